//===- SplitColumnReductions.cpp - column reductions in chunks ------------===//
//
// A reduction across rows with few columns (a norm's weight gradient) gives
// dc-map-to-gpu too few blocks to keep an H200's memory busy. Splitting its
// rows into contiguous chunks (upstream linalg::splitReduction) multiplies
// the blocks by the chunk count; a short second reduction folds the chunks'
// partials. See Passes.td.
//
//===----------------------------------------------------------------------===//
#include "dc/GPU/Passes.h"

#include "ColumnReductionShape.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/IndexingUtils.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace dc {
#define GEN_PASS_DEF_DCSPLITCOLUMNREDUCTIONS
#include "dc/GPU/Passes.h.inc"
} // namespace dc

using namespace mlir;
using dc::kColumnsPerBlock;

namespace {

/// The loop of `op`'s one reduction, if some input reads it across rows
/// (not as its innermost dim): a column reduction. Row reductions, which
/// read along contiguous rows, get a block per row already.
std::optional<unsigned> getColumnReductionLoop(linalg::LinalgOp op) {
  SmallVector<unsigned> reductions;
  op.getReductionDims(reductions);
  if (reductions.size() != 1 || op.getNumDpsInits() != 1 ||
      !op.hasPureTensorSemantics())
    return std::nullopt;
  unsigned loop = reductions.front();
  AffineExpr dim = getAffineDimExpr(loop, op.getContext());
  for (OpOperand *input : op.getDpsInputOperands()) {
    AffineMap map = op.getMatchingIndexingMap(input);
    if (map.isFunctionOfDim(loop) && map.getNumResults() > 0 &&
        map.getResults().back() != dim)
      return loop;
  }
  return std::nullopt;
}

/// True if `value` is available at `point`: an argument of its block or of
/// an enclosing one, defined by an op before it in its block, or outside.
bool isDefinedBefore(Value value, Operation *point) {
  Operation *def = value.getDefiningOp();
  if (!def)
    return true;
  if (Operation *inBlock = point->getBlock()->findAncestorOpInBlock(*def))
    return inBlock->isBeforeInBlock(point);
  return true;
}

/// The row reduction that `op` (a column reduction over rows `loop` of a
/// [rows, columns] loop nest) can share its rows' loads with: the nearest
/// linalg.generic before it in its block that reduces along the rows of
/// the same [rows, columns] nest and reads one of `op`'s [rows, columns]
/// inputs at the same points (a norm backward's row sum next to its weight
/// gradient), where every input of `op` is already defined. Returns the
/// op to place the split's partial sums before: the fill of that
/// reduction's output when it comes right before it, else the reduction.
/// dc-map-to-gpu then folds the partial sums into the row group's kernel
/// (ColumnReductionShape.h). Null: none.
Operation *getRowGroupPlace(linalg::LinalgOp op, unsigned loop) {
  SmallVector<int64_t> trips = op.getStaticLoopRanges();
  if (trips.size() != 2 || loop != 0)
    return nullptr;
  MLIRContext *context = op.getContext();
  AffineMap rowsColumns = AffineMap::getMultiDimIdentityMap(2, context);
  llvm::SmallPtrSet<Value, 4> shared;
  for (OpOperand *input : op.getDpsInputOperands())
    if (op.getMatchingIndexingMap(input) == rowsColumns)
      shared.insert(input->get());
  for (Operation *previous = op->getPrevNode(); previous;
       previous = previous->getPrevNode()) {
    auto generic = dyn_cast<linalg::GenericOp>(previous);
    if (!generic || generic.getNumLoops() != 2 ||
        generic.getNumReductionLoops() != 1 ||
        !linalg::isReductionIterator(generic.getIteratorTypesArray()[1]) ||
        generic.getStaticLoopRanges() != ArrayRef<int64_t>(trips))
      continue;
    bool reads =
        llvm::any_of(generic.getDpsInputOperands(), [&](OpOperand *in) {
          return shared.contains(in->get()) &&
                 generic.getMatchingIndexingMap(in) == rowsColumns;
        });
    if (!reads)
      continue;
    // Before the fill too when only ops that are not linalg ops (views,
    // constants, --profile-ops' hooks) lie between it and the reduction:
    // dc-map-to-gpu then keeps the fill in the row group.
    Operation *place = generic;
    if (auto fill = generic.getDpsInits()[0].getDefiningOp<linalg::FillOp>();
        fill && fill->getBlock() == generic->getBlock() &&
        fill->isBeforeInBlock(generic)) {
      Operation *between = fill->getNextNode();
      while (between != generic && !isa<linalg::LinalgOp>(between))
        between = between->getNextNode();
      if (between == generic)
        place = fill;
    }
    // Only the inputs: the output stays with the second reduction.
    for (Value input : op.getDpsInputs())
      if (!isDefinedBefore(input, place))
        return nullptr;
    return place;
  }
  return nullptr;
}

/// Moves `op` before `point`, first the ops in `point`'s block that define
/// its operands after `point` (the split's expanded inputs, its fill).
void hoistBefore(Operation *op, Operation *point) {
  for (Value operand : op->getOperands())
    if (Operation *def = operand.getDefiningOp())
      if (def->getBlock() == point->getBlock() && !def->isBeforeInBlock(point))
        hoistBefore(def, point);
  op->moveBefore(point);
}

struct SplitColumnReductionsPass
    : public dc::impl::DCSplitColumnReductionsBase<SplitColumnReductionsPass> {
  using DCSplitColumnReductionsBase::DCSplitColumnReductionsBase;

  /// Blocks of 64 columns below which a reduction is split: min-blocks, or
  /// two per multiprocessor of the module's target.
  int64_t fewestBlocks = 0;

  /// How many chunks to split `op`'s rows into (1: leave it whole), and
  /// in `place` where its partial sums go to share a row group's loads.
  int64_t getChunks(linalg::LinalgOp op, Operation **place = nullptr) const {
    std::optional<unsigned> loop = getColumnReductionLoop(op);
    if (!loop)
      return 1;
    SmallVector<int64_t> trips = op.getStaticLoopRanges();
    if (ShapedType::isDynamicShape(trips))
      return 1;
    int64_t rows = trips[*loop];
    int64_t points = 1;
    for (auto [i, trip] : llvm::enumerate(trips))
      if (i != *loop)
        points *= trip;
    if (points == 0 ||
        llvm::divideCeilSigned(points, kColumnsPerBlock) >= fewestBlocks)
      return 1;
    // A reduction that dc-map-to-gpu folds into the block-per-row kernel of
    // a row reduction over the same rows (a norm's weight gradient into its
    // backward) in chunks of folded-chunk-rows rows. Each block runs a
    // chunk's rows one after another, its threads keeping their columns'
    // partial sums in registers. The default,
    // 32 rows, leaves 8192 rows 256 blocks (about 2 per SM, each
    // with two rows' loads in flight) and a 256-row second pass (run by the
    // same kernel's last 64 blocks: MapToGPU.cpp's FinishingPass). 16 rows
    // (512 blocks, 3 per SM as registers allow) make the norm backward
    // slower: a second wave for the blocks past 3 per SM, and twice the
    // partial sums; 8 rows slower still. With registers capped so that all
    // 512 fit at once (folded-blocks-per-sm=4, 128 registers) 16 rows are
    // still slower than 32 (docs/lowering.md, "Why the GPU kernels'
    // constants").
    if (Operation *partner = getRowGroupPlace(op, *loop);
        partner && rows % foldedChunkRows == 0 && rows / foldedChunkRows >= 2) {
      if (place)
        *place = partner;
      return rows / foldedChunkRows;
    }
    int64_t chunks = 1;
    while (chunks * 2 <= maxChunks && rows % (chunks * 2) == 0 &&
           rows / (chunks * 2) >= rowsPerChunk)
      chunks *= 2;
    return chunks;
  }

  void runOnOperation() override {
    if (foldedChunkRows < 1 || foldedChunkRows > dc::kMaxFoldedChunkRows) {
      getOperation()->emitError()
          << "dc-split-column-reductions: folded-chunk-rows must be 1 to "
          << dc::kMaxFoldedChunkRows << ", got " << foldedChunkRows.getValue();
      return signalPassFailure();
    }
    if (minBlocks < 0) {
      getOperation()->emitError()
          << "dc-split-column-reductions: min-blocks must be at least 0, got "
          << minBlocks.getValue();
      return signalPassFailure();
    }
    fewestBlocks = minBlocks > 0 ? minBlocks
                                 : 2 * dc::getModuleTarget(getOperation())
                                           .description.multiprocessors;
    SmallVector<linalg::LinalgOp> candidates;
    getOperation()->walk([&](linalg::LinalgOp op) {
      if (getChunks(op) > 1)
        candidates.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (linalg::LinalgOp op : candidates) {
      Operation *place = nullptr;
      int64_t chunks = getChunks(op, &place);
      rewriter.setInsertionPoint(op);
      // Chunks outermost (innerParallel = false: each chunk is a run of
      // consecutive rows) and first in the partial tensor, so the partials
      // of one chunk are written, and the second reduction reads them, as
      // contiguous rows.
      auto control = [chunks](linalg::LinalgOp) {
        return linalg::SplitReductionOptions{chunks, /*index=*/0,
                                             /*innerParallel=*/false};
      };
      // An op whose combiner splitReduction does not know stays whole:
      // splitting is only ever a speed-up.
      FailureOr<linalg::SplitReductionResult> split =
          linalg::splitReduction(rewriter, op, control);
      // The partial sums (with their inputs' views and their fill) right
      // before the row reduction that reads the same rows: its kernel can
      // then compute them too, and the step arena keeps their buffers
      // apart from the row group's for the whole kernel.
      if (failed(split) || !place)
        continue;
      // The second pass over the partial sums (a row per chunk: 256 for
      // 8192 rows) stays where it is, one reduction: dc-map-to-gpu runs it
      // at the end of the row group's kernel (FinishingPass), or as a
      // short column reduction of its own.
      hoistBefore(split->splitLinalgOp, place);
    }
  }
};

} // namespace
