//===- MoeTile.h - the grouped products' tensor-core tile addressing ------===//
//
// Where the tensor-core kernel of MoeKernels.cu puts and finds each element
// of a block's tiles, as plain functions that the host compiler also
// compiles: MoeTileTest.cpp emulates the kernel's ldmatrix and
// mma.m16n8k16 (PTX's fragment layouts) on the CPU through them, so that
// the addressing is checked without a GPU.
//
// A block computes a 128 x 128 output tile, 64 deep per pipeline stage,
// with 4 warps of 64 x 64 (2 x 2). Shared tiles are rows of 16-byte chunks
// (8 elements of 16 bits); chunk j of row r is stored at chunk j ^ (r % 8),
// so that the 8 rows one ldmatrix matrix reads, and the chunks one warp's
// cp.async writes, fall in distinct banks. A is the M x K operand, stored
// [m][k] (rows of 64) or, "along M", [k][m] (rows of 128: the weight
// gradient's lhs^T); B the K x N one, stored [n][k] (a transposed weight)
// or, "along N", [k][n] (an untransposed weight, the weight gradient's
// rhs). Operands stored along M or N are read with ldmatrix.trans.
//
//===----------------------------------------------------------------------===//
#ifndef DCRT_CUDA_MOETILE_H
#define DCRT_CUDA_MOETILE_H

#ifdef __CUDACC__
#define DCRT_TILE_FN __host__ __device__ __forceinline__
#else
#define DCRT_TILE_FN inline
#endif

