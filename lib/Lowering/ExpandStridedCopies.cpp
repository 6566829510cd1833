//===- ExpandStridedCopies.cpp - strided memref.copy to linalg.copy -------===//
#include "dc/Lowering/Passes.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Utils/MemRefUtils.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace dc {
#define GEN_PASS_DEF_DCEXPANDSTRIDEDCOPIES
#include "dc/Lowering/Passes.h.inc"
} // namespace dc

using namespace mlir;

namespace {

struct StridedCopyToLinalg : public OpRewritePattern<memref::CopyOp> {
  StridedCopyToLinalg(MLIRContext *context, bool all)
      : OpRewritePattern(context), all(all) {}

  LogicalResult matchAndRewrite(memref::CopyOp op,
                                PatternRewriter &rewriter) const override {
    auto isContiguous = [](Type type) {
      auto memref = dyn_cast<MemRefType>(type);
      return memref && memref::isStaticShapeAndContiguousRowMajor(memref);
    };
    if (!all && isContiguous(op.getSource().getType()) &&
        isContiguous(op.getTarget().getType()))
      return rewriter.notifyMatchFailure(op, "lowers to llvm.memcpy");
    rewriter.replaceOpWithNewOp<linalg::CopyOp>(op, op.getSource(),
                                                op.getTarget());
    return success();
  }

  bool all;
};

struct ExpandStridedCopiesPass
    : public dc::impl::DCExpandStridedCopiesBase<ExpandStridedCopiesPass> {
  using DCExpandStridedCopiesBase::DCExpandStridedCopiesBase;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<StridedCopyToLinalg>(&getContext(), all);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
