//===- ExpandExperts.cpp - routing ops to linalg.generic ------------------===//
//
// The reference semantics of the mixture-of-experts ops as linalg on
// tensors, every shape static. Each generic is written as the op's formula
// over named loops; data-dependent choices are selects, comparisons with
// the loop indices, and (for the rows of a gather or an expert's matrix)
// tensor.extract at a computed index, guarded so that an out-of-range index
// reads nothing.
//
//===----------------------------------------------------------------------===//
#include "dc/Rewrite/Passes.h"

#include "dc/Dialect/DC/IR/DCDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/TypeSwitch.h"

namespace dc {
#define GEN_PASS_DEF_DCEXPANDEXPERTS
#include "dc/Rewrite/Passes.h.inc"
} // namespace dc

using namespace mlir;
using namespace dc;

namespace {

using utils::IteratorType;
using Dims = SmallVector<unsigned>;
using BodyFn =
    function_ref<SmallVector<Value>(OpBuilder &, Location, ValueRange)>;

/// One tensor of a generic and the loops that index its dims.
struct Operand {
  Value value;
  Dims dims;
};

/// Builds the generics of one op at its location.
class Expander {
public:
  Expander(RewriterBase &rewriter, Location loc)
      : rewriter(rewriter), loc(loc) {}

  /// A tensor of `shape` and `element` filled with zero.
  Value zeros(ArrayRef<int64_t> shape, Type element) {
    Value empty = tensor::EmptyOp::create(rewriter, loc, shape, element);
    Value zero = arith::ConstantOp::create(rewriter, loc, element,
                                           rewriter.getZeroAttr(element));
    return linalg::FillOp::create(rewriter, loc, zero, empty).getResult(0);
  }

  /// A generic over loops of `sizes` (the innermost `reductions` of them
  /// reduce); `body` gets the inputs' elements then the outputs' and yields
  /// the outputs'.
  SmallVector<Value> generic(ArrayRef<int64_t> sizes, unsigned reductions,
                             ArrayRef<Operand> inputs,
                             ArrayRef<Operand> outputs, BodyFn body) {
    MLIRContext *context = rewriter.getContext();
    auto map = [&](const Dims &dims) {
      SmallVector<AffineExpr> exprs;
      for (unsigned dim : dims)
        exprs.push_back(getAffineDimExpr(dim, context));
      return AffineMap::get(sizes.size(), 0, exprs, context);
    };
    SmallVector<Value> ins, outs;
    SmallVector<AffineMap> maps;
    SmallVector<Type> types;
    for (const Operand &input : inputs) {
      ins.push_back(input.value);
      maps.push_back(map(input.dims));
    }
    for (const Operand &output : outputs) {
      outs.push_back(output.value);
      maps.push_back(map(output.dims));
      types.push_back(output.value.getType());
    }
    SmallVector<IteratorType> iterators(sizes.size(), IteratorType::parallel);
    for (unsigned i = sizes.size() - reductions; i < sizes.size(); ++i)
      iterators[i] = IteratorType::reduction;
    auto op = linalg::GenericOp::create(
        rewriter, loc, types, ins, outs, maps, iterators,
        [&](OpBuilder &b, Location l, ValueRange args) {
          linalg::YieldOp::create(b, l, body(b, l, args));
        });
    return SmallVector<Value>(op.getResults());
  }

  Value generic1(ArrayRef<int64_t> sizes, unsigned reductions,
                 ArrayRef<Operand> inputs, Operand output,
                 function_ref<Value(OpBuilder &, Location, ValueRange)> body) {
    return generic(sizes, reductions, inputs, {output},
                   [&](OpBuilder &b, Location l, ValueRange args) {
                     return SmallVector<Value>{body(b, l, args)};
                   })
        .front();
  }

  /// The f32 (or wider) type sums of `element` accumulate in.
  Type accumulatorFor(Type element) {
    if (element.getIntOrFloatBitWidth() > 32)
      return element;
    return rewriter.getF32Type();
  }

