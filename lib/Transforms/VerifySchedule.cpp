//===- VerifySchedule.cpp - prove a dc schedule safe and within budget ----===//
#include "dc/Analysis/BufferAliasing.h"
#include "dc/Support/ByteSize.h"
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
  for (auto start : body.getOps<AsyncStartOpInterface>()) {
    Operation &op = *start.getOperation();
    for (OpResult future : start.getFutures()) {
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
        return op.emitError()
               << "future #" << future.getResultNumber() << " is never waited";
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

/// The dc.releases of `value`, in block order; reports a second one.
FailureOr<ReleaseOp>
findRelease(Value value, const llvm::DenseMap<Operation *, size_t> &index,
            StringRef what) {
  SmallVector<ReleaseOp> releases = getReleasesInOrder(value, index);
  if (releases.size() > 1) {
    InFlightDiagnostic diag = releases[1].emitError()
                              << "releases a " << what << " twice";
    diag.attachNote(releases[0].getLoc()) << "first released here";
    return diag;
  }
  return releases.empty() ? ReleaseOp() : releases.front();
}

/// Nothing uses the buffer `release` frees (`value` or a view of it) after
/// the release, and no start op reading it is waited after the release.
LogicalResult
verifyUsedBeforeRelease(Block &body,
                        const llvm::DenseMap<Operation *, size_t> &index,
                        Value value, ReleaseOp release, StringRef what) {
  size_t releasedAt = index.lookup(release);
  for (Value view : getBufferViews(value)) {
    for (OpOperand &use : view.getUses()) {
      Operation *owner = use.getOwner();
      Operation *top = body.findAncestorOpInBlock(*owner);
      if (owner == release || !top)
        continue;
      if (index.lookup(top) > releasedAt) {
        InFlightDiagnostic diag = owner->emitError()
                                  << "uses a " << what
                                  << (view == value ? "" : " (through a view)")
                                  << " after its dc.release";
        diag.attachNote(release.getLoc()) << "released here";
        return diag;
      }
      // A start op reads its operands until its future is waited.
      if (auto start = dyn_cast<AsyncStartOpInterface>(top))
        for (Value future : start.getFutures())
          for (Operation *waiter : future.getUsers()) {
            Operation *wait = body.findAncestorOpInBlock(*waiter);
            if (wait && index.lookup(wait) > releasedAt) {
              InFlightDiagnostic diag =
                  top->emitError()
                  << "reads a " << what
                  << " until its future is waited, which is after the "
                     "value's dc.release";
              diag.attachNote(release.getLoc()) << "released here";
              diag.attachNote(wait->getLoc()) << "waited here";
              return diag;
            }
          }
    }
  }
  return success();
}

/// No gathered or reloaded value is used after its release or released
/// twice; every gather is released unless persistent. A reloaded value may
/// go unreleased (it lives until the step ends); the offload passes always
/// release it.
LogicalResult verifyReleases(Block &body) {
  llvm::DenseMap<Operation *, size_t> index;
  for (auto [i, op] : llvm::enumerate(body.getOperations()))
    index[&op] = i;
  for (Operation &op : body) {
    auto wait = dyn_cast<WaitOp>(op);
    if (!wait)
      continue;
    Operation *start = wait.getFuture().getDefiningOp();
    auto gather = dyn_cast_or_null<GatherStartOp>(start);
    if (!gather && !isa_and_nonnull<ReloadStartOp>(start))
      continue;
    StringRef what = gather ? "gathered parameter" : "reloaded value";
    FailureOr<ReleaseOp> release = findRelease(wait.getResult(), index, what);
    if (failed(release))
      return failure();
    if (!*release) {
      if (gather && !gather.getPersistent())
        return gather.emitError()
               << "gathers a parameter that is never released and not "
                  "persistent";
      continue;
    }
    if (failed(verifyUsedBeforeRelease(body, index, wait.getResult(), *release,
                                       what)))
      return failure();
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
      if (failed(verifyFutures(body)) || failed(verifyReleases(body)))
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
