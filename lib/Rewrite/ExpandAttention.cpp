//===- ExpandAttention.cpp - dc.attention(_grad) to linalg.generic --------===//
//
// The reference semantics of the fused attention ops as linalg on tensors,
// for targets without a flash-attention kernel. Every generic loops over the
// batch dims first, then over the dims of its formula, named as in the op
// descriptions: i (query), j (key), d (head).
//
// Grouped-query attention (k and v with G times fewer heads than q): the
// query-shaped operands are viewed as [..., Hkv, G, S, D] (tensor.expand_shape)
// so that the batch loops are those of k and v plus an innermost group loop
// that k and v do not index; dk and dv reduce over it, and the query-shaped
// results are collapsed back.
//
//===----------------------------------------------------------------------===//
#include "dc/Rewrite/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

#include <limits>

namespace dc {
#define GEN_PASS_DEF_DCEXPANDATTENTION
#include "dc/Rewrite/Passes.h.inc"
} // namespace dc

using namespace mlir;
using namespace dc;

namespace {

using BodyFn = function_ref<Value(OpBuilder &, Location, ValueRange)>;
using utils::IteratorType;

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

/// Builds the linalg ops of one fused op on q [batch..., M, D] and
/// k, v [batch..., N, D]. Everything between the loads and the results is
/// computed in `compute`: f32, or the operands' type if that is wider. With
/// grouped-query attention, q-shaped values are [kv batch..., G, ...] (see
/// `group`) and k-shaped ones [kv batch..., ...]: an operand of a generic
/// that has one batch dim fewer than the loops is k-shaped and is not
/// indexed by the group loop.
class Expander {
public:
  // The loops of the (i, j, d) space of the products; (i, j) spaces use the
  // first two.
  static constexpr unsigned I = 0, J = 1, D = 2;

  /// The batch loops of a generic: q's (with the group loop, if grouped),
  /// q's with the group loop a reduction and the result k-shaped (dk, dv),
  /// or k's only.
  enum class Space { Query, ReduceGroup, Key };

  Expander(RewriterBase &rewriter, Operation *op, Value q, Value k,
           FloatAttr scale, bool causal)
      : rewriter(rewriter), loc(op->getLoc()), causal(causal) {
    auto qType = cast<RankedTensorType>(q.getType());
    auto kType = cast<RankedTensorType>(k.getType());
    groupSize = getAttentionKVGroup(qType, kType);
    grouped = groupSize > 1;
    numBatch = qType.getRank() - 2 + (grouped ? 1 : 0);
    batchShape.assign(kType.getShape().drop_back(2).begin(),
                      kType.getShape().drop_back(2).end());
    if (grouped)
      batchShape.push_back(groupSize);
    int64_t seq = qType.getRank() - 2;
    ijd = {qType.getDimSize(seq), kType.getDimSize(seq),
           qType.getDimSize(seq + 1)};
    element = qType.getElementType();
    compute = element.getIntOrFloatBitWidth() > 32
                  ? element
                  : Float32Type::get(op->getContext());
    this->scale = constant(scale.getValueAsDouble());
    zero = constant(0.0);
  }

  /// sum over loop `reduction` of a[aDims] b[bDims] in the (i, j, d) space,
  /// as [batch..., outDims]; `keyShaped` results (dk, dv) also sum over the
  /// query heads of a group.
  Value contract(Value a, ArrayRef<unsigned> aDims, Value b,
                 ArrayRef<unsigned> bDims, ArrayRef<unsigned> outDims,
                 unsigned reduction, bool keyShaped = false) {
    SmallVector<IteratorType> iterators(3, IteratorType::parallel);
    iterators[reduction] = IteratorType::reduction;
    return generic(
        {a, b}, {aDims, bDims}, outDims, ijd, iterators, zero,
        [&](OpBuilder &builder, Location l, ValueRange args) {
          return multiplyAdd(builder, l, args);
        },
        Type(), keyShaped ? Space::ReduceGroup : Space::Query);
  }

  /// q-shaped `value` ([batch..., H, rest...]) as [batch..., Hkv, G,
  /// rest...] when grouped.
  Value splitHeads(Value value) {
    if (!grouped)
      return value;
    auto type = cast<RankedTensorType>(value.getType());
    int64_t heads = numBatch - 2; // the innermost batch dim of value
    SmallVector<int64_t> shape(type.getShape());
    shape[heads] /= groupSize;
    shape.insert(shape.begin() + heads + 1, groupSize);
    SmallVector<ReassociationIndices> groups;
    for (int64_t dim = 0; dim < type.getRank(); ++dim) {
      ReassociationIndices group = {dim + (dim > heads ? 1 : 0)};
      if (dim == heads)
        group.push_back(group.front() + 1);
      groups.push_back(group);
    }
    return tensor::ExpandShapeOp::create(
        rewriter, loc, RankedTensorType::get(shape, type.getElementType()),
        value, groups);
  }

