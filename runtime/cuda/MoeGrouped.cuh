//===- MoeGrouped.cuh - what the MoE kernels share (device code) -*- CUDA
//-*-===//
//
// Included by MoeKernels.cu, MoeWgmma.cu and MoeWgmmaTma.cu (the last two
// compiled for sm_90a alone):
// element access, the grouped products' arguments and schedule (which
// expert and rows a block works on, from `ends` on the device), their
// output tiles, and the cp.async helpers.
//
//===----------------------------------------------------------------------===//
#ifndef DCRT_CUDA_MOEGROUPED_CUH
#define DCRT_CUDA_MOEGROUPED_CUH

#include "dcrt/dcrt.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace dcrt::cuda::moe::grouped {

constexpr unsigned kFull = 0xffffffffu;

//===----------------------------------------------------------------------===//
// Element access
//===----------------------------------------------------------------------===//

__device__ __forceinline__ int64_t loadIndex(const void *data, bool i64,
                                             int64_t i) {
  return i64 ? static_cast<const int64_t *>(data)[i]
             : static_cast<const int32_t *>(data)[i];
}

__device__ __forceinline__ void storeIndex(void *data, bool i64, int64_t i,
                                           int64_t value) {
  if (i64)
    static_cast<int64_t *>(data)[i] = value;
  else
    static_cast<int32_t *>(data)[i] = static_cast<int32_t>(value);
}

