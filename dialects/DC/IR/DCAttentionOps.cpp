//===- DCAttentionOps.cpp - dc.attention and dc.attention_grad -----------===//
#include "dc/Dialect/DC/IR/DCDialect.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace dc;

/// q's shape in the [batch..., seq, head_dim] form the checks read: `bshd`'s
/// [B, S, H, D] as [B, H, S, D].
static SmallVector<int64_t> getHeadsMajorShape(ShapedType type, bool bshd) {
  SmallVector<int64_t> shape(type.getShape());
  if (bshd && shape.size() == 4)
    std::swap(shape[1], shape[2]);
  return shape;
}

/// The lse type of a query tensor: its heads-major shape without the head
/// dim, in f32 (a dense buffer for a buffer).
static ShapedType getLSEType(Value q, bool bshd) {
  auto type = cast<ShapedType>(q.getType());
  auto f32 = Float32Type::get(type.getContext());
  SmallVector<int64_t> shape = getHeadsMajorShape(type, bshd);
  shape.pop_back();
  if (isa<MemRefType>(type))
    return MemRefType::get(shape, f32);
  return RankedTensorType::get(shape, f32);
}

Value dc::swapSeqAndHeads(OpBuilder &builder, Location loc, Value x) {
  auto type = cast<RankedTensorType>(x.getType());
  SmallVector<int64_t> shape = {type.getDimSize(0), type.getDimSize(2),
                                type.getDimSize(1), type.getDimSize(3)};
  Value init =
      tensor::EmptyOp::create(builder, loc, shape, type.getElementType());
  return linalg::TransposeOp::create(builder, loc, x, init, kSwapSeqAndHeads)
      .getResult()[0];
}

int64_t dc::getAttentionKVGroup(ShapedType q, ShapedType k, bool bshd) {
  int64_t headsDim = getAttentionHeadsDim(q.getRank(), bshd);
  if (headsDim < 0 || k.getRank() != q.getRank() || k.getDimSize(headsDim) <= 0)
    return 1;
  return q.getDimSize(headsDim) / k.getDimSize(headsDim);
}

bool dc::isLibraryAttention(Operation *op) {
  Type element = getElementTypeOrSelf(op->getOperand(0).getType());
  return element.isBF16() || element.isF16();
}

/// Checks what dc.attention and dc.attention_grad share: q [..., Sq, D],
/// k and v [..., Sk, D] (`bshd`: [B, S, H, D], rank 4) with q's element
/// type and batch dims, except that q's heads dim may be a multiple of
/// k's (grouped-query attention: that many query heads share a key/value
/// head), a causal mask only on a square score matrix, a finite scale.
static LogicalResult verifyAttentionOperands(Operation *op, Value q, Value k,
                                             Value v, bool causal, bool bshd,
                                             APFloat scale) {
  auto qType = cast<ShapedType>(q.getType());
  auto kType = cast<ShapedType>(k.getType());
  auto vType = cast<ShapedType>(v.getType());
  int64_t rank = qType.getRank();
  if (bshd && rank != 4)
    return op->emitOpError() << "bshd needs q as [batch, seq, heads, "
                                "head_dim], got "
                             << qType;
  if (rank < 3)
    return op->emitOpError() << "q must be [batch..., seq, head_dim] with at "
                                "least one batch dim, got "
                             << qType;
  if (kType.getRank() != rank)
    return op->emitOpError()
           << "k has rank " << kType.getRank() << " but q has rank " << rank;
  if (vType.getShape() != kType.getShape() ||
      vType.getElementType() != kType.getElementType())
    return op->emitOpError()
           << "v must have the type of k (" << kType << "), got " << vType;
  if (kType.getElementType() != qType.getElementType())
    return op->emitOpError()
           << "q, k and v must have one element type, got "
           << qType.getElementType() << " and " << kType.getElementType();
  SmallVector<int64_t> qShape = getHeadsMajorShape(qType, bshd);
  SmallVector<int64_t> kShape = getHeadsMajorShape(kType, bshd);
  ArrayRef<int64_t> qBatch = ArrayRef(qShape).drop_back(2);
  ArrayRef<int64_t> kBatch = ArrayRef(kShape).drop_back(2);
  if (qBatch.drop_back() != kBatch.drop_back())
    return op->emitOpError() << "q " << qType << " and k " << kType
                             << " must have the same batch dims but the "
                                "innermost";
  // Empty k heads only go with empty q heads (no grouping, nothing to do).
  if (kBatch.back() == 0 ? qBatch.back() != 0
                         : qBatch.back() % kBatch.back() != 0)
    return op->emitOpError()
           << "the innermost batch dim of q (" << qBatch.back()
           << ", query heads) must be a multiple of k's (" << kBatch.back()
           << ", key/value heads), got q " << qType << " and k " << kType;
  if (qShape.back() != kShape.back())
    return op->emitOpError() << "q head dim " << qShape.back()
                             << " differs from k head dim " << kShape.back();
  if (causal && qShape[rank - 2] != kShape[rank - 2])
    return op->emitOpError() << "causal attention needs as many queries as "
                                "keys, got "
                             << qShape[rank - 2] << " and " << kShape[rank - 2];
  if (!scale.isFinite())
    return op->emitOpError("scale must be finite");
  return success();
}

/// Fails unless `value` has the shape and element type of `expected`;
/// `what` names the value. (Buffers of the bshd form may differ in
/// layout: views of one fused projection sit at different offsets.)
static LogicalResult verifyTypeIs(Operation *op, Value value, Type expected,
                                  StringRef what) {
  auto type = cast<ShapedType>(value.getType());
  auto want = cast<ShapedType>(expected);
  if (type.getShape() == want.getShape() &&
      type.getElementType() == want.getElementType())
    return success();
  return op->emitOpError() << what << " must be " << expected << ", got "
                           << value.getType();
}

