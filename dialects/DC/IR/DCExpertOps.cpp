//===- DCExpertOps.cpp - mixture-of-experts routing ops -------------------===//
#include "dc/Dialect/DC/IR/DCDialect.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;
using namespace dc;

static std::string shapeString(ArrayRef<int64_t> shape) {
  std::string text = "[";
  llvm::raw_string_ostream os(text);
  llvm::interleave(shape, os, ", ");
  os << "]";
  return text;
}

/// `value` is `[expected...]` with element type `element`; `what` names it
/// in the error.
static LogicalResult verifyShaped(Operation *op, Value value,
                                  ArrayRef<int64_t> expected, Type element,
                                  StringRef what) {
  auto type = cast<ShapedType>(value.getType());
  if (type.getShape() != expected)
    return op->emitOpError() << what << " must be " << shapeString(expected)
                             << ", got " << shapeString(type.getShape());
  if (element && type.getElementType() != element)
    return op->emitOpError() << what << " must have element type " << element
                             << ", got " << type.getElementType();
  return success();
}

static ArrayRef<int64_t> shapeOf(Value value) {
  return cast<ShapedType>(value.getType()).getShape();
}

static Type elementOf(Value value) {
  return cast<ShapedType>(value.getType()).getElementType();
}

static LogicalResult verifyRank(Operation *op, Value value, int64_t rank,
                                StringRef what) {
  int64_t actual = cast<ShapedType>(value.getType()).getRank();
  if (actual != rank)
    return op->emitOpError()
           << what << " must have rank " << rank << ", got " << actual;
  return success();
}

/// The shape rules each op and its buffer form share: the tensor op's
/// operands, then its results (the buffer form's outputs).
static LogicalResult verifyTopK(Operation *op, Value scores, int64_t k,
                                Value values, Value indices) {
  ArrayRef<int64_t> shape = shapeOf(scores);
  if (shape.empty())
    return op->emitOpError("scores must have rank >= 1 (top-k runs along the "
                           "last dim)");
  if (k < 1 || k > shape.back())
    return op->emitOpError()
           << "k = " << k << " must be in [1, " << shape.back()
           << "] (the size of the scores' last dim)";
  SmallVector<int64_t> expected(shape);
  expected.back() = k;
  if (failed(verifyShaped(op, values, expected, elementOf(scores),
                          "values (the scores' shape with k last)")))
    return failure();
  return verifyShaped(op, indices, expected, Type(),
                      "indices (the shape of values)");
}

LogicalResult TopKOp::verify() {
  return verifyTopK(*this, getScores(), getK(), getValues(), getIndices());
}

LogicalResult TopKIntoOp::verify() {
  // The runtime reads rows of scores with one stride: a view of rank 3 or
  // more has several.
  if (getScores().getType().getRank() > 2 &&
      !isDeviceBuffer(getScores().getType()))
    return emitOpError("scores of rank > 2 must be a dense buffer (one row "
                       "stride for every row)");
  return verifyTopK(*this, getScores(), getK(), getValues(), getIndices());
}

static LogicalResult verifyGroupByExpert(Operation *op, Value ids,
                                         int64_t experts, Value order,
                                         Value ends) {
  if (experts < 1)
    return op->emitOpError() << "experts = " << experts << " must be >= 1";
  int64_t assignments = cast<ShapedType>(ids.getType()).getNumElements();
  if (failed(verifyShaped(op, order, {assignments}, Type(),
                          "order (one entry per id)")))
    return failure();
  return verifyShaped(op, ends, {experts}, Type(),
                      "ends (one entry per expert)");
}

LogicalResult GroupByExpertOp::verify() {
  if (std::optional<int64_t> capacity = getCapacity();
      capacity && *capacity < 1)
    return emitOpError() << "capacity = " << *capacity
                         << " must be >= 1 (each expert keeps at most that "
                            "many assignments)";
  return verifyGroupByExpert(*this, getIds(), getExperts(), getOrder(),
                             getEnds());
}

LogicalResult GroupByExpertIntoOp::verify() {
  return verifyGroupByExpert(*this, getIds(), getExperts(), getOrder(),
                             getEnds());
}

/// The shared shape rule of dc.gather_rows and dc.scatter_add_rows: `rows`
/// rows of `from` become rows of `to`, the rest of the shape unchanged.
static LogicalResult verifyRowMap(Operation *op, Value from, Value index,
                                  Value to, StringRef indexRule) {
  if (failed(verifyRank(op, index, 1, "index")))
    return failure();
  ArrayRef<int64_t> fromShape = shapeOf(from), toShape = shapeOf(to);
  if (fromShape.empty())
    return op->emitOpError("source must have rank >= 1 (rows first)");
  if (elementOf(from) != elementOf(to))
    return op->emitOpError() << "result must have the source's element type "
                             << elementOf(from) << ", got " << elementOf(to);
  if (toShape.size() != fromShape.size() ||
      toShape.drop_front() != fromShape.drop_front())
    return op->emitOpError()
           << "result must be [rows, " << shapeString(fromShape.drop_front())
           << "...] like the source, got " << shapeString(toShape);
  int64_t indexed = shapeOf(index).front();
  if (indexed != (indexRule == "result" ? toShape : fromShape).front())
    return op->emitOpError()
           << "index has " << indexed << " entries; it must have one per "
           << indexRule << " row";
  return success();
}

LogicalResult GatherRowsOp::verify() {
  return verifyRowMap(*this, getSource(), getIndex(), getResult(), "result");
}

