//===- MoeWgmmaTma.cu - the grouped products on TMA and wgmma -------------===//
//
// dcrt_grouped_matmul's and dcrt_grouped_weight_grad's default kernel on
// sm_90 GPUs (H100, H200), compiled for sm_90a alone. The cp.async kernel
// (MoeWgmma.cu) has every thread compute addresses and issue copies
// between its wgmmas, waits for its own copies and holds both warpgroups
// at two block barriers per 64-deep stage, and leaves the tensor cores
// idle while a block starts (schedule, pipeline fill) and stores its tile.
// Here:
//  - TMA loads the operands: one thread issues a stage's 2 (transposed
//    weight), 5 (untransposed: four 64-column blocks) or 6 (weight
//    gradient: lhs^T's two 64-column blocks, rhs's four) bulk tensor
//    copies, described by tensor maps the host encodes per call (no device
//    memory read: a captured call keeps its maps as kernel parameters). The
//    boxes land in MoeTile.h's 128-byte-swizzled layouts (TMA's 128-byte
//    swizzle is the same XOR of address bits 4-6 by bits 7-9; MoeTileTest
//    checks that the boxes tile them), rows and columns past the tensors'
//    ends zero-filled.
//  - Forward: an lhs box may run past its expert's end into the next
//    expert's rows: those output rows are never written (emit's rowsLeft),
//    and an output row depends on its own lhs row only.
//  - Weight gradient: the rows are the reduction, so no row of another
//    expert may reach a sum. Each item (an output tile of one expert's
//    slice of rows) loads 64-row steps from the slice's first row (a TMA
//    box starts at any row), so only its last step can hold rows past the
//    slice's end; the consumers zero those k rows of both operands in
//    shared memory (whole 128-byte lines of the MN-major blocks) before
//    its wgmmas, fenced into the async proxy. The slices and their f32
//    partials (added in slice order after the kernel) are the cp.async
//    kernel's.
//  - Warp specialization: 2 consumer warpgroups (64 x 256 each of the
//    128 x 256 tile, m64n256k16 wgmma as in MoeWgmma.cu) and one producer
//    warp after them (the schedule; its lane 0 issues the copies). The
//    consumers need at most 164 registers here, within the 224 a block of
//    288 threads leaves them: no setmaxnreg. Stages are handed over by
//    mbarriers, not block barriers: `full` (the copies' bytes arrived: TMA's
//    complete_tx) and `empty` (each consumer warp's lane 0 arrives once the
//    wgmmas that read the stage are done, wgmma.wait_group 1).
//  - Persistent blocks: one per SM (192 KiB of stages), each walking the
//    items (the forward's tiles, the worst-case count; the weight
//    gradient's tiles of every expert and slice; MoeGrouped.cuh's orders)
//    from blockIdx.x by gridDim.x. The producer runs up to 4 stages ahead,
//    across items too, so the next item's operands load while the
//    consumers store this one's outputs.
// Every warp works out each item's expert and rows itself (the warp scans
// of MoeGrouped.cuh, a few shuffles for Mixtral-sized expert counts): no
// block barrier after the start (the weight gradient's zeroing holds the
// consumers alone at a named barrier). Each output is accumulated over its
// rows or k in the same order whichever block computes it: deterministic.
//
//===----------------------------------------------------------------------===//
#include "MoeWgmma.cuh"

#include <cuda.h> // CUtensorMap and its enums; the encoder is the driver's

#include <algorithm>
#include <climits>

