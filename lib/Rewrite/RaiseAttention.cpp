//===- RaiseAttention.cpp - decomposed attention to dc.attention(_grad) ---===//
//
// Matches the decomposed attention dc-gen-llama writes (docs/models.md) by
// walking def-use chains back from the product with v, and replaces it and,
// when the saved probabilities feed the decomposed backward, that backward
// too. A match is all or nothing: any op of it with a use outside it, or
// a body that computes something else, leaves the IR untouched.
//
//===----------------------------------------------------------------------===//
#include "dc/Rewrite/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"

namespace dc {
#define GEN_PASS_DEF_DCRAISEATTENTION
#include "dc/Rewrite/Passes.h.inc"
} // namespace dc

using namespace mlir;
using namespace dc;

namespace {

//===----------------------------------------------------------------------===//
// Scalar bodies
//===----------------------------------------------------------------------===//

/// `value` before an arith.extf: bf16 bodies widen every load to f32.
Value skipExtF(Value value) {
  if (auto ext = value.getDefiningOp<arith::ExtFOp>())
    return ext.getIn();
  return value;
}

/// The scalar a one-result linalg.generic yields, before a final
/// arith.truncf (bf16 bodies round once at the end).
Value getYield(linalg::GenericOp op) {
  Value value = op.getBody()->getTerminator()->getOperand(0);
  if (auto trunc = value.getDefiningOp<arith::TruncFOp>())
    return trunc.getIn();
  return value;
}

/// Whether `value` is (a widening of) block argument `index` of `op`'s body.
bool isArg(Value value, linalg::GenericOp op, unsigned index) {
  return skipExtF(value) == op.getBody()->getArgument(index);
}

/// Whether `value` is a `BinOp` whose operands satisfy `lhs` and `rhs`, in
/// either order when `commutative`.
template <typename BinOp>
bool isBinary(Value value, function_ref<bool(Value)> lhs,
              function_ref<bool(Value)> rhs, bool commutative) {
  auto op = value.getDefiningOp<BinOp>();
  if (!op)
    return false;
  Value a = op->getOperand(0), b = op->getOperand(1);
  return (lhs(a) && rhs(b)) || (commutative && lhs(b) && rhs(a));
}

/// The value of an f32 constant, or nullopt.
std::optional<APFloat> getConstant(Value value) {
  FloatAttr attr;
  if (!matchPattern(value, m_Constant(&attr)) || !attr.getType().isF32())
    return std::nullopt;
  return attr.getValue();
}

/// Whether `value` is `arg * scale` (commuted or not) and sets `scale`.
bool isScaled(Value value, function_ref<bool(Value)> arg,
              std::optional<APFloat> &scale) {
  return isBinary<arith::MulFOp>(
      value, arg,
      [&](Value s) {
        scale = getConstant(s);
        return scale.has_value();
      },
      /*commutative=*/true);
}

bool isLinalgIndex(Value value, int64_t dim) {
  auto index = value.getDefiningOp<linalg::IndexOp>();
  return index && static_cast<int64_t>(index.getDim()) == dim;
}

/// Whether `value` is true exactly where key index `keyDim` exceeds query
/// index `queryDim`.
bool isAboveDiagonal(Value value, int64_t queryDim, int64_t keyDim) {
  auto cmp = value.getDefiningOp<arith::CmpIOp>();
  if (!cmp)
    return false;
  Value lhs = cmp.getLhs(), rhs = cmp.getRhs();
  switch (cmp.getPredicate()) {
  case arith::CmpIPredicate::ugt:
  case arith::CmpIPredicate::sgt:
    return isLinalgIndex(lhs, keyDim) && isLinalgIndex(rhs, queryDim);
  case arith::CmpIPredicate::ult:
  case arith::CmpIPredicate::slt:
    return isLinalgIndex(lhs, queryDim) && isLinalgIndex(rhs, keyDim);
  default:
    return false;
  }
}

//===----------------------------------------------------------------------===//
// Tensor ops
//===----------------------------------------------------------------------===//

/// Whether `init` is a linalg.fill of the f32, bf16, ... constant `value`.
bool isFilledWith(Value init, double value) {
  auto fill = init.getDefiningOp<linalg::FillOp>();
  FloatAttr attr;
  return fill && matchPattern(fill.getInputs()[0], m_Constant(&attr)) &&
         attr.getValueAsDouble() == value;
}

AffineMap getMap(MLIRContext *context, ArrayRef<unsigned> dims,
                 unsigned numDims) {
  SmallVector<AffineExpr> exprs;
  for (unsigned dim : dims)
    exprs.push_back(getAffineDimExpr(dim, context));
  return AffineMap::get(numDims, 0, exprs, context);
}

/// Which operand of a batched product [b, m, k] x [b, k, n] is transposed.
enum class Transposed { None, Lhs, Rhs };

/// The linalg.batch_matmul defining `value` if it has the maps of
/// `transposed` and accumulates into zeros.
linalg::BatchMatmulOp getBatchMatmul(Value value, Transposed transposed) {
  auto op = value.getDefiningOp<linalg::BatchMatmulOp>();
  if (!op || !isFilledWith(op.getDpsInits()[0], 0.0))
    return {};
  MLIRContext *context = op.getContext();
  // Loop dims (b, m, n, k).
  SmallVector<unsigned> lhs = {0, 1, 3}, rhs = {0, 3, 2};
  if (transposed == Transposed::Lhs)
    lhs = {0, 3, 1};
  if (transposed == Transposed::Rhs)
    rhs = {0, 2, 3};
  SmallVector<AffineMap> expected = {getMap(context, lhs, 4),
                                     getMap(context, rhs, 4),
                                     getMap(context, {0, 1, 2}, 4)};
  return op.getIndexingMapsArray() == expected ? op : linalg::BatchMatmulOp();
}

/// The linalg.generic defining `value` if it is a one-result op on
/// `numInputs` inputs over [b, i, j] whose operands are the whole
/// iteration space or one row statistic [b, i] each (`rowOperands` lists
/// the latter, inputs and the init numbered together), reducing over j
/// when `reduction`.
linalg::GenericOp getGeneric(Value value, unsigned numInputs,
                             ArrayRef<unsigned> rowOperands, bool reduction) {
  auto op = value.getDefiningOp<linalg::GenericOp>();
  if (!op || op.getNumDpsInputs() != numInputs || op.getNumDpsInits() != 1)
    return {};
  MLIRContext *context = op.getContext();
  SmallVector<AffineMap> expected;
  for (unsigned i = 0; i <= numInputs; ++i)
    expected.push_back(llvm::is_contained(rowOperands, i)
                           ? getMap(context, {0, 1}, 3)
                           : getMap(context, {0, 1, 2}, 3));
  SmallVector<utils::IteratorType> iterators(3, utils::IteratorType::parallel);
  if (reduction)
    iterators.back() = utils::IteratorType::reduction;
  if (op.getIndexingMapsArray() != expected ||
      op.getIteratorTypesArray() != iterators)
    return {};
  return op;
}

/// Whether the results of `ops` other than `exits` are only used by `ops`.
bool isClosed(ArrayRef<Operation *> ops, ArrayRef<Operation *> exits) {
  llvm::SmallPtrSet<Operation *, 16> inside(ops.begin(), ops.end());
  return llvm::all_of(ops, [&](Operation *op) {
    return llvm::is_contained(exits, op) ||
           llvm::all_of(op->getUsers(),
                        [&](Operation *user) { return inside.contains(user); });
  });
}

//===----------------------------------------------------------------------===//
// The forward
//===----------------------------------------------------------------------===//

/// o = softmax(mask(scale q k^T)) v, op by op.
struct Forward {
  Value q, k, v, probs;
  APFloat scale = APFloat(0.0f);
  bool causal = false;
  linalg::BatchMatmulOp scores, output;
  linalg::GenericOp masked, rowMax, denom, normalize;

