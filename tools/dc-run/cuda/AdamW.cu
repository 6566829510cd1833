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

__global__ void adamwKernel(void *master, int32_t masterType, const void *grad,
                            int32_t gradType, void *expAvg, void *expAvgSq,
                            int32_t momentType, void *data, int32_t dataType,
                            int64_t numel, double beta1, double beta2,
                            double eps, double decay, double stepSize,
                            double correction2, double gradScale) {
  const bool separateData = master != data;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < numel;
       i += int64_t(gridDim.x) * blockDim.x) {
    // Scaled in fp32 like the host AdamW's clipped gradient.
    double g = static_cast<float>(load(grad, gradType, i) * gradScale);
    double m = beta1 * load(expAvg, momentType, i) + (1.0 - beta1) * g;
    double v = beta2 * load(expAvgSq, momentType, i) + (1.0 - beta2) * g * g;
    store(expAvg, momentType, i, static_cast<float>(m));
    store(expAvgSq, momentType, i, static_cast<float>(v));
    double denominator = sqrt(v) / correction2 + eps;
    float updated = static_cast<float>(load(master, masterType, i) * decay -
                                       stepSize * m / denominator);
    store(master, masterType, i, updated);
    if (separateData)
      store(data, dataType, i, updated);
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
  int64_t blocks = (numel + threads - 1) / threads;
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

__global__ void sumOfSquaresKernel(const void *grad, int32_t gradType,
                                   int64_t numel, double *sum) {
  __shared__ double partial[normThreads];
  double local = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < numel;
       i += int64_t(gridDim.x) * blockDim.x) {
    double g = load(grad, gradType, i);
    local += g * g;
  }
  partial[threadIdx.x] = local;
  __syncthreads();
  for (int stride = normThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride)
      partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    atomicAdd(sum, partial[0]);
}
} // namespace

cudaError_t addSumOfSquares(const void *grad, int32_t gradType, int64_t numel,
                            double *sum, cudaStream_t stream) {
  if (numel == 0)
    return cudaSuccess;
  int64_t blocks = (numel + normThreads - 1) / normThreads;
  if (blocks > 1024)
    blocks = 1024;
  sumOfSquaresKernel<<<static_cast<unsigned>(blocks), normThreads, 0, stream>>>(
      grad, gradType, numel, sum);
  return cudaGetLastError();
}

} // namespace dcrun::cuda