namespace dcrt::cuda::moe::grouped {
namespace {

namespace wg = tile::wgmma;
using namespace hopper;

constexpr int kStages = 4;
/// The consumers' 2 warpgroups (wgmma wants a warpgroup's first warp at
/// a multiple of 4), then the producer warp.
constexpr int kThreads = wg::kThreads + 32;
constexpr int kConsumerWarps = wg::kThreads / 32;
constexpr int kStageElements = wg::kATileElements + wg::kBTileElements;
constexpr uint32_t kStageBytes = kStageElements * 2;
/// The stages, and 1 KiB to align them to 1024 bytes (the swizzle's
/// pattern).
constexpr int kSharedBytes = kStages * kStageElements * 2 + 1024;

//===----------------------------------------------------------------------===//
// mbarriers and TMA
//===----------------------------------------------------------------------===//

__device__ __forceinline__ void barrierInit(uint64_t *barrier, int count) {
  asm volatile(
      "mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(sharedAddress(barrier)),
      "r"(count)
      : "memory");
}

/// Makes the barriers' initialization visible to the async proxy (TMA's
/// complete_tx) and the other threads (with the block barrier after it).
__device__ __forceinline__ void fenceBarrierInit() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

/// Arrives on `barrier` and tells it `bytes` more are to come (the
/// stage's copies).
__device__ __forceinline__ void arriveExpecting(uint64_t *barrier,
                                                uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(
                   sharedAddress(barrier)),
               "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void arrive(uint64_t *barrier) {
  asm volatile(
      "mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(sharedAddress(barrier))
      : "memory");
}

/// A consumer warp is done with a stage: its lane 0 arrives on the
/// stage's `empty` barrier for the warp, after a warp barrier so that the
/// arrival's release covers every lane's reads.
__device__ __forceinline__ void release(uint64_t *empty, int lane) {
  __syncwarp();
  if (lane == 0)
    arrive(empty);
}

/// Waits until the phase of `barrier` with parity `parity` has completed.
__device__ __forceinline__ void waitPhase(uint64_t *barrier, uint32_t parity) {
  uint32_t done = 0;
  while (!done)
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n"
                 "}\n"
                 : "=r"(done)
                 : "r"(sharedAddress(barrier)), "r"(parity)
                 : "memory");
}

/// The box of `map` at coordinates (c0, c1, c2) (innermost first) into
/// shared `tile`, completing on `barrier`. A 2-D map ignores c2.
template <int RANK>
__device__ __forceinline__ void loadBox(void *tile, const CUtensorMap *map,
                                        uint64_t *barrier, int c0, int c1,
                                        int c2) {
  const uint64_t mapAddress = reinterpret_cast<uint64_t>(map);
  if constexpr (RANK == 2)
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::"
                 "complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
                     sharedAddress(tile)),
                 "l"(mapAddress), "r"(c0), "r"(c1), "r"(sharedAddress(barrier))
                 : "memory");
  else
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::"
                 "complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(
                     sharedAddress(tile)),
                 "l"(mapAddress), "r"(c0), "r"(c1), "r"(c2),
                 "r"(sharedAddress(barrier))
                 : "memory");
}

//===----------------------------------------------------------------------===//
// The kernel
//===----------------------------------------------------------------------===//

/// Where a stage advances: the next slot, its phase's parity flipping at
/// each wrap.
struct Pipeline {
  int stage = 0;
  uint32_t phase = 0;
  __device__ void advance() {
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1;
    }
  }
};

/// The weight gradient's last stage of an item may hold rows past its
/// slice's end (the next expert's, or the next slice's): the consumers
/// zero them, k rows [valid, 64) of both operands (a row of A alone is not
/// enough: 0 x Inf is NaN), before any wgmma reads the stage. The writes
/// are the generic proxy's, wgmma reads through the async one: each thread
/// fences its writes into it, then a barrier of the 256 consumer threads
/// (named barrier 1; the producer warp is not in it) orders every thread's
/// writes before every warpgroup's wgmmas.
template <typename T>
__device__ __forceinline__ void zeroRowsFrom(T *stage, int valid) {
  constexpr int kChunks = kStageElements / 8;
  uint4 *chunks = reinterpret_cast<uint4 *>(stage);
  for (int i = threadIdx.x; i < kChunks; i += wg::kThreads)
    if (wg::mnMajorChunkRow(i) >= valid)
      chunks[i] = make_uint4(0, 0, 0, 0);
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  asm volatile("bar.sync 1, %0;\n" ::"n"(wg::kThreads) : "memory");
}

