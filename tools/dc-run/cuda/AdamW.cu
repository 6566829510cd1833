//===- AdamW.cu - the fused AdamW kernel of dc-run's cuda optimizer -------===//
//
// Both kernels are pure bandwidth (AdamW moves 28 bytes an element with
// fp32 state). Where every buffer is 16-byte aligned and of f32 or bf16,
// each thread moves 8 elements of each stream with 16-byte accesses; the
// rest (f16, misaligned buffers, the last numel % 8 elements) takes a
// scalar grid-stride loop. Both paths compute the same fp32 update, so
// which one runs does not change a bit of the result.
//
//===----------------------------------------------------------------------===//
#include "AdamW.h"

#include "AdamWDevice.cuh"

#include "dcrt/dcrt.h"

namespace dcrun::cuda {

using namespace dcrt::cuda::adamw;

namespace {

int64_t elementBytes(int32_t type) { return type == DCRT_F32 ? 4 : 2; }

__global__ void adamwKernel(void *master, int32_t masterType, const void *grad,
                            int32_t gradType, void *expAvg, void *expAvgSq,
                            int32_t momentType, void *data, int32_t dataType,
                            int64_t numel, Update update) {
  const bool separateData = master != data;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < numel;
       i += int64_t(gridDim.x) * blockDim.x) {
    float m = load(expAvg, momentType, i), v = load(expAvgSq, momentType, i);
    float w = load(master, masterType, i);
    adamwElement(update, load(grad, gradType, i), m, v, w);
    store(expAvg, momentType, i, m);
    store(expAvgSq, momentType, i, v);
    store(master, masterType, i, w);
    if (separateData)
      store(data, dataType, i, w);
  }
}

/// The vectorized path: `packs` packs of kPack elements.
template <typename Grad, typename Moment, typename Master, typename Data>
__global__ void adamwPackKernel(Master *master, const Grad *grad,
                                Moment *expAvg, Moment *expAvgSq, Data *data,
                                int64_t packs, Update update) {
  const bool separateData =
      static_cast<void *>(master) != static_cast<void *>(data);
  for (int64_t p = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; p < packs;
       p += int64_t(gridDim.x) * blockDim.x) {
    const int64_t at = p * kPack;
    float g[kPack], m[kPack], v[kPack], w[kPack];
    loadPack(grad + at, g);
    loadPack(expAvg + at, m);
    loadPack(expAvgSq + at, v);
    loadPack(master + at, w);
#pragma unroll
    for (int k = 0; k < kPack; ++k)
      adamwElement(update, g[k], m[k], v[k], w[k]);
    storePack(expAvg + at, m);
    storePack(expAvgSq + at, v);
    storePack(master + at, w);
    if (separateData)
      storePack(data + at, w);
  }
}

} // namespace

cudaError_t adamwStep(void *master, int32_t masterType, const void *grad,
                      int32_t gradType, void *expAvg, void *expAvgSq,
                      int32_t momentType, void *data, int32_t dataType,
                      int64_t numel, const AdamWStep &config,
                      cudaStream_t stream) {
  if (numel == 0)
    return cudaSuccess;
  // A bf16 master is the parameter itself; moments are f32 or bf16.
  bool sharedMaster = master == data && masterType == dataType;
  if (config.step < 1 ||
      (masterType != DCRT_F32 && !(masterType == DCRT_BF16 && sharedMaster)) ||
      (momentType != DCRT_F32 && momentType != DCRT_BF16))
    return cudaErrorInvalidValue;
  auto f32 = [](double value) { return static_cast<float>(value); };
  double step = static_cast<double>(config.step);
  Update update{f32(config.beta1),
                f32(1.0 - config.beta1),
                f32(config.beta2),
                f32(1.0 - config.beta2),
                f32(config.eps),
                f32(1.0 - config.lr * config.weightDecay),
                f32(config.lr / (1.0 - pow(config.beta1, step))),
                f32(sqrt(1.0 - pow(config.beta2, step))),
                f32(config.gradScale)};
  int64_t vectorized = 0;
  if (aligned(master) && aligned(grad) && aligned(expAvg) &&
      aligned(expAvgSq) && aligned(data)) {
    int64_t packs = numel / kPack;
    bool launched =
        packs > 0 && withType(gradType, [&](auto g) {
          return withType(momentType, [&](auto m) {
            return withType(masterType, [&](auto w) {
              return withType(dataType, [&](auto d) {
                using G = decltype(g);
                using M = decltype(m);
                using W = decltype(w);
                using D = decltype(d);
                adamwPackKernel<G, M, W, D>
                    <<<static_cast<unsigned>(gridFor(packs, 8192)), kThreads, 0,
                       stream>>>(
                        static_cast<W *>(master), static_cast<const G *>(grad),
                        static_cast<M *>(expAvg), static_cast<M *>(expAvgSq),
                        static_cast<D *>(data), packs, update);
              });
            });
          });
        });
    if (launched)
      vectorized = packs * kPack;
  }
  if (vectorized < numel) {
    auto at = [&](auto *pointer, int32_t type) {
      return static_cast<char *>(
                 const_cast<void *>(static_cast<const void *>(pointer))) +
             vectorized * elementBytes(type);
    };
    adamwKernel<<<static_cast<unsigned>(gridFor(numel - vectorized, 4096)),
                  kThreads, 0, stream>>>(
        at(master, masterType), masterType, at(grad, gradType), gradType,
        at(expAvg, momentType), at(expAvgSq, momentType), momentType,
        at(data, dataType), dataType, numel - vectorized, update);
  }
  return cudaGetLastError();
}

