//===- WaitReductionsEarly.cpp - retire gradient reductions when done -----===//
//
// dc-zero3 ends the backward with one dc.end_backward that waits for every
// reduce-scatter (and all-reduce) of the step, so every full gradient the
// reductions read stays live until the step's end. Each reduction is waited
// instead where the stream simulator says it has finished: before the first
// op the compute stream reaches after its completion, which stalls nothing
// in the model and frees its source there.
//
//===----------------------------------------------------------------------===//
#include "dc/Schedule/Passes.h"
#include "dc/Schedule/Planning.h"

#include "dc/Analysis/MemoryTimeline.h"
#include "dc/Analysis/StreamSimulator.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace dc {
#define GEN_PASS_DEF_DCWAITREDUCTIONSEARLY
#include "dc/Schedule/Passes.h.inc"
} // namespace dc

using namespace mlir;
using namespace dc;

namespace {

/// `budget`: the step's share of the memory budget; with `overBudgetOnly`,
/// a step that fits it is left as it is.
LogicalResult waitEarly(func::FuncOp fn, const CostModel &costModel,
                        int64_t budget, bool overBudgetOnly) {
  SmallVector<EndBackwardOp> ends(fn.getBody().front().getOps<EndBackwardOp>());
  if (ends.empty())
    return success();
  FailureOr<MemoryTimeline> timeline = MemoryTimeline::compute(fn);
  if (failed(timeline))
    return failure();
  if (overBudgetOnly && timeline->getPeakDeviceBytes() <= budget)
    return success();
  SimulationResult sim = StreamSimulator(costModel).run(fn, *timeline);
  const std::vector<Operation *> &ops = timeline->getOps();
  llvm::DenseMap<Operation *, size_t> indexOf;
  for (auto [i, op] : llvm::enumerate(ops))
    indexOf[op] = i;

  // Erased only at the end: a wait of a later end_backward may be placed
  // before an earlier one.
  SmallVector<EndBackwardOp> replaced;
  for (EndBackwardOp end : ends) {
    size_t endIndex = indexOf.lookup(end);
    // Where each future's wait goes: before the first op after its start
    // that the compute stream reaches once the reduction is done.
    SmallVector<std::pair<size_t, Value>> moved; // (insert before op, future)
    SmallVector<Value> kept;
    for (Value future : end.getFutures()) {
      Operation *start = future.getDefiningOp();
      auto ready = sim.futureReady.find(future);
      if (!start || !indexOf.count(start) || ready == sim.futureReady.end()) {
        kept.push_back(future);
        continue;
      }
      size_t at = indexOf.lookup(start) + 1;
      while (at < endIndex && sim.ops[at].issue < ready->second)
        ++at;
      if (at >= endIndex) {
        kept.push_back(future);
        continue;
      }
      moved.push_back({at, future});
    }
    if (moved.empty())
      continue;

    // The waits, in place; then end_backward without their futures.
    llvm::DenseMap<Value, Value> shardOf;
    OpBuilder builder(fn.getContext());
    for (auto [at, future] : moved) {
      builder.setInsertionPoint(ops[at]);
      shardOf[future] = WaitOp::create(builder, end.getLoc(), future);
    }
    if (!kept.empty()) {
      builder.setInsertionPoint(end);
      auto rest = EndBackwardOp::create(builder, end.getLoc(), kept);
      for (auto [future, shard] : llvm::zip(kept, rest.getShards()))
        shardOf[future] = shard;
    }
    for (auto [future, result] : llvm::zip(end.getFutures(), end.getShards()))
      result.replaceAllUsesWith(shardOf.lookup(future));
    replaced.push_back(end);
  }
  for (EndBackwardOp end : replaced)
    end.erase();
  return success();
}

struct WaitReductionsEarlyPass
    : public dc::impl::DCWaitReductionsEarlyBase<WaitReductionsEarlyPass> {
  using DCWaitReductionsEarlyBase::DCWaitReductionsEarlyBase;

  void runOnOperation() override {
    auto plan = [&](func::FuncOp fn, const PlanningSetup &setup,
                    const CostModel &costModel) {
      return waitEarly(fn, costModel, setup.budgetBytes, overBudgetOnly);
    };
    if (failed(planEachStep(getOperation(), getArgument(), profile,
                            optimizerStateBytes, plan)))
      signalPassFailure();
  }
};

} // namespace