  SmallVector<Operation *> ops() const {
    return {scores, masked, rowMax, denom, normalize, output};
  }
};

/// Matches the forward that ends in `output` (p v).
std::optional<Forward> matchForward(linalg::BatchMatmulOp output) {
  Forward f;
  f.output = getBatchMatmul(output.getResult(0), Transposed::None);
  if (!f.output)
    return std::nullopt;
  f.probs = output.getDpsInputs()[0];
  f.v = output.getDpsInputs()[1];

  // p = exp(z - max) / denom
  f.normalize = getGeneric(f.probs, 3, {1, 2}, /*reduction=*/false);
  if (!f.normalize)
    return std::nullopt;
  linalg::GenericOp n = f.normalize;
  auto isExpOfShifted = [&](Value x, linalg::GenericOp op) {
    auto exp = x.getDefiningOp<math::ExpOp>();
    return exp &&
           isBinary<arith::SubFOp>(
               exp.getOperand(), [&](Value a) { return isArg(a, op, 0); },
               [&](Value a) { return isArg(a, op, 1); },
               /*commutative=*/false);
  };
  if (!isBinary<arith::DivFOp>(
          getYield(n), [&](Value x) { return isExpOfShifted(x, n); },
          [&](Value x) { return isArg(x, n, 2); }, /*commutative=*/false))
    return std::nullopt;
  Value masked = n.getDpsInputs()[0];
  Value max = n.getDpsInputs()[1];
  Value denom = n.getDpsInputs()[2];

  // max_j z, from -inf
  f.rowMax = getGeneric(max, 1, {1}, /*reduction=*/true);
  if (!f.rowMax || f.rowMax.getDpsInputs()[0] != masked ||
      !isFilledWith(f.rowMax.getDpsInits()[0],
                    -std::numeric_limits<double>::infinity()) ||
      !isBinary<arith::MaximumFOp>(
          getYield(f.rowMax), [&](Value a) { return isArg(a, f.rowMax, 1); },
          [&](Value a) { return isArg(a, f.rowMax, 0); },
          /*commutative=*/true))
    return std::nullopt;

  // sum_j exp(z - max), from 0
  f.denom = getGeneric(denom, 2, {1, 2}, /*reduction=*/true);
  if (!f.denom || f.denom.getDpsInputs()[0] != masked ||
      f.denom.getDpsInputs()[1] != max ||
      !isFilledWith(f.denom.getDpsInits()[0], 0.0) ||
      !isBinary<arith::AddFOp>(
          getYield(f.denom), [&](Value a) { return isArg(a, f.denom, 2); },
          [&](Value a) { return isExpOfShifted(a, f.denom); },
          /*commutative=*/true))
    return std::nullopt;

  // z = s * scale, or -inf above the diagonal when causal
  f.masked = getGeneric(masked, 1, {}, /*reduction=*/false);
  if (!f.masked)
    return std::nullopt;
  Value z = getYield(f.masked);
  std::optional<APFloat> scale;
  auto isScaledScore = [&](Value x) {
    return isScaled(x, [&](Value a) { return isArg(a, f.masked, 0); }, scale);
  };
  if (auto select = z.getDefiningOp<arith::SelectOp>()) {
    std::optional<APFloat> fill = getConstant(select.getTrueValue());
    f.causal = fill && fill->isInfinity() && fill->isNegative() &&
               isAboveDiagonal(select.getCondition(), 1, 2) &&
               isScaledScore(select.getFalseValue());
    if (!f.causal)
      return std::nullopt;
  } else if (!isScaledScore(z)) {
    return std::nullopt;
  }
  f.scale = *scale;

  // s = q k^T
  f.scores = getBatchMatmul(f.masked.getDpsInputs()[0], Transposed::Rhs);
  if (!f.scores)
    return std::nullopt;
  f.q = f.scores.getDpsInputs()[0];
  f.k = f.scores.getDpsInputs()[1];
  return f;
}

//===----------------------------------------------------------------------===//
// The backward
//===----------------------------------------------------------------------===//

/// dq, dk, dv from the saved probabilities p, op by op.
struct Backward {
  Value dOut;
  linalg::BatchMatmulOp dProbs, dV, dQ, dK;
  linalg::GenericOp rowDot, dScores;