  /// The inverse of splitHeads.
  Value mergeHeads(Value value) {
    if (!grouped)
      return value;
    auto type = cast<RankedTensorType>(value.getType());
    int64_t heads = numBatch - 2;
    SmallVector<ReassociationIndices> groups;
    for (int64_t dim = 0; dim < type.getRank(); ++dim) {
      if (dim == heads + 1)
        groups.back().push_back(dim);
      else
        groups.push_back({dim});
    }
    return tensor::CollapseShapeOp::create(rewriter, loc, value, groups);
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

  /// `value` ([batch..., rows, cols] in `compute`, q-shaped or
  /// `keyShaped`) in the operands' type.
  Value narrow(Value value, bool keyShaped = false) {
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
        element, keyShaped ? Space::Key : Space::Query);
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

  /// One linalg.generic over the batch dims of `space` and loops of sizes
  /// `loops`: inputs indexed by their batch dims and `inDims`, one result of
  /// element type `type` (default `compute`) by the batch dims and
  /// `outDims`, filled with the scalar `init` first unless it is null.
  Value generic(ValueRange ins, ArrayRef<ArrayRef<unsigned>> inDims,
                ArrayRef<unsigned> outDims, ArrayRef<int64_t> loops,
                ArrayRef<IteratorType> iterators, Value init, BodyFn body,
                Type type = {}, Space space = Space::Query) {
    bool groupLoop = grouped && space != Space::Key;
    unsigned spaceBatch = numBatch - (grouped && !groupLoop ? 1 : 0);
    unsigned numLoops = spaceBatch + loops.size();
    SmallVector<AffineMap> maps;
    for (auto [in, dims] : llvm::zip_equal(ins, inDims)) {
      auto rank = cast<RankedTensorType>(in.getType()).getRank();
      bool keyShaped =
          grouped && static_cast<size_t>(rank) + 1 == numBatch + dims.size();
      maps.push_back(
          getMap(dims, spaceBatch, numLoops, groupLoop && keyShaped));
    }
    bool keyResult = groupLoop && space == Space::ReduceGroup;
    maps.push_back(getMap(outDims, spaceBatch, numLoops, keyResult));
    SmallVector<IteratorType> allIterators(spaceBatch, IteratorType::parallel);
    if (keyResult)
      allIterators.back() = IteratorType::reduction;
    llvm::append_range(allIterators, iterators);
    SmallVector<int64_t> shape(batchShape.begin(),
                               batchShape.begin() + spaceBatch);
    if (keyResult)
      shape.pop_back();
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

  /// The indexing map of an operand of a generic with `spaceBatch` batch
  /// loops: every batch loop but the innermost (the group loop) when
  /// `skipGroup`, then the loops `dims`.
  AffineMap getMap(ArrayRef<unsigned> dims, unsigned spaceBatch,
                   unsigned numLoops, bool skipGroup) const {
    MLIRContext *context = rewriter.getContext();
    SmallVector<AffineExpr> exprs;
    for (unsigned b = 0; b < spaceBatch - (skipGroup ? 1 : 0); ++b)
      exprs.push_back(getAffineDimExpr(b, context));
    for (unsigned dim : dims)
      exprs.push_back(getAffineDimExpr(spaceBatch + dim, context));
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
  /// Query heads per key/value head; grouped when more than one.
  int64_t groupSize;
  bool grouped;
  /// Batch loops of the query space (one more than q's batch dims when
  /// grouped: the group loop, innermost).
  unsigned numBatch;
  SmallVector<int64_t> batchShape;
  SmallVector<int64_t, 3> ijd; // sizes of i, j, d
  Type element, compute;
  Value scale, zero, negInf;
};

void expand(RewriterBase &rewriter, AttentionOp op) {
  using E = Expander;
  E e(rewriter, op, op.getQ(), op.getK(), op.getScaleAttr(), op.getCausal());
  Value z = e.scores(e.splitHeads(op.getQ()), op.getK());
  Value lse = e.logSumExp(z);
  Value o = e.contract(e.probabilities(z, lse), {E::I, E::J}, op.getV(),
                       {E::J, E::D}, {E::I, E::D}, E::J);
  rewriter.replaceOp(op, {e.mergeHeads(e.narrow(o)), e.mergeHeads(lse)});
}

void expand(RewriterBase &rewriter, AttentionGradOp op) {
  using E = Expander;
  E e(rewriter, op, op.getQ(), op.getK(), op.getScaleAttr(), op.getCausal());
  Value q = e.splitHeads(op.getQ());
  Value p = e.probabilities(e.scores(q, op.getK()), e.splitHeads(op.getLse()));
  Value dO = e.splitHeads(op.getDO());
  Value dp =
      e.contract(dO, {E::I, E::D}, op.getV(), {E::J, E::D}, {E::I, E::J}, E::D);
  Value ds = e.scoreGradients(p, dp, dO, e.splitHeads(op.getO()));
  Value dq =
      e.contract(ds, {E::I, E::J}, op.getK(), {E::J, E::D}, {E::I, E::D}, E::J);
  Value dk = e.contract(ds, {E::I, E::J}, q, {E::I, E::D}, {E::J, E::D}, E::I,
                        /*keyShaped=*/true);
  Value dv = e.contract(p, {E::I, E::J}, dO, {E::I, E::D}, {E::J, E::D}, E::I,
                        /*keyShaped=*/true);
  rewriter.replaceOp(op, {e.mergeHeads(e.narrow(dq)),
                          e.narrow(dk, /*keyShaped=*/true),
                          e.narrow(dv, /*keyShaped=*/true)});
}

/// The bshd form as the [B, H, S, D] op between transposes (which the
/// expansion reads like any other operand): `op` replaced, the new op
/// returned. lse is [B, H, S] in both forms.
template <typename OpTy> OpTy toHeadsMajor(RewriterBase &rewriter, OpTy op) {
  Location loc = op.getLoc();
  Value lse;
  if constexpr (std::is_same_v<OpTy, AttentionGradOp>)
    lse = op.getLse();
  SmallVector<Value> operands =
      llvm::map_to_vector(op->getOperands(), [&](Value operand) {
        return operand == lse ? operand
                              : swapSeqAndHeads(rewriter, loc, operand);
      });
  float scale = op.getScale().convertToFloat();
  OpTy headsMajor;
  if constexpr (std::is_same_v<OpTy, AttentionGradOp>)
    headsMajor = OpTy::create(rewriter, loc, operands[0], operands[1],
                              operands[2], operands[3], operands[4],
                              operands[5], scale, op.getCausal());
  else
    headsMajor = OpTy::create(rewriter, loc, operands[0], operands[1],
                              operands[2], scale, op.getCausal());
  SmallVector<Value> results =
      llvm::map_to_vector(headsMajor->getResults(), [&](Value result) {
        return cast<RankedTensorType>(result.getType()).getRank() == 4
                   ? swapSeqAndHeads(rewriter, loc, result)
                   : result;
      });
  rewriter.replaceOp(op, results);
  return headsMajor;
}

/// True when k (and v) have fewer heads than q.
template <typename OpTy> bool isGrouped(OpTy op) {
  return getAttentionKVGroup(cast<ShapedType>(op.getQ().getType()),
                             cast<ShapedType>(op.getK().getType()),
                             op.getBshd()) > 1;
}

struct ExpandAttentionPass
    : public dc::impl::DCExpandAttentionBase<ExpandAttentionPass> {
  using DCExpandAttentionBase::DCExpandAttentionBase;

  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    // One attention op, forward or backward: the bshd form goes through
    // the [B, H, S, D] op between transposes where it is expanded, and
    // where the runtime's flash attention runs a grouped-query op (it
    // reads grouped heads only dense, heads-major); a fused op the runtime
    // takes stays otherwise as it is.
    auto handle = [&](auto op) {
      rewriter.setInsertionPoint(op);
      if (keepFused && isLibraryAttention(op)) {
        if (op.getBshd() && isGrouped(op))
          toHeadsMajor(rewriter, op);
        return;
      }
      auto fused = op.getBshd() ? toHeadsMajor(rewriter, op) : op;
      // The expansion goes where the op is (before the bshd form's result
      // transposes, which read it).
      rewriter.setInsertionPoint(fused);
      expand(rewriter, fused);
    };
    getOperation().walk([&](Operation *op) {
      if (auto attention = dyn_cast<AttentionOp>(op))
        handle(attention);
      else if (auto grad = dyn_cast<AttentionGradOp>(op))
        handle(grad);
    });
  }
};

} // namespace
