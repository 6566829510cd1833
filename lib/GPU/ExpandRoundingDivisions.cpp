//===- ExpandRoundingDivisions.cpp - ceil/floor divisions, nothing else ---===//
//
// The kernels' pipeline needs arith-expand's rewrite of the rounding
// divisions (no LLVM lowering) but not its rewrite of min/max into
// compares and selects, which the NVVM lowering does better.
//
//===----------------------------------------------------------------------===//
#include "dc/GPU/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace dc {
#define GEN_PASS_DEF_DCEXPANDROUNDINGDIVISIONS
#include "dc/GPU/Passes.h.inc"
} // namespace dc

using namespace mlir;

namespace {

struct ExpandRoundingDivisionsPass
    : public dc::impl::DCExpandRoundingDivisionsBase<
          ExpandRoundingDivisionsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    arith::populateCeilFloorDivExpandOpsPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