/// Forward: lhsMap is lhs as [rows][k] (boxes 128 rows x 64 deep); rhsMap
/// rhs as [experts][p][k] (TRANSPOSE_RHS, boxes 256 x 64) or
/// [experts][k][p] (boxes 64 deep x 64 columns). Weight gradient: lhsMap
/// and rhsMap are lhs as [rows][k] and rhs as [rows][p], boxes 64 deep x 64
/// columns, both MN-major: A's 2 blocks and B's 4 at the item's first row
/// + 64 t, at any row (not a multiple of 64: rows before the item's first
/// are never loaded).
template <typename T, bool WEIGHT_GRAD, bool TRANSPOSE_RHS>
__global__ void __launch_bounds__(kThreads, 1)
    groupedTmaKernel(const __grid_constant__ CUtensorMap lhsMap,
                     const __grid_constant__ CUtensorMap rhsMap,
                     GroupedArgs a) {
  constexpr bool aMnMajor = WEIGHT_GRAD;
  constexpr bool bMnMajor = WEIGHT_GRAD || !TRANSPOSE_RHS;
  extern __shared__ __align__(128) unsigned char sharedBytes[];
  __shared__ uint64_t full[kStages], empty[kStages];
  // The swizzle is on address bits: stages start at 1024-byte boundaries.
  T *tiles = reinterpret_cast<T *>(
      sharedBytes + ((1024 - sharedAddress(sharedBytes) % 1024) % 1024));
  auto tileA = [&](int stage) { return tiles + stage * kStageElements; };
  auto tileB = [&](int stage) { return tileA(stage) + wg::kATileElements; };

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      barrierInit(&full[s], 1);
      barrierInit(&empty[s], kConsumerWarps);
    }
    fenceBarrierInit();
  }
  __syncthreads();

  const int64_t items = WEIGHT_GRAD
                            ? a.kTiles * a.colTiles * a.experts * a.slices
                            : a.rowTiles * a.colTiles;
  const int forwardSteps = int((a.k + wg::kTileK - 1) / wg::kTileK);
  const int lane = threadIdx.x % 32;
  Pipeline pipe;
  // Item `item`'s work and its count of 64-deep steps; false: nothing
  // there (past the forward's last tile). Every lane of a warp calls it.
  auto work = [&](int64_t item, BlockWork &w, int &steps) {
    if constexpr (WEIGHT_GRAD) {
      weightWork<wg::kTileM, wg::kTileN>(a, item, w);
      steps = int((w.end - w.first + wg::kTileK - 1) / wg::kTileK);
      return true;
    } else {
      if (!forwardWork<wg::kTileM, wg::kTileN>(a, item, w))
        return false;
      // The rows past the last end are zeros: nothing loaded.
      steps = w.group == a.experts ? 0 : forwardSteps;
      return true;
    }
  };

  if (threadIdx.x >= wg::kThreads) { // the producer warp
    for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
      BlockWork w;
      int steps;
      if (!work(item, w, steps))
        continue;
      if (lane == 0)
        for (int t = 0; t < steps; ++t, pipe.advance()) {
          // The first pass finds every stage empty: parity 1 is the
          // phase before the barrier's first.
          waitPhase(&empty[pipe.stage], pipe.phase ^ 1);
          uint64_t *barrier = &full[pipe.stage];
          arriveExpecting(barrier, kStageBytes);
          const int k0 = t * wg::kTileK;
          if constexpr (WEIGHT_GRAD) {
            const int row = int(w.first) + k0;
            for (int block = 0; block < wg::kTileM / 64; ++block)
              loadBox<2>(tileA(pipe.stage) + block * wg::kBlockElements,
                         &lhsMap, barrier, int(w.row0) + block * 64, row, 0);
            for (int block = 0; block < wg::kTileN / 64; ++block)
              loadBox<2>(tileB(pipe.stage) + block * wg::kBlockElements,
                         &rhsMap, barrier, int(w.col0) + block * 64, row, 0);
          } else {
            loadBox<2>(tileA(pipe.stage), &lhsMap, barrier, k0, int(w.first),
                       0);
            if constexpr (TRANSPOSE_RHS)
              loadBox<3>(tileB(pipe.stage), &rhsMap, barrier, k0, int(w.col0),
                         w.group);
            else
              for (int block = 0; block < wg::kTileN / 64; ++block)
                loadBox<3>(tileB(pipe.stage) + block * wg::kBlockElements,
                           &rhsMap, barrier, int(w.col0) + block * 64, k0,
                           w.group);
          }
        }
      __syncwarp();
    }
    return;
  }

  const int group = threadIdx.x / 128; // the warpgroup: rows 64 group ...
  float d[128];
  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    BlockWork w;
    int steps;
    if (!work(item, w, steps))
      continue;
    for (float &x : d)
      x = 0.0f;
    int previous = 0;
    for (int t = 0; t < steps; ++t, pipe.advance()) {
      waitPhase(&full[pipe.stage], pipe.phase);
      if constexpr (WEIGHT_GRAD) {
        // Uniform over the consumers: each warp found the same item.
        const int64_t valid = w.end - w.first - int64_t(t) * wg::kTileK;
        if (valid < wg::kTileK)
          zeroRowsFrom(tileA(pipe.stage), int(valid));
      }
      fenceOperands(d);
      wgmmaFence();
#pragma unroll
      for (int step = 0; step < wg::kTileK / 16; ++step) {
        uint64_t da =
            descriptor(tileA(pipe.stage),
                       aMnMajor ? wg::mnMajorDescriptor(group, step)
                                : wg::kMajorDescriptor(group * 64, step));
        uint64_t db = descriptor(tileB(pipe.stage),
                                 bMnMajor ? wg::mnMajorDescriptor(0, step)
                                          : wg::kMajorDescriptor(0, step));
        mma<T, aMnMajor, bMnMajor>(d, da, db);
      }
      wgmmaCommit();
      wgmmaWait<1>(); // the previous stage's wgmmas are done: release it
      fenceOperands(d);
      if (t > 0)
        release(&empty[previous], lane);
      previous = pipe.stage;
    }
    wgmmaWait<0>();
    fenceOperands(d);
    if (steps > 0)
      release(&empty[previous], lane);

    const OutTile o = outTile<T>(a, w, WEIGHT_GRAD);
