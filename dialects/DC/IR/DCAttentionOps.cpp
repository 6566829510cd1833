//===- DCAttentionOps.cpp - dc.attention and dc.attention_grad -----------===//
#include "dc/Dialect/DC/IR/DCDialect.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace dc;

/// The lse type of a query tensor [..., S, D]: [..., S] in f32 (a tensor,
/// or a buffer for a buffer).
static ShapedType getLSEType(Value q) {
  auto type = cast<ShapedType>(q.getType());
  auto f32 = Float32Type::get(type.getContext());
  if (isa<MemRefType>(type))
    return MemRefType::get(type.getShape().drop_back(), f32);
  return RankedTensorType::get(type.getShape().drop_back(), f32);
}

int64_t dc::getAttentionKVGroup(ShapedType q, ShapedType k) {
  int64_t batchDim = q.getRank() - 3;
  if (batchDim < 0 || k.getRank() != q.getRank() || k.getDimSize(batchDim) <= 0)
    return 1;
  return q.getDimSize(batchDim) / k.getDimSize(batchDim);
}

/// Checks what dc.attention and dc.attention_grad share: q [..., Sq, D],
/// k and v [..., Sk, D] with q's element type and batch dims, except that
/// q's innermost batch dim may be a multiple of k's (grouped-query
/// attention: that many query heads share a key/value head), a causal mask
/// only on a square score matrix, a finite scale.
static LogicalResult verifyAttentionOperands(Operation *op, Value q, Value k,
                                             Value v, bool causal,
                                             APFloat scale) {
  auto qType = cast<ShapedType>(q.getType());
  auto kType = cast<ShapedType>(k.getType());
  int64_t rank = qType.getRank();
  if (rank < 3)
    return op->emitOpError() << "q must be [batch..., seq, head_dim] with at "
                                "least one batch dim, got "
                             << qType;
  if (kType.getRank() != rank)
    return op->emitOpError()
           << "k has rank " << kType.getRank() << " but q has rank " << rank;
  if (v.getType() != kType)
    return op->emitOpError() << "v must have the type of k (" << kType
                             << "), got " << v.getType();
  if (kType.getElementType() != qType.getElementType())
    return op->emitOpError()
           << "q, k and v must have one element type, got "
           << qType.getElementType() << " and " << kType.getElementType();
  ArrayRef<int64_t> qBatch = qType.getShape().drop_back(2);
  ArrayRef<int64_t> kBatch = kType.getShape().drop_back(2);
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
  if (qType.getShape().back() != kType.getShape().back())
    return op->emitOpError()
           << "q head dim " << qType.getShape().back()
           << " differs from k head dim " << kType.getShape().back();
  if (causal && qType.getDimSize(rank - 2) != kType.getDimSize(rank - 2))
    return op->emitOpError() << "causal attention needs as many queries as "
                                "keys, got "
                             << qType.getDimSize(rank - 2) << " and "
                             << kType.getDimSize(rank - 2);
  if (!scale.isFinite())
    return op->emitOpError("scale must be finite");
  return success();
}

/// Fails unless `value` has type `expected`; `what` names the value.
static LogicalResult verifyTypeIs(Operation *op, Value value, Type expected,
                                  StringRef what) {
  if (value.getType() == expected)
    return success();
  return op->emitOpError() << what << " must be " << expected << ", got "
                           << value.getType();
}

/// The forward's operands and results, for dc.attention (tensors) and
/// dc.attention_into (buffers) alike.
template <typename OpTy> static LogicalResult verifyAttentionForward(OpTy op) {
  if (failed(verifyAttentionOperands(op, op.getQ(), op.getK(), op.getV(),
                                     op.getCausal(), op.getScale())) ||
      failed(verifyTypeIs(op, op.getO(), op.getQ().getType(),
                          "o (the type of q)")))
    return failure();
  return verifyTypeIs(op, op.getLse(), getLSEType(op.getQ()),
                      "lse ([batch..., seq] of q, f32)");
}

/// The backward's, for dc.attention_grad and dc.attention_grad_into.
template <typename OpTy> static LogicalResult verifyAttentionBackward(OpTy op) {
  Type qType = op.getQ().getType();
  if (failed(verifyAttentionOperands(op, op.getQ(), op.getK(), op.getV(),
                                     op.getCausal(), op.getScale())) ||
      failed(verifyTypeIs(op, op.getO(), qType, "o (the type of q)")) ||
      failed(verifyTypeIs(op, op.getLse(), getLSEType(op.getQ()),
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
                        Value k, Value v, float scale, bool causal) {
  build(builder, state, q.getType(), cast<RankedTensorType>(getLSEType(q)), q,
        k, v, APFloat(scale), causal);
}

LogicalResult AttentionOp::verify() { return verifyAttentionForward(*this); }

//===----------------------------------------------------------------------===//
// AttentionGradOp
//===----------------------------------------------------------------------===//

void AttentionGradOp::build(OpBuilder &builder, OperationState &state, Value q,
                            Value k, Value v, Value o, Value lse, Value dO,
                            float scale, bool causal) {
  build(builder, state, q.getType(), k.getType(), v.getType(), q, k, v, o, lse,
        dO, APFloat(scale), causal);
}

LogicalResult AttentionGradOp::verify() {
  return verifyAttentionBackward(*this);
}

//===----------------------------------------------------------------------===//
// AttentionIntoOp and AttentionGradIntoOp (buffer forms)
//===----------------------------------------------------------------------===//

LogicalResult AttentionIntoOp::verify() {
  return verifyAttentionForward(*this);
}

LogicalResult AttentionGradIntoOp::verify() {
  return verifyAttentionBackward(*this);
}
