//===- MoeKernels.cu - the cuda backend's mixture-of-experts kernels ------===//
//
// Routing (all bandwidth-bound, no floating-point atomics):
//  - top-k: a segment of L lanes per row (L = experts rounded up to a
//    power of two, at most 32); k rounds, each lane's best entry after the
//    previous pick, then a butterfly over the segment in topkBefore's order.
//  - group_by_expert: a counting sort in two kernels. The first counts each
//    chunk's ids per bin (experts + 1, the last for dropped ids) in shared
//    memory, stores the counts bin-major, and its last block to finish (an
//    atomic ticket, reset for the next call) scans all of them: offset of
//    (bin, chunk) = the ids of lower bins plus those of this bin in earlier
//    chunks; ends[e] = the offset of (e + 1, chunk 0). The second places
//    each id stably: tiles of 256 in order, within a warp by
//    __match_any_sync ranks, across warps by their per-bin counts.
//  - gather: threads per row over 16-, 4- or 2-byte units.
//  - scatter_add: each result row's sources listed by an atomic count into
//    16 slots per row (integers: the list is the same whatever the order of
//    the atomics); each result row sorts its list and sums the source rows
//    in increasing order in f32. A row named more than 16 times scans the
//    whole index in order instead (slow, the same sum; dc's combine names
//    each token k times).
//
// Grouped products, the grid the worst case for any routing:
//  - forward: 1-D, (ceil(rows / BM) + experts + 1) row tiles x
//    ceil(p / BN) column tiles, grouped by 8 row tiles for L2 reuse. Warp 0
//    maps a row tile to its expert by a warp scan over the experts' tile
//    counts (expertRowRanges' clamped ends, running maximum); tiles past
//    the last return. Group `experts` is the rows past the last end: zeros.
//  - weight gradient: (k tiles x p tiles, experts, slices); each block
//    loops over its slice of its expert's rows (the reduction dimension).
//    With one slice it writes out; with more, f32 partial sums go to the
//    workspace and a second kernel adds them in slice order.
// Three kernels compute a tile:
//  - wgmma (bf16, f16 on sm_90 GPUs; compiled for sm_90a): 128 x 256
//    tiles, 2 warpgroups of m64n256k16 wgmma.mma_async; fed by TMA with
//    persistent blocks (MoeWgmmaTma.cu; the weight gradient's blocks walk
//    the same tiles, experts and slices as this grid), or with
//    DCRT_MOE_TMA=0 by cp.async (MoeWgmma.cu);
//  - mma.sync (bf16, f16 elsewhere, or with DCRT_MOE_WGMMA=0): 128 x 128
//    tiles, 64 deep, 4 warps of 64 x 64, mma.sync m16n8k16 with f32
//    accumulators, a 3-stage cp.async pipeline (rows and columns past the
//    operand's end zero-filled), shared memory in rows of 16-byte chunks
//    XOR-swizzled by row so that ldmatrix reads are conflict-free;
//    ldmatrix.trans for operands stored along M or N (the transposed reads
//    of the weight gradient, an untransposed [k, p] weight);
//  - CUDA cores (f32 always, any stride or alignment): 64 x 64 tiles, 16
//    deep, each thread 4 x 4 outputs by FMA.
// Both accumulate each output in a fixed order: deterministic.
//
//===----------------------------------------------------------------------===//
#include "MoeGrouped.cuh"
#include "MoeKernels.h"
#include "MoeTile.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <climits>
#include <type_traits>