#pragma unroll
    for (int j = 0; j < wg::kTileN / 8; ++j)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const auto [r, c] = wg::accumulatorCell(threadIdx.x, j, half);
        emit<T>(o, r, c, d[4 * j + 2 * half], d[4 * j + 2 * half + 1]);
      }
  }
}

//===----------------------------------------------------------------------===//
// Tensor maps and the launch
//===----------------------------------------------------------------------===//

/// cuTensorMapEncodeTiled's signature (cuda.h), fetched from the driver
/// through the runtime so that libdcrt needs no -lcuda.
using EncodeTiled = CUresult (*)(CUtensorMap *, CUtensorMapDataType, cuuint32_t,
                                 void *, const cuuint64_t *, const cuuint64_t *,
                                 const cuuint32_t *, const cuuint32_t *,
                                 CUtensorMapInterleave, CUtensorMapSwizzle,
                                 CUtensorMapL2promotion,
                                 CUtensorMapFloatOOBfill);

EncodeTiled encoder() {
  static const EncodeTiled encode = [] {
    void *function = nullptr;
    cudaDriverEntryPointQueryResult found{};
    // The ABI of CUDA 12.0's; the call asking by version is 12.5's.
#if CUDART_VERSION >= 12050
    const cudaError_t status = cudaGetDriverEntryPointByVersion(
        "cuTensorMapEncodeTiled", &function, 12000, cudaEnableDefault, &found);
#else
    const cudaError_t status = cudaGetDriverEntryPoint(
        "cuTensorMapEncodeTiled", &function, cudaEnableDefault, &found);
#endif
    if (status != cudaSuccess || found != cudaDriverEntryPointSuccess)
      return EncodeTiled(nullptr);
    return reinterpret_cast<EncodeTiled>(function);
  }();
  return encode;
}

