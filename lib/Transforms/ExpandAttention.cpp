//===- ExpandAttention.cpp - dc.attention(_grad) to linalg.generic --------===//
//
// The reference semantics of the fused attention ops as linalg on tensors,
// for targets without a flash-attention kernel. Every generic loops over the
// batch dims first, then over the dims of its formula, named as in the op
// descriptions: i (query), j (key), d (head).
//
//===----------------------------------------------------------------------===//
#include "dc/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

#include <limits>

namespace dc {
#define GEN_PASS_DEF_DCEXPANDATTENTION
#include "dc/Transforms/Passes.h.inc"
} // namespace dc

using namespace mlir;
using namespace dc;

namespace {

using BodyFn = function_ref<Value(OpBuilder &, Location, ValueRange)>;
using utils::IteratorType;

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

/// Builds the linalg ops of one fused op on q [batch..., M, D] and
/// k, v [batch..., N, D]. Everything between the loads and the results is
/// computed in `compute`: f32, or the operands' type if that is wider.
class Expander {
public:
  // The loops of the (i, j, d) space of the products; (i, j) spaces use the
  // first two.
  static constexpr unsigned I = 0, J = 1, D = 2;

  Expander(RewriterBase &rewriter, Operation *op, Value q, Value k,
           FloatAttr scale, bool causal)
      : rewriter(rewriter), loc(op->getLoc()), causal(causal) {
    auto qType = cast<RankedTensorType>(q.getType());
    numBatch = qType.getRank() - 2;
    batchShape.assign(qType.getShape().drop_back(2).begin(),
                      qType.getShape().drop_back(2).end());
    ijd = {qType.getDimSize(numBatch),
           cast<RankedTensorType>(k.getType()).getDimSize(numBatch),
           qType.getDimSize(numBatch + 1)};
    element = qType.getElementType();
    compute = element.getIntOrFloatBitWidth() > 32
                  ? element
                  : Float32Type::get(op->getContext());
    this->scale = constant(scale.getValueAsDouble());
    zero = constant(0.0);
  }

  /// sum over loop `reduction` of a[aDims] b[bDims] in the (i, j, d) space,
  /// as [batch..., outDims].
  Value contract(Value a, ArrayRef<unsigned> aDims, Value b,
                 ArrayRef<unsigned> bDims, ArrayRef<unsigned> outDims,
                 unsigned reduction) {
    SmallVector<IteratorType> iterators(3, IteratorType::parallel);
    iterators[reduction] = IteratorType::reduction;
    return generic({a, b}, {aDims, bDims}, outDims, ijd, iterators, zero,
                   [&](OpBuilder &builder, Location l, ValueRange args) {
                     return multiplyAdd(builder, l, args);
                   });
  }

  /// z = scale q k^T, -inf where j > i when causal: [batch..., i, j].
  Value scores(Value q, Value k) {
    Value s = contract(q, {I, D}, k, {J, D}, {I, J}, D);
    Value negInf = causal ? getNegInf() : Value();
    return mapScores(
        {s}, {{I, J}}, [&](OpBuilder &b, Location l, ValueRange args) -> Value {
          Value scaled = arith::MulFOp::create(b, l, args[0], scale);
          if (!causal)
            return scaled;
          Value i = linalg::IndexOp::create(b, l, numBatch + I);
          Value j = linalg::IndexOp::create(b, l, numBatch + J);
          Value above =
              arith::CmpIOp::create(b, l, arith::CmpIPredicate::ugt, j, i);
          return arith::SelectOp::create(b, l, above, negInf, scaled);
        });
  }

  /// lse = max_j z + log sum_j exp(z - max_j z): [batch..., i] in f32.
  Value logSumExp(Value z) {
    Value max =
        reduceRows({z}, {{I, J}}, getNegInf(),
                   [](OpBuilder &b, Location l, ValueRange args) -> Value {
                     return arith::MaximumFOp::create(b, l, args[1], args[0]);
                   });
    Value sum = reduceRows(
        {z, max}, {{I, J}, {I}}, zero,
        [](OpBuilder &b, Location l, ValueRange args) -> Value {
          Value shifted = arith::SubFOp::create(b, l, args[0], args[1]);
          return arith::AddFOp::create(b, l, args[2],
                                       math::ExpOp::create(b, l, shifted));
        });
    Type f32 = Float32Type::get(rewriter.getContext());
    return generic(
        {max, sum}, {{I}, {I}}, {I}, ijd[I], IteratorType::parallel, Value(),
        [&](OpBuilder &b, Location l, ValueRange args) {
          Value log = math::LogOp::create(b, l, args[1]);
          return convert(b, l, arith::AddFOp::create(b, l, args[0], log), f32);
        },
        f32);
  }

