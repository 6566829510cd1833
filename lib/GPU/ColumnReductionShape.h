//===- ColumnReductionShape.h - dc-map-to-gpu's column-reduction block ---===//
//
// The shape of one column-reduction block of dc-map-to-gpu, which
// dc-split-column-reductions sizes its row chunks for: both passes must
// agree on it.
//
//===----------------------------------------------------------------------===//
#ifndef DC_LIB_GPU_COLUMNREDUCTIONSHAPE_H
#define DC_LIB_GPU_COLUMNREDUCTIONSHAPE_H

#include <cstdint>

namespace dc {

/// A column reduction's block: 64 neighbouring columns times 4 to 64 row
/// lanes (256 threads). With 16-byte loads of bf16 columns a warp reads 4
/// rows of 128 bytes (a whole cache line each); 16 columns have it read 16
/// rows of 32 bytes, and a norm weight gradient stalls on loads. 32 columns
/// per block without splitting the rows leave half of an H200 idle (64
/// blocks), so dc-split-column-reductions splits the rows of narrow
/// reductions into chunks (docs/lowering.md, "Why the GPU kernels'
/// constants").
constexpr int64_t kColumnsPerBlock = 64;

/// The most rows of a chunk dc-map-to-gpu folds into a row group: longer
/// chunks leave too few blocks to keep the memory busy.
constexpr int64_t kMaxFoldedChunkRows = 64;

} // namespace dc

#endif // DC_LIB_GPU_COLUMNREDUCTIONSHAPE_H