  /// `value` as a float of `type` (extended or rounded).
  static Value toFloat(OpBuilder &b, Location l, Value value, Type type) {
    unsigned from = value.getType().getIntOrFloatBitWidth();
    unsigned to = type.getIntOrFloatBitWidth();
    if (value.getType() == type)
      return value;
    if (from < to)
      return arith::ExtFOp::create(b, l, type, value);
    return arith::TruncFOp::create(b, l, type, value);
  }

  /// `value` (an integer or index) as the integer or index type `type`.
  static Value toInt(OpBuilder &b, Location l, Value value, Type type) {
    Type from = value.getType();
    if (from == type)
      return value;
    if (from.isIndex() || type.isIndex())
      return arith::IndexCastOp::create(b, l, type, value);
    if (from.getIntOrFloatBitWidth() < type.getIntOrFloatBitWidth())
      return arith::ExtSIOp::create(b, l, type, value);
    return arith::TruncIOp::create(b, l, type, value);
  }

  static Value loopIndex(OpBuilder &b, Location l, unsigned dim, Type type) {
    return toInt(b, l, linalg::IndexOp::create(b, l, dim), type);
  }

  static Value constantInt(OpBuilder &b, Location l, int64_t value, Type type) {
    return arith::ConstantOp::create(b, l, type, b.getIntegerAttr(type, value));
  }

  /// `acc + (cond ? 1 : 0)` in acc's integer type.
  static Value count(OpBuilder &b, Location l, Value cond, Value acc) {
    Value one = arith::ExtUIOp::create(b, l, acc.getType(), cond);
    return arith::AddIOp::create(b, l, acc, one);
  }

  /// `accumulator` (a tensor of the accumulation type) rounded to
  /// `element`.
  Value roundTo(Value accumulator, Type element) {
    auto type = cast<RankedTensorType>(accumulator.getType());
    if (type.getElementType() == element)
      return accumulator;
    Dims dims;
    for (unsigned d = 0; d < type.getRank(); ++d)
      dims.push_back(d);
    Value init =
        tensor::EmptyOp::create(rewriter, loc, type.getShape(), element);
    return generic1(type.getShape(), 0, {{accumulator, dims}}, {init, dims},
                    [&](OpBuilder &b, Location l, ValueRange args) {
                      return toFloat(b, l, args[0], element);
                    });
  }

  /// For each of `rows` rows grouped by `ends` ([E]): its group, in
  /// [0, E], E for a row past the last end (the number of ends at or before
  /// the row).
  Value groupOfRows(int64_t rows, Value ends) {
    auto endsType = cast<RankedTensorType>(ends.getType());
    Type element = endsType.getElementType();
    // Loops: (i row, e expert).
    return generic1({rows, endsType.getDimSize(0)}, 1, {{ends, {1}}},
                    {zeros({rows}, element), {0}},
                    [&](OpBuilder &b, Location l, ValueRange args) {
                      Value row = loopIndex(b, l, 0, element);
                      Value ended = arith::CmpIOp::create(
                          b, l, arith::CmpIPredicate::sle, args[0], row);
                      return count(b, l, ended, args[1]);
                    });
  }