namespace dcrt::cuda::moe {
namespace {

using namespace grouped;

constexpr int kThreads = 256;

unsigned gridFor(int64_t blocks) {
  return static_cast<unsigned>(
      std::max<int64_t>(1, std::min<int64_t>(blocks, int64_t(1) << 20)));
}

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// The smallest power of two >= x (x <= 2^30).
int pow2AtLeast(int64_t x) {
  int p = 1;
  while (p < x)
    p *= 2;
  return p;
}

//===----------------------------------------------------------------------===//
// Top-k
//===----------------------------------------------------------------------===//

/// Moe.h's topkBefore on the device.
__device__ __forceinline__ bool before(float a, int ai, float b, int bi) {
  bool aNaN = a != a, bNaN = b != b;
  if (aNaN || bNaN)
    return aNaN && (!bNaN || ai < bi);
  return a > b || (a == b && ai < bi);
}

template <typename T>
__global__ void topkKernel(const T *scores, T *values, void *indices, bool i64,
                           int64_t rows, int experts, int k, int64_t scoresLd,
                           int64_t valuesLd, int64_t indicesLd, int lanes) {
  const int lane = threadIdx.x % 32;
  const int64_t warp = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32;
  const int64_t row = warp * (32 / lanes) + lane / lanes;
  const int sub = lane % lanes;
  const bool valid = row < rows;
  const T *scoreRow = scores + (valid ? row : 0) * scoresLd;
  float lastValue = 0.0f;
  int last = -1; // none picked yet
  for (int j = 0; j < k; ++j) {
    float bestValue = 0.0f;
    int best = -1;
    for (int e = sub; valid && e < experts; e += lanes) {
      float x = toFloat(scoreRow[e]);
      if (last >= 0 && !before(lastValue, last, x, e))
        continue; // picked already
      if (best < 0 || before(x, e, bestValue, best)) {
        bestValue = x;
        best = e;
      }
    }
    // Offsets below `lanes` stay inside the row's segment.
    for (int offset = lanes / 2; offset > 0; offset /= 2) {
      float otherValue = __shfl_xor_sync(kFull, bestValue, offset);
      int other = __shfl_xor_sync(kFull, best, offset);
      if (other >= 0 &&
          (best < 0 || before(otherValue, other, bestValue, best))) {
        bestValue = otherValue;
        best = other;
      }
    }
    if (valid && sub == 0) {
      values[row * valuesLd + j] = scoreRow[best]; // the bits, not a rounding
      storeIndex(indices, i64, row * indicesLd + j, best);
    }
    lastValue = bestValue;
    last = best;
  }
}

template <typename T>
cudaError_t launchTopk(const dcrt_topk_desc &d, const void *scores,
                       void *values, void *indices, cudaStream_t stream) {
  int lanes = std::min(32, pow2AtLeast(d.experts));
  int64_t warps = ceilDiv(d.rows, 32 / lanes);
  int64_t blocks = ceilDiv(warps * 32, kThreads);
  if (blocks > INT_MAX)
    return cudaErrorInvalidConfiguration;
  topkKernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      static_cast<const T *>(scores), static_cast<T *>(values), indices,
      d.index_dtype == DCRT_I64, d.rows, static_cast<int>(d.experts),
      static_cast<int>(d.k), d.scores_ld, d.values_ld, d.indices_ld, lanes);
  return cudaGetLastError();
}

//===----------------------------------------------------------------------===//
// Group by expert
//===----------------------------------------------------------------------===//

/// At most this many (bin, chunk) counts: the last block scans them alone.
constexpr int64_t kMaxGroupCounts = 16384;

struct GroupArgs {
  const void *ids;
  void *order, *ends;
  unsigned *ticket;
  int *counts; // [bins][chunks]
  int64_t n;
  int experts;
  int chunks, tilesPerChunk;
  bool idsI64, orderI64, endsI64;
};

__device__ __forceinline__ int binOf(const GroupArgs &a, int64_t i) {
  int64_t id = loadIndex(a.ids, a.idsI64, i);
  return id >= 0 && id < a.experts ? static_cast<int>(id) : a.experts;
}

/// An exclusive scan of one value per thread over the block; `total` gets
/// the block's sum. `shared` holds 32 ints.
__device__ int blockExclusiveScan(int value, int *shared, int &total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int warps = blockDim.x / 32;
  int inclusive = value;
  for (int offset = 1; offset < 32; offset *= 2) {
    int other = __shfl_up_sync(kFull, inclusive, offset);
    if (lane >= offset)
      inclusive += other;
  }
  if (lane == 31)
    shared[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    int sum = lane < warps ? shared[lane] : 0;
    for (int offset = 1; offset < 32; offset *= 2) {
      int other = __shfl_up_sync(kFull, sum, offset);
      if (lane >= offset)
        sum += other;
    }
    if (lane < warps)
      shared[lane] = sum; // inclusive over warps
  }
  __syncthreads();
  int before = (warp > 0 ? shared[warp - 1] : 0) + inclusive - value;
  total = shared[warps - 1];
  __syncthreads(); // `shared` is reused by the next call
  return before;
}

__global__ void __launch_bounds__(kThreads) groupCountKernel(GroupArgs a) {
  extern __shared__ int histogram[]; // [experts + 1]
  __shared__ int scratch[32];
  __shared__ bool lastBlock;
  const int bins = a.experts + 1;
  for (int b = threadIdx.x; b < bins; b += blockDim.x)
    histogram[b] = 0;
  __syncthreads();
  const int64_t begin = int64_t(blockIdx.x) * a.tilesPerChunk * kThreads;
  const int64_t end = min(a.n, begin + int64_t(a.tilesPerChunk) * kThreads);
#pragma unroll 8
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x)
    atomicAdd(&histogram[binOf(a, i)], 1);
  __syncthreads();
  for (int b = threadIdx.x; b < bins; b += blockDim.x)
    a.counts[int64_t(b) * a.chunks + blockIdx.x] = histogram[b];
  // The counts before the ticket (threadFenceReduction's pattern).
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0)
    lastBlock = atomicAdd(a.ticket, 1u) == static_cast<unsigned>(a.chunks) - 1;
  __syncthreads();
  if (!lastBlock)
    return;
  // The last block: an exclusive scan of every count, bin-major, in place
  // (4 consecutive counts per thread per round; __ldcg: other blocks' writes
  // bypass this SM's L1).
  const int64_t total = int64_t(bins) * a.chunks;
  int carry = 0;
  for (int64_t base = 0; base < total; base += 4 * kThreads) {
    int64_t first = base + 4 * threadIdx.x;
    int v[4], sum = 0;
    for (int q = 0; q < 4; ++q) {
      v[q] = first + q < total ? __ldcg(&a.counts[first + q]) : 0;
      sum += v[q];
    }
    int roundTotal;
    int offset = carry + blockExclusiveScan(sum, scratch, roundTotal);
    for (int q = 0; q < 4; ++q)
      if (first + q < total) {
        a.counts[first + q] = offset;
        offset += v[q];
      }
    carry += roundTotal;
  }
  __syncthreads();
  // ends[e]: the offset of bin e + 1's first chunk (ids <= e).
  for (int e = threadIdx.x; e < a.experts; e += blockDim.x)
    storeIndex(a.ends, a.endsI64, e, a.counts[int64_t(e + 1) * a.chunks]);
  if (threadIdx.x == 0)
    *a.ticket = 0; // for the next call (graph replays too)
}