__device__ __forceinline__ float toFloat(float x) { return x; }
__device__ __forceinline__ float toFloat(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
__device__ __forceinline__ float toFloat(__half x) { return __half2float(x); }

template <typename T> __device__ __forceinline__ T fromFloat(float x);
template <> __device__ __forceinline__ float fromFloat<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 fromFloat<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <> __device__ __forceinline__ __half fromFloat<__half>(float x) {
  return __float2half_rn(x);
}

//===----------------------------------------------------------------------===//
// Grouped products: shared pieces
//===----------------------------------------------------------------------===//

struct GroupedArgs {
  const void *lhs, *rhs, *ends;
  void *out;
  float *partial; // [slices][experts][k][p] when slices > 1
  int64_t rows, k, p;
  int experts, slices;
  bool endsI64, accumulate;
  int64_t lhsLd, rhsLd, outLd, rhsExpertStride, outExpertStride;
  int64_t rowTiles, colTiles; // forward: rows' tiles (worst case), p's
  int64_t kTiles;             // weight gradient: k's tiles
};

/// Clamped end e (expertRowRanges).
__device__ __forceinline__ int64_t clampedEnd(const GroupedArgs &a, int e) {
  return min(max(loadIndex(a.ends, a.endsI64, e), int64_t(0)), a.rows);
}

/// Warp 0's part of the forward's schedule: the group (expert, or
/// `experts` for the rows past the last end) of row tile `tile`, the tile's
/// first row and its group's end. False past the last tile.
struct RowTile {
  int group;
  int64_t first, end;
};
inline __device__ bool findRowTile(const GroupedArgs &a, int64_t tile,
                                   int tileRows, RowTile &found) {
  const int lane = threadIdx.x % 32;
  int64_t hiBefore = 0, tilesBefore = 0;
  for (int base = 0; base <= a.experts; base += 32) {
    const int g = base + lane;
    int64_t hi = g < a.experts ? clampedEnd(a, g) : a.rows;
    hi = max(hi, hiBefore);
    for (int offset = 1; offset < 32; offset *= 2) { // running maximum
      int64_t other = __shfl_up_sync(kFull, hi, offset);
      if (lane >= offset)
        hi = max(hi, other);
    }
    int64_t lo = __shfl_up_sync(kFull, hi, 1);
    if (lane == 0)
      lo = hiBefore;
    const int64_t tiles =
        g <= a.experts ? (hi - lo + tileRows - 1) / tileRows : 0;
    int64_t inclusive = tiles;
    for (int offset = 1; offset < 32; offset *= 2) {
      int64_t other = __shfl_up_sync(kFull, inclusive, offset);
      if (lane >= offset)
        inclusive += other;
    }
    const int64_t start = tilesBefore + inclusive - tiles;
    const unsigned hit =
        __ballot_sync(kFull, tile >= start && tile < start + tiles);
    if (hit) {
      const int owner = __ffs(hit) - 1;
      found.group = __shfl_sync(kFull, g, owner);
      found.first = __shfl_sync(kFull, lo + (tile - start) * tileRows, owner);
      found.end = __shfl_sync(kFull, hi, owner);
      return true;
    }
    hiBefore = __shfl_sync(kFull, hi, 31);
    tilesBefore += __shfl_sync(kFull, inclusive, 31);
  }
  return false;
}

/// Warp 0's part of the weight gradient's schedule: expert e's slice
/// `slice` of its rows.
inline __device__ void findSlice(const GroupedArgs &a, int e, int slice,
                                 int64_t &first, int64_t &end) {
  const int lane = threadIdx.x % 32;
  int64_t hiBefore = 0, hi = 0; // max of clamped ends [0, e) and [0, e]
  for (int j = lane; j <= e; j += 32) {
    int64_t v = clampedEnd(a, j);
    hi = max(hi, v);
    if (j < e)
      hiBefore = max(hiBefore, v);
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    hi = max(hi, __shfl_xor_sync(kFull, hi, offset));
    hiBefore = max(hiBefore, __shfl_xor_sync(kFull, hiBefore, offset));
  }
  const int64_t length = hi - hiBefore;
  first = hiBefore + length * slice / a.slices;
  end = hiBefore + length * (slice + 1) / a.slices;
}

/// The output tiles' order: tile `pid` of rowTiles x colTiles is a row
/// tile and a column tile; row tiles in groups of GROUP, column tiles
/// inside a group, so that the blocks running at once share their operands'
/// tiles in L2.
template <int GROUP>
__device__ __forceinline__ void tileOrder(int64_t pid, int64_t rowTiles,
                                          int64_t colTiles, int64_t &rowTile,
                                          int64_t &colTile) {
  const int64_t perGroup = GROUP * colTiles;
  const int64_t firstRow = pid / perGroup * GROUP;
  const int64_t size = min(rowTiles - firstRow, int64_t(GROUP));
  rowTile = firstRow + pid % perGroup % size;
  colTile = pid % perGroup / size;
}

/// The forward's tile order: tile `pid` (a block's, or a persistent
/// block's next); row tiles in groups of 8 (each group's weight tiles and
/// rows stay in L2).
__device__ __forceinline__ void forwardTile(const GroupedArgs &a, int64_t pid,
                                            int64_t &rowTile,
                                            int64_t &colTile) {
  tileOrder<8>(pid, a.rowTiles, a.colTiles, rowTile, colTile);
}

/// What a block computes: for the forward, out rows [first, end) (relative
/// row r of the tile is first + r) and columns from col0; for the weight
/// gradient, out[e] rows (k) from row0 and columns from col0, reducing
/// over data rows [first, end), slice `slice` of expert e's rows.
struct BlockWork {
  int group, slice;
  int64_t first, end; // the data rows
  int64_t row0, col0; // the output tile's origin (forward: row0 = first)
  bool found;
};

/// A whole warp's part of the forward's schedule: the work of tile `pid`
/// (every lane gets it). False past the last tile.
template <int TILE_M, int TILE_N>
__device__ bool forwardWork(const GroupedArgs &a, int64_t pid, BlockWork &w) {
  int64_t rowTile, colTile;
  forwardTile(a, pid, rowTile, colTile);
  RowTile t{};
  w.found = findRowTile(a, rowTile, TILE_M, t);
  w.group = t.group;
  w.first = w.row0 = t.first;
  w.end = min(t.end, t.first + TILE_M);
  w.col0 = colTile * TILE_N;
  return w.found;
}

/// A whole warp's part of the weight gradient's schedule for a persistent
/// block: the work of item `pid` of kTiles x colTiles x experts x slices
/// (every lane gets it). Items go by expert, then slice, then output tile
/// (tileOrder, groups of 16 k tiles: the blocks running at once read about
/// as many bytes of lhs as of rhs): when one expert takes every row, its
/// items are consecutive and spread over every block.
template <int TILE_M, int TILE_N>
__device__ void weightWork(const GroupedArgs &a, int64_t pid, BlockWork &w) {
  const int64_t tiles = a.kTiles * a.colTiles, rest = pid / tiles;
  int64_t kTile, colTile;
  tileOrder<16>(pid % tiles, a.kTiles, a.colTiles, kTile, colTile);
  w.found = true;
  w.group = int(rest / a.slices);
  w.slice = int(rest % a.slices);
  findSlice(a, w.group, w.slice, w.first, w.end);
  w.row0 = kTile * TILE_M;
  w.col0 = colTile * TILE_N;
}

template <int TILE_M, int TILE_N>
__device__ BlockWork findWork(const GroupedArgs &a, bool weightGrad) {
  __shared__ BlockWork work;
  if (threadIdx.x < 32) {
    BlockWork w{};
    if (!weightGrad) {
      forwardWork<TILE_M, TILE_N>(a, blockIdx.x, w);
    } else {
      w.found = true;
      w.group = blockIdx.y;
      w.slice = blockIdx.z;
      findSlice(a, blockIdx.y, blockIdx.z, w.first, w.end);
      w.row0 = blockIdx.x % a.kTiles * TILE_M;
      w.col0 = blockIdx.x / a.kTiles * TILE_N;
    }
    if (threadIdx.x == 0)
      work = w;
  }
  __syncthreads();
  return work;
}

/// Stores two adjacent outputs (f32 partials, or out's dtype with
/// accumulation) at element `at` of `base`.
template <typename T>
__device__ __forceinline__ void storePair(T *base, int64_t at, float x, float y,
                                          bool accumulate) {
  if (accumulate) {
    x += toFloat(base[at]);
    y += toFloat(base[at + 1]);
  }
  if constexpr (sizeof(T) == 2) {
    T pair[2] = {fromFloat<T>(x), fromFloat<T>(y)};
    *reinterpret_cast<uint32_t *>(base + at) =
        *reinterpret_cast<const uint32_t *>(pair);
  } else {
    base[at] = fromFloat<T>(x);
    base[at + 1] = fromFloat<T>(y);
  }
}

/// Where a block's outputs go: out (in `T`) or, for sliced weight
/// gradients, the f32 partials; element (r, c) of the tile at
/// base[r * ld + c]; rows < rowsLeft and columns < colsLeft exist.
/// `write` is false where nothing may be written (rows past the last end
/// while accumulating).
struct OutTile {
  void *base;
  int64_t ld, rowsLeft, colsLeft;
  bool partial, write, accumulate;
};

template <typename T>
__device__ OutTile outTile(const GroupedArgs &a, const BlockWork &w,
                           bool weightGrad) {
  OutTile o{};
  o.colsLeft = a.p - w.col0;
  if (!weightGrad) {
    o.base = static_cast<T *>(a.out) + w.first * a.outLd + w.col0;
    o.ld = a.outLd;
    o.rowsLeft = w.end - w.first;
    o.write = !(w.group == a.experts && a.accumulate);
    o.accumulate = a.accumulate;
  } else if (a.slices == 1) {
    o.base = static_cast<T *>(a.out) + w.group * a.outExpertStride +
             w.row0 * a.outLd + w.col0;
    o.ld = a.outLd;
    o.rowsLeft = a.k - w.row0;
    o.write = true;
    o.accumulate = a.accumulate;
  } else {
    o.base = a.partial +
             ((int64_t(w.slice) * a.experts + w.group) * a.k + w.row0) * a.p +
             w.col0;
    o.ld = a.p;
    o.rowsLeft = a.k - w.row0;
    o.partial = true;
    o.write = true;
  }
  return o;
}

/// Writes the pair (x, y) at tile element (r, c), c even.
template <typename T>
__device__ __forceinline__ void emit(const OutTile &o, int r, int c, float x,
                                     float y) {
  if (!o.write || r >= o.rowsLeft || c >= o.colsLeft)
    return;
  int64_t at = r * o.ld + c;
  if (o.partial) {
    float *p = static_cast<float *>(o.base);
    p[at] = x;
    if (c + 1 < o.colsLeft)
      p[at + 1] = y;
    return;
  }
  T *out = static_cast<T *>(o.base);
  if (c + 1 < o.colsLeft && sizeof(T) == 2) {
    storePair(out, at, x, y, o.accumulate);
    return;
  }
  out[at] = fromFloat<T>(o.accumulate ? toFloat(out[at]) + x : x);
  if (c + 1 < o.colsLeft)
    out[at + 1] = fromFloat<T>(o.accumulate ? toFloat(out[at + 1]) + y : y);
}

//===----------------------------------------------------------------------===//
// cp.async
//===----------------------------------------------------------------------===//

__device__ __forceinline__ uint32_t sharedAddress(const void *pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}

/// 16 bytes from global `src` into shared `dst`, or zeros when !valid.
__device__ __forceinline__ void copyAsync(void *dst, const void *src,
                                          bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(
                   sharedAddress(dst)),
               "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void commitAsync() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N> __device__ __forceinline__ void waitAsync() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

/// One operand's tiles in global memory: tile t is ROWS x COLS elements
/// from `origin` (row stride `ld`); it moves by the tile's depth (64) along its
/// rows
/// (`alongRows`: an operand stored along the reduction, rows = the
/// reduction) or along its columns. `rowsValid` and `colsValid` count from
/// the origin.
template <typename T> struct TileSource {
  const T *origin;
  const T *fallback; // a valid address for zero-filled chunks
  int64_t ld, rowsValid, colsValid;
  bool alongRows;
};

/// The tensor-core kernel for Hopper (MoeWgmma.cu, sm_90a): launches it for
/// `a` (bf16 or f16 `dtype`, tiles of kWgmmaTileM x kWgmmaTileN as `a`'s
/// tile counts say) on `stream`.
constexpr int kWgmmaTileM = 128, kWgmmaTileN = 256;
cudaError_t launchWgmma(const GroupedArgs &a, int32_t dtype, bool weightGrad,
                        bool transposeRhs, cudaStream_t stream);
/// The TMA kernel for Hopper (MoeWgmmaTma.cu, sm_90a, the same tiles):
/// launches it for `a` on `stream` with one persistent block per SM
/// (`multiprocessors`), sets `status`, and returns true; or returns false,
/// launching nothing, where tensor maps cannot describe the operands (the
/// driver refuses them, or sizes past TMA's 32-bit coordinates).
bool launchWgmmaTma(const GroupedArgs &a, int32_t dtype, bool weightGrad,
                    bool transposeRhs, int multiprocessors, cudaStream_t stream,
                    cudaError_t &status);

/// Lets KERNEL use `bytes` of dynamic shared memory (above the default 48
/// KiB), once per kernel: host code, called before each launch.
template <auto KERNEL> cudaError_t allowSharedBytes(int bytes) {
  static bool allowed = false;
  if (allowed)
    return cudaSuccess;
  cudaError_t status = cudaFuncSetAttribute(
      KERNEL, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  allowed = status == cudaSuccess;
  return status;
}

} // namespace dcrt::cuda::moe::grouped

#endif // DCRT_CUDA_MOEGROUPED_CUH