  RewriterBase &rewriter;
  Location loc;
};

void expand(RewriterBase &rewriter, TopKOp op) {
  Expander x(rewriter, op.getLoc());
  Value scores = op.getScores();
  auto type = cast<RankedTensorType>(scores.getType());
  unsigned lead = type.getRank() - 1;
  int64_t width = type.getShape().back(), k = op.getK();
  Dims batch;
  SmallVector<int64_t> batchSizes;
  for (unsigned d = 0; d < lead; ++d) {
    batch.push_back(d);
    batchSizes.push_back(type.getDimSize(d));
  }
  auto with = [&](Dims dims, std::initializer_list<unsigned> more) {
    dims.append(more.begin(), more.end());
    return dims;
  };
  auto sizes = [&](std::initializer_list<int64_t> more) {
    SmallVector<int64_t> all(batchSizes);
    all.append(more.begin(), more.end());
    return all;
  };
  const unsigned first = lead, second = lead + 1;
  // rank[..., e]: how many entries of the row come before entry e (larger,
  // or equal at a lower position). Loops: (batch..., e, other).
  Type i64 = rewriter.getI64Type();
  SmallVector<int64_t> rankShape(type.getShape());
  Value rank = x.generic1(
      sizes({width, width}), 1,
      {{scores, with(batch, {second})}, {scores, with(batch, {first})}},
      {x.zeros(rankShape, i64), with(batch, {first})},
      [&](OpBuilder &b, Location l, ValueRange args) {
        Value other = args[0], self = args[1];
        Value larger =
            arith::CmpFOp::create(b, l, arith::CmpFPredicate::OGT, other, self);
        Value equal =
            arith::CmpFOp::create(b, l, arith::CmpFPredicate::OEQ, other, self);
        Value lower =
            arith::CmpIOp::create(b, l, arith::CmpIPredicate::ult,
                                  linalg::IndexOp::create(b, l, second),
                                  linalg::IndexOp::create(b, l, first));
        Value before = arith::OrIOp::create(
            b, l, larger, arith::AndIOp::create(b, l, equal, lower));
        return Expander::count(b, l, before, args[2]);
      });
  // values[..., j], indices[..., j]: the entry of rank j. Loops:
  // (batch..., j, e).
  auto valuesType = cast<RankedTensorType>(op.getValues().getType());
  Type indexElement = op.getIndices().getType().getElementType();
  SmallVector<Value> picked = x.generic(
      sizes({k, width}), 1,
      {{rank, with(batch, {second})}, {scores, with(batch, {second})}},
      {{x.zeros(valuesType.getShape(), type.getElementType()),
        with(batch, {first})},
       {x.zeros(valuesType.getShape(), indexElement), with(batch, {first})}},
      [&](OpBuilder &b, Location l, ValueRange args) {
        Value j = Expander::loopIndex(b, l, first, i64);
        Value hit =
            arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, args[0], j);
        Value position = Expander::loopIndex(b, l, second, indexElement);
        return SmallVector<Value>{
            arith::SelectOp::create(b, l, hit, args[1], args[2]),
            arith::SelectOp::create(b, l, hit, position, args[3])};
      });
  rewriter.replaceOp(op, picked);
}