__global__ void __launch_bounds__(kThreads) groupPlaceKernel(GroupArgs a) {
  extern __shared__ int shared[];
  const int bins = a.experts + 1;
  const int warps = kThreads / 32;
  int *next = shared;              // [bins]: the next position of each bin
  int *warpCounts = shared + bins; // [warps][bins]
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int b = threadIdx.x; b < bins; b += blockDim.x) {
    next[b] = a.counts[int64_t(b) * a.chunks + blockIdx.x];
    for (int w = 0; w < warps; ++w)
      warpCounts[w * bins + b] = 0;
  }
  __syncthreads();
  const int64_t begin = int64_t(blockIdx.x) * a.tilesPerChunk * kThreads;
  const int64_t end = min(a.n, begin + int64_t(a.tilesPerChunk) * kThreads);
  const unsigned lanesBefore = (1u << lane) - 1;
  // Each tile's ids are loaded while the tile before is placed.
  int64_t i = begin + threadIdx.x;
  int bin = i < end ? binOf(a, i) : -1;
  for (int64_t tile = begin; tile < end; tile += kThreads) {
    const int64_t nextI = i + kThreads;
    const int nextBin = nextI < end ? binOf(a, nextI) : -1;
    const bool active = i < end;
    const unsigned peers = __match_any_sync(kFull, bin);
    const int rank = __popc(peers & lanesBefore);
    const int count = __popc(peers);
    const bool leader = rank == 0;
    if (active && leader)
      warpCounts[warp * bins + bin] = count;
    __syncthreads();
    if (active) {
      int position = next[bin] + rank;
      for (int w = 0; w < warp; ++w)
        position += warpCounts[w * bins + bin];
      storeIndex(a.order, a.orderI64, position, i);
    }
    __syncthreads();
    if (active && leader) {
      atomicAdd(&next[bin], count); // integers: any order, one result
      warpCounts[warp * bins + bin] = 0;
    }
    __syncthreads();
    i = nextI;
    bin = nextBin;
  }
}

//===----------------------------------------------------------------------===//
// Gather
//===----------------------------------------------------------------------===//

/// `units` units of U per row; `lanes` threads per row (a power of two
/// dividing the block).
template <typename U>
__global__ void gatherKernel(const char *source, const void *index, bool i64,
                             char *result, int64_t rows, int64_t tableRows,
                             int64_t units, int64_t sourceLdBytes,
                             int64_t resultLdBytes, int lanes) {
  const int rowsPerBlock = blockDim.x / lanes;
  const int sub = threadIdx.x % lanes;
  for (int64_t row = blockIdx.x * int64_t(rowsPerBlock) + threadIdx.x / lanes;
       row < rows; row += int64_t(gridDim.x) * rowsPerBlock) {
    int64_t from = loadIndex(index, i64, row);
    bool inside = from >= 0 && from < tableRows;
    const U *src = reinterpret_cast<const U *>(source + (inside ? from : 0) *
                                                            sourceLdBytes);
    U *dst = reinterpret_cast<U *>(result + row * resultLdBytes);
#pragma unroll 4
    for (int64_t c = sub; c < units; c += lanes)
      dst[c] = inside ? src[c] : U{};
  }
}

/// The widest unit (16, 4 or 2 bytes) that divides every row's bytes,
/// stride and base address.
int unitBytes(int64_t rowBytes, int64_t ld1, int64_t ld2, const void *p1,
              const void *p2) {
  for (int unit : {16, 4}) {
    if (rowBytes % unit == 0 && ld1 % unit == 0 && ld2 % unit == 0 &&
        reinterpret_cast<uintptr_t>(p1) % unit == 0 &&
        reinterpret_cast<uintptr_t>(p2) % unit == 0)
      return unit;
  }
  return 2;
}

template <typename U>
cudaError_t launchGather(const dcrt_row_map_desc &d, int64_t size,
                         const void *source, const void *index, void *result,
                         cudaStream_t stream) {
  int64_t units = d.width * size / int64_t(sizeof(U));
  int lanes = std::min(kThreads, pow2AtLeast(units));
  int64_t blocks = ceilDiv(d.indexed_rows, kThreads / lanes);
  gatherKernel<U><<<gridFor(blocks), kThreads, 0, stream>>>(
      static_cast<const char *>(source), index, d.index_dtype == DCRT_I64,
      static_cast<char *>(result), d.indexed_rows, d.table_rows, units,
      d.source_ld * size, d.result_ld * size, lanes);
  return cudaGetLastError();
}

//===----------------------------------------------------------------------===//
// Scatter-add
//===----------------------------------------------------------------------===//

/// Each result row's sources are listed in `slots` (up to kScatterSlots
/// per row, in any order) by an atomic count; the sum kernel sorts a row's
/// list and adds its sources in increasing row. A row named more often
/// (not dc's combine, where each token has k <= kScatterSlots choices)
/// scans the whole index instead, in order: slower, the same sum.
constexpr int kScatterSlots = 16;

int64_t align256(int64_t bytes) { return (bytes + 255) / 256 * 256; }

__global__ void scatterSlotsKernel(const void *index, bool i64, int64_t n,
                                   int64_t tableRows, int *counts, int *slots) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t m = loadIndex(index, i64, i);
    if (m < 0 || m >= tableRows)
      continue;
    int slot = atomicAdd(&counts[m], 1);
    if (slot < kScatterSlots)
      slots[m * kScatterSlots + slot] = static_cast<int>(i);
  }
}

