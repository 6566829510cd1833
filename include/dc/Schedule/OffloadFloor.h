//===- OffloadFloor.h - what activation offload can at best do --*- C++ -*-===//
//
// The tensors activation offload may move, and the copy stall no placement
// of them avoids: shared by dc-offload-activations (which plans with them)
// and dc-rematerialize (which records what offload alone would have faced).
//
//===----------------------------------------------------------------------===//
#ifndef DC_SCHEDULE_OFFLOADFLOOR_H
#define DC_SCHEDULE_OFFLOADFLOOR_H

#include "dc/Analysis/CostModel.h"
#include "dc/Analysis/MemoryTimeline.h"
#include "dc/Analysis/StreamSimulator.h"
#include "dc/Dialect/DC/IR/DCDialect.h"

#include <optional>
#include <vector>

namespace dc {

/// A tensor idle between two top-level ops: `lastBefore` (its def or a use)
/// and `firstAfter` (the next use).
struct OffloadCandidate {
  mlir::Value value;
  mlir::Operation *lastBefore, *firstAfter;
  int64_t bytes;
  double idleSeconds;
};

/// Tensors of at least `minBytes` that own their buffer and are not
/// offloaded yet, each with its widest idle gap that can hide both copies;
/// the last `keepLast` (by where their gap begins) are left out.
std::vector<OffloadCandidate>
collectOffloadCandidates(mlir::func::FuncOp fn, const CostModel &costModel,
                         const MemoryTimeline &timeline,
                         const SimulationResult &sim, int64_t minBytes,
                         int64_t keepLast);

/// What no placement of `candidates` can beat: the bytes over `budget` at
/// the peak must be on the host before the peak op runs and come back after
/// it, by their uses. Before the peak, the device-to-host stream has at
/// most the time since the first candidate became idle; after it, the
/// host-to-device stream must deliver those bytes by their uses (best case:
/// the bytes used last, in use order). Any shortfall stalls compute.
/// Nothing when no candidate spans the peak.
std::optional<OffloadFloorAttr>
computeOffloadFloor(const CostModel &costModel, const MemoryTimeline &timeline,
                    const SimulationResult &sim,
                    const std::vector<OffloadCandidate> &candidates,
                    int64_t budget);

/// Where dc-rematerialize records the joint floor of the step it planned
/// (an OffloadFloorAttr: the bytes over budget at the first peak, and the
/// least time any mix of recomputation and offload adds to remove them).
constexpr llvm::StringLiteral kJointFloorAttrName = "dc.joint_floor";

/// One tensor recomputation could drop at the peak: its bytes and the
/// compute time its recomputation adds.
struct RecomputeCost {
  int64_t bytes;
  double seconds;
};

/// A lower bound on the time any mix of offload and recomputation adds to
/// bring the peak down to `budget`: x of the excess bytes offloaded (at
/// least the stall computeOffloadFloor gives for x bytes) and the rest
/// recomputed (at least the cheapest seconds per byte of `recomputable`,
/// taken fractionally), the larger of the two (recomputed ops may hide
/// reloads), minimised over x. Relaxed so that no plan can beat it on the
/// cost model's terms: a tensor may count on both sides, fractions of
/// tensors count, each recomputation is priced alone, and only the first
/// peak is considered. Nothing when even both together cannot cover the
/// excess.
std::optional<OffloadFloorAttr>
computeJointFloor(const CostModel &costModel, const MemoryTimeline &timeline,
                  const SimulationResult &sim,
                  const std::vector<OffloadCandidate> &offloadable,
                  std::vector<RecomputeCost> recomputable, int64_t budget);

/// The time dc-offload-activations' own placement for `budget` (tensors of
/// at least `minBytes`, none kept back) adds to `fn` as it is now: the
/// simulated step once placed on a copy of `fn`, less the step before. The
/// floor above bounds what any placement adds; this is what the pass's
/// does, which dc-rematerialize weighs against recomputing more. Infinity
/// where the placement cannot fit the budget; `fn` is left as it was.
/// `stalled`, if given, receives the values of `fn` whose copies the
/// placement waits for (compute stalls on them), the longest stall first.
double
trialOffloadSeconds(mlir::func::FuncOp fn, const CostModel &costModel,
                    int64_t budget, int64_t minBytes,
                    llvm::SmallVectorImpl<mlir::Value> *stalled = nullptr);

/// The same for each of `copies` (copies of a step beside it in the module,
/// e.g. each with another tensor recomputed), placed in parallel on the
/// context's threads; the copies are erased.
llvm::SmallVector<double>
trialOffloadSeconds(llvm::ArrayRef<mlir::func::FuncOp> copies,
                    const CostModel &costModel, int64_t budget,
                    int64_t minBytes);

} // namespace dc

#endif // DC_SCHEDULE_OFFLOADFLOOR_H