void expand(RewriterBase &rewriter, GroupByExpertOp op) {
  Expander x(rewriter, op.getLoc());
  Value ids = op.getIds();
  auto idsType = cast<RankedTensorType>(ids.getType());
  int64_t n = idsType.getNumElements(), experts = op.getExperts();
  if (idsType.getRank() != 1) {
    ReassociationIndices all;
    for (int64_t d = 0; d < idsType.getRank(); ++d)
      all.push_back(d);
    ids = tensor::CollapseShapeOp::create(rewriter, op.getLoc(), ids,
                                          ArrayRef<ReassociationIndices>{all});
  }
  Type idElement = idsType.getElementType();
  Type endElement = op.getEnds().getType().getElementType();
  Type orderElement = op.getOrder().getType().getElementType();
  auto valid = [&](OpBuilder &b, Location l, Value id) {
    Value zero = Expander::constantInt(b, l, 0, idElement);
    Value limit = Expander::constantInt(b, l, experts, idElement);
    return arith::AndIOp::create(
        b, l, arith::CmpIOp::create(b, l, arith::CmpIPredicate::sge, id, zero),
        arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt, id, limit));
  };
  // counts[e]. Loops: (e, a).
  Value counts = x.generic1(
      {experts, n}, 1, {{ids, {1}}}, {x.zeros({experts}, endElement), {0}},
      [&](OpBuilder &b, Location l, ValueRange args) {
        Value e = Expander::loopIndex(b, l, 0, idElement);
        Value mine =
            arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, args[0], e);
        return Expander::count(b, l, mine, args[1]);
      });
  // ends[e] = sum of counts[0..e]. Loops: (e, other).
  Value ends =
      x.generic1({experts, experts}, 1, {{counts, {1}}},
                 {x.zeros({experts}, endElement), {0}},
                 [&](OpBuilder &b, Location l, ValueRange args) {
                   Value upTo =
                       arith::CmpIOp::create(b, l, arith::CmpIPredicate::ule,
                                             linalg::IndexOp::create(b, l, 1),
                                             linalg::IndexOp::create(b, l, 0));
                   Value sum = arith::AddIOp::create(b, l, args[1], args[0]);
                   return arith::SelectOp::create(b, l, upTo, sum, args[1]);
                 });
  // start[a]: the rows of the experts before a's (all experts' for an
  // invalid id). Loops: (a, e).
  Value start =
      x.generic1({n, experts}, 1, {{ids, {0}}, {counts, {1}}},
                 {x.zeros({n}, orderElement), {0}},
                 [&](OpBuilder &b, Location l, ValueRange args) {
                   Value id = args[0];
                   Value e = Expander::loopIndex(b, l, 1, idElement);
                   Value earlier = arith::CmpIOp::create(
                       b, l, arith::CmpIPredicate::slt, e, id);
                   Value isValid = valid(b, l, id);
                   Value before = arith::SelectOp::create(
                       b, l, isValid, earlier,
                       Expander::constantInt(b, l, 1, b.getI1Type()));
                   Value rows = Expander::toInt(b, l, args[1], orderElement);
                   Value sum = arith::AddIOp::create(b, l, args[2], rows);
                   return arith::SelectOp::create(b, l, before, sum, args[2]);
                 });
  // position[a] = start[a] + the earlier assignments of the same group.
  // Loops: (a, other).
  Value position = x.generic1(
      {n, n}, 1, {{ids, {1}}, {ids, {0}}}, {start, {0}},
      [&](OpBuilder &b, Location l, ValueRange args) {
        Value other = args[0], self = args[1];
        Value sameExpert =
            arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, other, self);
        Value selfValid = valid(b, l, self);
        Value otherInvalid = arith::XOrIOp::create(
            b, l, valid(b, l, other),
            Expander::constantInt(b, l, 1, b.getI1Type()));
        Value sameGroup =
            arith::SelectOp::create(b, l, selfValid, sameExpert, otherInvalid);
        Value earlier = arith::CmpIOp::create(b, l, arith::CmpIPredicate::ult,
                                              linalg::IndexOp::create(b, l, 1),
                                              linalg::IndexOp::create(b, l, 0));
        return Expander::count(
            b, l, arith::AndIOp::create(b, l, sameGroup, earlier), args[2]);
      });
  // order[p] = the assignment placed at p. Loops: (p, a).
  Value order = x.generic1(
      {n, n}, 1, {{position, {1}}}, {x.zeros({n}, orderElement), {0}},
      [&](OpBuilder &b, Location l, ValueRange args) {
        Value p = Expander::loopIndex(b, l, 0, orderElement);
        Value here =
            arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, args[0], p);
        Value a = Expander::loopIndex(b, l, 1, orderElement);
        return arith::SelectOp::create(b, l, here, a, args[1]);
      });
  rewriter.replaceOp(op, {order, ends});
}

/// The loops of a row op's rest dims (after the row loop, which is 0).
Dims restDims(int64_t rank, unsigned first = 1) {
  Dims dims;
  for (int64_t d = 1; d < rank; ++d)
    dims.push_back(first + d - 1);
  return dims;
}