namespace {

/// Each block sums its squares into partials[block]; the last block to
/// finish adds the partials in block order: the same bits every run (an
/// atomic add per block would sum in arrival order).
template <typename Grad>
__global__ void sumOfSquaresKernel(const void *grad, int32_t gradType,
                                   int64_t numel, double *partials,
                                   unsigned *finished, double *sum) {
  __shared__ double shared[kThreads];
  __shared__ bool last;
  double total = blockSum(threadSquares<Grad>(grad, gradType, numel), shared);
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = total;
    __threadfence();
    // Wraps back to 0 for the last block: the counter is ready for the
    // next launch.
    last = atomicInc(finished, gridDim.x - 1) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last)
    return;
  double mine = 0;
  for (unsigned b = threadIdx.x; b < gridDim.x; b += blockDim.x)
    mine += __ldcg(&partials[b]);
  __syncthreads(); // `shared` is reused
  total = blockSum(mine, shared);
  if (threadIdx.x == 0)
    *sum = total;
}
} // namespace

int64_t normWorkspaceBytes() {
  return kNormBlocks * int64_t(sizeof(double)) + int64_t(sizeof(unsigned));
}

cudaError_t sumOfSquares(const void *grad, int32_t gradType, int64_t numel,
                         double *sum, void *workspace, cudaStream_t stream) {
  if (numel == 0)
    return cudaMemsetAsync(sum, 0, sizeof(double), stream);
  auto *partials = static_cast<double *>(workspace);
  auto *finished = reinterpret_cast<unsigned *>(partials + kNormBlocks);
  auto launch = [&](auto kernel, int64_t items) {
    kernel<<<static_cast<unsigned>(gridFor(items, kNormBlocks)), kThreads, 0,
             stream>>>(grad, gradType, numel, partials, finished, sum);
  };
  bool vectorized = aligned(grad) && withType(gradType, [&](auto g) {
                      launch(sumOfSquaresKernel<decltype(g)>, numel / kPack);
                    });
  if (!vectorized)
    launch(sumOfSquaresKernel<void>, numel);
  return cudaGetLastError();
}

namespace {
__global__ void accumulateKernel(float *sum, const void *grad, int32_t gradType,
                                 int64_t numel, bool overwrite) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < numel;
       i += int64_t(gridDim.x) * blockDim.x) {
    float g = load(grad, gradType, i);
    sum[i] = overwrite ? g : __fadd_rn(sum[i], g);
  }
}
} // namespace

cudaError_t accumulateGradient(float *sum, const void *grad, int32_t gradType,
                               int64_t numel, bool overwrite,
                               cudaStream_t stream) {
  if (numel == 0)
    return cudaSuccess;
  if (gradType != DCRT_F32 && gradType != DCRT_BF16 && gradType != DCRT_F16)
    return cudaErrorInvalidValue;
  accumulateKernel<<<static_cast<unsigned>(gridFor(numel, 4096)), kThreads, 0,
                     stream>>>(sum, grad, gradType, numel, overwrite);
  return cudaGetLastError();
}

} // namespace dcrun::cuda
