//===- OffloadParams.cpp - parameter shards in host memory ----------------===//
#include "dc/Schedule/Passes.h"
#include "dc/Schedule/Planning.h"
#include "dc/Schedule/ReloadReleases.h"
#include "dc/Support/ByteSize.h"

#include "dc/Analysis/MemoryTimeline.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace dc {
#define GEN_PASS_DEF_DCOFFLOADPARAMS
#include "dc/Schedule/Passes.h.inc"
} // namespace dc

using namespace mlir;
using namespace dc;

namespace {

/// Moves parameter `arg` (a !dc.shard) to host memory: every op that used the
/// shard now uses a reload of it, started and waited right before that op
/// (and released after it: insertReloadReleases, once the plan is made).
void offloadParam(func::FuncOp fn, BlockArgument arg) {
  auto shard = cast<ShardType>(arg.getType());
  arg.setType(HostType::get(shard));
  SmallVector<OpOperand *> uses;
  for (OpOperand &use : arg.getUses())
    uses.push_back(&use);
  for (OpOperand *use : uses) {
    Operation *user = use->getOwner();
    OpBuilder builder(user);
    auto reload = ReloadStartOp::create(builder, user->getLoc(), arg);
    auto wait = WaitOp::create(builder, user->getLoc(), reload.getFuture());
    use->set(wait.getResult());
  }
  fn.setType(FunctionType::get(fn.getContext(),
                               fn.getBody().front().getArgumentTypes(),
                               fn.getResultTypes()));
}

LogicalResult offloadParams(func::FuncOp fn, ParamsInHost mode, int64_t budget,
                            bool failOverBudget) {
  SmallVector<BlockArgument> shards;
  for (BlockArgument arg : fn.getArguments())
    if (isa<ShardType>(arg.getType()) &&
        fn.getArgAttr(arg.getArgNumber(), kParamAttrName))
      shards.push_back(arg);
  if (mode == ParamsInHost::All) {
    for (BlockArgument arg : shards)
      offloadParam(fn, arg);
    return success();
  }
  // Largest shards first (then argument order), until the step fits.
  llvm::stable_sort(shards, [](BlockArgument a, BlockArgument b) {
    return cast<ShardType>(a.getType()).getLocalBytes() >
           cast<ShardType>(b.getType()).getLocalBytes();
  });
  for (size_t next = 0;; ++next) {
    FailureOr<MemoryTimeline> timeline = MemoryTimeline::compute(fn);
    if (failed(timeline))
      return failure();
    if (timeline->getPeakDeviceBytes() <= budget)
      return success();
    if (next == shards.size() && !failOverBudget)
      return success();
    if (next == shards.size())
      return timeline->getOps()[timeline->getPeakIndex()]->emitError()
             << "with every parameter shard in host memory, device memory "
                "still peaks here at "
             << formatBytes(timeline->getPeakDeviceBytes())
             << "; the budget of " << formatBytes(budget) << " is short by "
             << formatBytes(timeline->getPeakDeviceBytes() - budget);
    offloadParam(fn, shards[next]);
  }
}

struct OffloadParamsPass
    : public dc::impl::DCOffloadParamsBase<OffloadParamsPass> {
  using DCOffloadParamsBase::DCOffloadParamsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto plan = [&](func::FuncOp fn, const PlanningSetup &setup,
                    const CostModel &) {
      if (failed(offloadParams(fn, params, setup.budgetBytes, failOverBudget)))
        return failure();
      // Each uploaded shard is freed once its gather is waited, as planned.
      insertReloadReleases(fn);
      return success();
    };
    if (failed(planEachStep(module, getArgument(), profile, optimizerStateBytes,
                            plan,
                            /*replacesReloadReleases=*/true)))
      signalPassFailure();
  }
};

} // namespace
