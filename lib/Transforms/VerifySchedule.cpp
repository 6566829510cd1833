//===- VerifySchedule.cpp - prove a dc schedule safe and within budget ----===//
#include "dc/Transforms/Passes.h"
#include "dc/Transforms/Planning.h"

#include "dc/Analysis/MemoryTimeline.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace dc {
#define GEN_PASS_DEF_DCVERIFYSCHEDULE
#include "dc/Transforms/Passes.h.inc"
} // namespace dc

using namespace mlir;
using namespace dc;

namespace {

/// Each future is consumed exactly once, by a wait or end_backward.
LogicalResult verifyFutures(Block &body) {
  for (Operation &op : body) {
    for (OpResult future : op.getResults()) {
      if (!isa<FutureType>(future.getType()))
        continue;
      SmallVector<Operation *> waits;
      for (Operation *user : future.getUsers()) {
        if (!isa<WaitOp, EndBackwardOp>(user))
          return user->emitError()
                 << "uses future #" << future.getResultNumber() << " of '"
                 << op.getName()
                 << "'; a future may only be taken by dc.wait or "
                    "dc.end_backward";
        waits.push_back(user);
      }
      if (waits.empty())
        return op.emitError() << "future #" << future.getResultNumber()
                              << " is never waited";
      if (waits.size() > 1) {
        InFlightDiagnostic diag = op.emitError()
                                  << "future #" << future.getResultNumber()
                                  << " is waited " << waits.size()
                                  << " times; it must be waited exactly once";
        for (Operation *wait : waits)
          diag.attachNote(wait->getLoc()) << "waited here";
        return diag;
      }
    }
  }
  return success();
}

/// No gathered value is used after its release, released twice, or left
/// unreleased unless persistent.
LogicalResult verifyGatherLifetimes(Block &body) {
  llvm::DenseMap<Operation *, size_t> index;
  for (auto [i, op] : llvm::enumerate(body.getOperations()))
    index[&op] = i;
  for (Operation &op : body) {
    auto gather = dyn_cast<GatherStartOp>(op);
    if (!gather)
      continue;
    for (Value future : gather.getFutures()) {
      auto wait = future.hasOneUse()
                      ? dyn_cast<WaitOp>(*future.getUsers().begin())
                      : WaitOp();
      if (!wait)
        continue; // reported by verifyFutures
      Value full = wait.getResult();
      SmallVector<ReleaseOp> releases;
      for (Operation *user : full.getUsers())
        if (auto release = dyn_cast<ReleaseOp>(user))
          releases.push_back(release);
      llvm::sort(releases, [&](ReleaseOp a, ReleaseOp b) {
        return index.lookup(a) < index.lookup(b);
      });
      ReleaseOp release = releases.empty() ? ReleaseOp() : releases.front();
      if (releases.size() > 1) {
        InFlightDiagnostic diag = releases[1].emitError()
                                  << "releases a gathered parameter twice";
        diag.attachNote(release.getLoc()) << "first released here";
        return diag;
      }
      if (!release) {
        if (!gather.getPersistent())
          return gather.emitError()
                 << "gathers a parameter that is never released and not "
                    "persistent";
        continue;
      }
      size_t releasedAt = index.lookup(release);
      for (OpOperand &use : full.getUses()) {
        Operation *top = body.findAncestorOpInBlock(*use.getOwner());
        if (use.getOwner() != release && index.lookup(top) > releasedAt) {
          InFlightDiagnostic diag =
              use.getOwner()->emitError()
              << "uses a gathered parameter after its dc.release";
          diag.attachNote(release.getLoc()) << "released here";
          return diag;
        }
      }
    }
  }
  return success();
}

struct VerifySchedulePass
    : public dc::impl::DCVerifyScheduleBase<VerifySchedulePass> {
  using DCVerifyScheduleBase::DCVerifyScheduleBase;

  void runOnOperation() override {
    FailureOr<std::optional<int64_t>> budget =
        resolveMemoryBudget(getOperation(), memoryBudget, target);
    if (failed(budget))
      return signalPassFailure();
    for (auto fn : getOperation().getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      if (!llvm::hasSingleElement(fn.getBody())) {
        fn.emitError("dc-verify-schedule needs single-block functions");
        return signalPassFailure();
      }
      Block &body = fn.getBody().front();
      if (failed(verifyFutures(body)) || failed(verifyGatherLifetimes(body)))
        return signalPassFailure();
      if (!*budget)
        continue;
      FailureOr<MemoryTimeline> timeline = MemoryTimeline::compute(fn);
      if (failed(timeline))
        return signalPassFailure();
      if (timeline->getPeakDeviceBytes() > **budget) {
        Operation *peakOp = timeline->getOps()[timeline->getPeakIndex()];
        peakOp->emitError()
            << "device memory peaks here at "
            << formatBytes(timeline->getPeakDeviceBytes())
            << ", over the budget of " << formatBytes(**budget) << " by "
            << formatBytes(timeline->getPeakDeviceBytes() - **budget);
        return signalPassFailure();
      }
    }
  }
};

} // namespace
