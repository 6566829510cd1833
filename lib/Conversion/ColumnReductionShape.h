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

/// A column reduction's block: 16 neighbouring columns (a half-warp reads
/// one 32-byte sector of a bf16 row) times 16 lanes of rows. 32 columns per
/// block left half of an H200 idle on a 2048-column norm weight gradient
/// (64 blocks: 0.15 ms for 8192 rows, measured). 16 columns x 64 row lanes
/// (1024 threads) made them no faster (87 us each on config A, measured).
constexpr int64_t kColumnsPerBlock = 16;

} // namespace dc

#endif // DC_LIB_CONVERSION_COLUMNREDUCTIONSHAPE_H
