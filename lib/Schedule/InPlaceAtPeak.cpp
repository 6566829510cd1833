//===- InPlaceAtPeak.cpp - the peak op writes over an input it reads last -===//
//
// Writing an elementwise result over a dying input of its type saves a
// buffer only where the memory timeline peaks; there this pass hands the
// input to the op as its destination, so that One-Shot Bufferize, and the
// timeline before it, count one buffer. See Passes.td.
//
//===----------------------------------------------------------------------===//
#include "dc/Schedule/Passes.h"

#include "dc/Analysis/BufferAliasing.h"
#include "dc/Analysis/MemoryTimeline.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

namespace dc {
#define GEN_PASS_DEF_DCINPLACEATPEAK
#include "dc/Schedule/Passes.h.inc"
} // namespace dc

using namespace mlir;
using namespace dc;

namespace {

/// An (input, init) pair of `op` where the input can become the init.
struct InPlaceChoice {
  OpOperand *input = nullptr;
  OpOperand *init = nullptr;
};

/// The first input of the elementwise `op` that can take the place of an
/// init: an init that only names a shape (tensor.empty, its element unread)
/// and an input of its type, read at the points written (the same
/// permutation map), that no other operand of `op` names and whose buffer
/// nothing reads after `op` (isLastReadBeforeInPlaceWrite).
std::optional<InPlaceChoice> chooseInPlace(linalg::GenericOp op) {
  if (op.getNumParallelLoops() != op.getNumLoops() ||
      !op.hasPureTensorSemantics())
    return std::nullopt;
  Block &body = op.getRegion().front();
  for (OpOperand &init : op.getDpsInitsMutable()) {
    if (!init.get().getDefiningOp<tensor::EmptyOp>() ||
        !op.getMatchingBlockArgument(&init).use_empty())
      continue;
    AffineMap written = op.getMatchingIndexingMap(&init);
    if (!written.isPermutation())
      continue;
    for (OpOperand *input : op.getDpsInputOperands()) {
      Value value = input->get();
      if (value.getType() != init.get().getType() ||
          op.getMatchingIndexingMap(input) != written ||
          body.getArgument(input->getOperandNumber()).use_empty())
        continue;
      bool once = llvm::count_if(op->getOperands(), [&](Value operand) {
                    return operand == value;
                  }) == 1;
      if (once && isLastReadBeforeInPlaceWrite(value, op))
        return InPlaceChoice{input, &init};
    }
  }
  return std::nullopt;
}

/// `op` with `choice.input` as its init in place of `choice.init`: the
/// input's block argument becomes the init's (the body reads the element
/// it then overwrites).
void writeInPlace(IRRewriter &rewriter, linalg::GenericOp op,
                  const InPlaceChoice &choice) {
  unsigned inputNumber = choice.input->getOperandNumber();
  unsigned initNumber = choice.init->getOperandNumber();
  SmallVector<Value> inputs, inits;
  SmallVector<AffineMap> maps;
  for (OpOperand *input : op.getDpsInputOperands())
    if (input->getOperandNumber() != inputNumber) {
      inputs.push_back(input->get());
      maps.push_back(op.getMatchingIndexingMap(input));
    }
  for (OpOperand &init : op.getDpsInitsMutable()) {
    inits.push_back(init.getOperandNumber() == initNumber ? choice.input->get()
                                                          : init.get());
    maps.push_back(op.getMatchingIndexingMap(&init));
  }
  rewriter.setInsertionPoint(op);
  auto replacement = linalg::GenericOp::create(
      rewriter, op.getLoc(), op.getResultTypes(), inputs, inits, maps,
      op.getIteratorTypesArray());
  replacement->setDiscardableAttrs(op->getDiscardableAttrDictionary());
  rewriter.inlineRegionBefore(op.getRegion(), replacement.getRegion(),
                              replacement.getRegion().end());
  Block &body = replacement.getRegion().front();
  body.getArgument(inputNumber)
      .replaceAllUsesWith(body.getArgument(initNumber));
  body.eraseArgument(inputNumber);
  Operation *empty = choice.init->get().getDefiningOp();
  rewriter.replaceOp(op, replacement->getResults());
  if (empty->use_empty())
    rewriter.eraseOp(empty);
}

struct InPlaceAtPeakPass
    : public dc::impl::DCInPlaceAtPeakBase<InPlaceAtPeakPass> {
  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    for (auto fn : getOperation().getOps<func::FuncOp>()) {
      // A step the planners cannot plan is theirs to report.
      if (!MemoryTimeline::canCompute(fn))
        continue;
      // Each rewrite lowers the peak at its op; the next peak may be
      // another such op. Each op is rewritten at most once (its init is no
      // longer a tensor.empty), so this ends.
      while (true) {
        FailureOr<MemoryTimeline> timeline = MemoryTimeline::compute(fn);
        if (failed(timeline))
          return signalPassFailure();
        if (timeline->getOps().empty())
          break;
        auto peak = dyn_cast<linalg::GenericOp>(
            timeline->getOps()[timeline->getPeakIndex()]);
        std::optional<InPlaceChoice> choice =
            peak ? chooseInPlace(peak) : std::nullopt;
        if (!choice)
          break;
        writeInPlace(rewriter, peak, *choice);
      }
    }
  }
};

} // namespace