/// Buffer forms: dense buffers, or with `bshd` strided views whose
/// head_dim is contiguous; lse is always dense.
static LogicalResult verifyAttentionBuffers(Operation *op, bool bshd,
                                            Value lse) {
  for (Value operand : op->getOperands()) {
    auto type = cast<MemRefType>(operand.getType());
    if (operand == lse || !bshd) {
      if (!isDeviceBuffer(type))
        return op->emitOpError()
               << (operand == lse ? "lse" : "without bshd, every buffer")
               << " must be dense (identity layout), got " << type;
      continue;
    }
    SmallVector<int64_t> strides;
    int64_t offset;
    if (failed(type.getStridesAndOffset(strides, offset)) ||
        strides.back() != 1)
      return op->emitOpError()
             << "bshd buffers need a unit stride over head_dim, got " << type;
  }
  return success();
}

/// The forward's operands and results, for dc.attention (tensors) and
/// dc.attention_into (buffers) alike.
template <typename OpTy> static LogicalResult verifyAttentionForward(OpTy op) {
  if (failed(verifyAttentionOperands(op, op.getQ(), op.getK(), op.getV(),
                                     op.getCausal(), op.getBshd(),
                                     op.getScale())) ||
      failed(verifyTypeIs(op, op.getO(), op.getQ().getType(),
                          "o (the type of q)")))
    return failure();
  return verifyTypeIs(op, op.getLse(), getLSEType(op.getQ(), op.getBshd()),
                      "lse ([batch..., seq] of q, f32)");
}

/// The backward's, for dc.attention_grad and dc.attention_grad_into.
template <typename OpTy> static LogicalResult verifyAttentionBackward(OpTy op) {
  Type qType = op.getQ().getType();
  if (failed(verifyAttentionOperands(op, op.getQ(), op.getK(), op.getV(),
                                     op.getCausal(), op.getBshd(),
                                     op.getScale())) ||
      failed(verifyTypeIs(op, op.getO(), qType, "o (the type of q)")) ||
      failed(verifyTypeIs(op, op.getLse(), getLSEType(op.getQ(), op.getBshd()),
                          "lse ([batch..., seq] of q, f32)")) ||
      failed(verifyTypeIs(op, op.getDO(), qType, "do (the type of q)")) ||
      failed(verifyTypeIs(op, op.getDq(), qType, "dq (the type of q)")) ||
      failed(verifyTypeIs(op, op.getDk(), op.getK().getType(),
                          "dk (the type of k)")))
    return failure();
  return verifyTypeIs(op, op.getDv(), op.getV().getType(),
                      "dv (the type of v)");
}

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

void AttentionOp::build(OpBuilder &builder, OperationState &state, Value q,
                        Value k, Value v, float scale, bool causal, bool bshd) {
  build(builder, state, q.getType(),
        cast<RankedTensorType>(getLSEType(q, bshd)), q, k, v, APFloat(scale),
        causal, bshd);
}

LogicalResult AttentionOp::verify() { return verifyAttentionForward(*this); }

/// Matmul FLOPs of flash-attention forward: q k^T and p v, each
/// 2 Sq Sk D per batch index; a causal mask skips half of them.
static double attentionFlops(Value q, Value k, bool causal, bool bshd) {
  auto qType = cast<ShapedType>(q.getType());
  auto kType = cast<ShapedType>(k.getType());
  int64_t seqDim = getAttentionSeqDim(kType.getRank(), bshd);
  double flops = 4 * static_cast<double>(qType.getNumElements()) *
                 static_cast<double>(kType.getDimSize(seqDim));
  return causal ? flops / 2 : flops;
}

double AttentionOp::getFlops() {
  return attentionFlops(getQ(), getK(), getCausal(), getBshd());
}

Type AttentionOp::getMatmulElementType() {
  return getQ().getType().getElementType();
}

//===----------------------------------------------------------------------===//
// AttentionGradOp
//===----------------------------------------------------------------------===//

void AttentionGradOp::build(OpBuilder &builder, OperationState &state, Value q,
                            Value k, Value v, Value o, Value lse, Value dO,
                            float scale, bool causal, bool bshd) {
  build(builder, state, q.getType(), k.getType(), v.getType(), q, k, v, o, lse,
        dO, APFloat(scale), causal, bshd);
}

LogicalResult AttentionGradOp::verify() {
  return verifyAttentionBackward(*this);
}

/// The backward recomputes q k^T and adds the products for dv, dp, dq and
/// dk: 5 matmuls against the forward's 2.
double AttentionGradOp::getFlops() {
  return 2.5 * attentionFlops(getQ(), getK(), getCausal(), getBshd());
}

Type AttentionGradOp::getMatmulElementType() {
  return getQ().getType().getElementType();
}

/// cuDNN's flash-attention backward may sum dq across blocks with atomics.
bool AttentionGradOp::isReproducible() { return false; }

//===----------------------------------------------------------------------===//
// AttentionIntoOp and AttentionGradIntoOp (buffer forms)
//===----------------------------------------------------------------------===//

LogicalResult AttentionIntoOp::verify() {
  if (failed(verifyAttentionBuffers(*this, getBshd(), getLse())))
    return failure();
  return verifyAttentionForward(*this);
}

LogicalResult AttentionGradIntoOp::verify() {
  if (failed(verifyAttentionBuffers(*this, getBshd(), getLse())))
    return failure();
  return verifyAttentionBackward(*this);
}
