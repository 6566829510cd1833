//===- GemmForm.cpp - which linalg ops are library matrix products --------===//
#include "dc/Lowering/GemmForm.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/AffineExpr.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

namespace {

bool isLibraryFloat(Type type) {
  return type.isF32() || type.isBF16() || type.isF16();
}

/// Static shape, strided layout whose innermost stride is 1.
bool hasContiguousRows(Type type) {
  auto memref = dyn_cast<MemRefType>(type);
  if (!memref || !memref.hasStaticShape())
    return false;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(memref.getStridesAndOffset(strides, offset)))
    return false;
  return !strides.empty() && strides.back() == 1;
}

/// True if `map` is exactly (batch..., first, second).
bool isPair(AffineMap map, ArrayRef<unsigned> batch, unsigned first,
            unsigned second) {
  if (map.getNumResults() != batch.size() + 2)
    return false;
  MLIRContext *context = map.getContext();
  for (auto [i, dim] : llvm::enumerate(batch))
    if (map.getResult(i) != getAffineDimExpr(dim, context))
      return false;
  return map.getResult(batch.size()) == getAffineDimExpr(first, context) &&
         map.getResult(batch.size() + 1) == getAffineDimExpr(second, context);
}

/// `value` is block argument `arg`, or it widened (arith.extf) to the
/// accumulator's type, as a named product's implicit cast does.
bool isInput(Value value, BlockArgument arg) {
  if (auto ext = value.getDefiningOp<arith::ExtFOp>())
    value = ext.getIn();
  return value == arg;
}

/// The body of a generic is out + a * b (operands in either order).
bool isMultiplyAccumulate(linalg::GenericOp op) {
  Block &body = op.getRegion().front();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  if (yield.getNumOperands() != 1)
    return false;
  auto add = yield.getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add)
    return false;
  BlockArgument a = body.getArgument(0), b = body.getArgument(1),
                c = body.getArgument(2);
  Value product = add.getLhs() == c ? add.getRhs() : add.getLhs();
  if (add.getLhs() != c && add.getRhs() != c)
    return false;
  auto mul = product.getDefiningOp<arith::MulFOp>();
  if (!mul)
    return false;
  return (isInput(mul.getLhs(), a) && isInput(mul.getRhs(), b)) ||
         (isInput(mul.getLhs(), b) && isInput(mul.getRhs(), a));
}

} // namespace

std::optional<dc::GemmForm> dc::getGemmForm(Operation *op) {
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  if (!linalgOp)
    return std::nullopt;
  if (auto generic = dyn_cast<linalg::GenericOp>(op)) {
    if (generic.getNumDpsInputs() != 2 || generic.getNumDpsInits() != 1 ||
        !isMultiplyAccumulate(generic))
      return std::nullopt;
  } else if (!isa<linalg::MatmulOp, linalg::BatchMatmulOp>(op)) {
    return std::nullopt;
  }
  if (!linalgOp.hasPureBufferSemantics() || linalgOp.getNumDpsInputs() != 2 ||
      linalgOp.getNumDpsInits() != 1)
    return std::nullopt;
  Value a = linalgOp.getDpsInputs()[0], b = linalgOp.getDpsInputs()[1];
  Value c = linalgOp.getDpsInits()[0];
  for (Value operand : {a, b, c})
    if (!hasContiguousRows(operand.getType()))
      return std::nullopt;
  Type aType = cast<MemRefType>(a.getType()).getElementType();
  Type bType = cast<MemRefType>(b.getType()).getElementType();
  Type cType = cast<MemRefType>(c.getType()).getElementType();
  if (aType != bType || !isLibraryFloat(aType) || !isLibraryFloat(cType))
    return std::nullopt;

  // One m, n and k dim, at most one batch dim (the library's strided batch).
  FailureOr<linalg::ContractionDimensions> dims =
      linalg::inferContractionDims(linalgOp);
  if (failed(dims) || dims->batch.size() > 1 || dims->m.size() != 1 ||
      dims->n.size() != 1 || dims->k.size() != 1 ||
      linalgOp.getNumLoops() != dims->batch.size() + 3)
    return std::nullopt;
  unsigned m = dims->m[0], n = dims->n[0], k = dims->k[0];
  SmallVector<AffineMap> maps = linalgOp.getIndexingMapsArray();
  if (!isPair(maps[2], dims->batch, m, n))
    return std::nullopt;
  GemmForm form;
  form.batched = !dims->batch.empty();
  if (isPair(maps[0], dims->batch, m, k))
    form.transA = false;
  else if (isPair(maps[0], dims->batch, k, m))
    form.transA = true;
  else
    return std::nullopt;
  if (isPair(maps[1], dims->batch, k, n))
    form.transB = false;
  else if (isPair(maps[1], dims->batch, n, k))
    form.transB = true;
  else
    return std::nullopt;
  SmallVector<int64_t> ranges = linalgOp.getStaticLoopRanges();
  form.batch = form.batched ? ranges[dims->batch[0]] : 1;
  form.m = ranges[m];
  form.n = ranges[n];
  form.k = ranges[k];
  if (form.batch < 1 || form.m < 1 || form.n < 1 || form.k < 1)
    return std::nullopt;
  return form;
}
