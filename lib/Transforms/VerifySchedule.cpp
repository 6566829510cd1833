//===- VerifySchedule.cpp - prove a dc schedule safe and within budget ----===//
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
      if (failed(verifyFutures(body, "")) || failed(verifyReleases(body, "")))
        return signalPassFailure();
      if (!*budget)
        continue;
      FailureOr<MemoryTimeline> timeline = MemoryTimeline::compute(fn);
      if (failed(timeline))
        return signalPassFailure();
      if (failed(
              checkOptimizerStateBytes(fn, optimizerStateBytes, getArgument())))
        return signalPassFailure();
      int64_t state = trainerStateBytes(fn, optimizerStateBytes);
      if (timeline->getPeakDeviceBytes() + state > **budget) {
        Operation *peakOp = timeline->getOps()[timeline->getPeakIndex()];
        InFlightDiagnostic diag = peakOp->emitError();
        diag << "device memory peaks here at "
             << formatBytes(timeline->getPeakDeviceBytes() + state);
        if (state)
          diag << " (the step's " << formatBytes(timeline->getPeakDeviceBytes())
               << " and the trainer's optimizer state, " << formatBytes(state)
               << ")";
        diag << ", over the budget of " << formatBytes(**budget) << " by "
             << formatBytes(timeline->getPeakDeviceBytes() + state - **budget);
        return signalPassFailure();
      }
    }
  }
};

} // namespace
