//===- OffloadActivations.cpp - host offload of long-idle activations -----===//
//
// The ActivationOffloader picks, while the memory timeline peaks over the
// budget, the candidate spanning the peak with the most idle bytes, and
// places its offload, the offload's wait, the reload and the reload's wait
// by the stream simulator's times.
//
//===----------------------------------------------------------------------===//
#include "dc/Dialect/DC/IR/TypeSizes.h"
#include "dc/Schedule/OffloadFloor.h"
#include "dc/Schedule/Passes.h"
#include "dc/Schedule/Planning.h"
#include "dc/Schedule/ReloadReleases.h"
#include "dc/Support/ByteSize.h"

#include "dc/Analysis/BufferAliasing.h"
#include "dc/Analysis/MemoryTimeline.h"
#include "dc/Analysis/StreamSimulator.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Threading.h"

#include <limits>
#include <optional>

namespace dc {
#define GEN_PASS_DEF_DCOFFLOADACTIVATIONS
#include "dc/Schedule/Passes.h.inc"
} // namespace dc

using namespace mlir;
using namespace dc;

namespace {

/// Where each op is in `sim` (planning moves ops, so indices go stale).
llvm::DenseMap<Operation *, size_t> indexByOp(const SimulationResult &sim) {
  llvm::DenseMap<Operation *, size_t> index;
  for (auto [i, op] : llvm::enumerate(sim.ops))
    index[op.op] = i;
  return index;
}

class ActivationOffloader {
public:
  /// `shared`, if given, is the simulation (and its op costs) to use,
  /// e.g. kept across several placements on one copy of a step.
  ActivationOffloader(func::FuncOp fn, const CostModel &costModel,
                      int64_t budget, int64_t minBytes, int64_t keepLast,
                      bool checkEdits = false,
                      IncrementalSimulation *shared = nullptr)
      : fn(fn), costModel(costModel),
        simulation(shared ? *shared : own.emplace(costModel, fn)),
        budget(budget), minBytes(minBytes), keepLast(keepLast),
        checkEdits(checkEdits) {}

  LogicalResult run() {
    collectPlaced();
    FailureOr<MemoryTimeline> timeline = MemoryTimeline::compute(fn);
    if (failed(timeline))
      return failure();
    // Fits: offload nothing more. Offloads an earlier run placed are
    // re-timed: passes since (prefetch, selective gather) changed when ops
    // run and what memory is free.
    if (timeline->getPeakDeviceBytes() <= budget)
      return replan(*timeline);
    if (budget < timeline->getFloorBytes())
      return fn.emitError()
             << "memory budget " << formatBytes(budget)
             << " is below this step's floor of "
             << formatBytes(timeline->getFloorBytes())
             << " (arguments, results and the largest single op); no "
                "offload can reach it";
    SimulationResult sim = simulation.run(*timeline);
    std::vector<OffloadCandidate> candidates = collectOffloadCandidates(
        fn, costModel, *timeline, sim, minBytes, keepLast);
    if (std::optional<OffloadFloorAttr> floor =
            computeOffloadFloor(costModel, *timeline, sim, candidates, budget))
      fn->setAttr(kOffloadFloorAttrName, *floor);

    // Each round offloads a tensor or moves a wait or a reload of one; the
    // bound only keeps a planner bug from looping forever. The rounds edit
    // one timeline as they edit the IR (a whole timeline reads every op,
    // and a 70B step takes hundreds of rounds); a fit is confirmed on a
    // whole one, and where the edits' model missed a buffer the rounds go
    // on from that.
    size_t rounds = 4 * timeline->getOps().size() + 16;
    for (size_t round = 0;; ++round) {
      if (round == rounds)
        return fn.emitError() << "dc-offload-activations did not converge "
                                 "after "
                              << rounds << " rounds";
      if (failed(checkTimeline(*timeline, "by the placement rounds")))
        return failure();
      if (timeline->getPeakDeviceBytes() <= budget) {
        timeline = MemoryTimeline::compute(fn);
        if (failed(timeline))
          return failure();
        if (timeline->getPeakDeviceBytes() <= budget)
          return replan(*timeline);
      }
      size_t peak = timeline->getPeakIndex();
      if (tightenReloadAround(peak, *timeline))
        continue;
      sim = simulation.run(*timeline);
      // A new offload whose copy is done before the peak costs nothing;
      // waiting early for one in flight stalls compute, so it comes only
      // after every stall-free candidate (then the least stall wins).
      auto [best, stall] = pickCandidate(candidates, peak, *timeline, sim);
      if ((best == candidates.end() || stall > 0) &&
          tightenWaitAround(peak, *timeline))
        continue;
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
      offload(chosen, *timeline, sim, peak);
    }
  }

private:
  /// The ops of one placed offload.
  struct PlacedOffload {
    OffloadStartOp start;
    WaitOp hostWait;
    ReloadStartOp reload;
    int64_t bytes;
  };

