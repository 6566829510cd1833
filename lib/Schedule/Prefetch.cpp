//===- Prefetch.cpp - hide gathers behind compute, under the budget -------===//
//
// The GatherScheduler moves each gather start earlier until the stream
// simulator predicts no stall at its wait, checking the memory timeline at
// every op it moves across, then fuses neighbouring gathers into one group
// where the cost model predicts a gain. A gather never moves ahead of an
// all-to-all start (dc-ulysses' exchanges, which share the FIFO collective
// stream) that is waited before the gather is: it would delay an exchange
// needed sooner (earliest deadline first).
//
//===----------------------------------------------------------------------===//
#include "dc/Dialect/DC/IR/TypeSizes.h"
#include "dc/Schedule/Passes.h"
#include "dc/Schedule/Planning.h"
#include "dc/Support/ByteSize.h"

#include "dc/Analysis/MemoryTimeline.h"
#include "dc/Analysis/StreamSimulator.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <limits>
#include <optional>

namespace dc {
#define GEN_PASS_DEF_DCPREFETCH
#include "dc/Schedule/Passes.h.inc"
} // namespace dc

using namespace mlir;
using namespace dc;

namespace {

/// Below this a stall is noise, not a reason to move anything (s).
constexpr double kStallEpsilon = 1e-9;
/// Hoisting rounds: each re-simulates, since moving one gather changes
/// when the others in the FIFO collective stream can start.
constexpr int kMaxRounds = 64;
/// A round that shortens the predicted step by less than this fraction ends
/// the hoisting: later rounds would cost compile time for nothing.
constexpr double kMinRoundGain = 1e-3;

int64_t gatherBytes(GatherStartOp gather) {
  int64_t bytes = 0;
  for (Value future : gather.getFutures())
    bytes += getTypeBytes(future.getType());
  return bytes;
}

/// The earliest wait of a gather group.
Operation *firstWait(GatherStartOp gather, const MemoryTimeline &timeline) {
  Operation *first = nullptr;
  for (Value future : gather.getFutures())
    for (Operation *user : future.getUsers())
      if (!first || timeline.indexOf(user) < timeline.indexOf(first))
        first = user;
  return first;
}

/// Where the exchange of an all-to-all start is waited, or none.
std::optional<size_t> exchangeWaitAt(Operation *op,
                                     const MemoryTimeline &timeline) {
  auto exchange = dyn_cast<AllToAllStartOp>(op);
  if (!exchange || exchange.getFuture().use_empty())
    return std::nullopt;
  return timeline.indexOf(*exchange.getFuture().getUsers().begin());
}

/// The shard a gathered value came from, if `value` is a gathered tensor.
Value gatheredShard(Value value) {
  auto wait = value.getDefiningOp<WaitOp>();
  if (!wait)
    return Value();
  auto result = dyn_cast<OpResult>(wait.getFuture());
  auto gather =
      result ? dyn_cast<GatherStartOp>(result.getOwner()) : GatherStartOp();
  return gather ? gather.getShards()[result.getResultNumber()] : Value();
}

/// The reload feeding a shard, when the shard lives in host memory
/// (dc-offload-params) and is brought back just for this gather.
ReloadStartOp reloadOf(Value shard) {
  auto wait = shard.getDefiningOp<WaitOp>();
  return wait ? wait.getFuture().getDefiningOp<ReloadStartOp>()
              : ReloadStartOp();
}

bool hasReloads(GatherStartOp gather);

/// True if two gather groups may become one: one collective call runs on
/// one grid axis, and a group of reloaded (host-resident) shards would keep
/// them on the device until its last wait.
bool canMerge(GatherStartOp a, GatherStartOp b) {
  auto axisOf = [](GatherStartOp g) {
    auto shard = cast<ShardType>(g.getShards()[0].getType());
    return std::make_pair(shard.getGrid(), shard.getGroupAxis());
  };
  return axisOf(a) == axisOf(b) && !hasReloads(a) && !hasReloads(b);
}

/// True if some shard of `gather` is reloaded from host memory for it.
bool hasReloads(GatherStartOp gather) {
  return llvm::any_of(gather.getShards(),
                      [](Value shard) { return bool(reloadOf(shard)); });
}

/// The parameter behind a gathered shard: the host argument of a reloaded
/// shard, or the shard itself.
Value paramOf(Value shard) {
  if (ReloadStartOp reload = reloadOf(shard))
    return reload.getHost();
  return shard;
}

/// Moves a gather, with the reloads of its host-resident shards, before
/// `anchor`.
void moveGatherBefore(GatherStartOp gather, Operation *anchor) {
  for (Value shard : gather.getShards())
    if (ReloadStartOp reload = reloadOf(shard)) {
      reload->moveBefore(anchor);
      shard.getDefiningOp()->moveBefore(anchor);
    }
  gather->moveBefore(anchor);
}

/// Bytes that become live earlier when a gather moves up: its gathered
/// tensors and the device copies of the host-resident shards reloaded for it.
int64_t movedBytes(GatherStartOp gather) {
  int64_t bytes = gatherBytes(gather);
  for (Value shard : gather.getShards())
    if (reloadOf(shard))
      bytes += getTypeBytes(shard.getType());
  return bytes;
}

class GatherScheduler {
public:
  GatherScheduler(func::FuncOp fn, const CostModel &costModel, int64_t budget,
                  int64_t maxInFlight, int64_t maxFused)
      : fn(fn), costModel(costModel), budget(budget), maxInFlight(maxInFlight),
        maxFused(maxFused), simulation(costModel, fn) {}