  /// p = exp(z - lse): [batch..., i, j].
  Value probabilities(Value z, Value lse) {
    return mapScores({z, lse}, {{I, J}, {I}},
                     [&](OpBuilder &b, Location l, ValueRange args) -> Value {
                       Value shifted = arith::SubFOp::create(
                           b, l, args[0], convert(b, l, args[1], compute));
                       return math::ExpOp::create(b, l, shifted);
                     });
  }

  /// ds = scale p (dp - delta) with delta[i] = sum_d do o: [batch..., i, j].
  Value scoreGradients(Value p, Value dp, Value dO, Value o) {
    Value delta = generic({dO, o}, {{0, 1}, {0, 1}}, {0}, {ijd[I], ijd[D]},
                          {IteratorType::parallel, IteratorType::reduction},
                          zero, [&](OpBuilder &b, Location l, ValueRange args) {
                            return multiplyAdd(b, l, args);
                          });
    return mapScores({p, dp, delta}, {{I, J}, {I, J}, {I}},
                     [&](OpBuilder &b, Location l, ValueRange args) -> Value {
                       Value diff =
                           arith::SubFOp::create(b, l, args[1], args[2]);
                       Value grad = arith::MulFOp::create(b, l, args[0], diff);
                       return arith::MulFOp::create(b, l, grad, scale);
                     });
  }

  /// `value` ([batch..., rows, cols] in `compute`) in the operands' type.
  Value narrow(Value value) {
    if (compute == element)
      return value;
    ArrayRef<int64_t> shape =
        cast<RankedTensorType>(value.getType()).getShape();
    return generic(
        {value}, {{0, 1}}, {0, 1}, shape.take_back(2),
        {IteratorType::parallel, IteratorType::parallel}, Value(),
        [&](OpBuilder &b, Location l, ValueRange args) {
          return convert(b, l, args[0], element);
        },
        element);
  }

private:
  /// Elementwise over the (i, j) space.
  Value mapScores(ValueRange ins, ArrayRef<ArrayRef<unsigned>> inDims,
                  BodyFn body) {
    return generic(ins, inDims, {I, J}, {ijd[I], ijd[J]},
                   {IteratorType::parallel, IteratorType::parallel}, Value(),
                   body);
  }

  /// `body(ins..., acc)` from `init`, reduced over j of the (i, j) space.
  Value reduceRows(ValueRange ins, ArrayRef<ArrayRef<unsigned>> inDims,
                   Value init, BodyFn body) {
    return generic(ins, inDims, {I}, {ijd[I], ijd[J]},
                   {IteratorType::parallel, IteratorType::reduction}, init,
                   body);
  }

  /// One linalg.generic over the batch dims and loops of sizes `loops`:
  /// inputs indexed by the batch dims and `inDims`, one result of element
  /// type `type` (default `compute`) by the batch dims and `outDims`, filled
  /// with the scalar `init` first unless it is null.
  Value generic(ValueRange ins, ArrayRef<ArrayRef<unsigned>> inDims,
                ArrayRef<unsigned> outDims, ArrayRef<int64_t> loops,
                ArrayRef<IteratorType> iterators, Value init, BodyFn body,
                Type type = {}) {
    unsigned numLoops = numBatch + loops.size();
    SmallVector<AffineMap> maps;
    for (ArrayRef<unsigned> dims : inDims)
      maps.push_back(getMap(dims, numLoops));
    maps.push_back(getMap(outDims, numLoops));
    SmallVector<IteratorType> allIterators(numBatch, IteratorType::parallel);
    llvm::append_range(allIterators, iterators);
    SmallVector<int64_t> shape(batchShape);
    for (unsigned dim : outDims)
      shape.push_back(loops[dim]);
    Value out =
        tensor::EmptyOp::create(rewriter, loc, shape, type ? type : compute);
    if (init)
      out = linalg::FillOp::create(rewriter, loc, init, out).getResult(0);
    auto op = linalg::GenericOp::create(
        rewriter, loc, out.getType(), ins, out, maps, allIterators,
        [&](OpBuilder &b, Location l, ValueRange args) {
          linalg::YieldOp::create(b, l, body(b, l, args));
        });
    return op.getResult(0);
  }

