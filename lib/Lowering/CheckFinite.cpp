//===- CheckFinite.cpp - dc.check_finite after each compute op ------------===//
//
// For people whose model diverges: after each op that computes into memory
// (a kernel launch, a loop nest, a library call), a check of every float
// buffer it wrote, named by the op's location, so that the runtime can say
// which op made the first NaN or infinity of a step.
//
//===----------------------------------------------------------------------===//
#include "dc/Lowering/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/Utils/MemRefUtils.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace dc {
#define GEN_PASS_DEF_DCCHECKFINITE
#include "dc/Lowering/Passes.h.inc"
} // namespace dc

using namespace mlir;

namespace {

/// Ops that compute values into memory. Fills and copies only move or
/// repeat values some other op made (or a constant): a NaN they hold came
/// from there.
bool computes(Operation *op) {
  if (isa<gpu::LaunchOp, dc::AttentionIntoOp, dc::AttentionGradIntoOp,
          dc::TopKIntoOp, dc::GatherRowsIntoOp, dc::ScatterAddRowsIntoOp,
          dc::GroupedMatmulIntoOp, dc::GroupedWeightGradIntoOp>(op))
    return true;
  return isa<linalg::LinalgOp>(op) && !isa<linalg::FillOp, linalg::CopyOp>(op);
}

/// The buffers defined outside `op` that `op` writes: its operands with a
/// write effect, and for a launch the buffers its body stores into, seen
/// through the views the body takes of them.
SetVector<Value> writtenBuffers(Operation *op) {
  SetVector<Value> written;
  auto inside = [&](Value value) {
    Operation *owner = value.getDefiningOp();
    if (!owner)
      owner = value.getParentRegion()->getParentOp();
    return op->isAncestor(owner);
  };
  auto addWrites = [&](Operation *inner) {
    auto effects = dyn_cast<MemoryEffectOpInterface>(inner);
    if (!effects)
      return;
    SmallVector<MemoryEffects::EffectInstance> instances;
    effects.getEffects(instances);
    for (const MemoryEffects::EffectInstance &effect : instances) {
      Value value = effect.getValue();
      if (!value || !isa<MemoryEffects::Write>(effect.getEffect()) ||
          !isa<MemRefType>(value.getType()))
        continue;
      while (inside(value)) {
        auto view = value.getDefiningOp<ViewLikeOpInterface>();
        if (!view)
          break;
        value = view.getViewSource();
      }
      if (!inside(value))
        written.insert(value);
    }
  };
  if (isa<gpu::LaunchOp>(op))
    op->walk(addWrites);
  else
    addWrites(op);
  return written;
}

/// Whether `op` (or its body) uses an infinite constant: a mask's -inf or a
/// maximum's identity. Its outputs may then hold infinities on purpose, and
/// only NaN counts.
bool usesInfinity(Operation *op) {
  auto infinite = [](Value value) {
    Attribute attr;
    if (!matchPattern(value, m_Constant(&attr)))
      return false;
    if (auto splat = dyn_cast<SplatElementsAttr>(attr))
      attr = splat.getSplatValue<Attribute>();
    auto number = dyn_cast<FloatAttr>(attr);
    return number && number.getValue().isInfinity();
  };
  WalkResult found = op->walk([&](Operation *inner) {
    for (Value operand : inner->getOperands())
      if (infinite(operand))
        return WalkResult::interrupt();
    for (Value result : inner->getResults())
      if (infinite(result))
        return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return found.wasInterrupted();
}

/// "names at file:line" from an op's location: the PyTorch frontend's
/// `loc("pow_4 (backward: PowBackward0)"("model.py":40:0))`, fused ones
/// listed; any other location as MLIR prints it.
std::string describe(Location loc) {
  SmallVector<std::string> names;
  std::optional<std::string> place;
  loc->walk([&](Location inner) {
    if (auto name = dyn_cast<NameLoc>(inner)) {
      if (!llvm::is_contained(names, name.getName().str()))
        names.push_back(name.getName().str());
    } else if (auto file = dyn_cast<FileLineColLoc>(inner); file && !place) {
      place =
          (file.getFilename().getValue() + ":" + Twine(file.getLine())).str();
    }
    return WalkResult::advance();
  });
  std::string text = llvm::join(names, ", ");
  if (place)
    text += (text.empty() ? "" : " at ") + *place;
  if (text.empty()) {
    llvm::raw_string_ostream os(text);
    os << loc;
  }
  return text;
}

struct CheckFinitePass : public dc::impl::DCCheckFiniteBase<CheckFinitePass> {
  void runOnOperation() override {
    for (auto fn : getOperation().getOps<func::FuncOp>()) {
      if (fn.isExternal() || !fn.isPublic())
        continue;
      SmallVector<Operation *> ops;
      fn.walk<WalkOrder::PreOrder>([&](Operation *op) {
        if (computes(op)) {
          ops.push_back(op);
          return WalkResult::skip();
        }
        return isa<linalg::LinalgOp>(op) ? WalkResult::skip()
                                         : WalkResult::advance();
      });
      OpBuilder builder(&getContext());
      for (Operation *op : ops) {
        std::string what = isa<gpu::LaunchOp>(op)
                               ? std::string("kernel")
                               : op->getName().getStringRef().str();
        std::string site =
            (fn.getName() + ": " + what + " of " + describe(op->getLoc()))
                .str();
        bool allowInf = usesInfinity(op);
        builder.setInsertionPointAfter(op);
        for (Value buffer : writtenBuffers(op)) {
          auto type = cast<MemRefType>(buffer.getType());
          Type element = type.getElementType();
          // Strided views (a column slice) and non-float outputs are not
          // checked; nor is memory outside the device's.
          if (!(element.isF32() || element.isBF16() || element.isF16()) ||
              !type.hasStaticShape() || type.getMemorySpace() ||
              !memref::isStaticShapeAndContiguousRowMajor(type))
            continue;
          dc::CheckFiniteOp::create(builder, op->getLoc(), buffer,
                                    builder.getStringAttr(site), allowInf);
        }
      }
    }
  }
};

} // namespace