  LogicalResult run() {
    FailureOr<MemoryTimeline> timeline = MemoryTimeline::compute(fn);
    if (failed(timeline) || failed(checkJustInTimeFits(*timeline)))
      return failure();
    hoistUntilHidden();
    if (maxFused > 0 && fuseNeighbours())
      hoistUntilHidden();
    if (maxFused > 0 && fuseWhereStreamBound())
      hoistUntilHidden();
    hideReloads();
    // Every move was checked against the budget; prove it once more.
    timeline = MemoryTimeline::compute(fn);
    if (failed(timeline))
      return failure();
    if (timeline->getPeakDeviceBytes() > budget)
      return timeline->getOps()[timeline->getPeakIndex()]->emitError()
             << "dc-prefetch: internal error: the schedule peaks at "
             << formatBytes(timeline->getPeakDeviceBytes())
             << ", over the budget";
    return success();
  }

private:
  LogicalResult checkJustInTimeFits(const MemoryTimeline &timeline) {
    if (budget < timeline.getFloorBytes())
      return fn.emitError() << "memory budget " << formatBytes(budget)
                            << " is below this step's floor of "
                            << formatBytes(timeline.getFloorBytes())
                            << " (arguments plus the largest single op)";
    if (timeline.getPeakDeviceBytes() > budget)
      return timeline.getOps()[timeline.getPeakIndex()]->emitError()
             << "even gathering just in time, device memory peaks here at "
             << formatBytes(timeline.getPeakDeviceBytes()) << "; the budget of "
             << formatBytes(budget) << " is short by "
             << formatBytes(timeline.getPeakDeviceBytes() - budget);
    return success();
  }

  /// Rounds of: simulate, then move every stalled gather up by its stall,
  /// as far as memory, in-flight bytes and ordering allow.
  void hoistUntilHidden() {
    double previousStep = std::numeric_limits<double>::infinity();
    for (int round = 0; round < kMaxRounds; ++round) {
      FailureOr<MemoryTimeline> timeline = MemoryTimeline::compute(fn);
      if (failed(timeline))
        return;
      SimulationResult sim = simulation.run(*timeline);
      // Converged: the last round gained (almost) nothing.
      if (sim.stepSeconds > previousStep * (1 - kMinRoundGain))
        return;
      previousStep = sim.stepSeconds;
      if (!hoistRound(*timeline, sim))
        return;
    }
  }