/// Result row m = the sum of its source rows in increasing order; V
/// elements per thread and step (8 for 16-bit types and 4 for f32 on
/// 16-byte aligned rows, else 1).
template <typename T, int V>
__global__ void scatterSumKernel(const T *source, T *result, const int *counts,
                                 const int *slots, const void *index, bool i64,
                                 int64_t n, int64_t tableRows, int64_t groups,
                                 int64_t sourceLd, int64_t resultLd,
                                 int lanes) {
  const int rowsPerBlock = blockDim.x / lanes;
  const int sub = threadIdx.x % lanes;
  for (int64_t m = blockIdx.x * int64_t(rowsPerBlock) + threadIdx.x / lanes;
       m < tableRows; m += int64_t(gridDim.x) * rowsPerBlock) {
    const int count = counts[m];
    int list[kScatterSlots];
    if (count <= kScatterSlots) { // the row's sources, sorted
      for (int j = 0; j < count; ++j) {
        int value = slots[m * kScatterSlots + j], at = j;
        for (; at > 0 && list[at - 1] > value; --at)
          list[at] = list[at - 1];
        list[at] = value;
      }
    }
    for (int64_t g = sub; g < groups; g += lanes) {
      float sum[V];
      for (int v = 0; v < V; ++v)
        sum[v] = 0.0f;
      auto add = [&](int64_t row) {
        const T *src = source + row * sourceLd + g * V;
        if constexpr (V > 1) {
          alignas(16) T x[V];
          *reinterpret_cast<uint4 *>(x) = *reinterpret_cast<const uint4 *>(src);
          for (int v = 0; v < V; ++v)
            sum[v] += toFloat(x[v]);
        } else {
          sum[0] += toFloat(src[0]);
        }
      };
      if (count <= kScatterSlots) {
        for (int j = 0; j < count; ++j)
          add(list[j]);
      } else {
        for (int64_t i = 0; i < n; ++i)
          if (loadIndex(index, i64, i) == m)
            add(i);
      }
      T *dst = result + m * resultLd + g * V;
      if constexpr (V > 1) {
        alignas(16) T y[V];
        for (int v = 0; v < V; ++v)
          y[v] = fromFloat<T>(sum[v]);
        *reinterpret_cast<uint4 *>(dst) = *reinterpret_cast<const uint4 *>(y);
      } else {
        dst[0] = fromFloat<T>(sum[0]);
      }
    }
  }
}

template <typename T>
cudaError_t launchScatterSum(const dcrt_row_map_desc &d, const void *source,
                             const void *index, void *result, const int *counts,
                             const int *slots, cudaStream_t stream) {
  constexpr int wide = 16 / sizeof(T);
  bool vectors =
      unitBytes(d.width * int64_t(sizeof(T)), d.source_ld * int64_t(sizeof(T)),
                d.result_ld * int64_t(sizeof(T)), source, result) == 16;
  int64_t groups = vectors ? d.width / wide : d.width;
  int lanes = std::min(kThreads, pow2AtLeast(groups));
  int64_t blocks = ceilDiv(d.table_rows, kThreads / lanes);
  bool i64 = d.index_dtype == DCRT_I64;
  if (vectors)
    scatterSumKernel<T, wide><<<gridFor(blocks), kThreads, 0, stream>>>(
        static_cast<const T *>(source), static_cast<T *>(result), counts, slots,
        index, i64, d.indexed_rows, d.table_rows, groups, d.source_ld,
        d.result_ld, lanes);
  else
    scatterSumKernel<T, 1><<<gridFor(blocks), kThreads, 0, stream>>>(
        static_cast<const T *>(source), static_cast<T *>(result), counts, slots,
        index, i64, d.indexed_rows, d.table_rows, groups, d.source_ld,
        d.result_ld, lanes);
  return cudaGetLastError();
}

/// Sliced weight gradients: out[e] = (accumulate ? out[e] : 0) + the
/// slices' partial sums added in slice order.
template <typename T> __global__ void addSlicesKernel(GroupedArgs a) {
  const int64_t perExpert = a.k * a.p, total = perExpert * a.experts;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    float sum = 0.0f;
    for (int s = 0; s < a.slices; ++s)
      sum += a.partial[s * total + i];
    int64_t e = i / perExpert, kk = i % perExpert / a.p, j = i % a.p;
    T *out = static_cast<T *>(a.out) + e * a.outExpertStride + kk * a.outLd + j;
    *out = fromFloat<T>(a.accumulate ? toFloat(*out) + sum : sum);
  }
}

//===----------------------------------------------------------------------===//
// Grouped products: the tensor-core kernel
//===----------------------------------------------------------------------===//

using tile::kTileElements;
using tile::kTileK;
using tile::kTileM;
using tile::kTileN;
using tile::swizzled;
constexpr int kStages = 3;
constexpr int kMmaThreads = tile::kThreads;
constexpr int kMmaSharedBytes = kStages * 2 * kTileElements * 2;

__device__ __forceinline__ void loadMatrices(uint32_t (&r)[4],
                                             const void *address) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(sharedAddress(address)));
}
__device__ __forceinline__ void loadMatricesTransposed(uint32_t (&r)[4],
                                                       const void *address) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, "
      "[%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(sharedAddress(address)));
}

template <typename T>
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4],
                                    uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0),
                   "r"(b1));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0),
                   "r"(b1));
}

template <typename T, int ROWS, int COLS>
__device__ __forceinline__ void loadTile(T *tile, const TileSource<T> &s,
                                         int64_t t) {
  constexpr int chunksPerRow = COLS / 8;
  const int64_t rowShift = s.alongRows ? t * kTileK : 0;
  const int64_t colShift = s.alongRows ? 0 : t * kTileK;
  for (int i = threadIdx.x; i < ROWS * chunksPerRow; i += kMmaThreads) {
    const auto [r, c] = tile::chunkCell<COLS>(i);
    const bool valid = r + rowShift < s.rowsValid && c + colShift < s.colsValid;
    const T *src =
        valid ? s.origin + (r + rowShift) * s.ld + c + colShift : s.fallback;
    copyAsync(tile + swizzled<COLS>(r, c), src, valid);
  }
}