void expand(RewriterBase &rewriter, GatherRowsOp op) {
  Expander x(rewriter, op.getLoc());
  Value source = op.getSource(), index = op.getIndex();
  auto sourceType = cast<RankedTensorType>(source.getType());
  auto resultType = cast<RankedTensorType>(op.getResult().getType());
  int64_t rank = resultType.getRank(), rows = sourceType.getDimSize(0);
  Dims all = {0};
  all.append(restDims(rank));
  Type element = resultType.getElementType();
  Value init = tensor::EmptyOp::create(rewriter, op.getLoc(),
                                       resultType.getShape(), element);
  // Loops: (i, rest...).
  Value result = x.generic1(
      resultType.getShape(), 0, {{index, {0}}}, {init, all},
      [&](OpBuilder &b, Location l, ValueRange args) {
        Value row = Expander::toInt(b, l, args[0], b.getIndexType());
        Value zero = arith::ConstantIndexOp::create(b, l, 0);
        Value limit = arith::ConstantIndexOp::create(b, l, rows);
        Value inside = arith::AndIOp::create(
            b, l,
            arith::CmpIOp::create(b, l, arith::CmpIPredicate::sge, row, zero),
            arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt, row, limit));
        SmallVector<Value> at = {
            arith::SelectOp::create(b, l, inside, row, zero)};
        for (int64_t d = 1; d < rank; ++d)
          at.push_back(linalg::IndexOp::create(b, l, d));
        Value read = tensor::ExtractOp::create(b, l, source, at);
        Value none =
            arith::ConstantOp::create(b, l, element, b.getZeroAttr(element));
        return arith::SelectOp::create(b, l, inside, read, none);
      });
  rewriter.replaceOp(op, result);
}

void expand(RewriterBase &rewriter, ScatterAddRowsOp op) {
  Expander x(rewriter, op.getLoc());
  Value source = op.getSource(), index = op.getIndex();
  auto sourceType = cast<RankedTensorType>(source.getType());
  auto resultType = cast<RankedTensorType>(op.getResult().getType());
  int64_t rank = resultType.getRank();
  unsigned summed = rank; // the loop over source rows, innermost
  Type element = resultType.getElementType();
  Type accumulator = x.accumulatorFor(element);
  Type indexElement = cast<ShapedType>(index.getType()).getElementType();
  Dims out = {0};
  out.append(restDims(rank));
  Dims in = {summed};
  in.append(restDims(rank));
  SmallVector<int64_t> sizes(resultType.getShape());
  sizes.push_back(sourceType.getDimSize(0));
  // Loops: (m, rest..., i).
  Value sum = x.generic1(
      sizes, 1, {{index, {summed}}, {source, in}},
      {x.zeros(resultType.getShape(), accumulator), out},
      [&](OpBuilder &b, Location l, ValueRange args) {
        Value m = Expander::loopIndex(b, l, 0, indexElement);
        Value here =
            arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, args[0], m);
        Value added = arith::AddFOp::create(
            b, l, args[2], Expander::toFloat(b, l, args[1], accumulator));
        return arith::SelectOp::create(b, l, here, added, args[2]);
      });
  rewriter.replaceOp(op, x.roundTo(sum, element));
}

void expand(RewriterBase &rewriter, GroupedMatmulOp op) {
  Expander x(rewriter, op.getLoc());
  Value lhs = op.getLhs(), rhs = op.getRhs();
  auto lhsType = cast<RankedTensorType>(lhs.getType());
  auto resultType = cast<RankedTensorType>(op.getResult().getType());
  int64_t rows = lhsType.getDimSize(0), reduced = lhsType.getDimSize(1);
  int64_t columns = resultType.getDimSize(1);
  int64_t experts = cast<RankedTensorType>(rhs.getType()).getDimSize(0);
  bool transposed = op.getTransposeRhs();
  Type element = resultType.getElementType();
  Type accumulator = x.accumulatorFor(element);
  Value group = x.groupOfRows(rows, op.getEnds());
  // Loops: (i row, p column, k reduced).
  Value product = x.generic1(
      {rows, columns, reduced}, 1, {{lhs, {0, 2}}, {group, {0}}},
      {x.zeros(resultType.getShape(), accumulator), {0, 1}},
      [&](OpBuilder &b, Location l, ValueRange args) {
        Value e = Expander::toInt(b, l, args[1], b.getIndexType());
        Value zero = arith::ConstantIndexOp::create(b, l, 0);
        Value inside = arith::CmpIOp::create(
            b, l, arith::CmpIPredicate::slt, e,
            arith::ConstantIndexOp::create(b, l, experts));
        Value safe = arith::SelectOp::create(b, l, inside, e, zero);
        Value p = linalg::IndexOp::create(b, l, 1);
        Value k = linalg::IndexOp::create(b, l, 2);
        SmallVector<Value> at = {safe, transposed ? p : k, transposed ? k : p};
        Value weight = tensor::ExtractOp::create(b, l, rhs, at);
        Value term = arith::MulFOp::create(
            b, l, Expander::toFloat(b, l, args[0], accumulator),
            Expander::toFloat(b, l, weight, accumulator));
        Value added = arith::AddFOp::create(b, l, args[2], term);
        return arith::SelectOp::create(b, l, inside, added, args[2]);
      });
  rewriter.replaceOp(op, x.roundTo(product, element));
}

