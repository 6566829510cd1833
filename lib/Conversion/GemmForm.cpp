//===- GemmForm.cpp - which linalg ops are library matrix products --------===//
#include "GemmForm.h"

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

/// True if `map` is exactly (d_first, d_second) after the leading batch
/// results (`lead` of them, d0 .. d(lead-1)).
bool isPair(AffineMap map, unsigned lead, unsigned first, unsigned second) {
  if (map.getNumResults() != lead + 2)
    return false;
  for (unsigned i = 0; i < lead; ++i)
    if (map.getResult(i) != getAffineDimExpr(i, map.getContext()))
      return false;
  return map.getResult(lead) == getAffineDimExpr(first, map.getContext()) &&
         map.getResult(lead + 1) == getAffineDimExpr(second, map.getContext());
}

} // namespace

std::optional<dc::GemmForm> dc::getGemmForm(Operation *op) {
  bool batched = isa<linalg::BatchMatmulOp>(op);
  if (!batched && !isa<linalg::MatmulOp>(op))
    return std::nullopt;
  auto linalgOp = cast<linalg::LinalgOp>(op);
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

  // Loop dims: [b,] m, n, k.
  unsigned lead = batched ? 1 : 0;
  unsigned m = lead, n = lead + 1, k = lead + 2;
  SmallVector<AffineMap> maps = linalgOp.getIndexingMapsArray();
  if (maps.size() != 3 || maps[0].getNumDims() != lead + 3 ||
      !isPair(maps[2], lead, m, n))
    return std::nullopt;
  GemmForm form;
  form.batched = batched;
  if (isPair(maps[0], lead, m, k))
    form.transA = false;
  else if (isPair(maps[0], lead, k, m))
    form.transA = true;
  else
    return std::nullopt;
  if (isPair(maps[1], lead, k, n))
    form.transB = false;
  else if (isPair(maps[1], lead, n, k))
    form.transB = true;
  else
    return std::nullopt;
  SmallVector<int64_t> ranges = linalgOp.getStaticLoopRanges();
  form.batch = batched ? ranges[0] : 1;
  form.m = ranges[m];
  form.n = ranges[n];
  form.k = ranges[k];
  if (form.batch < 1 || form.m < 1 || form.n < 1 || form.k < 1)
    return std::nullopt;
  return form;
}
