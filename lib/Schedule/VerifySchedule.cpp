//===- VerifySchedule.cpp - prove a dc schedule safe and within budget ----===//
#include "dc/Schedule/Passes.h"
#include "dc/Schedule/Planning.h"
#include "dc/Support/ByteSize.h"

#include "dc/Analysis/MemoryTimeline.h"
#include "dc/Analysis/StepSignature.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace dc {
#define GEN_PASS_DEF_DCVERIFYSCHEDULE
#include "dc/Schedule/Passes.h.inc"
} // namespace dc

using namespace mlir;
using namespace dc;

namespace {

/// `buffer` and every memref view of it (the same bytes).
SmallVector<Value> getMemRefViews(Value buffer) {
  SmallVector<Value> views{buffer};
  for (size_t next = 0; next < views.size(); ++next)
    for (Operation *user : views[next].getUsers())
      if (auto view = dyn_cast<ViewLikeOpInterface>(user);
          view && view.getViewSource() == views[next])
        views.push_back(view->getResult(0));
  return views;
}

/// Whether `op` may write `value` (an op that says nothing may).
bool mayWrite(Operation *op, Value value) {
  auto effects = dyn_cast<MemoryEffectOpInterface>(op);
  return !effects ||
         effects.getEffectOnValue<MemoryEffects::Write>(value).has_value();
}

/// In buffer form an all-to-all start writes its output and reads its input
/// until its dc.wait: nothing may touch the output, nor write the input, in
/// between (in tensor form SSA already orders every use after the wait).
/// The future is waited exactly once (verifyFutures ran first).
LogicalResult verifyExchangesWaited(Block &body) {
  llvm::DenseMap<Operation *, size_t> index;
  for (auto [i, op] : llvm::enumerate(body.getOperations()))
    index[&op] = i;
  for (auto start : body.getOps<AllToAllStartOp>()) {
    if (!start.getOutput())
      continue;
    Operation *wait =
        body.findAncestorOpInBlock(**start.getFuture().getUsers().begin());
    if (!wait)
      continue;
    size_t from = index.lookup(start), to = index.lookup(wait);
    auto check = [&](Value buffer, bool writesOnly,
                     StringRef what) -> LogicalResult {
      for (Value view : getMemRefViews(buffer))
        for (Operation *user : view.getUsers()) {
          Operation *top = body.findAncestorOpInBlock(*user);
          if (!top || top == start || index.lookup(top) <= from ||
              index.lookup(top) >= to)
            continue;
          if (isa<ViewLikeOpInterface>(user) ||
              (writesOnly && !mayWrite(user, view)))
            continue;
          InFlightDiagnostic diag =
              user->emitError()
              << (writesOnly ? "writes" : "uses") << " the " << what
              << " of a dc.all_to_all_start before its dc.wait; the "
                 "exchange "
              << (writesOnly ? "reads" : "writes") << " it until then";
          diag.attachNote(start.getLoc()) << "started here";
          diag.attachNote(wait->getLoc()) << "waited here";
          return diag;
        }
      return success();
    };
    if (failed(
            check(start.getOutput(), /*writesOnly=*/false, "output buffer")) ||
        failed(check(start.getInput(), /*writesOnly=*/true, "input buffer")))
      return failure();
  }
  return success();
}

struct VerifySchedulePass
    : public dc::impl::DCVerifyScheduleBase<VerifySchedulePass> {
  using DCVerifyScheduleBase::DCVerifyScheduleBase;

  void runOnOperation() override {
    // The budget is checked only where the module says what it is.
    std::optional<int64_t> budget;
    if (TargetAttr target = findTargetAttr(getOperation()))
      budget = target.getMemoryBudget();
    for (auto fn : getOperation().getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      if (!llvm::hasSingleElement(fn.getBody())) {
        fn.emitError("dc-verify-schedule needs single-block functions");
        return signalPassFailure();
      }
      Block &body = fn.getBody().front();
      if (failed(verifyStepSignature(fn)) || failed(verifyFutures(body, "")) ||
          failed(verifyReleases(body, "")) ||
          failed(verifyExchangesWaited(body)))
        return signalPassFailure();
      if (!budget)
        continue;
      FailureOr<MemoryTimeline> timeline = MemoryTimeline::compute(fn);
      if (failed(timeline))
        return signalPassFailure();
      if (failed(
              checkOptimizerStateBytes(fn, optimizerStateBytes, getArgument())))
        return signalPassFailure();
      int64_t state = trainerStateBytes(fn, optimizerStateBytes);
      if (timeline->getPeakDeviceBytes() + state > *budget) {
        Operation *peakOp = timeline->getOps()[timeline->getPeakIndex()];
        InFlightDiagnostic diag = peakOp->emitError();
        diag << "device memory peaks here at "
             << formatBytes(timeline->getPeakDeviceBytes() + state);
        if (state)
          diag << " (the step's " << formatBytes(timeline->getPeakDeviceBytes())
               << " and the trainer's optimizer state, " << formatBytes(state)
               << ")";
        diag << ", over the budget of " << formatBytes(*budget) << " by "
             << formatBytes(timeline->getPeakDeviceBytes() + state - *budget);
        return signalPassFailure();
      }
    }
  }
};

} // namespace