  bool hoistRound(const MemoryTimeline &timeline, const SimulationResult &sim) {
    const std::vector<Operation *> &ops = timeline.getOps();
    size_t n = ops.size();
    std::vector<int64_t> bytes(n), inFlight(n, 0);
    for (size_t i = 0; i < n; ++i)
      bytes[i] = timeline.deviceBytesAt(i);
    for (size_t i = 0; i < n; ++i)
      if (auto gather = dyn_cast<GatherStartOp>(ops[i])) {
        size_t waitAt = timeline.indexOf(firstWait(gather, timeline));
        for (size_t j = i; j < waitAt; ++j)
          inFlight[j] += gatherBytes(gather);
      }

    // The latest time each collective may start so that it and everything
    // queued behind it on the FIFO collective stream finish before their
    // waits: walk the stream backwards from the last collective.
    std::vector<double> latestStart(n, 0);
    double nextLatestStart = std::numeric_limits<double>::infinity();
    for (size_t i = n; i-- > 0;) {
      if (sim.ops[i].stream != StreamKind::Collective)
        continue;
      double deadline = nextLatestStart;
      for (Value result : ops[i]->getResults())
        for (Operation *user : result.getUsers())
          deadline = std::min(deadline, sim.ops[timeline.indexOf(user)].issue);
      latestStart[i] = deadline - (sim.ops[i].end - sim.ops[i].start);
      nextLatestStart = latestStart[i];
    }

    // Earliest index the next gather may move to: not above an earlier
    // gather (FIFO order), the previous release of its own parameter, or
    // its shard's definition.
    size_t orderBound = 0;
    llvm::DenseMap<Value, size_t> releasedAt;
    // The all-to-all starts seen so far: (index, index of the wait).
    SmallVector<std::pair<size_t, size_t>> exchanges;
    SmallVector<std::pair<GatherStartOp, Operation *>> moves;
    llvm::DenseSet<Operation *> moved;
    for (size_t p = 0; p < n; ++p) {
      if (auto release = dyn_cast<ReleaseOp>(ops[p])) {
        if (Value shard = gatheredShard(release.getValue()))
          releasedAt[paramOf(shard)] = p;
        continue;
      }
      if (std::optional<size_t> waitAt = exchangeWaitAt(ops[p], timeline)) {
        exchanges.push_back({p, *waitAt});
        continue;
      }
      auto gather = dyn_cast<GatherStartOp>(ops[p]);
      if (!gather)
        continue;
      size_t bound = orderBound;
      // Not ahead of an exchange needed before this gather's data.
      size_t gatherWaitAt = timeline.indexOf(firstWait(gather, timeline));
      for (auto [at, waitAt] : exchanges)
        if (waitAt < gatherWaitAt)
          bound = std::max(bound, at + 1);
      for (Value shard : gather.getShards()) {
        auto it = releasedAt.find(paramOf(shard));
        if (it != releasedAt.end())
          bound = std::max(bound, it->second + 1);
        // A reloaded shard moves with its gather; any other defined shard
        // bounds it.
        if (Operation *def = paramOf(shard).getDefiningOp())
          bound = std::max(bound, timeline.indexOf(def) + 1);
      }
      size_t q = p;
      // Issue it early enough to start by its latest start: later than
      // that, it or a gather queued behind it stalls compute.
      // When it queues behind other collectives, issue it earlier by that
      // wait too, so it can overtake them (e.g. a backward gather behind
      // the previous layer's gradient reduce-scatter).
      double queued = std::max(0.0, sim.ops[p].start - sim.ops[p].issue);
      double wantIssue = latestStart[p] - queued;
      if (sim.ops[p].issue > wantIssue + kStallEpsilon) {
        int64_t size = movedBytes(gather);
        while (q > bound && sim.ops[q].issue > wantIssue + kStallEpsilon) {
          size_t next = q - 1;
          if (bytes[next] + size > budget ||
              (maxInFlight > 0 && inFlight[next] + size > maxInFlight))
            break;
          bytes[next] += size;
          inFlight[next] += size;
          q = next;
        }
        // Never anchor on an op this round already moved (a gather or a
        // reload moved with one) or on this gather's own reloads: that
        // would reorder them.
        llvm::SmallPtrSet<Operation *, 4> ownReloads;
        for (Value shard : gather.getShards())
          if (ReloadStartOp reload = reloadOf(shard)) {
            ownReloads.insert(reload);
            ownReloads.insert(shard.getDefiningOp());
          }
        while (q < p && (moved.contains(ops[q]) || ownReloads.contains(ops[q])))
          ++q;
        if (q < p) {
          moves.push_back({gather, ops[q]});
          moved.insert(gather);
          for (Value shard : gather.getShards())
            if (ReloadStartOp reload = reloadOf(shard)) {
              moved.insert(reload);
              moved.insert(shard.getDefiningOp());
            }
        }
      }
      // The next gather goes after this one: before the same anchor (moves
      // apply in order) or after this unmoved gather.
      orderBound = q < p ? q : p + 1;
    }
    for (auto [gather, anchor] : moves)
      moveGatherBefore(gather, anchor);
    return !moves.empty();
  }

