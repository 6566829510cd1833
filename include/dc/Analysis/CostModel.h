//===- CostModel.h - time of each op on a target -------------------*- C++ -*-===//
//
// Compute ops: roofline of FLOPs (exact for linalg named ops and
// linalg.generic, from indexing maps and iterator types) against bytes moved.
// Collectives: alpha-beta per kind. Host copies: link bandwidth. A measured
// profile (per-op times written by dc-run) overrides the estimates.
//
//===----------------------------------------------------------------------===//
#ifndef DC_ANALYSIS_COSTMODEL_H
#define DC_ANALYSIS_COSTMODEL_H

#include "dc/Analysis/TargetDescription.h"

#include "mlir/IR/Operation.h"
#include "llvm/ADT/StringMap.h"

namespace dc {

/// Which simulated stream an op runs on.
enum class StreamKind { Compute, Collective, HostToDevice, DeviceToHost, None };

enum class CollectiveKind { AllGather, ReduceScatter, AllToAll, AllReduce };

struct OpCost {
  StreamKind stream = StreamKind::None;
  double flops = 0;
  int64_t bytes = 0; // bytes read + written (compute) or moved (transfer)
  double seconds = 0;
};

/// Measured per-op times keyed by an op's `dc.op_id` (see assignOpIds).
struct Profile {
  llvm::StringMap<double> secondsByOpId;
  static llvm::Expected<Profile> fromJSON(llvm::StringRef text);
  static llvm::Expected<Profile> load(llvm::StringRef path);
};

class CostModel {
public:
  explicit CostModel(TargetDescription target, const Profile *profile = nullptr)
      : target(std::move(target)), profile(profile) {}

  const TargetDescription &getTarget() const { return target; }

  /// Cost of one op. Start ops cost their transfer on their stream; wait,
  /// release and other bookkeeping ops cost nothing (StreamKind::None).
  OpCost estimate(mlir::Operation *op) const;

  /// FLOPs of a compute op (0 if unknown): exact for linalg ops.
  static double countFlops(mlir::Operation *op);
  /// Bytes of all tensor operands and results of a compute op.
  static int64_t countBytes(mlir::Operation *op);

  /// Time of one collective over `groupSize` ranks moving a full tensor of
  /// `bytes` (all-gather result / reduce-scatter input).
  double collectiveSeconds(CollectiveKind kind, int64_t bytes,
                           int64_t groupSize) const;
  /// Time of one host<->device copy of `bytes`.
  double copySeconds(int64_t bytes) const;

private:
  TargetDescription target;
  const Profile *profile;
};

/// Bytes of a statically shaped tensor, shard (local slice), host or future
/// type; 0 for other types.
int64_t getTypeBytes(mlir::Type type);

} // namespace dc

#endif // DC_ANALYSIS_COSTMODEL_H