/// The block's output tile with tensor cores. A is the M x K operand, B
/// the K x N one; A_ALONG_M: A's shared tile is [k][m] (the weight
/// gradient's lhs^T), else [m][k]; B_ALONG_N: B's is [k][n] (an
/// untransposed weight, the weight gradient's rhs), else [n][k].
template <typename T, bool WEIGHT_GRAD, bool TRANSPOSE_RHS>
__global__ void __launch_bounds__(kMmaThreads, 2)
    groupedMmaKernel(GroupedArgs a) {
  constexpr bool aAlongM = WEIGHT_GRAD;
  constexpr bool bAlongN = WEIGHT_GRAD || !TRANSPOSE_RHS;
  extern __shared__ __align__(128) unsigned char sharedBytes[];
  T *tiles = reinterpret_cast<T *>(sharedBytes);

  const BlockWork w = findWork<kTileM, kTileN>(a, WEIGHT_GRAD);
  if (!w.found)
    return;
  const bool empty = !WEIGHT_GRAD && w.group == a.experts;
  const T *lhs = static_cast<const T *>(a.lhs);
  const T *rhs = static_cast<const T *>(a.rhs);
  TileSource<T> sa{}, sb{};
  int64_t steps;
  if constexpr (!WEIGHT_GRAD) {
    // A: lhs rows [first, end) x k. B: expert `group`'s [k, p] or [p, k].
    sa = {lhs + w.first * a.lhsLd, lhs, a.lhsLd, w.end - w.first, a.k, false};
    const T *matrix = rhs + int64_t(empty ? 0 : w.group) * a.rhsExpertStride;
    if constexpr (TRANSPOSE_RHS)
      sb = {matrix + w.col0 * a.rhsLd, rhs, a.rhsLd, a.p - w.col0, a.k, false};
    else
      sb = {matrix + w.col0, rhs, a.rhsLd, a.k, a.p - w.col0, true};
    steps = empty ? 0 : (a.k + kTileK - 1) / kTileK;
  } else {
    // A^T: lhs rows [first, end) x k columns from row0. B: rhs rows x p.
    sa = {lhs + w.first * a.lhsLd + w.row0,
          lhs,
          a.lhsLd,
          w.end - w.first,
          a.k - w.row0,
          true};
    sb = {rhs + w.first * a.rhsLd + w.col0,
          rhs,
          a.rhsLd,
          w.end - w.first,
          a.p - w.col0,
          true};
    steps = (w.end - w.first + kTileK - 1) / kTileK;
  }

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int warpRow = tile::warpRow(warp), warpCol = tile::warpCol(warp);
  float acc[4][8][4] = {};

  auto tileA = [&](int stage) { return tiles + stage * 2 * kTileElements; };
  auto tileB = [&](int stage) { return tileA(stage) + kTileElements; };
  auto load = [&](int stage, int64_t t) {
    if constexpr (aAlongM)
      loadTile<T, kTileK, kTileM>(tileA(stage), sa, t);
    else
      loadTile<T, kTileM, kTileK>(tileA(stage), sa, t);
    if constexpr (bAlongN)
      loadTile<T, kTileK, kTileN>(tileB(stage), sb, t);
    else
      loadTile<T, kTileN, kTileK>(tileB(stage), sb, t);
  };

  for (int s = 0; s < kStages - 1; ++s) {
    if (s < steps)
      load(s, s);
    commitAsync();
  }
  for (int64_t t = 0; t < steps; ++t) {
    waitAsync<kStages - 2>();
    __syncthreads();
    if (t + kStages - 1 < steps)
      load(int((t + kStages - 1) % kStages), t + kStages - 1);
    commitAsync();
    const T *sA = tileA(int(t % kStages));
    const T *sB = tileB(int(t % kStages));
#pragma unroll
    for (int kk = 0; kk < kTileK; kk += 16) {
      uint32_t fa[4][4], fb[8][2];
#pragma unroll
      for (int mi = 0; mi < 4; ++mi) {
        const auto [r, c] = tile::aFragmentCell<aAlongM>(lane, warpRow, mi, kk);
        if constexpr (aAlongM)
          loadMatricesTransposed(fa[mi], sA + swizzled<kTileM>(r, c));
        else
          loadMatrices(fa[mi], sA + swizzled<kTileK>(r, c));
      }
#pragma unroll
      for (int nj = 0; nj < 4; ++nj) {
        uint32_t r[4];
        const auto [row, col] =
            tile::bFragmentCell<bAlongN>(lane, warpCol, nj, kk);
        if constexpr (bAlongN)
          loadMatricesTransposed(r, sB + swizzled<kTileN>(row, col));
        else
          loadMatrices(r, sB + swizzled<kTileK>(row, col));
        fb[2 * nj][0] = r[0];
        fb[2 * nj][1] = r[1];
        fb[2 * nj + 1][0] = r[2];
        fb[2 * nj + 1][1] = r[3];
      }
#pragma unroll
      for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int ni = 0; ni < 8; ++ni)
          mma<T>(acc[mi][ni], fa[mi], fb[ni][0], fb[ni][1]);
    }
  }
  waitAsync<0>();

  const OutTile o = outTile<T>(a, w, WEIGHT_GRAD);
#pragma unroll
  for (int mi = 0; mi < 4; ++mi)
#pragma unroll
    for (int ni = 0; ni < 8; ++ni)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const auto [r, c] =
            tile::accumulatorCell(lane, warpRow, warpCol, mi, ni, half);
        emit<T>(o, r, c, acc[mi][ni][2 * half], acc[mi][ni][2 * half + 1]);
      }
}

