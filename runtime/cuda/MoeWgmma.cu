//===- MoeWgmma.cu - the grouped products on Hopper's wgmma (sm_90a) ------===//
//
// The grouped products' tensor-core kernel for sm_90 GPUs (H100, H200)
// where the TMA kernel (MoeWgmmaTma.cu) does not run (DCRT_MOE_TMA=0, or
// operands no tensor map describes);
// compiled for sm_90a alone (wgmma is an arch-specific instruction), its
// wgmma pieces in MoeWgmma.cuh: a block computes a 128 x 256 output tile with
// 2 warpgroups of 64 x 256, each k16 step one wgmma.mma_async m64n256k16
// per warpgroup with both operands read from shared memory by descriptor.
// Operands arrive by cp.async (16-byte chunks, zero-filled past the
// operand's rows and columns) in a 4-stage pipeline; shared tiles are PTX's
// canonical 128-byte-swizzled layouts (MoeTile.h, checked on the CPU by
// MoeTileTest): K-major for the forward's lhs and a transposed weight,
// MN-major (wgmma's transpose bits) for an untransposed weight and the
// weight gradient's operands. Each iteration: wait for its stage's copies,
// fence them into the async proxy, barrier; issue the stage's 4 wgmmas and
// commit; wait until the previous stage's wgmmas are done (one group stays
// in flight), barrier; refill that stage. The schedule (which expert, rows
// and columns), the zero rows and the epilogue are MoeKernels.cu's
// (MoeGrouped.cuh). Accumulation order is fixed: deterministic.
//
//===----------------------------------------------------------------------===//
#include "MoeWgmma.cuh"