  /// The candidate idle across `peak` to offload next, and the compute
  /// stall its copy would cause there (queued behind the offloads before
  /// it): the stall-free one with the most idle bytes, else the least
  /// stall.
  std::pair<std::vector<OffloadCandidate>::iterator, double>
  pickCandidate(std::vector<OffloadCandidate> &candidates, size_t peak,
                const MemoryTimeline &timeline, const SimulationResult &sim) {
    std::vector<double> d2hFree =
        streamFreeBefore(sim, StreamKind::DeviceToHost);
    auto best = candidates.end();
    double bestStall = 0, bestScore = -1;
    for (auto it = candidates.begin(); it != candidates.end(); ++it) {
      size_t begin = timeline.indexOf(it->lastBefore);
      size_t end = timeline.indexOf(it->firstAfter);
      if (begin >= peak || peak >= end)
        continue;
      double done = std::max(sim.ops[begin].end, d2hFree[begin + 1]) +
                    costModel.copySeconds(it->bytes);
      double stall = std::max(0.0, done - sim.ops[peak].issue);
      double score = static_cast<double>(it->bytes) * it->idleSeconds;
      if (best == candidates.end() || stall < bestStall ||
          (stall == bestStall && score > bestScore)) {
        best = it;
        bestStall = stall;
        bestScore = score;
      }
    }
    return {best, bestStall};
  }

  /// When the peak falls while a placed offload's reload is already in
  /// flight, starts the reload after the peak op.
  bool tightenReloadAround(size_t peak, MemoryTimeline &timeline) {
    Operation *peakOp = timeline.getOps()[peak];
    // Not around another reload: the peak would move to the one moved,
    // with the same bytes, and the two would swap places forever.
    if (isa<ReloadStartOp>(peakOp))
      return false;
    for (PlacedOffload &placed : placed) {
      Operation *use = *placed.reload.getFuture().getUsers().begin();
      size_t reload = timeline.indexOf(placed.reload);
      if (reload <= peak && peak < timeline.indexOf(use) &&
          placed.reload != peakOp && peakOp->isBeforeInBlock(use)) {
        // After the peak op: its destination is live from there on.
        timeline.moveOp(reload, peak + 1);
        return true;
      }
    }
    return false;
  }

  /// When the peak falls while a placed offload's copy is still in flight,
  /// waits for the copy before the peak op: compute may stall, memory fits.
  bool tightenWaitAround(size_t peak, MemoryTimeline &timeline) {
    Operation *peakOp = timeline.getOps()[peak];
    for (PlacedOffload &placed : placed) {
      size_t start = timeline.indexOf(placed.start);
      size_t waited = timeline.indexOf(placed.hostWait);
      if (start < peak && peak <= waited && placed.hostWait != peakOp) {
        // The offloaded buffer is freed at its wait, now before the peak.
        timeline.moveOp(waited, peak);
        return true;
      }
    }
    return false;
  }

