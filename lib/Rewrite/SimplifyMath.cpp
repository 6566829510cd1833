//===- SimplifyMath.cpp - powers by constants as plain arithmetic ---------===//
//
// Upstream's algebraic simplification of math ops as a pass: a power by a
// constant exponent becomes the multiplications, roots and divisions it
// equals (Passes.td says why the GPU target needs it).
//
//===----------------------------------------------------------------------===//
#include "dc/Rewrite/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace dc {
#define GEN_PASS_DEF_DCSIMPLIFYMATH
#include "dc/Rewrite/Passes.h.inc"
} // namespace dc

using namespace mlir;

namespace {

struct SimplifyMathPass
    : public dc::impl::DCSimplifyMathBase<SimplifyMathPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateMathAlgebraicSimplificationPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