  SmallVector<Operation *> ops() const {
    return {dProbs, dV, rowDot, dScores, dQ, dK};
  }
};

/// Matches the backward of `f` from the users of its probabilities.
std::optional<Backward> matchBackward(const Forward &f) {
  Backward b;
  for (Operation *user : f.probs.getUsers()) {
    if (user == f.output)
      continue;
    if (user->getNumResults() != 1)
      return std::nullopt;
    Value result = user->getResult(0);
    if (auto dv = getBatchMatmul(result, Transposed::Lhs);
        dv && dv.getDpsInputs()[0] == f.probs)
      b.dV = dv;
    else if (auto rowDot = getGeneric(result, 2, {2}, /*reduction=*/true))
      b.rowDot = rowDot;
    else if (auto dScores = getGeneric(result, 3, {2}, /*reduction=*/false))
      b.dScores = dScores;
    else
      return std::nullopt;
  }
  if (!b.dV || !b.rowDot || !b.dScores)
    return std::nullopt;
  b.dOut = b.dV.getDpsInputs()[1];

  // dp = do v^T
  Value dProbs = b.rowDot.getDpsInputs()[0];
  b.dProbs = getBatchMatmul(dProbs, Transposed::Rhs);
  if (!b.dProbs || b.dProbs.getDpsInputs()[0] != b.dOut ||
      b.dProbs.getDpsInputs()[1] != f.v)
    return std::nullopt;

  // rowdot = sum_j dp p, from 0
  linalg::GenericOp r = b.rowDot;
  if (r.getDpsInputs()[1] != f.probs ||
      !isFilledWith(r.getDpsInits()[0], 0.0) ||
      !isBinary<arith::AddFOp>(
          getYield(r), [&](Value a) { return isArg(a, r, 2); },
          [&](Value a) {
            return isBinary<arith::MulFOp>(
                a, [&](Value x) { return isArg(x, r, 0); },
                [&](Value x) { return isArg(x, r, 1); },
                /*commutative=*/true);
          },
          /*commutative=*/true))
    return std::nullopt;

  // ds = p (dp - rowdot) scale, with the forward's scale
  linalg::GenericOp d = b.dScores;
  if (d.getDpsInputs()[0] != dProbs || d.getDpsInputs()[1] != f.probs ||
      d.getDpsInputs()[2] != r.getResult(0))
    return std::nullopt;
  std::optional<APFloat> scale;
  auto isGradient = [&](Value x) {
    return isBinary<arith::MulFOp>(
        x, [&](Value p) { return isArg(p, d, 1); },
        [&](Value diff) {
          return isBinary<arith::SubFOp>(
              diff, [&](Value a) { return isArg(a, d, 0); },
              [&](Value a) { return isArg(a, d, 2); },
              /*commutative=*/false);
        },
        /*commutative=*/true);
  };
  if (!isScaled(getYield(d), isGradient, scale) ||
      scale->compare(f.scale) != APFloat::cmpEqual)
    return std::nullopt;

  // dq = ds k, dk = ds^T q
  Value dScores = d.getResult(0);
  for (Operation *user : dScores.getUsers()) {
    if (user->getNumResults() != 1)
      return std::nullopt;
    Value result = user->getResult(0);
    if (auto dq = getBatchMatmul(result, Transposed::None);
        dq && dq.getDpsInputs()[0] == dScores && dq.getDpsInputs()[1] == f.k)
      b.dQ = dq;
    else if (auto dk = getBatchMatmul(result, Transposed::Lhs);
             dk && dk.getDpsInputs()[0] == dScores &&
             dk.getDpsInputs()[1] == f.q)
      b.dK = dk;
    else
      return std::nullopt;
  }
  if (!b.dQ || !b.dK)
    return std::nullopt;
  return b;
}

//===----------------------------------------------------------------------===//
// Rewriting
//===----------------------------------------------------------------------===//

/// Erases `ops` (users before producers), then every producer of their
/// operands and captured values that only they used.
void eraseWithProducers(RewriterBase &rewriter, ArrayRef<Operation *> ops) {
  llvm::SetVector<Operation *> worklist(ops.rbegin(), ops.rend());
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    if (!isOpTriviallyDead(op))
      continue;
    llvm::SetVector<Value> used(op->operand_begin(), op->operand_end());
    for (Region &region : op->getRegions())
      getUsedValuesDefinedAbove(region, used);
    rewriter.eraseOp(op);
    for (Value value : used)
      if (Operation *producer = value.getDefiningOp())
        worklist.insert(producer);
  }
}

