//===- ColumnReductionShape.h - dc-map-to-gpu's column-reduction block ---===//
//
// The shape of one column-reduction block of dc-map-to-gpu, which
// dc-split-column-reductions sizes its row chunks for: both passes must
// agree on it.
//
//===----------------------------------------------------------------------===//
#ifndef DC_LIB_CONVERSION_COLUMNREDUCTIONSHAPE_H
#define DC_LIB_CONVERSION_COLUMNREDUCTIONSHAPE_H

#include <cstdint>

namespace dc {

/// A column reduction's block: 64 neighbouring columns times 4 to 64 row
/// lanes (256 threads). With 16-byte loads of bf16 columns a warp reads 4
/// rows of 128 bytes (a whole cache line each); 16 columns had it read 16
/// rows of 32 bytes, and config A's norm weight gradients ran at 43% of the
/// copy bandwidth, stalled on loads (Nsight Compute). 32 columns per block
/// without splitting the rows left half of an H200 idle (64 blocks: 0.15 ms
/// for 8192 rows, measured), so dc-split-column-reductions splits the rows
/// of narrow reductions into chunks.
constexpr int64_t kColumnsPerBlock = 64;

// Rows of one chunk of a column reduction that dc-map-to-gpu folds into
// the block-per-row kernel of a row reduction over the same rows (a norm's
// weight gradient into its backward): dc-split-column-reductions'
// folded-chunk-rows. Each block runs a chunk's rows one after another, its
// threads keeping their columns' partial sums in registers. The default,
// 32 rows, leaves config A's 8192 rows 256 blocks (about 2 per SM, each
// with two rows' loads in flight) and a 256-row second pass (run by the
// same kernel's last 64 blocks: MapToGPU.cpp's FinishingPass). 16 rows
// (512 blocks, 3 per SM as registers allow) ran the layers' norm backward
// 7% slower (58.7 against 54.4 us, Nsight Compute, 1 x H100): a second
// wave for the blocks past 3 per SM, and twice the partial sums; 8 rows
// slower still. With registers capped so that all 512 fit at once
// (folded-blocks-per-sm=4, 128 registers) still 1.4-3.6 us slower than 32
// rows (2026-12-06, 1 x H100).

/// The most rows of a chunk dc-map-to-gpu folds into a row group: longer
/// chunks leave too few blocks to keep the memory busy.
constexpr int64_t kMaxFoldedChunkRows = 64;

} // namespace dc

#endif // DC_LIB_CONVERSION_COLUMNREDUCTIONSHAPE_H