  AffineMap getMap(ArrayRef<unsigned> dims, unsigned numLoops) const {
    MLIRContext *context = rewriter.getContext();
    SmallVector<AffineExpr> exprs;
    for (unsigned b = 0; b < numBatch; ++b)
      exprs.push_back(getAffineDimExpr(b, context));
    for (unsigned dim : dims)
      exprs.push_back(getAffineDimExpr(numBatch + dim, context));
    return AffineMap::get(numLoops, 0, exprs, context);
  }

  /// acc + a b of the body arguments (a, b, acc), in `compute`.
  Value multiplyAdd(OpBuilder &b, Location l, ValueRange args) const {
    Value lhs = convert(b, l, args[0], compute);
    Value rhs = convert(b, l, args[1], compute);
    Value product = arith::MulFOp::create(b, l, lhs, rhs);
    return arith::AddFOp::create(b, l, args[2], product);
  }

  static Value convert(OpBuilder &b, Location l, Value value, Type to) {
    Type from = value.getType();
    if (from == to)
      return value;
    if (from.getIntOrFloatBitWidth() < to.getIntOrFloatBitWidth())
      return arith::ExtFOp::create(b, l, to, value);
    return arith::TruncFOp::create(b, l, to, value);
  }

  Value constant(double value) {
    return arith::ConstantOp::create(rewriter, loc, compute,
                                     rewriter.getFloatAttr(compute, value));
  }

  /// The -inf constant, made on first use (a non-causal backward has none).
  Value getNegInf() {
    if (!negInf)
      negInf = constant(kNegInf);
    return negInf;
  }

  RewriterBase &rewriter;
  Location loc;
  bool causal;
  unsigned numBatch;
  SmallVector<int64_t> batchShape;
  SmallVector<int64_t, 3> ijd; // sizes of i, j, d
  Type element, compute;
  Value scale, zero, negInf;
};

void expand(RewriterBase &rewriter, AttentionOp op) {
  using E = Expander;
  E e(rewriter, op, op.getQ(), op.getK(), op.getScaleAttr(), op.getCausal());
  Value z = e.scores(op.getQ(), op.getK());
  Value lse = e.logSumExp(z);
  Value o = e.contract(e.probabilities(z, lse), {E::I, E::J}, op.getV(),
                       {E::J, E::D}, {E::I, E::D}, E::J);
  rewriter.replaceOp(op, {e.narrow(o), lse});
}

void expand(RewriterBase &rewriter, AttentionGradOp op) {
  using E = Expander;
  E e(rewriter, op, op.getQ(), op.getK(), op.getScaleAttr(), op.getCausal());
  Value p = e.probabilities(e.scores(op.getQ(), op.getK()), op.getLse());
  Value dO = op.getDO();
  Value dp =
      e.contract(dO, {E::I, E::D}, op.getV(), {E::J, E::D}, {E::I, E::J}, E::D);
  Value ds = e.scoreGradients(p, dp, dO, op.getO());
  Value dq =
      e.contract(ds, {E::I, E::J}, op.getK(), {E::J, E::D}, {E::I, E::D}, E::J);
  Value dk =
      e.contract(ds, {E::I, E::J}, op.getQ(), {E::I, E::D}, {E::J, E::D}, E::I);
  Value dv = e.contract(p, {E::I, E::J}, dO, {E::I, E::D}, {E::J, E::D}, E::I);
  rewriter.replaceOp(op, {e.narrow(dq), e.narrow(dk), e.narrow(dv)});
}

/// True for an op the runtime's flash attention takes (bf16 or f16).
bool isLibraryAttention(Operation *op) {
  Type element = getElementTypeOrSelf(op->getOperand(0).getType());
  return element.isBF16() || element.isF16();
}

struct ExpandAttentionPass
    : public dc::impl::DCExpandAttentionBase<ExpandAttentionPass> {
  using DCExpandAttentionBase::DCExpandAttentionBase;

  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    getOperation().walk([&](Operation *op) {
      if (!isa<AttentionOp, AttentionGradOp>(op) ||
          (keepFused && isLibraryAttention(op)))
        return;
      rewriter.setInsertionPoint(op);
      if (auto attention = dyn_cast<AttentionOp>(op))
        expand(rewriter, attention);
      else if (auto grad = dyn_cast<AttentionGradOp>(op))
        expand(rewriter, grad);
    });
  }
};

} // namespace
