//===- BufferAccess.cpp - Which buffers an op may read or write ---------- ===//
#include "MapToGPUInternals.h"

namespace dc::map_to_gpu {

Extent getExtent(Value value) {
  Extent extent;
  int byteViews = 0;
  while (auto view = value.getDefiningOp<ViewLikeOpInterface>()) {
    if (auto byteView = dyn_cast<memref::ViewOp>(view.getOperation())) {
      ++byteViews;
      MemRefType type = byteView.getType();
      std::optional<int64_t> shift =
          getConstantIntValue(byteView.getByteShift());
      if (shift && type.hasStaticShape() &&
          type.getElementType().isIntOrFloat()) {
        extent.begin = *shift;
        extent.end =
            *shift + type.getNumElements() *
                         llvm::divideCeil(type.getElementTypeBitWidth(), 8);
      }
    }
    value = view.getViewSource();
  }
  if (byteViews > 1)
    extent = Extent();
  extent.root = value;
  return extent;
}

/// True unless `a` and `b` provably reach disjoint memory: different
/// buffers, or disjoint ranges of one (dc-assign-step-arena gives buffers
/// that are live at the same time disjoint ranges of the arena).
bool mayAlias(Value a, Value b) {
  Extent x = getExtent(a), y = getExtent(b);
  return x.root == y.root && x.begin < y.end && y.begin < x.end;
}

/// True when `a` and `b` are provably the same memory laid out the same
/// way: row r of one is row r of the other. Two buffers of the step arena
/// that overlap at different offsets (a dead buffer's bytes reused for
/// another) are not: row r of one lands on another row of the other.
bool sameLayout(Value a, Value b) {
  if (a == b)
    return true;
  Extent x = getExtent(a), y = getExtent(b);
  bool known = x.end != std::numeric_limits<int64_t>::max() &&
               y.end != std::numeric_limits<int64_t>::max();
  return known && x.root == y.root && x.begin == y.begin && x.end == y.end &&
         a.getType() == b.getType();
}

/// True when `op` may read or write `buffer` or memory it overlaps.
bool mayTouch(Operation *op, Value buffer) {
  return llvm::any_of(op->getOperands(), [&](Value operand) {
    return isa<BaseMemRefType>(operand.getType()) && mayAlias(operand, buffer);
  });
}

/// True when `op` or any op nested in it (a linalg body reading a buffer
/// it captures) may read or write `buffer` or memory it overlaps.
bool mayTouchNested(Operation *op, Value buffer) {
  bool touches = false;
  op->walk([&](Operation *nested) {
    touches = touches || mayTouch(nested, buffer);
    return touches ? WalkResult::interrupt() : WalkResult::advance();
  });
  return touches;
}

/// True for what a step's host code holds between two kernels without
/// touching memory itself: --profile-ops' hooks, views, constants (each may
/// still name a buffer: callers check what it touches).
bool isHookOrView(Operation *op) {
  return isa<LLVM::CallOp, LLVM::AddressOfOp, LLVM::GEPOp, ViewLikeOpInterface,
             arith::ConstantOp>(op);
}

} // namespace dc::map_to_gpu