void expand(RewriterBase &rewriter, GroupedWeightGradOp op) {
  Expander x(rewriter, op.getLoc());
  Value lhs = op.getLhs(), rhs = op.getRhs();
  auto resultType = cast<RankedTensorType>(op.getResult().getType());
  int64_t rows = cast<RankedTensorType>(lhs.getType()).getDimSize(0);
  Type element = resultType.getElementType();
  Type accumulator = x.accumulatorFor(element);
  Value group = x.groupOfRows(rows, op.getEnds());
  Type groupElement = cast<RankedTensorType>(group.getType()).getElementType();
  SmallVector<int64_t> sizes(resultType.getShape());
  sizes.push_back(rows);
  // Loops: (e, k, p, i row).
  Value product =
      x.generic1(sizes, 1, {{group, {3}}, {lhs, {3, 1}}, {rhs, {3, 2}}},
                 {x.zeros(resultType.getShape(), accumulator), {0, 1, 2}},
                 [&](OpBuilder &b, Location l, ValueRange args) {
                   Value e = Expander::loopIndex(b, l, 0, groupElement);
                   Value mine = arith::CmpIOp::create(
                       b, l, arith::CmpIPredicate::eq, args[0], e);
                   Value term = arith::MulFOp::create(
                       b, l, Expander::toFloat(b, l, args[1], accumulator),
                       Expander::toFloat(b, l, args[2], accumulator));
                   Value added = arith::AddFOp::create(b, l, args[3], term);
                   return arith::SelectOp::create(b, l, mine, added, args[3]);
                 });
  rewriter.replaceOp(op, x.roundTo(product, element));
}