  /// Starts the reload of each host-resident shard early enough that its
  /// copy (queued FIFO behind earlier reloads) ends before its wait, as far
  /// as the budget allows; the wait stays right before the gather.
  void hideReloads() {
    FailureOr<MemoryTimeline> timeline = MemoryTimeline::compute(fn);
    if (failed(timeline))
      return;
    SimulationResult sim = simulation.run(*timeline);
    const std::vector<Operation *> &ops = timeline->getOps();
    std::vector<double> h2dFree =
        streamFreeBefore(sim, StreamKind::HostToDevice);
    std::vector<int64_t> bytes(ops.size());
    for (size_t i = 0; i < ops.size(); ++i)
      bytes[i] = timeline->deviceBytesAt(i);
    SmallVector<std::pair<Operation *, Operation *>> moves;
    for (size_t r = 0; r < ops.size(); ++r) {
      auto reload = dyn_cast<ReloadStartOp>(ops[r]);
      if (!reload || !isa<BlockArgument>(reload.getHost()) ||
          !reload.getFuture().hasOneUse())
        continue;
      size_t waitAt = timeline->indexOf(*reload.getFuture().getUsers().begin());
      int64_t size = getTypeBytes(reload.getFuture().getType());
      double copy = sim.ops[r].end - sim.ops[r].start;
      size_t at = r;
      while (at > 0 &&
             std::max(sim.ops[at].issue, h2dFree[at]) + copy >
                 sim.ops[waitAt].issue &&
             bytes[at - 1] + size <= budget && !isa<ReloadStartOp>(ops[at - 1]))
        bytes[--at] += size;
      if (at < r)
        moves.push_back({reload, ops[at]});
    }
    for (auto [reload, anchor] : moves)
      reload->moveBefore(anchor);
  }

  /// Fuses each gather into the group right before it when the two are
  /// adjacent, or the later one can be hoisted next to the earlier within
  /// the budget, and the fused transfer is predicted cheaper without making
  /// the earlier group's wait stall longer.
  bool fuseNeighbours() {
    FailureOr<MemoryTimeline> timeline = MemoryTimeline::compute(fn);
    if (failed(timeline))
      return false;
    SimulationResult sim = simulation.run(*timeline);
    const std::vector<Operation *> &ops = timeline->getOps();
    std::vector<int64_t> bytes(ops.size());
    // Which shard each op releases and where each exchange is waited:
    // merging erases ops, so look nothing up in `ops` behind the cursor.
    std::vector<Value> releasedShard(ops.size());
    std::vector<std::optional<size_t>> exchangeWait(ops.size());
    for (size_t i = 0; i < ops.size(); ++i) {
      bytes[i] = timeline->deviceBytesAt(i);
      exchangeWait[i] = exchangeWaitAt(ops[i], *timeline);
      if (auto release = dyn_cast<ReleaseOp>(ops[i]))
        if (Value shard = gatheredShard(release.getValue()))
          releasedShard[i] = paramOf(shard);
    }

    bool fused = false;
    GatherStartOp group;
    size_t groupAt = 0;
    int64_t groupBytes = 0;
    double groupStart = 0, groupWaitIssue = 0, groupStall = 0;
    for (size_t p = 0; p < ops.size(); ++p) {
      auto gather = dyn_cast<GatherStartOp>(ops[p]);
      if (!gather)
        continue;
      int64_t size = gatherBytes(gather);
      int64_t moving = movedBytes(gather);
      size_t waitAt = timeline->indexOf(firstWait(gather, *timeline));
      bool canFuse =
          group && groupBytes + size <= maxFused && canMerge(group, gather);
      // Hoisting the later gather next to the group must fit at every op,
      // and it must not move above its own parameter's previous release nor
      // ahead of an exchange waited before it.
      for (size_t i = groupAt; canFuse && i < p; ++i) {
        canFuse = bytes[i] + moving <= budget &&
                  !(exchangeWait[i] && *exchangeWait[i] < waitAt) &&
                  !(releasedShard[i] &&
                    llvm::any_of(gather.getShards(), [&](Value shard) {
                      return paramOf(shard) == releasedShard[i];
                    }));
      }
      if (canFuse) {
        int64_t ranks = collectiveGroupSize(gather);
        auto seconds = [&](int64_t bytes) {
          return costModel.collectiveSeconds(CollectiveKind::AllGather, bytes,
                                             ranks);
        };
        double together = seconds(groupBytes + size);
        double fusedEnd = groupStart + together;
        // What the group's wait gains or loses against what this gather's
        // wait gains; with no change either way, a cheaper transfer frees
        // the collective stream for later gathers.
        double groupStallDelta =
            std::max(0.0, fusedEnd - groupWaitIssue) - groupStall;
        double stall = sim.ops[waitAt].stall;
        double stallGain =
            stall - std::max(0.0, fusedEnd - sim.ops[waitAt].issue);
        bool cheaper = together < seconds(groupBytes) + seconds(size);
        canFuse =
            cheaper &&
            (groupStallDelta + kStallEpsilon < stallGain ||
             (groupStallDelta <= kStallEpsilon && stallGain >= -kStallEpsilon));
        if (canFuse)
          groupStall += std::max(0.0, groupStallDelta);
      }
      if (!canFuse) {
        group = gather;
        groupAt = p;
        groupBytes = size;
        groupStart = sim.ops[p].start;
        groupWaitIssue = sim.ops[waitAt].issue;
        groupStall = sim.ops[waitAt].stall;
        continue;
      }
      for (size_t i = groupAt; i < p; ++i)
        bytes[i] += moving;
      simulation.forget(group);
      simulation.forget(gather);
      group = mergeGroups(group, gather);
      groupBytes += size;
      fused = true;
    }
    return fused;
  }