namespace dcrt::cuda::moe::tile {

constexpr int kTileM = 128, kTileN = 128, kTileK = 64;
constexpr int kWarpTileM = 64, kWarpTileN = 64;
constexpr int kThreads = 128; // 4 warps, 2 x 2
/// The elements of one operand's tile (128 x 64 either way).
constexpr int kTileElements = kTileM * kTileK;

/// A position in a tile: row and column.
struct Cell {
  int r, c;
};

/// The offset of element (r, c) in a shared tile of COLS columns.
template <int COLS> DCRT_TILE_FN int swizzled(int r, int c) {
  return r * COLS + (((c >> 3) ^ (r & 7)) << 3) + (c & 7);
}

/// The first element of chunk `i` of a tile of COLS columns (the copy
/// order: consecutive threads, consecutive chunks of a row).
template <int COLS> DCRT_TILE_FN Cell chunkCell(int i) {
  return {i / (COLS / 8), i % (COLS / 8) * 8};
}

/// The warp's first output row and column in the block's tile.
DCRT_TILE_FN int warpRow(int warp) { return warp / 2 * kWarpTileM; }
DCRT_TILE_FN int warpCol(int warp) { return warp % 2 * kWarpTileN; }

/// The tile cell whose 8 elements (a 16-byte row of one 8 x 8 matrix) lane
/// `lane` addresses in the ldmatrix.x4 of A fragment `mi` (rows
/// mRow0 + 16 mi ...) at depth kk: registers 0..3 are then the mma's
/// a0..a3 (rows +0/+8, depths +0/+8). Stored [m][k] (non-transposed load)
/// or along M, [k][m] (.trans).
template <bool ALONG_M>
DCRT_TILE_FN Cell aFragmentCell(int lane, int mRow0, int mi, int kk) {
  const int j = lane / 8; // the matrix this lane addresses
  if (ALONG_M)
    return {kk + (j >> 1) * 8 + lane % 8, mRow0 + mi * 16 + (j & 1) * 8};
  return {mRow0 + mi * 16 + lane % 16, kk + lane / 16 * 8};
}

/// The same for B fragments `2 nj` and `2 nj + 1` (columns nCol0 + 16 nj
/// ...): registers 0, 1 are b0, b1 of the first, 2, 3 of the second.
/// Stored [n][k] (non-transposed load) or along N, [k][n] (.trans).
template <bool ALONG_N>
DCRT_TILE_FN Cell bFragmentCell(int lane, int nCol0, int nj, int kk) {
  const int j = lane / 8;
  if (ALONG_N)
    return {kk + (j & 1) * 8 + lane % 8, nCol0 + nj * 16 + (j >> 1) * 8};
  return {nCol0 + nj * 16 + (j >> 1) * 8 + lane % 8, kk + (j & 1) * 8};
}

/// The output cell of accumulators c[2 half] and c[2 half + 1] of
/// fragment (mi, ni) (the second one column further).
DCRT_TILE_FN Cell accumulatorCell(int lane, int mRow0, int nCol0, int mi,
                                  int ni, int half) {
  return {mRow0 + mi * 16 + lane / 4 + 8 * half, nCol0 + ni * 8 + lane % 4 * 2};
}

/// The Hopper kernel (MoeWgmma.cu, wgmma.mma_async): a block computes a
/// 128 x 256 output tile, 64 deep per stage, with 2 warpgroups of 64 x 256
/// (m64n256k16 instructions reading both operands from shared memory by
/// descriptor). Shared tiles are PTX's canonical 128-byte-swizzled layouts
/// (Swizzle<3,4,3>: the 16-byte chunk bits 4-6 of an address XOR its bits
/// 7-9; tiles 1024-byte aligned):
///  - K-major (an operand stored along the reduction: the forward's lhs,
///    a transposed weight): rows of 64 elements (128 bytes), row r at
///    r * 128 bytes, swizzled<64>; 8-row groups 1024 bytes apart (the
///    descriptor's stride byte offset); a k16 step moves the start
///    address 32 bytes;
///  - MN-major (stored along M or N: an untransposed weight, the weight
///    gradient's operands): blocks of 64 M/N elements, each 64 k-rows of
///    128 bytes (8 KiB, the leading byte offset between blocks), rows
///    swizzled<64>; 8-k-row groups 1024 bytes apart (the stride byte
///    offset); a k16 step moves the start 16 rows (2048 bytes).
/// The TMA kernel (MoeWgmmaTma.cu) fills the same layouts with 128-byte
/// swizzled boxes 64 elements wide: a K-major tile is one box of its rows,
/// an MN-major one a box per 64-element block (64 k-rows deep).
namespace wgmma {

constexpr int kTileM = 128, kTileN = 256, kTileK = 64;
constexpr int kThreads = 256; // 2 warpgroups
constexpr int kATileElements = kTileM * kTileK;
constexpr int kBTileElements = kTileN * kTileK;
constexpr int kGroupBytes = 1024;       // 8 rows of 128 bytes
constexpr int kBlockElements = 64 * 64; // an MN-major block
constexpr int kBlockBytes = kBlockElements * 2;

/// The element offset of (k, mn) in an MN-major tile; of (r, c) in a
/// K-major one is swizzled<64>(r, c).
DCRT_TILE_FN int mnMajorOffset(int k, int mn) {
  return mn / 64 * kBlockElements + swizzled<64>(k, mn % 64);
}

/// The k row whose elements 16-byte chunk `chunk` of an MN-major tile
/// holds, or of consecutive MN-major tiles (the weight gradient's stage: A's
/// 2 blocks, then B's 4): k row r of a block is its 128-byte line r (the
/// swizzle moves chunks within their line), so zeroing the chunks of rows
/// >= v zeroes exactly the elements of depth >= v, whatever their mn.
DCRT_TILE_FN int mnMajorChunkRow(int chunk) { return chunk / 8 % 64; }

/// The copy order of a tile stored in global memory as ROWS x COLS
/// (COLS contiguous): chunk i is (row, first column); its shared offset is
/// mnMajorOffset(row, column) for an MN-major tile (rows are k), else
/// swizzled<64>(row, column).
template <int COLS> DCRT_TILE_FN Cell chunkCell(int i) {
  return {i / (COLS / 8), i % (COLS / 8) * 8};
}

/// A descriptor's fields for warpgroup `group`'s A (or, group 0, B) at k16
/// step `step`: the start (elements from the tile's base), the leading and
/// stride byte offsets.
struct Descriptor {
  int start, leadingBytes, strideBytes;
};
DCRT_TILE_FN Descriptor kMajorDescriptor(int firstRow, int step) {
  // The leading byte offset is unused for swizzled K-major layouts.
  return {firstRow * 64 + step * 16, 16, kGroupBytes};
}
DCRT_TILE_FN Descriptor mnMajorDescriptor(int firstBlock, int step) {
  return {firstBlock * kBlockElements + step * 16 * 64, kBlockBytes,
          kGroupBytes};
}

/// The output cell of accumulators d[4 j + 2 half] and d[4 j + 2 half + 1]
/// of thread `thread` (the second one column further).
DCRT_TILE_FN Cell accumulatorCell(int thread, int j, int half) {
  const int warp = thread / 32, lane = thread % 32;
  return {warp * 16 + lane / 4 + 8 * half, j * 8 + lane % 4 * 2};
}

} // namespace wgmma

} // namespace dcrt::cuda::moe::tile

#endif // DCRT_CUDA_MOETILE_H