  /// The offloads already in the step (from an earlier run of this pass):
  /// offload, its one wait, the one reload of the host copy.
  void collectPlaced() {
    for (auto start : fn.getBody().front().getOps<OffloadStartOp>()) {
      Value future = start.getFuture();
      if (!future.hasOneUse())
        continue;
      auto hostWait = dyn_cast<WaitOp>(*future.getUsers().begin());
      if (!hostWait || !hostWait.getResult().hasOneUse())
        continue;
      auto reload =
          dyn_cast<ReloadStartOp>(*hostWait.getResult().getUsers().begin());
      if (!reload || !reload.getFuture().hasOneUse() ||
          reload->getBlock() != start->getBlock())
        continue;
      placed.push_back(
          {start, hostWait, reload, getTypeBytes(start.getValue().getType())});
    }
  }

  /// Re-times the placed offloads on the step that fits (`timeline`, which
  /// the moves edit).
  LogicalResult replan(MemoryTimeline &timeline) {
    if (placed.empty())
      return success();
    // Reloads first: one started too early holds memory a later wait
    // needs; then the reloads again, for the waits' new times.
    if (failed(replanReloads(timeline)) || failed(replanOffloadWaits(timeline)))
      return failure();
    return replanReloads(timeline);
  }

  /// Fails, where check-timeline-edits asks, if `timeline` is not the
  /// step's.
  LogicalResult checkTimeline(const MemoryTimeline &timeline,
                              llvm::StringRef after) {
    if (!checkEdits || timeline.equalsRecomputed(fn))
      return success();
    return fn.emitError() << "dc-offload-activations: the timeline edited "
                          << after << " differs from the step's";
  }

  /// Re-places the waits for the offloads once their set is final. Each
  /// wait was placed when its copy was predicted done, but an offload
  /// placed later can queue ahead of it on the FIFO stream and delay it:
  /// such a wait moves down to the first op issued after its copy ends,
  /// as far as the budget allows (the device buffer lives until the wait).
  LogicalResult replanOffloadWaits(MemoryTimeline &timeline) {
    for (int round = 0; round < 4; ++round) {
      // The timeline is edited with each move, the times simulated again
      // on it (so the simulation's indices are the timeline's).
      SimulationResult sim = simulation.run(timeline);
      auto simOf = [&](Operation *op) -> const SimulatedOp & {
        return sim.ops[timeline.indexOf(op)];
      };
      bool moved = false;
      for (PlacedOffload &placed : placed) {
        double stall = simOf(placed.hostWait).stall;
        if (stall <= 0)
          continue;
        double ready = sim.futureReady.lookup(placed.start.getFuture());
        size_t current = timeline.indexOf(placed.hostWait);
        size_t limit = timeline.indexOf(placed.reload);
        // Ops that would be issued before the copy ends (once this wait
        // no longer stalls them) go before it; the buffer then stays live
        // through them.
        size_t target = current + 1;
        while (target < limit &&
               simOf(timeline.getOps()[target]).issue - stall < ready &&
               timeline.deviceBytesAt(target) + placed.bytes <= budget)
          ++target;
        if (target > current + 1) {
          moved = true;
          // Later waits see the times this move gives.
          timeline.moveOp(current, target);
          if (failed(checkTimeline(timeline, "by a wait's move")))
            return failure();
          sim = simulation.run(timeline);
        }
      }
      if (!moved)
        break;
    }
    return success();
  }