/// A map of the bf16/f16 tensor at `data`: dims innermost first, strides
/// in elements of the outer dims, boxes of `box`; 128-byte swizzle,
/// out-of-bounds elements read as zeros. False where the driver refuses.
template <int RANK>
bool encodeMap(CUtensorMap &map, int32_t dtype, const void *data,
               const int64_t (&dims)[RANK], const int64_t (&strides)[RANK - 1],
               const int (&box)[RANK]) {
  EncodeTiled encode = encoder();
  if (!encode)
    return false;
  cuuint64_t globalDims[RANK], globalStrides[RANK - 1];
  cuuint32_t boxDims[RANK], elementStrides[RANK];
  for (int i = 0; i < RANK; ++i) {
    globalDims[i] = static_cast<cuuint64_t>(dims[i]);
    boxDims[i] = static_cast<cuuint32_t>(box[i]);
    elementStrides[i] = 1;
    if (i + 1 < RANK)
      globalStrides[i] = static_cast<cuuint64_t>(strides[i]) * 2;
  }
  return encode(&map,
                dtype == DCRT_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                   : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                RANK, const_cast<void *>(data), globalDims, globalStrides,
                boxDims, elementStrides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <typename T, bool WEIGHT_GRAD, bool TRANSPOSE_RHS>
cudaError_t launch(const CUtensorMap &lhsMap, const CUtensorMap &rhsMap,
                   const GroupedArgs &a, int multiprocessors,
                   cudaStream_t stream) {
  auto kernel = groupedTmaKernel<T, WEIGHT_GRAD, TRANSPOSE_RHS>;
  if (cudaError_t status =
          allowSharedBytes<groupedTmaKernel<T, WEIGHT_GRAD, TRANSPOSE_RHS>>(
              kSharedBytes);
      status != cudaSuccess)
    return status;
  const int64_t items = WEIGHT_GRAD
                            ? a.kTiles * a.colTiles * a.experts * a.slices
                            : a.rowTiles * a.colTiles;
  const int64_t blocks = std::min<int64_t>(items, std::max(multiprocessors, 1));
  kernel<<<static_cast<unsigned>(blocks), kThreads, kSharedBytes, stream>>>(
      lhsMap, rhsMap, a);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launchFor(const CUtensorMap &lhsMap, const CUtensorMap &rhsMap,
                      const GroupedArgs &a, bool weightGrad, bool transposeRhs,
                      int multiprocessors, cudaStream_t stream) {
  if (weightGrad)
    return launch<T, true, false>(lhsMap, rhsMap, a, multiprocessors, stream);
  if (transposeRhs)
    return launch<T, false, true>(lhsMap, rhsMap, a, multiprocessors, stream);
  return launch<T, false, false>(lhsMap, rhsMap, a, multiprocessors, stream);
}

} // namespace

bool launchWgmmaTma(const GroupedArgs &a, int32_t dtype, bool weightGrad,
                    bool transposeRhs, int multiprocessors, cudaStream_t stream,
                    cudaError_t &status) {
  // TMA's coordinates are 32-bit; empty operands have no map.
  if (a.rows <= 0 || a.k <= 0 || a.p <= 0 || a.rows > INT_MAX ||
      a.k > INT_MAX || a.p > INT_MAX)
    return false;
  CUtensorMap lhsMap, rhsMap;
  bool encoded;
  if (weightGrad)
    encoded = encodeMap<2>(lhsMap, dtype, a.lhs, {a.k, a.rows}, {a.lhsLd},
                           {64, wg::kTileK}) &&
              encodeMap<2>(rhsMap, dtype, a.rhs, {a.p, a.rows}, {a.rhsLd},
                           {64, wg::kTileK});
  else
    encoded =
        encodeMap<2>(lhsMap, dtype, a.lhs, {a.k, a.rows}, {a.lhsLd},
                     {wg::kTileK, wg::kTileM}) &&
        (transposeRhs
             ? encodeMap<3>(rhsMap, dtype, a.rhs, {a.k, a.p, a.experts},
                            {a.rhsLd, a.rhsExpertStride},
                            {wg::kTileK, wg::kTileN, 1})
             : encodeMap<3>(rhsMap, dtype, a.rhs, {a.p, a.k, a.experts},
                            {a.rhsLd, a.rhsExpertStride}, {64, wg::kTileK, 1}));
  if (!encoded)
    return false;
  status = dtype == DCRT_BF16
               ? launchFor<__nv_bfloat16>(lhsMap, rhsMap, a, weightGrad,
                                          transposeRhs, multiprocessors, stream)
               : launchFor<__half>(lhsMap, rhsMap, a, weightGrad, transposeRhs,
                                   multiprocessors, stream);
  return true;
}

} // namespace dcrt::cuda::moe::grouped