/// dc.group_by_expert with a capacity C as two plain groupings, so that
/// every target runs it on the grouping it has. The first sorts by expert;
/// its sorted row p of expert e (e's rows [start(e), ends[e]) are in flat
/// order) is kept when p - start(e) < C. The second groups the sorted rows
/// by their expert, -1 for a drop: stably, so kept rows stay where they
/// were relative to each other, and the drops follow every expert's rows
/// (the capacity's by expert and flat order, then the invalid ids). The
/// order is the first grouping's order at the second's.
void expandCapacity(RewriterBase &rewriter, GroupByExpertOp op) {
  Expander x(rewriter, op.getLoc());
  Location loc = op.getLoc();
  auto orderType = cast<RankedTensorType>(op.getOrder().getType());
  auto endsType = cast<RankedTensorType>(op.getEnds().getType());
  Type orderElement = orderType.getElementType();
  Type endElement = endsType.getElementType();
  int64_t n = orderType.getDimSize(0), experts = op.getExperts();
  int64_t capacity = *op.getCapacity();
  auto first =
      GroupByExpertOp::create(rewriter, loc, orderType, endsType, op.getIds(),
                              op.getExpertsAttr(), /*capacity=*/IntegerAttr());
  Value firstEnds = first.getEnds();
  // Each sorted row's expert (E past the last end: an invalid id).
  Value group = x.groupOfRows(n, firstEnds);
  // The sorted rows' ids for the second grouping. Loops: (p).
  Value kept = x.generic1(
      {n}, 0, {{group, {0}}},
      {tensor::EmptyOp::create(rewriter, loc, ArrayRef<int64_t>{n}, endElement),
       {0}},
      [&](OpBuilder &b, Location l, ValueRange args) {
        Value expert = args[0];
        Value zero = Expander::constantInt(b, l, 0, endElement);
        Value one = Expander::constantInt(b, l, 1, endElement);
        Value valid = arith::CmpIOp::create(
            b, l, arith::CmpIPredicate::slt, expert,
            Expander::constantInt(b, l, experts, endElement));
        // start(e) = ends[e - 1], 0 for e == 0 (the index clamped: an
        // invalid row's E - 1 is in range, and its start is not used).
        Value previous = arith::MaxSIOp::create(
            b, l, arith::SubIOp::create(b, l, expert, one), zero);
        Value previousEnd = tensor::ExtractOp::create(
            b, l, firstEnds,
            ValueRange{Expander::toInt(b, l, previous, b.getIndexType())});
        Value start = arith::SelectOp::create(
            b, l,
            arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, expert, zero),
            zero, previousEnd);
        Value place = arith::SubIOp::create(
            b, l, Expander::loopIndex(b, l, 0, endElement), start);
        Value within = arith::CmpIOp::create(
            b, l, arith::CmpIPredicate::slt, place,
            Expander::constantInt(b, l, capacity, endElement));
        return arith::SelectOp::create(
            b, l, arith::AndIOp::create(b, l, valid, within), expert,
            Expander::constantInt(b, l, -1, endElement));
      });
  auto second =
      GroupByExpertOp::create(rewriter, loc, orderType, endsType, kept,
                              op.getExpertsAttr(), /*capacity=*/IntegerAttr());
  // order[q] = first order[second order[q]]. Loops: (q).
  Value firstOrder = first.getOrder();
  Value order = x.generic1(
      {n}, 0, {{second.getOrder(), {0}}},
      {tensor::EmptyOp::create(rewriter, loc, ArrayRef<int64_t>{n},
                               orderElement),
       {0}},
      [&](OpBuilder &b, Location l, ValueRange args) {
        Value at = Expander::toInt(b, l, args[0], b.getIndexType());
        return tensor::ExtractOp::create(b, l, firstOrder, ValueRange{at})
            .getResult();
      });
  rewriter.replaceOp(op, {order, second.getEnds()});
}

/// Whether libdcrt's routing call for `op` takes its element types: f32,
/// bf16 and f16 floats (the index operands are always i32 or i64).
bool hasLibraryTypes(Operation *op) {
  return llvm::all_of(op->getOperandTypes(), [](Type type) {
    Type element = cast<ShapedType>(type).getElementType();
    return !isa<FloatType>(element) || element.isF32() || element.isBF16() ||
           element.isF16();
  });
}

struct ExpandExpertsPass
    : public dc::impl::DCExpandExpertsBase<ExpandExpertsPass> {
  using DCExpandExpertsBase::DCExpandExpertsBase;

  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    // Capacities first, on every target: what they become is plain
    // groupings and linalg, expanded below like the rest.
    SmallVector<GroupByExpertOp> capacities;
    getOperation().walk([&](GroupByExpertOp op) {
      if (op.getCapacity())
        capacities.push_back(op);
    });
    for (GroupByExpertOp op : capacities) {
      rewriter.setInsertionPoint(op);
      expandCapacity(rewriter, op);
    }
    SmallVector<Operation *> ops;
    getOperation().walk([&](Operation *op) {
      if (isa<TopKOp, GroupByExpertOp, GatherRowsOp, ScatterAddRowsOp,
              GroupedMatmulOp, GroupedWeightGradOp>(op) &&
          !(keepLibraryTypes && hasLibraryTypes(op)))
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      rewriter.setInsertionPoint(op);
      TypeSwitch<Operation *>(op)
          .Case<TopKOp, GroupByExpertOp, GatherRowsOp, ScatterAddRowsOp,
                GroupedMatmulOp, GroupedWeightGradOp>(
              [&](auto typed) { expand(rewriter, typed); });
    }
  }
};

} // namespace
