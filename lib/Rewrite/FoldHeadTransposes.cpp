//===- FoldHeadTransposes.cpp - attention on [B, S, H, D] in place --------===//
//
// dc.attention and dc.attention_grad whose operands are head transposes
// ([B, S, H, D] -> [B, H, S, D], maybe collapsed to [B*H, S, D]) become
// their bshd form on the untransposed tensors; the results reach their
// users through the inverse transposes, which cancel against the users'
// own. Only ops the runtime's flash attention runs (16-bit): any other is
// expanded over [B, H, S, D]. See Passes.td.
//
//===----------------------------------------------------------------------===//
#include "dc/Rewrite/Passes.h"

#include "dc/Dialect/DC/IR/DCDialect.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace dc {
#define GEN_PASS_DEF_DCFOLDHEADTRANSPOSES
#include "dc/Rewrite/Passes.h.inc"
} // namespace dc

using namespace mlir;
using namespace dc;

namespace {

/// The [B, S, H, D] tensor `value` is the head transpose of: `value` is
/// linalg.transpose(x, [0, 2, 1, 3]), or that collapsed to [B*H, S, D].
FailureOr<Value> getSeqMajor(Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getRank() == 3) {
    auto collapse = value.getDefiningOp<tensor::CollapseShapeOp>();
    if (!collapse || collapse.getSrcType().getRank() != 4 ||
        collapse.getReassociationIndices() !=
            SmallVector<ReassociationIndices>{{0, 1}, {2}, {3}})
      return failure();
    value = collapse.getSrc();
  } else if (type.getRank() != 4) {
    return failure();
  }
  auto transpose = value.getDefiningOp<linalg::TransposeOp>();
  if (!transpose || transpose.getPermutation() != ArrayRef(kSwapSeqAndHeads))
    return failure();
  return transpose.getInput();
}

/// The seq-major forms of `values` (q, k, v, then q-shaped ones: o, do),
/// if every one is a head transpose with q's batch and heads: no
/// grouped-query form, and no operand whose [B*H] splits differently.
FailureOr<SmallVector<Value>> getSeqMajor(ValueRange values) {
  SmallVector<Value> seqMajor;
  for (Value value : values) {
    FailureOr<Value> x = getSeqMajor(value);
    if (failed(x))
      return failure();
    seqMajor.push_back(*x);
  }
  auto q = cast<RankedTensorType>(seqMajor[0].getType());
  for (auto [i, x] : llvm::enumerate(seqMajor)) {
    auto type = cast<RankedTensorType>(x.getType());
    bool keyShaped = i == 1 || i == 2;
    if (keyShaped ? type.getDimSize(0) != q.getDimSize(0) ||
                        type.getDimSize(2) != q.getDimSize(2)
                  : type.getShape() != q.getShape())
      return failure();
  }
  return seqMajor;
}

/// `x` [B, S, H, D] as the type `like` ([B, H, S, D] or [B*H, S, D]) had:
/// the head transpose, collapsed where `like` is.
Value toHeadsMajor(PatternRewriter &rewriter, Location loc, Value x,
                   Type like) {
  Value transposed = swapSeqAndHeads(rewriter, loc, x);
  if (cast<RankedTensorType>(like).getRank() == 4)
    return transposed;
  return tensor::CollapseShapeOp::create(
      rewriter, loc, like, transposed,
      SmallVector<ReassociationIndices>{{0, 1}, {2}, {3}});
}

/// lse [B*H, S] (or [B, H, S]) as [B, H, S], and back.
Value lseToBHS(PatternRewriter &rewriter, Location loc, Value lse,
               RankedTensorType bhs) {
  if (lse.getType() == bhs)
    return lse;
  return tensor::ExpandShapeOp::create(
      rewriter, loc, bhs, lse, SmallVector<ReassociationIndices>{{0, 1}, {2}});
}
Value lseFromBHS(PatternRewriter &rewriter, Location loc, Value lse,
                 Type like) {
  if (lse.getType() == like)
    return lse;
  return tensor::CollapseShapeOp::create(
      rewriter, loc, like, lse, SmallVector<ReassociationIndices>{{0, 1}, {2}});
}