  /// Where gathers queue behind each other (the collective stream is the
  /// bottleneck), a fused transfer's effect is not local: it frees the
  /// stream earlier for everything queued behind it but delays the first
  /// group's data, and which wins depends on the compute in between. So
  /// each fusion of two adjacent groups there is tried and kept only if the
  /// simulated step gets shorter (and fits the budget). The number of
  /// simulated ops is capped to bound compile time on long steps.
  bool fuseWhereStreamBound() {
    constexpr int64_t kMaxSimulatedOps = 150'000;
    FailureOr<MemoryTimeline> timeline = MemoryTimeline::compute(fn);
    if (failed(timeline))
      return false;
    SimulationResult sim = simulation.run(*timeline);
    double best = sim.stepSeconds;
    int64_t simulated = 0;
    bool fused = false;
    for (size_t p = 0;;) {
      const std::vector<Operation *> &ops = timeline->getOps();
      size_t a = p;
      while (a < ops.size() && !isa<GatherStartOp>(ops[a]))
        ++a;
      size_t b = a + 1;
      while (b < ops.size() && !isa<GatherStartOp>(ops[b]))
        ++b;
      if (b >= ops.size())
        break;
      auto group = cast<GatherStartOp>(ops[a]);
      auto gather = cast<GatherStartOp>(ops[b]);
      bool queued = sim.ops[b].start > sim.ops[b].issue + kStallEpsilon;
      bool candidate = queued && canMerge(group, gather) &&
                       gatherBytes(group) + gatherBytes(gather) <= maxFused;
      // Not above the release of the same parameter's previous interval.
      for (size_t i = a + 1; candidate && i < b; ++i)
        if (auto release = dyn_cast<ReleaseOp>(ops[i]))
          if (Value shard = gatheredShard(release.getValue()))
            candidate = llvm::none_of(gather.getShards(), [&](Value s) {
              return paramOf(s) == paramOf(shard);
            });
      if (!candidate) {
        p = b;
        continue;
      }
      simulated += static_cast<int64_t>(ops.size());
      if (simulated > kMaxSimulatedOps)
        break;
      Operation *anchor = gather->getNextNode();
      unsigned firstCount = group.getNumResults();
      simulation.forget(group);
      simulation.forget(gather);
      GatherStartOp merged = mergeGroups(group, gather);
      FailureOr<MemoryTimeline> trial = MemoryTimeline::compute(fn);
      SimulationResult trialSim;
      bool better = succeeded(trial) && trial->getPeakDeviceBytes() <= budget;
      if (better) {
        trialSim = simulation.run(*trial);
        better = trialSim.stepSeconds < best - kStallEpsilon;
      }
      if (better) {
        best = trialSim.stepSeconds;
        sim = std::move(trialSim);
        timeline = std::move(trial);
        fused = true;
        p = a; // the merged group may take the next one too
        continue;
      }
      simulation.forget(merged);
      splitGroup(merged, firstCount, anchor);
      timeline = MemoryTimeline::compute(fn);
      if (failed(timeline))
        return fused;
      p = b;
    }
    return fused;
  }

