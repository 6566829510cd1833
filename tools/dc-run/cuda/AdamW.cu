//===- AdamW.cu - the fused AdamW kernel of dc-run's cuda optimizer -------===//
#include "AdamW.h"

#include "dcrt/dcrt.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace dcrun::cuda {
namespace {

__device__ float load(const void *data, int32_t type, int64_t i) {
  if (type == DCRT_BF16)
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(data)[i]);
  if (type == DCRT_F16)
    return __half2float(static_cast<const __half *>(data)[i]);
  return static_cast<const float *>(data)[i];
}

__device__ void store(void *data, int32_t type, int64_t i, float value) {
  if (type == DCRT_BF16)
    static_cast<__nv_bfloat16 *>(data)[i] = __float2bfloat16_rn(value);
  else if (type == DCRT_F16)
    static_cast<__half *>(data)[i] = __float2half_rn(value);
  else
    static_cast<float *>(data)[i] = value;
}

// Each thread handles kUnroll elements a grid stride apart per iteration:
// loads stay coalesced and kUnroll of each stream are in flight at once
// (one at a time left the memory system idle: AdamW and the norm are pure
// bandwidth).
constexpr int kUnroll = 4;

__global__ void adamwKernel(void *master, int32_t masterType, const void *grad,
                            int32_t gradType, void *expAvg, void *expAvgSq,
                            int32_t momentType, void *data, int32_t dataType,
                            int64_t numel, double beta1, double beta2,
                            double eps, double decay, double stepSize,
                            double correction2, double gradScale) {
  const bool separateData = master != data;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t base = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
       base < numel; base += stride * kUnroll) {
    float g[kUnroll], m[kUnroll], v[kUnroll], w[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      int64_t i = base + k * stride;
      if (i < numel) {
        g[k] = load(grad, gradType, i);
        m[k] = load(expAvg, momentType, i);
        v[k] = load(expAvgSq, momentType, i);
        w[k] = load(master, masterType, i);
      }
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      int64_t i = base + k * stride;
      if (i >= numel)
        break;
      // Scaled in fp32 like the host AdamW's clipped gradient.
      double scaled = static_cast<float>(g[k] * gradScale);
      double avg = beta1 * m[k] + (1.0 - beta1) * scaled;
      double avgSq = beta2 * v[k] + (1.0 - beta2) * scaled * scaled;
      store(expAvg, momentType, i, static_cast<float>(avg));
      store(expAvgSq, momentType, i, static_cast<float>(avgSq));
      double denominator = sqrt(avgSq) / correction2 + eps;
      float updated =
          static_cast<float>(w[k] * decay - stepSize * avg / denominator);
      store(master, masterType, i, updated);
      if (separateData)
        store(data, dataType, i, updated);
    }
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
  double decay = 1.0 - config.lr * config.weightDecay;
  double stepSize =
      config.lr / (1.0 - pow(config.beta1, static_cast<double>(config.step)));
  double correction2 =
      sqrt(1.0 - pow(config.beta2, static_cast<double>(config.step)));
  constexpr int threads = 256;
  int64_t blocks = (numel + threads * kUnroll - 1) / (threads * kUnroll);
  if (blocks > 4096)
    blocks = 4096;
  adamwKernel<<<static_cast<unsigned>(blocks), threads, 0, stream>>>(
      master, masterType, grad, gradType, expAvg, expAvgSq, momentType, data,
      dataType, numel, config.beta1, config.beta2, config.eps, decay, stepSize,
      correction2, config.gradScale);
  return cudaGetLastError();
}

namespace {
constexpr int normThreads = 256;
constexpr int normUnroll = 8;

/// The sum of `partial` over the block's threads, in a fixed order.
__device__ double blockSum(double value, double *shared) {
  shared[threadIdx.x] = value;
  __syncthreads();
  for (int stride = normThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride)
      shared[threadIdx.x] += shared[threadIdx.x + stride];
    __syncthreads();
  }
  return shared[0];
}

/// Each block sums its squares into partials[block]; the last block to
/// finish adds the partials in block order: the same bits every run (an
/// atomic add per block would sum in arrival order).
__global__ void sumOfSquaresKernel(const void *grad, int32_t gradType,
                                   int64_t numel, double *partials,
                                   unsigned *finished, double *sum) {
  __shared__ double shared[normThreads];
  __shared__ bool last;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  double local = 0;
  for (int64_t base = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
       base < numel; base += stride * normUnroll) {
    float g[normUnroll];
#pragma unroll
    for (int k = 0; k < normUnroll; ++k) {
      int64_t i = base + k * stride;
      g[k] = i < numel ? load(grad, gradType, i) : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < normUnroll; ++k)
      local += double(g[k]) * g[k];
  }
  double total = blockSum(local, shared);
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
  int64_t blocks =
      (numel + normThreads * normUnroll - 1) / (normThreads * normUnroll);
  if (blocks > kNormBlocks)
    blocks = kNormBlocks;
  auto *partials = static_cast<double *>(workspace);
  auto *finished = reinterpret_cast<unsigned *>(partials + kNormBlocks);
  sumOfSquaresKernel<<<static_cast<unsigned>(blocks), normThreads, 0, stream>>>(
      grad, gradType, numel, partials, finished, sum);
  return cudaGetLastError();
}

} // namespace dcrun::cuda
