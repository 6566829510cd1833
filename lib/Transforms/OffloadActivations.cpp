//===- OffloadActivations.cpp - host offload of long-idle activations -----===//
//
// The ActivationOffloader picks, while the memory timeline peaks over the
// budget, the candidate spanning the peak with the most idle bytes, and
// places its offload, the offload's wait, the reload and the reload's wait
// by the stream simulator's times.
//
//===----------------------------------------------------------------------===//
#include "dc/Transforms/Passes.h"
#include "dc/Transforms/Planning.h"

#include "dc/Analysis/MemoryTimeline.h"
#include "dc/Analysis/StreamSimulator.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"

namespace dc {
#define GEN_PASS_DEF_DCOFFLOADACTIVATIONS
#include "dc/Transforms/Passes.h.inc"
} // namespace dc

using namespace mlir;
using namespace dc;

namespace {

/// A tensor idle between two top-level ops: `lastBefore` (its def or a use)
/// and `firstAfter` (the next use).
struct OffloadCandidate {
  Value value;
  Operation *lastBefore, *firstAfter;
  int64_t bytes;
  double idleSeconds;
};

/// True if offloading `value` would free its buffer: no other value names
/// the same buffer (views, in-place destination-style results).
bool ownsItsBuffer(Value value) {
  for (OpOperand &use : value.getUses()) {
    Operation *user = use.getOwner();
    if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp, tensor::CastOp,
            tensor::BitcastOp, func::ReturnOp>(user))
      return false;
    if (auto dps = dyn_cast<DestinationStyleOpInterface>(user))
      if (dps.isDpsInit(&use))
        return false;
  }
  return true;
}

class ActivationOffloader {
public:
  ActivationOffloader(func::FuncOp fn, const CostModel &costModel,
                      int64_t budget, int64_t minBytes, int64_t keepLast)
      : fn(fn), costModel(costModel), budget(budget), minBytes(minBytes),
        keepLast(keepLast) {}

  LogicalResult run() {
    FailureOr<MemoryTimeline> timeline = MemoryTimeline::compute(fn);
    if (failed(timeline))
      return failure();
    if (timeline->getPeakDeviceBytes() <= budget)
      return success(); // fits: offload nothing
    if (budget < timeline->getFloorBytes())
      return fn.emitError()
             << "memory budget " << formatBytes(budget)
             << " is below this step's floor of "
             << formatBytes(timeline->getFloorBytes())
             << " (arguments, results and the largest single op); no "
                "offload can reach it";
    SimulationResult sim = StreamSimulator(costModel).run(fn, *timeline);
    std::vector<OffloadCandidate> candidates =
        collectCandidates(*timeline, sim);

    while (true) {
      timeline = MemoryTimeline::compute(fn);
      if (failed(timeline))
        return failure();
      if (timeline->getPeakDeviceBytes() <= budget)
        return success();
      size_t peak = timeline->getPeakIndex();
      if (tightenAround(peak, *timeline))
        continue;
      auto best = candidates.end();
      double bestScore = -1;
      for (auto it = candidates.begin(); it != candidates.end(); ++it) {
        size_t begin = timeline->indexOf(it->lastBefore);
        size_t end = timeline->indexOf(it->firstAfter);
        double score = static_cast<double>(it->bytes) * it->idleSeconds;
        if (begin < peak && peak < end && score > bestScore) {
          best = it;
          bestScore = score;
        }
      }
      if (best == candidates.end())
        return timeline->getOps()[peak]->emitError()
               << "device memory peaks here at "
               << formatBytes(timeline->getPeakDeviceBytes())
               << " and no activation idle across this point can be "
                  "offloaded; the budget of "
               << formatBytes(budget) << " is short by "
               << formatBytes(timeline->getPeakDeviceBytes() - budget);
      OffloadCandidate chosen = *best;
      candidates.erase(best);
      sim = StreamSimulator(costModel).run(fn, *timeline);
      offload(chosen, *timeline, sim, peak);
    }
  }

private:
  /// The ops of one placed offload.
  struct PlacedOffload {
    OffloadStartOp start;
    WaitOp hostWait;
    ReloadStartOp reload;
  };

  /// When the peak falls while a placed offload's copy is still in flight
  /// (or its reload already is), waits for the copy before the peak op (or
  /// starts the reload after it): compute may stall, memory fits.
  bool tightenAround(size_t peak, const MemoryTimeline &timeline) {
    Operation *peakOp = timeline.getOps()[peak];
    for (PlacedOffload &placed : placed) {
      size_t start = timeline.indexOf(placed.start);
      size_t waited = timeline.indexOf(placed.hostWait);
      size_t reload = timeline.indexOf(placed.reload);
      size_t used = timeline.indexOf(
          *placed.reload.getFuture().getUsers().begin());
      if (start < peak && peak <= waited && placed.hostWait != peakOp) {
        placed.hostWait->moveBefore(peakOp);
        return true;
      }
      if (reload <= peak && peak < used && placed.reload != peakOp &&
          peakOp->isBeforeInBlock(
              *placed.reload.getFuture().getUsers().begin())) {
        placed.reload->moveAfter(peakOp);
        return true;
      }
    }
    return false;
  }

