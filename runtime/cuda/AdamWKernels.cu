//===- AdamWKernels.cu - dcrt_grad_squares and dcrt_adamw on the GPU ------===//
//
// Both kernels are pure bandwidth (AdamW moves 28 bytes an element with
// fp32 state). Where every buffer is 16-byte aligned and of f32 or bf16,
// each thread moves 8 elements of each stream with 16-byte accesses; the
// rest (f16, misaligned buffers, the last elements) takes a scalar
// grid-stride loop. Both paths compute the same fp32 update, so which one
// runs does not change a bit of the result.
//
//===----------------------------------------------------------------------===//
#include "AdamWKernels.h"

#include "AdamWDevice.cuh"

namespace dcrt::cuda::adamw {
namespace {

/// Blocks of the norm kernel at most: its workspace holds a partial sum
/// for each.
constexpr int64_t kNormBlocks = 1024;

/// The hyperparameters of the descriptor, passed by value.
struct Hyper {
  double beta1, beta2, eps, weightDecay, maxNorm;
  double meanScale; // 1 / micro_batches (1 without accumulation)
};

/// Computed in double from the scalars the step holds, as the host does,
/// then rounded to fp32. Thread 0 of each block computes them into shared
/// memory.
__device__ Update blockUpdate(const Hyper &h, const double *lr,
                              const int64_t *step, const double *squares) {
  __shared__ Update u;
  if (threadIdx.x == 0) {
    double rate = *lr, sq = *squares;
    double t = static_cast<double>(*step);
    double norm = sqrt(sq);
    double scale = h.maxNorm > 0 ? fmin(1.0, h.maxNorm / (norm + 1e-6)) : 1.0;
    scale *= h.meanScale;
    u.beta1 = float(h.beta1);
    u.oneMinusBeta1 = float(1.0 - h.beta1);
    u.beta2 = float(h.beta2);
    u.oneMinusBeta2 = float(1.0 - h.beta2);
    u.eps = float(h.eps);
    u.decay = float(1.0 - rate * h.weightDecay);
    u.stepSize = float(rate / (1.0 - pow(h.beta1, t)));
    u.correction2 = float(sqrt(1.0 - pow(h.beta2, t)));
    u.gradScale = float(scale);
    u.skip = !isfinite(sq) || *step < 1;
  }
  __syncthreads();
  return u;
}

/// The buffers of one update, from element `from` on.
struct Streams {
  const void *grad;
  void *master, *param, *expAvg, *expAvgSq;
  int64_t gradType, masterType, paramType, momentType;
};

__global__ void updateKernel(Streams s, int64_t from, int64_t numel, Hyper h,
                             const double *lr, const int64_t *step,
                             const double *squares) {
  Update u = blockUpdate(h, lr, step, squares);
  if (u.skip)
    return;
  const bool separateParam = s.master != s.param;
  for (int64_t i = from + blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
       i < numel; i += int64_t(gridDim.x) * blockDim.x) {
    float m = load(s.expAvg, s.momentType, i),
          v = load(s.expAvgSq, s.momentType, i);
    float w = load(s.master, s.masterType, i);
    adamwElement(u, load(s.grad, s.gradType, i), m, v, w);
    store(s.expAvg, s.momentType, i, m);
    store(s.expAvgSq, s.momentType, i, v);
    store(s.master, s.masterType, i, w);
    if (separateParam)
      store(s.param, s.paramType, i, w);
  }
}

/// The vectorized path: `packs` packs of kPack elements.
template <typename Grad, typename Moment, typename Master, typename Param>
__global__ void updatePackKernel(Streams s, int64_t packs, Hyper h,
                                 const double *lr, const int64_t *step,
                                 const double *squares) {
  Update u = blockUpdate(h, lr, step, squares);
  if (u.skip)
    return;
  auto *grad = static_cast<const Grad *>(s.grad);
  auto *expAvg = static_cast<Moment *>(s.expAvg);
  auto *expAvgSq = static_cast<Moment *>(s.expAvgSq);
  auto *master = static_cast<Master *>(s.master);
  auto *param = static_cast<Param *>(s.param);
  const bool separateParam = s.master != s.param;
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
      adamwElement(u, g[k], m[k], v[k], w[k]);
    storePack(expAvg + at, m);
    storePack(expAvgSq + at, v);
    storePack(master + at, w);
    if (separateParam)
      storePack(param + at, w);
  }
}

/// Each block sums its squares into partials[block]; the last block to
/// finish adds the partials in block order (an atomic add per block would
/// sum in arrival order) and writes *out = *in + the share.
template <typename Grad>
__global__ void squaresKernel(const void *grad, int64_t gradType, int64_t numel,
                              bool counts, double scale2, const double *in,
                              double *out, double *partials,
                              unsigned *finished) {
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
  if (scale2 != 1.0)
    total *= scale2;
  if (threadIdx.x == 0)
    *out = *in + (counts ? total : 0.0 * total);
}

/// sum[i] += grad[i] in fp32, kPack elements a thread (the vectorized
/// path, `packs` packs) or one (from element `from`).
template <typename Grad>
__global__ void accumulatePackKernel(const Grad *grad, const float *in,
                                     float *out, int64_t packs) {
  for (int64_t p = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; p < packs;
       p += int64_t(gridDim.x) * blockDim.x) {
    const int64_t at = p * kPack;
    float g[kPack], sum[kPack];
    loadPack(grad + at, g);
    loadPack(in + at, sum);
#pragma unroll
    for (int k = 0; k < kPack; ++k)
      sum[k] += g[k];
    storePack(out + at, sum);
  }
}

__global__ void accumulateKernel(const void *grad, int64_t gradType,
                                 const float *in, float *out, int64_t from,
                                 int64_t numel) {
  for (int64_t i = from + blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
       i < numel; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = in[i] + load(grad, gradType, i);
}

} // namespace

int64_t squaresWorkspaceBytes() {
  return kNormBlocks * int64_t(sizeof(double)) + int64_t(sizeof(unsigned));
}

cudaError_t gradSquares(const dcrt_adamw_desc &desc, int64_t valid, bool counts,
                        const void *grad, const double *in, double *out,
                        void *workspace, cudaStream_t stream) {
  auto *partials = static_cast<double *>(workspace);
  auto *finished = reinterpret_cast<unsigned *>(partials + kNormBlocks);
  double mean = desc.micro_batches > 1
                    ? 1.0 / static_cast<double>(desc.micro_batches)
                    : 1.0;
  double scale2 = mean * mean;
  auto launch = [&](auto kernel, int64_t items) {
    kernel<<<static_cast<unsigned>(gridFor(items, kNormBlocks)), kThreads, 0,
             stream>>>(grad, desc.grad_dtype, valid, counts, scale2, in, out,
                       partials, finished);
  };
  bool vectorized = aligned(grad) && withType(desc.grad_dtype, [&](auto g) {
                      launch(squaresKernel<decltype(g)>, valid / kPack);
                    });
  if (!vectorized)
    launch(squaresKernel<void>, valid);
  return cudaGetLastError();
}

cudaError_t update(const dcrt_adamw_desc &desc, int64_t valid, const void *grad,
                   const double *lr, const int64_t *step, const double *squares,
                   void *param, void *master, void *expAvg, void *expAvgSq,
                   cudaStream_t stream) {
  if (valid == 0)
    return cudaSuccess;
  bool separateMaster = desc.master_dtype == DCRT_F32;
  Streams s{grad,
            separateMaster ? master : param,
            param,
            expAvg,
            expAvgSq,
            desc.grad_dtype,
            separateMaster ? int64_t(DCRT_F32) : desc.param_dtype,
            desc.param_dtype,
            desc.moment_dtype};
  Hyper h{desc.beta1,
          desc.beta2,
          desc.eps,
          desc.weight_decay,
          desc.max_grad_norm,
          desc.micro_batches > 1 ? 1.0 / static_cast<double>(desc.micro_batches)
                                 : 1.0};
  int64_t vectorized = 0;
  if (aligned(s.master) && aligned(grad) && aligned(expAvg) &&
      aligned(expAvgSq) && aligned(param)) {
    int64_t packs = valid / kPack;
    bool launched =
        packs > 0 && withType(s.gradType, [&](auto g) {
          return withType(s.momentType, [&](auto m) {
            return withType(s.masterType, [&](auto w) {
              return withType(s.paramType, [&](auto d) {
                updatePackKernel<decltype(g), decltype(m), decltype(w),
                                 decltype(d)>
                    <<<static_cast<unsigned>(gridFor(packs, 8192)), kThreads, 0,
                       stream>>>(s, packs, h, lr, step, squares);
              });
            });
          });
        });
    if (launched)
      vectorized = packs * kPack;
  }
  if (vectorized < valid)
    updateKernel<<<static_cast<unsigned>(gridFor(valid - vectorized, 4096)),
                   kThreads, 0, stream>>>(s, vectorized, valid, h, lr, step,
                                          squares);
  return cudaGetLastError();
}

cudaError_t accumulate(const dcrt_adamw_desc &desc, const void *grad,
                       const float *sumIn, float *sumOut, cudaStream_t stream) {
  int64_t numel = desc.local_numel, vectorized = 0;
  if (numel == 0)
    return cudaSuccess;
  if (aligned(grad) && aligned(sumIn) && aligned(sumOut)) {
    int64_t packs = numel / kPack;
    bool launched =
        packs > 0 && withType(desc.grad_dtype, [&](auto g) {
          accumulatePackKernel<<<static_cast<unsigned>(gridFor(packs, 8192)),
                                 kThreads, 0, stream>>>(
              static_cast<const decltype(g) *>(grad), sumIn, sumOut, packs);
        });
    if (launched)
      vectorized = packs * kPack;
  }
  if (vectorized < numel)
    accumulateKernel<<<static_cast<unsigned>(gridFor(numel - vectorized, 4096)),
                       kThreads, 0, stream>>>(grad, desc.grad_dtype, sumIn,
                                              sumOut, vectorized, numel);
  return cudaGetLastError();
}

} // namespace dcrt::cuda::adamw
