//===- PassDefaults.h - defaults of the passes and pipelines ----*- C++ -*-===//
//
// The dc passes (Passes.td) and the pipelines that run them (Pipelines.h)
// take these defaults from here, so the two never drift apart.
//
//===----------------------------------------------------------------------===//
#ifndef DC_SCHEDULE_PASSDEFAULTS_H
#define DC_SCHEDULE_PASSDEFAULTS_H

#include "dc/Target/TargetDescription.h"

#include <cstdint>

namespace dc {

/// Which parameter shards live in host memory (dc-offload-params `params`,
/// dc-zero3-pipeline `offload-params`).
enum class ParamsInHost { None, All, Budget };

/// Which optimizer state lives in host memory (dc-offload-optimizer-state
/// `state`, dc-zero3-pipeline `offload-optimizer-state`).
enum class StateInHost { None, All, Budget };

/// Ranks on the grid axis; 0 takes them from the module's grid.
constexpr int64_t kDefaultWorldSize = 0;
constexpr const char kDefaultGrid[] = "world";
/// Empty: the target's whole device memory.
constexpr const char kDefaultMemoryBudget[] = "";
constexpr const char *kDefaultTarget = kDefaultTargetPreset;
/// Empty: no measured profile.
constexpr const char kDefaultProfile[] = "";
constexpr int64_t kDefaultBucketBytes = 25 * 1024 * 1024;
constexpr int64_t kDefaultReplicateBelow = 0;
constexpr int64_t kDefaultOffloadMinBytes = 1024 * 1024;
constexpr int64_t kDefaultOffloadKeepLast = 0;
constexpr int64_t kDefaultMaxRecomputeOps = 16;
constexpr int64_t kDefaultMaxFusedBytes = 256 * 1024 * 1024;
/// 0: no limit.
constexpr int64_t kDefaultMaxInFlightBytes = 0;

} // namespace dc

#endif // DC_SCHEDULE_PASSDEFAULTS_H