  /// Undoes mergeGroups: the first `firstCount` futures stay a group where
  /// `merged` is, the rest become a group again right before `anchor`.
  void splitGroup(GatherStartOp merged, unsigned firstCount,
                  Operation *anchor) {
    auto shards = merged.getShards();
    auto futures = merged.getFutures();
    OpBuilder builder(merged);
    auto first = GatherStartOp::create(
        builder, merged.getLoc(),
        TypeRange(futures.getTypes()).take_front(firstCount),
        shards.take_front(firstCount), /*persistent=*/false);
    builder.setInsertionPoint(anchor);
    auto second = GatherStartOp::create(
        builder, merged.getLoc(),
        TypeRange(futures.getTypes()).drop_front(firstCount),
        shards.drop_front(firstCount), /*persistent=*/false);
    for (unsigned i = 0, e = futures.size(); i < e; ++i)
      futures[i].replaceAllUsesWith(i < firstCount
                                        ? first.getFutures()[i]
                                        : second.getFutures()[i - firstCount]);
    merged.erase();
  }

  GatherStartOp mergeGroups(GatherStartOp first, GatherStartOp second) {
    SmallVector<Value> shards(first.getShards());
    shards.append(second.getShards().begin(), second.getShards().end());
    SmallVector<Type> types(first.getFutures().getTypes());
    types.append(second.getFutures().getTypes().begin(),
                 second.getFutures().getTypes().end());
    // The second group's reloads must come before the merged start.
    for (Value shard : second.getShards())
      if (ReloadStartOp reload = reloadOf(shard)) {
        reload->moveBefore(first);
        shard.getDefiningOp()->moveBefore(first);
      }
    OpBuilder builder(first);
    auto merged = GatherStartOp::create(builder, first.getLoc(), types, shards,
                                        /*persistent=*/false);
    unsigned n = first.getNumResults();
    for (unsigned i = 0; i < n; ++i)
      first.getFutures()[i].replaceAllUsesWith(merged.getFutures()[i]);
    for (unsigned i = 0, e = second.getNumResults(); i < e; ++i)
      second.getFutures()[i].replaceAllUsesWith(merged.getFutures()[n + i]);
    first.erase();
    second.erase();
    return merged;
  }

  int64_t collectiveGroupSize(GatherStartOp gather) {
    auto shard = cast<ShardType>(gather.getShards()[0].getType());
    SymbolTableCollection symbols;
    FailureOr<int64_t> size = getShardGroupSize(gather, shard, symbols);
    return succeeded(size) ? *size : 1;
  }

  func::FuncOp fn;
  const CostModel &costModel;
  int64_t budget, maxInFlight, maxFused;
  /// Every simulation of the run: the scheduler only moves, merges and
  /// splits gathers (and moves reloads), so every other op keeps the cost
  /// estimated once; an erased gather is forgotten before it goes.
  IncrementalSimulation simulation;
};

struct PrefetchPass : public dc::impl::DCPrefetchBase<PrefetchPass> {
  using DCPrefetchBase::DCPrefetchBase;

  void runOnOperation() override {
    if (failed(checkOptionRange(getOperation(), getArgument(),
                                "max-fused-bytes", maxFusedBytes, 0)) ||
        failed(checkOptionRange(getOperation(), getArgument(),
                                "max-in-flight-bytes", maxInFlightBytes, 0)))
      return signalPassFailure();
    auto plan = [&](func::FuncOp fn, const PlanningSetup &setup,
                    const CostModel &costModel) {
      if (fn.getOps<GatherStartOp>().empty())
        return success();
      return GatherScheduler(fn, costModel, setup.budgetBytes, maxInFlightBytes,
                             maxFusedBytes)
          .run();
    };
    if (failed(planEachStep(getOperation(), getArgument(), profile,
                            optimizerStateBytes, plan)))
      signalPassFailure();
  }
};

} // namespace