//===----------------------------------------------------------------------===//
// Grouped products: the CUDA-core kernel
//===----------------------------------------------------------------------===//

constexpr int kSimtTile = 64, kSimtDepth = 16;

template <typename T, bool WEIGHT_GRAD, bool TRANSPOSE_RHS>
__global__ void __launch_bounds__(kThreads) groupedSimtKernel(GroupedArgs a) {
  __shared__ float sA[kSimtDepth][kSimtTile + 1];
  __shared__ float sB[kSimtDepth][kSimtTile + 1];
  const BlockWork w = findWork<kSimtTile, kSimtTile>(a, WEIGHT_GRAD);
  if (!w.found)
    return;
  const bool empty = !WEIGHT_GRAD && w.group == a.experts;
  const T *lhs = static_cast<const T *>(a.lhs);
  const T *rhs = static_cast<const T *>(a.rhs);
  const T *matrix =
      rhs + (WEIGHT_GRAD || empty ? 0 : int64_t(w.group) * a.rhsExpertStride);
  const int64_t depth = empty         ? 0
                        : WEIGHT_GRAD ? w.end - w.first
                                      : a.k; // the reduction
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  float acc[4][4] = {};
  for (int64_t k0 = 0; k0 < depth; k0 += kSimtDepth) {
    for (int q = threadIdx.x; q < kSimtDepth * kSimtTile; q += kThreads) {
      // Consecutive threads read consecutive addresses of each operand.
      float x = 0.0f, y = 0.0f;
      if constexpr (!WEIGHT_GRAD) {
        int m = q / kSimtDepth, kk = q % kSimtDepth; // lhs along k
        if (w.first + m < w.end && k0 + kk < a.k)
          x = toFloat(lhs[(w.first + m) * a.lhsLd + k0 + kk]);
        sA[kk][m] = x;
        if constexpr (TRANSPOSE_RHS) { // [p, k]: along k
          int n = q / kSimtDepth, kb = q % kSimtDepth;
          if (w.col0 + n < a.p && k0 + kb < a.k)
            y = toFloat(matrix[(w.col0 + n) * a.rhsLd + k0 + kb]);
          sB[kb][n] = y;
        } else { // [k, p]: along p
          int n = q % kSimtTile, kb = q / kSimtTile;
          if (w.col0 + n < a.p && k0 + kb < a.k)
            y = toFloat(matrix[(k0 + kb) * a.rhsLd + w.col0 + n]);
          sB[kb][n] = y;
        }
      } else { // both along their columns, rows = the reduction
        int m = q % kSimtTile, kk = q / kSimtTile;
        int64_t row = w.first + k0 + kk;
        if (row < w.end && w.row0 + m < a.k)
          x = toFloat(lhs[row * a.lhsLd + w.row0 + m]);
        if (row < w.end && w.col0 + m < a.p)
          y = toFloat(rhs[row * a.rhsLd + w.col0 + m]);
        sA[kk][m] = x;
        sB[kk][m] = y;
      }
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kSimtDepth; ++kk) {
      float av[4], bv[4];
      for (int i = 0; i < 4; ++i) {
        av[i] = sA[kk][ty + 16 * i];
        bv[i] = sB[kk][tx + 16 * i];
      }
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j)
          acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }
  const OutTile o = outTile<T>(a, w, WEIGHT_GRAD);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      int r = ty + 16 * i, c = tx + 16 * j;
      if (!o.write || r >= o.rowsLeft || c >= o.colsLeft)
        continue;
      int64_t at = r * o.ld + c;
      if (o.partial) {
        static_cast<float *>(o.base)[at] = acc[i][j];
      } else {
        T *out = static_cast<T *>(o.base);
        out[at] = fromFloat<T>(o.accumulate ? toFloat(out[at]) + acc[i][j]
                                            : acc[i][j]);
      }
    }
}

//===----------------------------------------------------------------------===//
// Grouped products: launches
//===----------------------------------------------------------------------===//

GroupedArgs groupedArgs(const dcrt_grouped_matmul_desc &d,
                        const GroupedPlan &plan, void *workspace,
                        const void *lhs, const void *rhs, const void *ends,
                        void *out, int tileM, int tileN) {
  GroupedArgs a{};
  a.lhs = lhs;
  a.rhs = rhs;
  a.ends = ends;
  a.out = out;
  a.partial = static_cast<float *>(workspace);
  a.rows = d.rows;
  a.k = d.k;
  a.p = d.p;
  a.experts = static_cast<int>(d.experts);
  a.slices = static_cast<int>(plan.slices);
  a.endsI64 = d.ends_dtype == DCRT_I64;
  a.accumulate = d.accumulate != 0;
  a.lhsLd = d.lhs_ld;
  a.rhsLd = d.rhs_ld;
  a.outLd = d.out_ld;
  a.rhsExpertStride = d.rhs_expert_stride;
  a.outExpertStride = d.out_expert_stride;
  // Every expert's rows can start a partial tile, and the rows past the
  // last end are one more group.
  a.rowTiles = ceilDiv(d.rows, tileM) + d.experts + 1;
  a.colTiles = ceilDiv(d.p, tileN);
  a.kTiles = ceilDiv(d.k, tileM);
  return a;
}

/// The kernel a grouped product runs on.
enum class Kernel { CudaCores, MmaSync, Wgmma };