  /// Re-places every reload once the set of offloads is final. Each was
  /// placed alone, just in time; together they queue on one FIFO stream,
  /// so a reload placed early for itself can still start late behind
  /// others. Walking the reloads from the last use back, each must finish
  /// by its use and by the start of the reload queued after it: that gives
  /// the latest start that stalls nothing. Then, in use order, each moves
  /// to the op issued at that time, or to the earliest op the budget
  /// allows if that is later (then the copy stalls compute, as little as
  /// memory permits). A few rounds, since stalls shift the times.
  LogicalResult replanReloads(MemoryTimeline &timeline) {
    for (int round = 0; round < 4; ++round) {
      SimulationResult sim = simulation.run(timeline);
      llvm::DenseMap<Operation *, size_t> simIndex = indexByOp(sim);
      auto useOf = [&](PlacedOffload &placed) {
        return simIndex.lookup(*placed.reload.getFuture().getUsers().begin());
      };
      std::vector<PlacedOffload *> order;
      for (PlacedOffload &placed : placed)
        order.push_back(&placed);
      llvm::sort(order, [&](PlacedOffload *a, PlacedOffload *b) {
        return useOf(*a) < useOf(*b);
      });
      // When each op would be issued if no copy stalled compute: the
      // deadlines a stall-free queue must meet (the simulated times
      // include this round's stalls, which would excuse late reloads).
      std::vector<double> stallFree(sim.ops.size());
      double copyStalls = 0;
      for (auto [i, op] : llvm::enumerate(sim.ops)) {
        stallFree[i] = op.issue - copyStalls;
        if (auto wait = dyn_cast<WaitOp>(op.op))
          if (isa_and_nonnull<OffloadStartOp, ReloadStartOp>(
                  wait->getOperand(0).getDefiningOp()))
            copyStalls += op.stall;
      }
      // Latest start times, from the last use back.
      std::vector<double> latestStart(order.size());
      double nextStart = std::numeric_limits<double>::infinity();
      for (size_t k = order.size(); k-- > 0;) {
        double finish = std::min(stallFree[useOf(*order[k])], nextStart);
        latestStart[k] = finish - costModel.copySeconds(order[k]->bytes);
        nextStart = latestStart[k];
      }
      bool moved = false;
      size_t previous = 0; // keep the issue order = the use order (FIFO)
      for (auto [k, placed] : llvm::enumerate(order)) {
        size_t current = timeline.indexOf(placed->reload);
        size_t use =
            timeline.indexOf(*placed->reload.getFuture().getUsers().begin());
        size_t lowest =
            std::max(timeline.indexOf(placed->hostWait) + 1, previous);
        // The latest op issued by the latest start (sim indices are those
        // of the round's first timeline: the ops' order only changes here,
        // by moving reloads, so map through the ops themselves).
        size_t target = lowest;
        for (size_t i = lowest; i < use; ++i) {
          Operation *op = timeline.getOps()[i];
          auto simIt = simIndex.find(op);
          if (simIt == simIndex.end() ||
              stallFree[simIt->second] <= latestStart[k])
            target = i;
          else
            break;
        }
        // No earlier than the budget allows: the reloaded buffer is live
        // from the reload to the use (scanned back from where it is now).
        if (target < current) {
          size_t earliest = current;
          while (earliest > target &&
                 timeline.deviceBytesAt(earliest - 1) + placed->bytes <= budget)
            --earliest;
          target = earliest;
        }
        if (target != current && target < use) {
          // Its destination is live from its new place to its use.
          timeline.moveOp(current, target);
          moved = true;
        }
        previous = timeline.indexOf(placed->reload) + 1;
      }
      if (!moved)
        break;
      if (failed(checkTimeline(timeline, "by the reloads' moves")))
        return failure();
    }
    return success();
  }

