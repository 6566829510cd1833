//===- WriteOutputsInPlace.cpp - outputs into their copies' views ------===//
//
// An op output that is only copied into a view of another buffer (a fused
// attention's dq, dk, dv, or a rotary embedding's backward, into the fused
// q/k/v gradient) is written there directly. See Passes.td.
//
//===----------------------------------------------------------------------===//
#include "dc/GPU/Passes.h"

#include "dc/Dialect/DC/IR/DCDialect.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace dc {
#define GEN_PASS_DEF_DCWRITEOUTPUTSINPLACE
#include "dc/GPU/Passes.h.inc"
} // namespace dc

using namespace mlir;
using namespace dc;

namespace {

/// The buffer `value` is a view of (itself if none).
Value getViewRoot(Value value) {
  while (auto view = value.getDefiningOp<ViewLikeOpInterface>())
    value = view.getViewSource();
  return value;
}

/// True if the unit-stride static subviews `a` and `b` of one buffer
/// cover no common element (their ranges are apart in some dim).
bool areDisjoint(memref::SubViewOp a, memref::SubViewOp b) {
  if (!a.hasUnitStride() || !b.hasUnitStride() ||
      ShapedType::isDynamicShape(a.getStaticOffsets()) ||
      ShapedType::isDynamicShape(b.getStaticOffsets()) ||
      ShapedType::isDynamicShape(a.getStaticSizes()) ||
      ShapedType::isDynamicShape(b.getStaticSizes()))
    return false;
  for (auto [offA, sizeA, offB, sizeB] :
       llvm::zip(a.getStaticOffsets(), a.getStaticSizes(), b.getStaticOffsets(),
                 b.getStaticSizes()))
    if (offA + sizeA <= offB || offB + sizeB <= offA)
      return true;
  return false;
}

/// What forwarding output `output` of `op` needs: the copy that reads it
/// (through `collapse`, if any) into `target`, a static subview of the
/// allocation `root`.
struct Forwarding {
  memref::AllocOp output;
  memref::CollapseShapeOp collapse;
  memref::CopyOp copy;
  memref::SubViewOp target;
  memref::AllocOp root;
};

/// The subview an output already forwarded into a buffer writes (the
/// output is it, or it expanded), if any.
memref::SubViewOp getForwardedSubview(Value output) {
  if (auto expand = output.getDefiningOp<memref::ExpandShapeOp>())
    output = expand.getSrc();
  return output.getDefiningOp<memref::SubViewOp>();
}

/// Whether an op nested in `op` (not `op` itself) reads or writes a view
/// of `root`: a body that loads from a captured buffer.
bool bodyTouches(Operation *op, Value root) {
  WalkResult found = op->walk([&](Operation *inner) {
    if (inner == op)
      return WalkResult::advance();
    for (Value operand : inner->getOperands())
      if (getViewRoot(operand) == root)
        return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return found.wasInterrupted();
}

/// The forwarding of `value`, one of `op`'s outputs `outputs` (written,
/// never read), if it is safe.
std::optional<Forwarding> getForwarding(Operation *op, ValueRange outputs,
                                        Value value) {
  Forwarding f;
  f.output = value.getDefiningOp<memref::AllocOp>();
  if (!f.output || !f.output->getOperands().empty() ||
      f.output->getBlock() != op->getBlock())
    return std::nullopt;
  // Users: op (once) and one copy, maybe through one collapse_shape.
  Operation *other = nullptr;
  for (Operation *user : f.output->getUsers()) {
    if (user == op)
      continue;
    if (other)
      return std::nullopt;
    other = user;
  }
  if (llvm::count(op->getOperands(), value) != 1 || !other)
    return std::nullopt;
  if ((f.collapse = dyn_cast<memref::CollapseShapeOp>(other))) {
    if (!f.collapse->hasOneUse())
      return std::nullopt;
    other = *f.collapse->getUsers().begin();
  }
  f.copy = dyn_cast<memref::CopyOp>(other);
  Value source = f.collapse ? f.collapse.getResult() : value;
  if (!f.copy || f.copy.getSource() != source ||
      f.copy->getBlock() != op->getBlock() || !op->isBeforeInBlock(f.copy))
    return std::nullopt;
  f.target = f.copy.getTarget().getDefiningOp<memref::SubViewOp>();
  if (!f.target)
    return std::nullopt;
  f.root = f.target.getSource().getDefiningOp<memref::AllocOp>();
  if (!f.root || !f.root->getOperands().empty() ||
      f.root->getBlock() != op->getBlock())
    return std::nullopt;
  // The op does not read the root (it may write other outputs into it, apart
  // from the target), and between the op and the copy the root is only
  // viewed or copied into subviews apart from the target.
  if (bodyTouches(op, f.root.getResult()))
    return std::nullopt;
  for (Value operand : op->getOperands()) {
    if (getViewRoot(operand) != f.root.getResult())
      continue;
    memref::SubViewOp written = getForwardedSubview(operand);
    if (!llvm::is_contained(outputs, operand) || !written ||
        written.getSource() != f.root.getResult() ||
        !areDisjoint(written, f.target))
      return std::nullopt;
  }
  for (Operation *between = op->getNextNode(); between != f.copy;
       between = between->getNextNode()) {
    for (Value operand : between->getOperands()) {
      if (getViewRoot(operand) != f.root.getResult() ||
          isa<ViewLikeOpInterface>(between))
        continue;
      auto copy = dyn_cast<memref::CopyOp>(between);
      auto subview = copy ? copy.getTarget().getDefiningOp<memref::SubViewOp>()
                          : memref::SubViewOp();
      if (!copy || operand != copy.getTarget() || !subview ||
          subview.getSource() != f.root.getResult() ||
          !areDisjoint(subview, f.target))
        return std::nullopt;
    }
    // A body could touch the root through a captured view.
    if (bodyTouches(between, f.root.getResult()))
      return std::nullopt;
  }
  return f;
}

/// Writes `f.output`'s data where `f`'s copy put it: the target subview
/// (expanded back to the output's shape) becomes `op`'s operand, returned.
Value forward(Operation *op, Forwarding f) {
  if (op->isBeforeInBlock(f.root))
    f.root->moveBefore(op);
  OpBuilder builder(op);
  Location loc = f.target.getLoc();
  Value view = memref::SubViewOp::create(
      builder, loc, f.root.getResult(), f.target.getMixedOffsets(),
      f.target.getMixedSizes(), f.target.getMixedStrides());
  if (f.collapse)
    view = memref::ExpandShapeOp::create(builder, loc,
                                         f.output.getType().getShape(), view,
                                         f.collapse.getReassociationIndices());
  op->replaceUsesOfWith(f.output.getResult(), view);
  f.copy->erase();
  if (f.collapse)
    f.collapse->erase();
  if (f.target->use_empty())
    f.target->erase();
  f.output->erase();
  return view;
}

struct WriteOutputsInPlacePass
    : public dc::impl::DCWriteOutputsInPlaceBase<WriteOutputsInPlacePass> {
  void runOnOperation() override {
    SmallVector<std::pair<Operation *, SmallVector<Value>>> candidates;
    getOperation()->walk([&](Operation *op) {
      // The bshd forms take strided outputs; lse stays dense.
      if (auto fwd = dyn_cast<AttentionIntoOp>(op); fwd && fwd.getBshd())
        candidates.push_back({op, {fwd.getO()}});
      if (auto bwd = dyn_cast<AttentionGradIntoOp>(op); bwd && bwd.getBshd())
        candidates.push_back({op, {bwd.getDq(), bwd.getDk(), bwd.getDv()}});
      // An elementwise op whose outputs are only written (a rotary
      // embedding's backward): each output element is one iteration's, so
      // any strided view takes them.
      if (auto generic = dyn_cast<linalg::GenericOp>(op);
          generic && generic.hasPureBufferSemantics() &&
          generic.getNumLoops() == generic.getNumParallelLoops()) {
        SmallVector<Value> inits;
        for (OpOperand &init : generic.getDpsInitsMutable())
          if (!generic.payloadUsesValueFromOperand(&init) &&
              !llvm::is_contained(generic.getDpsInputs(), init.get()))
            inits.push_back(init.get());
        if (static_cast<int64_t>(inits.size()) == generic.getNumDpsInits())
          candidates.push_back({op, inits});
      }
    });
    for (auto &[op, outputs] : candidates)
      for (auto [i, output] : llvm::enumerate(outputs))
        if (std::optional<Forwarding> f = getForwarding(op, outputs, output))
          outputs[i] = forward(op, *f);
  }
};

} // namespace