/// Whether the ops are in one block, in this order of their first op.
bool isOrderedInBlock(ArrayRef<Operation *> ops, Operation *first) {
  return llvm::all_of(ops, [&](Operation *op) {
    return op->getBlock() == first->getBlock() &&
           (op == first || first->isBeforeInBlock(op));
  });
}

/// The first of `ops` in their block.
Operation *getFirst(ArrayRef<Operation *> ops) {
  return *llvm::min_element(
      ops, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
}

/// A forward, and its backward when the probabilities feed one.
struct Match {
  Forward forward;
  std::optional<Backward> backward;
};

/// Whether the fused ops accept the matched values (their verifiers): q, o
/// (and do, dq) of one static float type, k and v (and dk, dv) of another
/// with that element type, and as many keys as queries when causal.
bool hasFusedTypes(const Match &m) {
  const Forward &f = m.forward;
  auto q = cast<RankedTensorType>(f.q.getType());
  auto k = cast<RankedTensorType>(f.k.getType());
  if (!q.hasStaticShape() || !k.hasStaticShape() ||
      !isa<FloatType>(q.getElementType()) ||
      k.getElementType() != q.getElementType() || f.v.getType() != k ||
      f.output->getResult(0).getType() != q || (f.causal && k != q))
    return false;
  const std::optional<Backward> &b = m.backward;
  return !b || (b->dOut.getType() == q && b->dQ->getResult(0).getType() == q &&
                b->dK->getResult(0).getType() == k &&
                b->dV->getResult(0).getType() == k);
}

/// Matches the attention ending in `output`: only o, dq, dk and dv are used
/// outside the match, and all its ops lie in one block, the backward after
/// the forward's product with v, where the fused forward goes.
std::optional<Match> match(linalg::BatchMatmulOp output) {
  std::optional<Forward> f = matchForward(output);
  if (!f)
    return std::nullopt;
  Match m{*f, std::nullopt};
  if (!f->probs.hasOneUse()) {
    m.backward = matchBackward(*f);
    if (!m.backward)
      return std::nullopt;
  }
  SmallVector<Operation *> ops = f->ops(), exits = {output};
  if (m.backward) {
    llvm::append_range(ops, m.backward->ops());
    exits.append({m.backward->dQ, m.backward->dK, m.backward->dV});
  }
  if (!hasFusedTypes(m) || !isClosed(ops, exits) ||
      !isOrderedInBlock(ops, f->scores) ||
      (m.backward && !output->isBeforeInBlock(getFirst(m.backward->ops()))))
    return std::nullopt;
  return m;
}

void rewrite(RewriterBase &rewriter, Match &m) {
  Forward &f = m.forward;
  rewriter.setInsertionPoint(f.output);
  float scale = f.scale.convertToFloat();
  auto attention = AttentionOp::create(rewriter, f.output.getLoc(), f.q, f.k,
                                       f.v, scale, f.causal);
  rewriter.replaceAllUsesWith(f.output.getResult(0), attention.getO());
  SmallVector<Operation *> ops = f.ops();
  if (std::optional<Backward> &b = m.backward) {
    rewriter.setInsertionPoint(getFirst(b->ops()));
    auto grad = AttentionGradOp::create(
        rewriter, b->dProbs.getLoc(), f.q, f.k, f.v, attention.getO(),
        attention.getLse(), b->dOut, scale, f.causal);
    rewriter.replaceAllUsesWith(b->dQ.getResult(0), grad.getDq());
    rewriter.replaceAllUsesWith(b->dK.getResult(0), grad.getDk());
    rewriter.replaceAllUsesWith(b->dV.getResult(0), grad.getDv());
    llvm::append_range(ops, b->ops());
  }
  eraseWithProducers(rewriter, ops);
}

struct RaiseAttentionPass
    : public dc::impl::DCRaiseAttentionBase<RaiseAttentionPass> {
  void runOnOperation() override {
    // Match everything first: matches share no op (each is closed), and
    // rewriting one erases ops another walk would visit.
    SmallVector<Match> matches;
    getOperation().walk([&](linalg::BatchMatmulOp op) {
      if (!op.hasPureTensorSemantics())
        return;
      if (std::optional<Match> m = match(op))
        matches.push_back(std::move(*m));
    });
    IRRewriter rewriter(&getContext());
    for (Match &m : matches)
      rewrite(rewriter, m);
  }
};

} // namespace