namespace dcrt::cuda::moe::grouped {
namespace {

namespace wg = tile::wgmma;
using tile::swizzled;
using namespace hopper;

constexpr int kStages = 4;
constexpr int kStageElements = wg::kATileElements + wg::kBTileElements;
/// The stages, and 1 KiB to align them to 1024 bytes (the swizzle's
/// pattern).
constexpr int kSharedBytes = kStages * kStageElements * 2 + 1024;

/// cp.async wrote through the generic proxy; wgmma reads through the async
/// one.
__device__ __forceinline__ void fenceAsyncProxy() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

/// One operand's tile t into shared memory: ROWS x COLS of global memory
/// (COLS contiguous) from `s`, stored K-major (COLS = 64) or MN-major
/// (ROWS = 64 k-rows).
template <typename T, int ROWS, int COLS, bool MN_MAJOR>
__device__ __forceinline__ void loadTile(T *tile, const TileSource<T> &s,
                                         int64_t t) {
  const int64_t rowShift = s.alongRows ? t * wg::kTileK : 0;
  const int64_t colShift = s.alongRows ? 0 : t * wg::kTileK;
#pragma unroll
  for (int i = threadIdx.x; i < ROWS * COLS / 8; i += wg::kThreads) {
    const auto [r, c] = wg::chunkCell<COLS>(i);
    const bool valid = r + rowShift < s.rowsValid && c + colShift < s.colsValid;
    const T *src =
        valid ? s.origin + (r + rowShift) * s.ld + c + colShift : s.fallback;
    copyAsync(tile + (MN_MAJOR ? wg::mnMajorOffset(r, c) : swizzled<64>(r, c)),
              src, valid);
  }
}

template <typename T, bool WEIGHT_GRAD, bool TRANSPOSE_RHS>
__global__ void __launch_bounds__(wg::kThreads, 1)
    groupedWgmmaKernel(GroupedArgs a) {
  constexpr bool aMnMajor = WEIGHT_GRAD;
  constexpr bool bMnMajor = WEIGHT_GRAD || !TRANSPOSE_RHS;
  extern __shared__ __align__(128) unsigned char sharedBytes[];
  // The swizzle is on address bits: stages start at 1024-byte boundaries.
  T *tiles = reinterpret_cast<T *>(
      sharedBytes + ((1024 - sharedAddress(sharedBytes) % 1024) % 1024));

  const BlockWork w = findWork<wg::kTileM, wg::kTileN>(a, WEIGHT_GRAD);
  if (!w.found)
    return;
  const bool empty = !WEIGHT_GRAD && w.group == a.experts;
  const T *lhs = static_cast<const T *>(a.lhs);
  const T *rhs = static_cast<const T *>(a.rhs);
  TileSource<T> sa{}, sb{};
  int64_t steps;
  if constexpr (!WEIGHT_GRAD) {
    sa = {lhs + w.first * a.lhsLd, lhs, a.lhsLd, w.end - w.first, a.k, false};
    const T *matrix = rhs + int64_t(empty ? 0 : w.group) * a.rhsExpertStride;
    if constexpr (TRANSPOSE_RHS)
      sb = {matrix + w.col0 * a.rhsLd, rhs, a.rhsLd, a.p - w.col0, a.k, false};
    else
      sb = {matrix + w.col0, rhs, a.rhsLd, a.k, a.p - w.col0, true};
    steps = empty ? 0 : (a.k + wg::kTileK - 1) / wg::kTileK;
  } else {
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
    steps = (w.end - w.first + wg::kTileK - 1) / wg::kTileK;
  }

  auto tileA = [&](int stage) { return tiles + stage * kStageElements; };
  auto tileB = [&](int stage) { return tileA(stage) + wg::kATileElements; };
  auto load = [&](int stage, int64_t t) {
    if constexpr (aMnMajor)
      loadTile<T, wg::kTileK, wg::kTileM, true>(tileA(stage), sa, t);
    else
      loadTile<T, wg::kTileM, wg::kTileK, false>(tileA(stage), sa, t);
    if constexpr (bMnMajor)
      loadTile<T, wg::kTileK, wg::kTileN, true>(tileB(stage), sb, t);
    else
      loadTile<T, wg::kTileN, wg::kTileK, false>(tileB(stage), sb, t);
  };

  const int group = threadIdx.x / 128; // the warpgroup: rows 64 group ...
  float d[128];
  for (float &x : d)
    x = 0.0f;

  for (int s = 0; s < kStages - 1; ++s) {
    if (s < steps)
      load(s, s);
    commitAsync();
  }
  for (int64_t t = 0; t < steps; ++t) {
    const int stage = int(t % kStages);
    waitAsync<kStages - 2>();
    fenceAsyncProxy();
    __syncthreads();
    fenceOperands(d);
    wgmmaFence();
#pragma unroll
    for (int step = 0; step < wg::kTileK / 16; ++step) {
      uint64_t da = descriptor(
          tileA(stage), aMnMajor ? wg::mnMajorDescriptor(group, step)
                                 : wg::kMajorDescriptor(group * 64, step));
      uint64_t db =
          descriptor(tileB(stage), bMnMajor ? wg::mnMajorDescriptor(0, step)
                                            : wg::kMajorDescriptor(0, step));
      mma<T, aMnMajor, bMnMajor>(d, da, db);
    }
    wgmmaCommit();
    wgmmaWait<1>(); // the previous stage's wgmmas are done
    fenceOperands(d);
    __syncthreads(); // ... in both warpgroups: its stage is free
    if (t + kStages - 1 < steps)
      load(int((t + kStages - 1) % kStages), t + kStages - 1);
    commitAsync();
  }
  wgmmaWait<0>();
  fenceOperands(d);
  waitAsync<0>();

  const OutTile o = outTile<T>(a, w, WEIGHT_GRAD);
#pragma unroll
  for (int j = 0; j < wg::kTileN / 8; ++j)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const auto [r, c] = wg::accumulatorCell(threadIdx.x, j, half);
      emit<T>(o, r, c, d[4 * j + 2 * half], d[4 * j + 2 * half + 1]);
    }
}

template <typename T, bool WEIGHT_GRAD, bool TRANSPOSE_RHS>
cudaError_t launch(const GroupedArgs &a, cudaStream_t stream) {
  auto kernel = groupedWgmmaKernel<T, WEIGHT_GRAD, TRANSPOSE_RHS>;
  if (cudaError_t status =
          allowSharedBytes<groupedWgmmaKernel<T, WEIGHT_GRAD, TRANSPOSE_RHS>>(
              kSharedBytes);
      status != cudaSuccess)
    return status;
  dim3 grid = WEIGHT_GRAD
                  ? dim3(static_cast<unsigned>(a.kTiles * a.colTiles),
                         static_cast<unsigned>(a.experts),
                         static_cast<unsigned>(a.slices))
                  : dim3(static_cast<unsigned>(a.rowTiles * a.colTiles));
  kernel<<<grid, wg::kThreads, kSharedBytes, stream>>>(a);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launchFor(const GroupedArgs &a, bool weightGrad, bool transposeRhs,
                      cudaStream_t stream) {
  if (weightGrad)
    return launch<T, true, false>(a, stream);
  if (transposeRhs)
    return launch<T, false, true>(a, stream);
  return launch<T, false, false>(a, stream);
}

} // namespace

cudaError_t launchWgmma(const GroupedArgs &a, int32_t dtype, bool weightGrad,
                        bool transposeRhs, cudaStream_t stream) {
  if (dtype == DCRT_BF16)
    return launchFor<__nv_bfloat16>(a, weightGrad, transposeRhs, stream);
  return launchFor<__half>(a, weightGrad, transposeRhs, stream);
}

} // namespace dcrt::cuda::moe::grouped
