//===- SplitColumnReductions.cpp - column reductions in chunks ------------===//
//
// A reduction across rows with few columns (a norm's weight gradient) gives
// dc-map-to-gpu too few blocks to keep an H200's memory busy. Splitting its
// rows into contiguous chunks (upstream linalg::splitReduction) multiplies
// the blocks by the chunk count; a short second reduction folds the chunks'
// partials. See Passes.td.
//
//===----------------------------------------------------------------------===//
#include "dc/Conversion/Passes.h"

#include "ColumnReductionShape.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/IndexingUtils.h"
#include "mlir/IR/PatternMatch.h"

namespace dc {
#define GEN_PASS_DEF_DCSPLITCOLUMNREDUCTIONS
#include "dc/Conversion/Passes.h.inc"
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

struct SplitColumnReductionsPass
    : public dc::impl::DCSplitColumnReductionsBase<SplitColumnReductionsPass> {
  using DCSplitColumnReductionsBase::DCSplitColumnReductionsBase;

  /// How many chunks to split `op`'s rows into (1: leave it whole).
  int64_t getChunks(linalg::LinalgOp op) const {
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
        llvm::divideCeilSigned(points, kColumnsPerBlock) >= minBlocks)
      return 1;
    int64_t chunks = 1;
    while (chunks * 2 <= maxChunks && rows % (chunks * 2) == 0 &&
           rows / (chunks * 2) >= rowsPerChunk)
      chunks *= 2;
    return chunks;
  }

  void runOnOperation() override {
    SmallVector<linalg::LinalgOp> candidates;
    getOperation()->walk([&](linalg::LinalgOp op) {
      if (getChunks(op) > 1)
        candidates.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (linalg::LinalgOp op : candidates) {
      int64_t chunks = getChunks(op);
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
      (void)linalg::splitReduction(rewriter, op, control);
    }
  }
};

} // namespace