  std::vector<OffloadCandidate>
  collectCandidates(const MemoryTimeline &timeline,
                    const SimulationResult &sim) {
    Block &body = fn.getBody().front();
    std::vector<OffloadCandidate> candidates;
    for (Operation *op : timeline.getOps()) {
      if (isa<DCDialect>(op->getDialect()) || isa<tensor::EmptyOp>(op))
        continue;
      for (Value value : op->getResults()) {
        auto type = dyn_cast<RankedTensorType>(value.getType());
        if (!type || getTypeBytes(type) < minBytes || !ownsItsBuffer(value))
          continue;
        // The top-level ops touching it, in order; the widest idle gap.
        SmallVector<Operation *> touches{op};
        for (Operation *user : value.getUsers())
          touches.push_back(body.findAncestorOpInBlock(*user));
        llvm::sort(touches, [&](Operation *a, Operation *b) {
          return timeline.indexOf(a) < timeline.indexOf(b);
        });
        touches.erase(std::unique(touches.begin(), touches.end()),
                      touches.end());
        int64_t bytes = getTypeBytes(type);
        double roundTrip = 2 * costModel.copySeconds(bytes);
        std::optional<OffloadCandidate> widest;
        for (size_t i = 0; i + 1 < touches.size(); ++i) {
          double idle = sim.ops[timeline.indexOf(touches[i + 1])].issue -
                        sim.ops[timeline.indexOf(touches[i])].end;
          // Both copies must fit in the gap, or offloading stalls compute.
          if (idle > roundTrip && (!widest || idle > widest->idleSeconds))
            widest = OffloadCandidate{value, touches[i], touches[i + 1],
                                      bytes, idle};
        }
        if (widest)
          candidates.push_back(*widest);
      }
    }
    // Keep the last `keepLast` (by where their gap begins) on the device.
    llvm::stable_sort(candidates, [&](const OffloadCandidate &a,
                                      const OffloadCandidate &b) {
      return timeline.indexOf(a.lastBefore) < timeline.indexOf(b.lastBefore);
    });
    size_t keep = std::min<size_t>(candidates.size(),
                                   static_cast<size_t>(std::max<int64_t>(
                                       keepLast, 0)));
    candidates.resize(candidates.size() - keep);
    return candidates;
  }

  void offload(const OffloadCandidate &candidate,
               const MemoryTimeline &timeline, const SimulationResult &sim,
               size_t peak) {
    const std::vector<Operation *> &ops = timeline.getOps();
    size_t begin = timeline.indexOf(candidate.lastBefore);
    size_t end = timeline.indexOf(candidate.firstAfter);
    double copy = costModel.copySeconds(candidate.bytes);

    // Copies queue FIFO on their stream: one can start only once the
    // stream has finished what was issued before it.
    std::vector<double> d2hFree =
        streamFreeBefore(sim, StreamKind::DeviceToHost);
    std::vector<double> h2dFree =
        streamFreeBefore(sim, StreamKind::HostToDevice);

    // The offload's wait: at the first op the copy is predicted done by.
    double offloadDone = std::max(sim.ops[begin].end, d2hFree[begin + 1]) + copy;
    size_t waitAt = begin + 1;
    while (waitAt < end && sim.ops[waitAt].issue < offloadDone)
      ++waitAt;
    // The reload: the latest op at which the copy, queued behind the
    // reloads issued before it, still ends before the use.
    double needBy = sim.ops[end].issue;
    size_t reloadAt = end;
    while (reloadAt > waitAt &&
           std::max(sim.ops[reloadAt].issue, h2dFree[reloadAt]) + copy >
               needBy)
      --reloadAt;
    // The buffer must be off the device at the peak this offload is for:
    // wait before it and reload after it, even if compute then stalls.
    if (begin < peak && peak < waitAt)
      waitAt = peak;
    if (reloadAt <= peak && peak < end)
      reloadAt = peak + 1;

    Location loc = candidate.value.getLoc();
    OpBuilder builder(fn.getContext());
    builder.setInsertionPointAfter(candidate.lastBefore);
    auto start = OffloadStartOp::create(builder, loc, candidate.value);
    builder.setInsertionPoint(ops[waitAt]);
    auto host = WaitOp::create(builder, loc, start.getFuture());
    builder.setInsertionPoint(ops[reloadAt]);
    auto reload = ReloadStartOp::create(builder, loc, host.getResult());
    builder.setInsertionPoint(candidate.firstAfter);
    auto back = WaitOp::create(builder, loc, reload.getFuture());
    placed.push_back({start, host, reload});
    Block &body = fn.getBody().front();
    Value value = candidate.value;
    value.replaceUsesWithIf(back.getResult(), [&](OpOperand &use) {
      Operation *top = body.findAncestorOpInBlock(*use.getOwner());
      return top && top != start && timeline.indexOf(top) >= end &&
             top->getBlock() == &body && !isa<OffloadStartOp>(top);
    });
  }

  func::FuncOp fn;
  const CostModel &costModel;
  int64_t budget, minBytes, keepLast;
  std::vector<PlacedOffload> placed;
};

struct OffloadActivationsPass
    : public dc::impl::DCOffloadActivationsBase<OffloadActivationsPass> {
  using DCOffloadActivationsBase::DCOffloadActivationsBase;

  void runOnOperation() override {
    auto plan = [&](func::FuncOp fn, const PlanningSetup &setup,
                    const CostModel &costModel) {
      return ActivationOffloader(fn, costModel, setup.budgetBytes, minBytes,
                                 keepLast)
          .run();
    };
    if (failed(planEachStep(getOperation(), memoryBudget, target, profile,
                            plan)))
      signalPassFailure();
  }
};

} // namespace