  void offload(const OffloadCandidate &candidate, MemoryTimeline &timeline,
               const SimulationResult &sim, size_t peak) {
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
    double offloadDone =
        std::max(sim.ops[begin].end, d2hFree[begin + 1]) + copy;
    size_t waitAt = begin + 1;
    while (waitAt < end && sim.ops[waitAt].issue < offloadDone)
      ++waitAt;
    // The reload: the latest op at which the copy, queued behind the
    // reloads issued before it, still ends before the use.
    double needBy = sim.ops[end].issue;
    size_t reloadAt = end;
    while (reloadAt > waitAt &&
           std::max(sim.ops[reloadAt].issue, h2dFree[reloadAt]) + copy > needBy)
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
    Operation *waitBefore = ops[waitAt], *reloadBefore = ops[reloadAt];
    builder.setInsertionPoint(waitBefore);
    auto host = WaitOp::create(builder, loc, start.getFuture());
    builder.setInsertionPoint(reloadBefore);
    auto reload = ReloadStartOp::create(builder, loc, host.getResult());
    builder.setInsertionPoint(candidate.firstAfter);
    auto back = WaitOp::create(builder, loc, reload.getFuture());
    placed.push_back({start, host, reload, candidate.bytes});
    Block &body = fn.getBody().front();
    // Every read from the next use on, through views of the reload where
    // it read views of the value.
    SmallVector<std::pair<Value, Value>> views = redirectBufferUses(
        candidate.value, back.getResult(),
        [&](OpOperand &use) {
          Operation *top = body.findAncestorOpInBlock(*use.getOwner());
          return top && top != start && !isa<OffloadStartOp>(top) &&
                 timeline.indexOf(top) >= end;
        },
        builder);

    // The same in the timeline. The value's buffer is now read last by
    // the offload, until its wait; the reload's destination takes over its
    // reads from the next use on (the views cloned before that use share
    // it), the host copy lives from the offload to the reload's wait.
    std::optional<size_t> buffer = timeline.findBuffer(candidate.value);
    Operation *lastReader =
        ops[buffer ? timeline.getBuffers()[*buffer].end : end];
    timeline.insertOp(start, begin + 1);
    timeline.insertOp(host, timeline.indexOf(waitBefore));
    timeline.insertOp(reload, timeline.indexOf(reloadBefore));
    timeline.insertOp(back, timeline.indexOf(candidate.firstAfter));
    for (auto &[clone, view] : views)
      timeline.insertOp(clone.getDefiningOp(),
                        timeline.indexOf(candidate.firstAfter));
    if (buffer)
      timeline.setBufferEnd(*buffer, timeline.indexOf(host));
    timeline.addBuffer(
        {start.getFuture(), getTypeBytes(start.getFuture().getType()),
         /*onHost=*/true, timeline.indexOf(start), timeline.indexOf(back)});
    timeline.addBuffer({reload.getFuture(),
                        getTypeBytes(reload.getFuture().getType()),
                        /*onHost=*/false, timeline.indexOf(reload),
                        timeline.indexOf(lastReader)});
  }

  func::FuncOp fn;
  const CostModel &costModel;
  // The offloader adds and moves schedule ops and erases none.
  std::optional<IncrementalSimulation> own;
  IncrementalSimulation &simulation;
  int64_t budget, minBytes, keepLast;
  bool checkEdits;
  std::vector<PlacedOffload> placed;
};

} // namespace

namespace {

/// dc-offload-activations' placement on `copy` (a copy of a step, which it
/// changes): the simulated step once placed, less the step before;
/// infinity where it cannot fit. `byStall`, if given, receives the copy's
/// offloaded values whose copies compute waits for, the longest first.
double placeOnCopy(func::FuncOp copy, const CostModel &costModel,
                   int64_t budget, int64_t minBytes,
                   SmallVectorImpl<Value> *byStall) {
  constexpr double kNever = std::numeric_limits<double>::infinity();
  FailureOr<MemoryTimeline> timeline = MemoryTimeline::compute(copy);
  if (failed(timeline))
    return kNever;
  // One simulation throughout: the copy's ops are estimated once, the
  // placements' own ops as they come.
  IncrementalSimulation simulation(costModel, copy);
  double before = simulation.run(*timeline).stepSeconds;
  // Placed, then re-timed as the pipeline does after prefetch.
  auto place = [&] {
    if (failed(ActivationOffloader(copy, costModel, budget, minBytes,
                                   /*keepLast=*/0, /*checkEdits=*/false,
                                   &simulation)
                   .run()))
      return false;
    insertReloadReleases(copy);
    return true;
  };
  if (!place() || !place())
    return kNever;
  FailureOr<MemoryTimeline> placed = MemoryTimeline::compute(copy);
  if (failed(placed))
    return kNever;
  SimulationResult sim = simulation.run(*placed);
  if (byStall) {
    SmallVector<std::pair<double, Value>> stalls;
    for (auto offload : copy.getBody().front().getOps<OffloadStartOp>()) {
      auto wait = cast<WaitOp>(*offload.getFuture().getUsers().begin());
      double stall = sim.ops[placed->indexOf(wait)].stall;
      if (stall > 0)
        stalls.push_back({stall, offload.getValue()});
    }
    llvm::stable_sort(stalls,
                      [](auto &a, auto &b) { return a.first > b.first; });
    for (auto &[stall, value] : stalls)
      byStall->push_back(value);
  }
  return sim.stepSeconds - before;
}

} // namespace

