//===- MoeWgmma.cu - the grouped products on Hopper's wgmma (sm_90a) ------===//
//
// dcrt_grouped_matmul's and dcrt_grouped_weight_grad's tensor-core kernel
// for sm_90 GPUs (H100, H200), compiled for sm_90a alone (wgmma is an
// arch-specific instruction): a block computes a 128 x 256 output tile with
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
#include "MoeGrouped.cuh"
#include "MoeTile.h"

#include <type_traits>

namespace dcrt::cuda::moe::grouped {
namespace {

namespace wg = tile::wgmma;
using tile::swizzled;

constexpr int kStages = 4;
constexpr int kStageElements = wg::kATileElements + wg::kBTileElements;
/// The stages, and 1 KiB to align them to 1024 bytes (the swizzle's
/// pattern).
constexpr int kSharedBytes = kStages * kStageElements * 2 + 1024;

/// A wgmma matrix descriptor of `d` in the tile at `tile`: the start
/// address, leading and stride byte offsets (each >> 4), 128-byte
/// swizzling (base offset 0: the tile is 1024-byte aligned).
template <typename T>
__device__ __forceinline__ uint64_t descriptor(const T *tile,
                                               const wg::Descriptor &d) {
  uint64_t address = sharedAddress(tile + d.start);
  return ((address & 0x3ffff) >> 4) |
         (uint64_t((d.leadingBytes >> 4) & 0x3fff) << 16) |
         (uint64_t((d.strideBytes >> 4) & 0x3fff) << 32) | (uint64_t(1) << 62);
}

/// Keeps the compiler from moving accumulator accesses across the
/// asynchronous wgmmas that own them.
__device__ __forceinline__ void fenceOperands(float (&d)[128]) {
  for (int i = 0; i < 128; ++i)
    asm volatile("" : "+f"(d[i])::"memory");
}

__device__ __forceinline__ void wgmmaFence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmmaCommit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N> __device__ __forceinline__ void wgmmaWait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/// cp.async wrote through the generic proxy; wgmma reads through the async
/// one.
__device__ __forceinline__ void fenceAsyncProxy() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

/// d (+)= a b for one k16 step: wgmma.mma_async m64n256k16, bf16
/// inputs, f32 accumulators, both operands from shared memory.
template <int TRANSPOSE_A, int TRANSPOSE_B>
__device__ __forceinline__ void mmaBf16(float (&d)[128], uint64_t a,
                                        uint64_t b) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, "
      "%30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, "
      "%44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, "
      "%58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, "
      "%72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, "
      "%86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, "
      "%100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, "
      "%124, %125, %126, %127}, "
      "%128, %129, p, 1, 1, %131, %132;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
        "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]),
        "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]),
        "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]),
        "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
        "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]),
        "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]),
        "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]),
        "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]),
        "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]),
        "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]),
        "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]),
        "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]),
        "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]),
        "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]),
        "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]),
        "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]),
        "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]),
        "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]),
        "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]),
        "+f"(d[126]), "+f"(d[127])
      : "l"(a), "l"(b), "r"(1), "n"(TRANSPOSE_A), "n"(TRANSPOSE_B));
}

/// d (+)= a b for one k16 step: wgmma.mma_async m64n256k16, f16
/// inputs, f32 accumulators, both operands from shared memory.
template <int TRANSPOSE_A, int TRANSPOSE_B>
__device__ __forceinline__ void mmaF16(float (&d)[128], uint64_t a,
                                       uint64_t b) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, "
      "%30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, "
      "%44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, "
      "%58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, "
      "%72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, "
      "%86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, "
      "%100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, "
      "%124, %125, %126, %127}, "
      "%128, %129, p, 1, 1, %131, %132;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
        "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]),
        "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]),
        "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]),
        "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
        "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]),
        "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]),
        "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]),
        "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]),
        "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]),
        "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]),
        "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]),
        "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]),
        "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]),
        "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]),
        "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]),
        "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]),
        "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]),
        "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]),
        "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]),
        "+f"(d[126]), "+f"(d[127])
      : "l"(a), "l"(b), "r"(1), "n"(TRANSPOSE_A), "n"(TRANSPOSE_B));
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
      if constexpr (std::is_same_v<T, __nv_bfloat16>)
        mmaBf16<aMnMajor, bMnMajor>(d, da, db);
      else
        mmaF16<aMnMajor, bMnMajor>(d, da, db);
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
  static bool sharedSet = false; // once per kernel (host only)
  if (!sharedSet) {
    cudaError_t status = cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes);
    if (status != cudaSuccess)
      return status;
    sharedSet = true;
  }
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