template <typename T, bool WEIGHT_GRAD, bool TRANSPOSE_RHS>
cudaError_t launchGrouped(const GroupedArgs &a, Kernel kernel,
                          const GroupedKernels &kernels, cudaStream_t stream) {
  dim3 grid;
  if (WEIGHT_GRAD)
    grid =
        dim3(static_cast<unsigned>(a.kTiles * a.colTiles),
             static_cast<unsigned>(a.experts), static_cast<unsigned>(a.slices));
  else
    grid = dim3(static_cast<unsigned>(a.rowTiles * a.colTiles));
  if constexpr (!std::is_same_v<T, float>) {
    if (kernel == Kernel::Wgmma) {
      const int32_t dtype = std::is_same_v<T, __half> ? DCRT_F16 : DCRT_BF16;
      cudaError_t status;
      if (kernels.tma &&
          launchWgmmaTma(a, dtype, WEIGHT_GRAD, TRANSPOSE_RHS,
                         kernels.multiprocessors, stream, status))
        return status;
      return launchWgmma(a, dtype, WEIGHT_GRAD, TRANSPOSE_RHS, stream);
    }
    if (kernel == Kernel::MmaSync) {
      auto mma = groupedMmaKernel<T, WEIGHT_GRAD, TRANSPOSE_RHS>;
      if (cudaError_t status =
              allowSharedBytes<groupedMmaKernel<T, WEIGHT_GRAD, TRANSPOSE_RHS>>(
                  kMmaSharedBytes);
          status != cudaSuccess)
        return status;
      mma<<<grid, kMmaThreads, kMmaSharedBytes, stream>>>(a);
      return cudaGetLastError();
    }
  }
  groupedSimtKernel<T, WEIGHT_GRAD, TRANSPOSE_RHS>
      <<<grid, kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

template <typename T>
cudaError_t runGrouped(const dcrt_grouped_matmul_desc &d,
                       const GroupedPlan &plan, void *workspace, Kernel kernel,
                       const GroupedKernels &kernels, bool weightGrad,
                       const void *lhs, const void *rhs, const void *ends,
                       void *out, cudaStream_t stream) {
  GroupedArgs a =
      kernel == Kernel::Wgmma ? groupedArgs(d, plan, workspace, lhs, rhs, ends,
                                            out, kWgmmaTileM, kWgmmaTileN)
      : kernel == Kernel::MmaSync
          ? groupedArgs(d, plan, workspace, lhs, rhs, ends, out, kTileM, kTileN)
          : groupedArgs(d, plan, workspace, lhs, rhs, ends, out, kSimtTile,
                        kSimtTile);
  cudaError_t status;
  if (weightGrad)
    status = launchGrouped<T, true, false>(a, kernel, kernels, stream);
  else if (d.transpose_rhs)
    status = launchGrouped<T, false, true>(a, kernel, kernels, stream);
  else
    status = launchGrouped<T, false, false>(a, kernel, kernels, stream);
  if (status != cudaSuccess || !weightGrad || plan.slices == 1)
    return status;
  addSlicesKernel<T><<<gridFor(ceilDiv(d.experts * d.k * d.p, kThreads)),
                       kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t dispatchGrouped(const dcrt_grouped_matmul_desc &d,
                            const GroupedPlan &plan, void *workspace,
                            const GroupedKernels &kernels, bool weightGrad,
                            const void *lhs, const void *rhs, const void *ends,
                            void *out, cudaStream_t stream) {
  Kernel kernel = Kernel::CudaCores;
  if (kernels.tensorCores &&
      groupedUsesTensorCores(d, weightGrad, lhs, rhs, out))
    kernel = kernels.wgmma ? Kernel::Wgmma : Kernel::MmaSync;
  switch (d.dtype) {
  case DCRT_BF16:
    return runGrouped<__nv_bfloat16>(d, plan, workspace, kernel, kernels,
                                     weightGrad, lhs, rhs, ends, out, stream);
  case DCRT_F16:
    return runGrouped<__half>(d, plan, workspace, kernel, kernels, weightGrad,
                              lhs, rhs, ends, out, stream);
  default:
    return runGrouped<float>(d, plan, workspace, Kernel::CudaCores, kernels,
                             weightGrad, lhs, rhs, ends, out, stream);
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

cudaError_t topk(const dcrt_topk_desc &d, const void *scores, void *values,
                 void *indices, cudaStream_t stream) {
  switch (d.dtype) {
  case DCRT_BF16:
    return launchTopk<__nv_bfloat16>(d, scores, values, indices, stream);
  case DCRT_F16:
    return launchTopk<__half>(d, scores, values, indices, stream);
  default:
    return launchTopk<float>(d, scores, values, indices, stream);
  }
}

GroupByExpertLayout groupByExpertLayout(const dcrt_group_by_expert_desc &d) {
  GroupByExpertLayout layout;
  const int64_t bins = d.experts + 1, tiles = ceilDiv(d.assignments, kThreads);
  const int64_t maxChunks = std::max<int64_t>(1, kMaxGroupCounts / bins);
  layout.tilesPerChunk = ceilDiv(tiles, maxChunks);
  layout.chunks = ceilDiv(tiles, layout.tilesPerChunk);
  layout.workspaceBytes = 256 + bins * layout.chunks * 4;
  return layout;
}

cudaError_t groupByExpert(const dcrt_group_by_expert_desc &d,
                          const GroupByExpertLayout &layout, void *workspace,
                          const void *ids, void *order, void *ends,
                          cudaStream_t stream) {
  if (d.experts > kMaxGroupExperts || d.assignments > INT_MAX)
    return cudaErrorInvalidValue;
  GroupArgs a{};
  a.ids = ids;
  a.order = order;
  a.ends = ends;
  a.ticket = static_cast<unsigned *>(workspace);
  a.counts = reinterpret_cast<int *>(static_cast<char *>(workspace) + 256);
  a.n = d.assignments;
  a.experts = static_cast<int>(d.experts);
  a.chunks = static_cast<int>(layout.chunks);
  a.tilesPerChunk = static_cast<int>(layout.tilesPerChunk);
  a.idsI64 = d.ids_dtype == DCRT_I64;
  a.orderI64 = d.order_dtype == DCRT_I64;
  a.endsI64 = d.ends_dtype == DCRT_I64;
  const int bins = a.experts + 1;
  groupCountKernel<<<a.chunks, kThreads, bins * sizeof(int), stream>>>(a);
  cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess)
    return status;
  groupPlaceKernel<<<a.chunks, kThreads,
                     (1 + kThreads / 32) * bins * sizeof(int), stream>>>(a);
  return cudaGetLastError();
}

cudaError_t gatherRows(const dcrt_row_map_desc &d, const void *source,
                       const void *index, void *result, cudaStream_t stream) {
  int64_t size = d.dtype == DCRT_F32 ? 4 : 2;
  switch (unitBytes(d.width * size, d.source_ld * size, d.result_ld * size,
                    source, result)) {
  case 16:
    return launchGather<uint4>(d, size, source, index, result, stream);
  case 4:
    return launchGather<uint32_t>(d, size, source, index, result, stream);
  default:
    return launchGather<uint16_t>(d, size, source, index, result, stream);
  }
}

int64_t scatterAddWorkspaceBytes(const dcrt_row_map_desc &d) {
  return align256(d.table_rows * 4) + d.table_rows * kScatterSlots * 4;
}

cudaError_t scatterAddRows(const dcrt_row_map_desc &d, void *workspace,
                           const void *source, const void *index, void *result,
                           cudaStream_t stream) {
  if (d.indexed_rows > INT_MAX)
    return cudaErrorInvalidValue;
  int *counts = static_cast<int *>(workspace);
  int *slots = reinterpret_cast<int *>(static_cast<char *>(workspace) +
                                       align256(d.table_rows * 4));
  cudaError_t status =
      cudaMemsetAsync(counts, 0, static_cast<size_t>(d.table_rows) * 4, stream);
  if (status != cudaSuccess)
    return status;
  scatterSlotsKernel<<<gridFor(ceilDiv(d.indexed_rows, kThreads)), kThreads, 0,
                       stream>>>(index, d.index_dtype == DCRT_I64,
                                 d.indexed_rows, d.table_rows, counts, slots);
  status = cudaGetLastError();
  if (status != cudaSuccess)
    return status;
  switch (d.dtype) {
  case DCRT_BF16:
    return launchScatterSum<__nv_bfloat16>(d, source, index, result, counts,
                                           slots, stream);
  case DCRT_F16:
    return launchScatterSum<__half>(d, source, index, result, counts, slots,
                                    stream);
  default:
    return launchScatterSum<float>(d, source, index, result, counts, slots,
                                   stream);
  }
}

GroupedPlan planGrouped(const dcrt_grouped_matmul_desc &d, bool weightGrad,
                        int multiprocessors) {
  GroupedPlan plan;
  if (!weightGrad)
    return plan;
  // Enough blocks for two per SM when one expert has every row; slices of
  // at least 256 of the worst case's rows; at most 256 MiB of partials.
  const int64_t tiles = ceilDiv(d.k, kTileM) * ceilDiv(d.p, kTileN);
  int64_t slices = ceilDiv(2 * int64_t(multiprocessors), tiles);
  slices = std::min<int64_t>({slices, 16, std::max<int64_t>(1, d.rows / 256)});
  const int64_t partialBytes = d.experts * d.k * d.p * 4;
  while (slices > 1 && slices * partialBytes > (int64_t(256) << 20))
    --slices;
  plan.slices = std::max<int64_t>(1, slices);
  plan.workspaceBytes = plan.slices > 1 ? plan.slices * partialBytes : 0;
  return plan;
}

bool groupedUsesTensorCores(const dcrt_grouped_matmul_desc &d, bool weightGrad,
                            const void *lhs, const void *rhs, const void *out) {
  if (d.dtype != DCRT_BF16 && d.dtype != DCRT_F16)
    return false;
  auto aligned = [](const void *p) {
    return reinterpret_cast<uintptr_t>(p) % 16 == 0;
  };
  return d.k % 8 == 0 && d.p % 8 == 0 && d.lhs_ld % 8 == 0 &&
         d.rhs_ld % 8 == 0 && d.out_ld % 8 == 0 &&
         (weightGrad ? d.out_expert_stride : d.rhs_expert_stride) % 8 == 0 &&
         aligned(lhs) && aligned(rhs) && aligned(out);
}

cudaError_t groupedMatmul(const dcrt_grouped_matmul_desc &d,
                          const GroupedPlan &plan, void *workspace,
                          const GroupedKernels &kernels, const void *lhs,
                          const void *rhs, const void *ends, void *out,
                          cudaStream_t stream) {
  return dispatchGrouped(d, plan, workspace, kernels, false, lhs, rhs, ends,
                         out, stream);
}

cudaError_t groupedWeightGrad(const dcrt_grouped_matmul_desc &d,
                              const GroupedPlan &plan, void *workspace,
                              const GroupedKernels &kernels, const void *lhs,
                              const void *rhs, const void *ends, void *out,
                              cudaStream_t stream) {
  return dispatchGrouped(d, plan, workspace, kernels, true, lhs, rhs, ends, out,
                         stream);
}

} // namespace dcrt::cuda::moe