double dc::trialOffloadSeconds(func::FuncOp fn, const CostModel &costModel,
                               int64_t budget, int64_t minBytes,
                               SmallVectorImpl<Value> *stalled) {
  // A copy beside `fn` (its own name: nothing may find it in its place),
  // errors kept quiet: a placement that cannot fit is an answer here.
  OpBuilder builder(fn);
  IRMapping mapping;
  auto copy = cast<func::FuncOp>(builder.clone(*fn, mapping));
  copy.setName((fn.getName() + ".offload_trial").str());
  SmallVector<Value> byStall;
  double added;
  {
    ScopedDiagnosticHandler quiet(fn.getContext(),
                                  [](Diagnostic &) { return success(); });
    added = placeOnCopy(copy, costModel, budget, minBytes,
                        stalled ? &byStall : nullptr);
  }
  if (stalled) {
    // The copy's offloaded values, back to fn's.
    llvm::DenseMap<Value, Value> original;
    for (auto [from, to] : mapping.getValueMap())
      original[to] = from;
    for (Value value : byStall)
      if (Value mine = original.lookup(value))
        stalled->push_back(mine);
  }
  copy.erase();
  return added;
}

SmallVector<double> dc::trialOffloadSeconds(ArrayRef<func::FuncOp> copies,
                                            const CostModel &costModel,
                                            int64_t budget, int64_t minBytes) {
  SmallVector<double> added(copies.size());
  if (copies.empty())
    return added;
  MLIRContext *context = copies.front()->getContext();
  {
    ScopedDiagnosticHandler quiet(context,
                                  [](Diagnostic &) { return success(); });
    // Each placement changes only its own copy (the module's block is not
    // touched until the copies are erased below).
    parallelFor(context, 0, copies.size(), [&](size_t i) {
      added[i] = placeOnCopy(copies[i], costModel, budget, minBytes,
                             /*byStall=*/nullptr);
    });
  }
  for (func::FuncOp copy : copies)
    copy.erase();
  return added;
}

namespace {

struct OffloadActivationsPass
    : public dc::impl::DCOffloadActivationsBase<OffloadActivationsPass> {
  using DCOffloadActivationsBase::DCOffloadActivationsBase;

  void runOnOperation() override {
    if (failed(checkOptionRange(getOperation(), getArgument(), "min-bytes",
                                minBytes, 0)) ||
        failed(checkOptionRange(getOperation(), getArgument(), "keep-last",
                                keepLast, 0)))
      return signalPassFailure();
    auto plan = [&](func::FuncOp fn, const PlanningSetup &setup,
                    const CostModel &costModel) {
      if (failed(ActivationOffloader(fn, costModel, setup.budgetBytes, minBytes,
                                     keepLast, checkTimelineEdits)
                     .run()))
        return failure();
      // Each reloaded buffer is freed after its last use, as planned.
      insertReloadReleases(fn);
      return success();
    };
    if (failed(planEachStep(getOperation(), getArgument(), profile,
                            optimizerStateBytes, plan,
                            /*replacesReloadReleases=*/true)))
      signalPassFailure();
  }
};

} // namespace