struct FoldForward : public OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getBshd() || !isLibraryAttention(op))
      return failure();
    FailureOr<SmallVector<Value>> x =
        getSeqMajor(ValueRange{op.getQ(), op.getK(), op.getV()});
    if (failed(x))
      return rewriter.notifyMatchFailure(op, "operands are not head "
                                             "transposes");
    Location loc = op.getLoc();
    auto folded = AttentionOp::create(rewriter, loc, (*x)[0], (*x)[1], (*x)[2],
                                      op.getScale().convertToFloat(),
                                      op.getCausal(), /*bshd=*/true);
    rewriter.replaceOp(
        op,
        {toHeadsMajor(rewriter, loc, folded.getO(), op.getO().getType()),
         lseFromBHS(rewriter, loc, folded.getLse(), op.getLse().getType())});
    return success();
  }
};

struct FoldBackward : public OpRewritePattern<AttentionGradOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AttentionGradOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getBshd() || !isLibraryAttention(op))
      return failure();
    FailureOr<SmallVector<Value>> x = getSeqMajor(
        ValueRange{op.getQ(), op.getK(), op.getV(), op.getO(), op.getDO()});
    if (failed(x))
      return rewriter.notifyMatchFailure(op, "operands are not head "
                                             "transposes");
    Location loc = op.getLoc();
    auto q = cast<RankedTensorType>((*x)[0].getType());
    auto bhs = RankedTensorType::get(
        {q.getDimSize(0), q.getDimSize(2), q.getDimSize(1)},
        cast<ShapedType>(op.getLse().getType()).getElementType());
    auto folded = AttentionGradOp::create(
        rewriter, loc, (*x)[0], (*x)[1], (*x)[2], (*x)[3],
        lseToBHS(rewriter, loc, op.getLse(), bhs), (*x)[4],
        op.getScale().convertToFloat(), op.getCausal(), /*bshd=*/true);
    rewriter.replaceOp(
        op,
        {toHeadsMajor(rewriter, loc, folded.getDq(), op.getDq().getType()),
         toHeadsMajor(rewriter, loc, folded.getDk(), op.getDk().getType()),
         toHeadsMajor(rewriter, loc, folded.getDv(), op.getDv().getType())});
    return success();
  }
};

/// transpose(transpose(x, p), p^-1) = x: a result's inverse transpose
/// against its user's transpose (the user's expand_shape of our
/// collapse_shape folds away first).
struct CancelTransposes : public OpRewritePattern<linalg::TransposeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::TransposeOp op,
                                PatternRewriter &rewriter) const override {
    auto inner = op.getInput().getDefiningOp<linalg::TransposeOp>();
    if (!inner || !op.hasPureTensorSemantics())
      return failure();
    ArrayRef<int64_t> outer = op.getPermutation(),
                      first = inner.getPermutation();
    for (auto [i, p] : llvm::enumerate(outer))
      if (first[p] != static_cast<int64_t>(i))
        return failure();
    rewriter.replaceOp(op, inner.getInput());
    return success();
  }
};

struct FoldHeadTransposesPass
    : public dc::impl::DCFoldHeadTransposesBase<FoldHeadTransposesPass> {
  using DCFoldHeadTransposesBase::DCFoldHeadTransposesBase;

  void runOnOperation() override {
    if (ifTargetFolds &&
        !getModuleTarget(getOperation()).description.foldsHeadTransposes)
      return;
    MLIRContext *context = &getContext();
    RewritePatternSet patterns(context);
    patterns.add<FoldForward, FoldBackward, CancelTransposes>(context);
    // expand_shape(collapse_shape(x)) -> x, and dead ops away.
    tensor::ExpandShapeOp::getCanonicalizationPatterns(patterns, context);
    tensor::CollapseShapeOp::getCanonicalizationPatterns(patterns, context);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