LogicalResult ScatterAddRowsOp::verify() {
  return verifyRowMap(*this, getSource(), getIndex(), getResult(), "source");
}

LogicalResult GatherRowsIntoOp::verify() {
  return verifyRowMap(*this, getSource(), getIndex(), getResult(), "result");
}

LogicalResult ScatterAddRowsIntoOp::verify() {
  return verifyRowMap(*this, getSource(), getIndex(), getResult(), "source");
}

/// The ranks and element types both grouped products share: `lhs` rows
/// [N, K], `rhs` of `rhsRank` with lhs's element type, one `ends` per
/// expert.
static LogicalResult verifyGroupedOperands(Operation *op, Value lhs, Value rhs,
                                           Value ends, int64_t rhsRank) {
  if (failed(verifyRank(op, lhs, 2, "lhs")) ||
      failed(verifyRank(op, rhs, rhsRank, "rhs")) ||
      failed(verifyRank(op, ends, 1, "ends")))
    return failure();
  if (elementOf(rhs) != elementOf(lhs))
    return op->emitOpError() << "rhs must have lhs's element type "
                             << elementOf(lhs) << ", got " << elementOf(rhs);
  return success();
}

static LogicalResult verifyGroupedMatmul(Operation *op, Value lhsValue,
                                         Value rhsValue, Value ends,
                                         bool transposeRhs, Value result) {
  if (failed(verifyGroupedOperands(op, lhsValue, rhsValue, ends, 3)))
    return failure();
  ArrayRef<int64_t> lhs = shapeOf(lhsValue), rhs = shapeOf(rhsValue);
  if (shapeOf(ends).front() != rhs[0])
    return op->emitOpError()
           << "ends has " << shapeOf(ends).front()
           << " entries; it must have one per expert of rhs (" << rhs[0] << ")";
  int64_t reduced = transposeRhs ? rhs[2] : rhs[1];
  int64_t columns = transposeRhs ? rhs[1] : rhs[2];
  if (reduced != lhs[1])
    return op->emitOpError()
           << "rhs's " << (transposeRhs ? "last" : "middle") << " dim ("
           << reduced << ") must equal lhs's columns (" << lhs[1] << ")";
  return verifyShaped(op, result, {lhs[0], columns}, elementOf(lhsValue),
                      "result ([lhs rows, rhs columns])");
}

LogicalResult GroupedMatmulOp::verify() {
  return verifyGroupedMatmul(*this, getLhs(), getRhs(), getEnds(),
                             getTransposeRhs(), getResult());
}

LogicalResult GroupedMatmulIntoOp::verify() {
  return verifyGroupedMatmul(*this, getLhs(), getRhs(), getEnds(),
                             getTransposeRhs(), getResult());
}

static LogicalResult verifyGroupedWeightGrad(Operation *op, Value lhsValue,
                                             Value rhsValue, Value ends,
                                             Value result) {
  if (failed(verifyGroupedOperands(op, lhsValue, rhsValue, ends, 2)))
    return failure();
  ArrayRef<int64_t> lhs = shapeOf(lhsValue), rhs = shapeOf(rhsValue);
  if (lhs[0] != rhs[0])
    return op->emitOpError() << "lhs and rhs must have the same rows, got "
                             << lhs[0] << " and " << rhs[0];
  return verifyShaped(op, result, {shapeOf(ends).front(), lhs[1], rhs[1]},
                      elementOf(lhsValue),
                      "result ([experts, lhs columns, rhs columns])");
}

LogicalResult GroupedWeightGradOp::verify() {
  return verifyGroupedWeightGrad(*this, getLhs(), getRhs(), getEnds(),
                                 getResult());
}

LogicalResult GroupedWeightGradIntoOp::verify() {
  return verifyGroupedWeightGrad(*this, getLhs(), getRhs(), getEnds(),
                                 getResult());
}

//===----------------------------------------------------------------------===//
// Work, for the cost model: what a kernel of each op does, whatever the
// routing (the reference expansion into linalg does more).
//===----------------------------------------------------------------------===//

static double elementsOf(Value value) {
  return static_cast<double>(
      cast<ShapedType>(value.getType()).getNumElements());
}

/// k passes over each row, one comparison per entry.
double TopKOp::getFlops() {
  return elementsOf(getScores()) * static_cast<double>(getK());
}

/// A counting sort: count, sum the counts, place.
double GroupByExpertOp::getFlops() {
  return 3 * elementsOf(getIds()) + static_cast<double>(getExperts());
}

/// Copies: no arithmetic.
double GatherRowsOp::getFlops() { return 0; }

/// One addition per source element.
double ScatterAddRowsOp::getFlops() { return elementsOf(getSource()); }

/// One [N, K] x [K, P] product, split among the experts.
double GroupedMatmulOp::getFlops() {
  return 2 * elementsOf(getLhs()) *
         static_cast<double>(
             cast<ShapedType>(getResult().getType()).getShape().back());
}

Type GroupedMatmulOp::getMatmulElementType() {
  return getLhs().getType().getElementType();
}

/// [K, N] x [N, P] over all rows, split among the experts.
double GroupedWeightGradOp::getFlops() {
  return 2 * elementsOf(getLhs()) *
         static_cast<double>(
             cast<ShapedType>(getRhs().getType()).getShape().back());
}

Type GroupedWeightGradOp::getMatmulElementType() {
  return getLhs().getType().getElementType();
}
