//===- SelectiveGather.cpp - keep gathered copies where the budget allows -===//
#include "dc/Dialect/DC/IR/TypeSizes.h"
#include "dc/Schedule/Passes.h"
#include "dc/Schedule/Planning.h"

#include "dc/Analysis/MemoryTimeline.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace dc {
#define GEN_PASS_DEF_DCSELECTIVEGATHER
#include "dc/Schedule/Passes.h.inc"
} // namespace dc

using namespace mlir;
using namespace dc;

namespace {

/// Keeping interval k's copy of a parameter alive until interval k+1: drop
/// `release` and let `nextWait`'s uses take the kept copy.
struct KeepCandidate {
  ReleaseOp release;
  WaitOp nextWait;
  size_t gapBegin, gapEnd; // [release, next gather start) op indices
  int64_t bytes;
  double savedSeconds;
  int64_t paramOrder;
};

/// The gather group and result index behind a gathered value's wait.
std::pair<GatherStartOp, unsigned> gatherOf(WaitOp wait) {
  auto result = cast<OpResult>(wait.getFuture());
  return {cast<GatherStartOp>(result.getOwner()), result.getResultNumber()};
}

/// Removes one shard (and its future) from a gather group.
void dropFromGroup(GatherStartOp gather, unsigned index) {
  if (gather.getNumResults() == 1) {
    gather.erase();
    return;
  }
  SmallVector<Value> shards;
  SmallVector<Type> types;
  for (unsigned i = 0, e = gather.getNumResults(); i < e; ++i)
    if (i != index) {
      shards.push_back(gather.getShards()[i]);
      types.push_back(gather.getFutures()[i].getType());
    }
  OpBuilder builder(gather);
  auto smaller = GatherStartOp::create(builder, gather.getLoc(), types, shards,
                                       gather.getPersistent());
  for (unsigned i = 0, j = 0, e = gather.getNumResults(); i < e; ++i)
    if (i != index)
      gather.getFutures()[i].replaceAllUsesWith(smaller.getFutures()[j++]);
  gather.erase();
}

/// Folds every gathered copy that lives inside another copy of the same
/// parameter (gathered after it, released before it) into that outer copy:
/// its uses read the outer copy, and its gather, wait and release go. This
/// saves a gather and the copy's bytes at no cost. Such nesting comes from
/// a recomputation that gathers a parameter again inside the interval of
/// the backward's own gather of it. The merge below needs it gone: it
/// drops the earlier interval's release, which for nested copies would
/// leave the outer copy released at the inner copy's release, before the
/// outer copy's last use.
void foldNestedCopies(func::FuncOp fn) {
  Block &body = fn.getBody().front();
  llvm::DenseMap<Operation *, size_t> index;
  for (auto [i, op] : llvm::enumerate(body.getOperations()))
    index[&op] = i;
  // Per parameter shard, the copy that is released last so far.
  llvm::DenseMap<Value, std::pair<WaitOp, ReleaseOp>> outermost;
  SmallVector<std::tuple<WaitOp, ReleaseOp, WaitOp>> nested;
  for (Operation &op : body) {
    auto wait = dyn_cast<WaitOp>(op);
    if (!wait)
      continue;
    auto result = dyn_cast<OpResult>(wait.getFuture());
    auto gather =
        result ? dyn_cast<GatherStartOp>(result.getOwner()) : GatherStartOp();
    if (!gather || gather.getPersistent())
      continue;
    SmallVector<ReleaseOp> releases;
    for (Operation *user : wait.getResult().getUsers())
      if (auto release = dyn_cast<ReleaseOp>(user))
        releases.push_back(release);
    // A copy released twice or never is dc-verify-schedule's to report.
    if (releases.size() != 1 || releases[0]->getBlock() != &body)
      continue;
    ReleaseOp release = releases[0];
    Value shard = gather.getShards()[result.getResultNumber()];
    auto [it, inserted] = outermost.try_emplace(shard, wait, release);
    if (inserted)
      continue;
    auto [outerWait, outerRelease] = it->second;
    if (index.lookup(release) < index.lookup(outerRelease))
      nested.push_back({wait, release, outerWait});
    else
      it->second = {wait, release};
  }
  for (auto [wait, release, outerWait] : nested) {
    auto [gather, i] = gatherOf(wait);
    release.erase();
    wait.getResult().replaceAllUsesWith(outerWait.getResult());
    wait.erase();
    dropFromGroup(gather, i);
  }
}

LogicalResult keepGathered(func::FuncOp fn, const CostModel &costModel,
                           int64_t budget) {
  foldNestedCopies(fn);
  FailureOr<MemoryTimeline> timeline = MemoryTimeline::compute(fn);
  if (failed(timeline))
    return failure();
  std::vector<OpCost> costs = costModel.estimateFunction(fn);
  const std::vector<Operation *> &ops = timeline->getOps();

  // Each parameter's intervals in order: (wait, release) per gather.
  llvm::MapVector<Value, SmallVector<std::pair<WaitOp, ReleaseOp>>> intervals;
  for (Operation *op : ops)
    if (auto wait = dyn_cast<WaitOp>(op)) {
      auto result = dyn_cast<OpResult>(wait.getFuture());
      auto gather =
          result ? dyn_cast<GatherStartOp>(result.getOwner()) : GatherStartOp();
      if (!gather || gather.getPersistent())
        continue;
      ReleaseOp release;
      for (Operation *user : wait.getResult().getUsers())
        if (auto r = dyn_cast<ReleaseOp>(user))
          release = r;
      intervals[gather.getShards()[result.getResultNumber()]].push_back(
          {wait, release});
    }

  SmallVector<KeepCandidate> candidates;
  int64_t order = 0;
  for (auto &[shard, list] : intervals) {
    ++order;
    for (size_t k = 0; k + 1 < list.size(); ++k) {
      auto [wait, release] = list[k];
      WaitOp nextWait = list[k + 1].first;
      if (!release)
        continue;
      GatherStartOp nextGather = gatherOf(nextWait).first;
      size_t begin = timeline->indexOf(release);
      size_t end = std::max(begin, timeline->indexOf(nextGather));
      int64_t bytes = getTypeBytes(wait.getResult().getType());
      // The saving is the gather's own cost: the collective stream time it
      // frees (a fused group saves its share of the bytes).
      OpCost cost = costs[timeline->indexOf(nextGather)];
      int64_t groupBytes = 0;
      for (Value future : nextGather.getFutures())
        groupBytes += getTypeBytes(future.getType());
      double saved = groupBytes > 0 ? cost.seconds * bytes / groupBytes : 0;
      candidates.push_back(
          {release, nextWait, begin, end, bytes, saved, order});
    }
  }
  llvm::stable_sort(
      candidates, [](const KeepCandidate &a, const KeepCandidate &b) {
        double ra = a.savedSeconds / std::max<int64_t>(a.bytes, 1);
        double rb = b.savedSeconds / std::max<int64_t>(b.bytes, 1);
        if (ra != rb)
          return ra > rb;
        if (a.gapEnd - a.gapBegin != b.gapEnd - b.gapBegin)
          return a.gapEnd - a.gapBegin < b.gapEnd - b.gapBegin;
        return a.paramOrder < b.paramOrder;
      });

  std::vector<int64_t> bytes(ops.size());
  for (size_t i = 0; i < ops.size(); ++i)
    bytes[i] = timeline->deviceBytesAt(i);
  for (KeepCandidate &candidate : candidates) {
    bool fits = true;
    for (size_t i = candidate.gapBegin; fits && i < candidate.gapEnd; ++i)
      fits = bytes[i] + candidate.bytes <= budget;
    if (!fits)
      continue;
    for (size_t i = candidate.gapBegin; i < candidate.gapEnd; ++i)
      bytes[i] += candidate.bytes;
    // The release's operand is the copy kept so far (earlier merges of the
    // same parameter replaced later copies with it).
    Value kept = candidate.release.getValue();
    auto [gather, index] = gatherOf(candidate.nextWait);
    candidate.nextWait.getResult().replaceAllUsesWith(kept);
    candidate.nextWait.erase();
    dropFromGroup(gather, index);
    candidate.release.erase();
  }
  return success();
}

struct SelectiveGatherPass
    : public dc::impl::DCSelectiveGatherBase<SelectiveGatherPass> {
  using DCSelectiveGatherBase::DCSelectiveGatherBase;

  void runOnOperation() override {
    auto plan = [](func::FuncOp fn, const PlanningSetup &setup,
                   const CostModel &costModel) {
      if (fn.getOps<GatherStartOp>().empty())
        return success();
      return keepGathered(fn, costModel, setup.budgetBytes);
    };
    if (failed(planEachStep(getOperation(), getArgument(), profile,
                            optimizerStateBytes, plan)))
      signalPassFailure();
  }
};

} // namespace
