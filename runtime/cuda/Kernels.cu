//===- Kernels.cu - the cuda backend's own device kernels -----------------===//
#include "Kernels.h"

#include "dcrt/dcrt.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace dcrt::cuda {
namespace {

constexpr int threadsPerBlock = 256;

/// Blocks for a grid-stride loop over `numel` elements: enough to fill the
/// device, bounded so the launch stays cheap.
unsigned blocksFor(int64_t numel) {
  int64_t blocks = (numel + threadsPerBlock - 1) / threadsPerBlock;
  return static_cast<unsigned>(blocks < 1 ? 1
                                          : (blocks > 8192 ? 8192 : blocks));
}

__device__ float loadFloat(const void *data, int32_t type, int64_t i) {
  switch (type) {
  case DCRT_BF16:
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(data)[i]);
  case DCRT_F16:
    return __half2float(static_cast<const __half *>(data)[i]);
  default:
    return static_cast<const float *>(data)[i];
  }
}

__device__ void storeFloat(void *data, int32_t type, int64_t i, float value) {
  switch (type) {
  case DCRT_BF16:
    static_cast<__nv_bfloat16 *>(data)[i] = __float2bfloat16_rn(value);
    break;
  case DCRT_F16:
    static_cast<__half *>(data)[i] = __float2half_rn(value);
    break;
  default:
    static_cast<float *>(data)[i] = value;
  }
}

__global__ void convertFloats(const void *src, int32_t srcType, void *dst,
                              int32_t dstType, int64_t numel) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < numel;
       i += int64_t(gridDim.x) * blockDim.x)
    storeFloat(dst, dstType, i, loadFloat(src, srcType, i));
}

__global__ void convertIntegers(const void *src, int32_t srcType, void *dst,
                                int32_t dstType, int64_t numel) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < numel;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t value = srcType == DCRT_I64 ? static_cast<const int64_t *>(src)[i]
                                        : static_cast<const int32_t *>(src)[i];
    if (dstType == DCRT_I64)
      static_cast<int64_t *>(dst)[i] = value;
    else
      static_cast<int32_t *>(dst)[i] = static_cast<int32_t>(value);
  }
}

__global__ void packSlotsKernel(const void *grad, int32_t gradType,
                                int64_t fullNumel, int64_t localNumel,
                                int64_t world, int64_t block, int64_t segment,
                                float *bucket) {
  int64_t total = world * localNumel;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t r = i / localNumel, j = i % localNumel;
    bucket[r * block + segment + j] =
        i < fullNumel ? loadFloat(grad, gradType, i) : 0.0f;
  }
}

bool isFloat(int32_t type) {
  return type == DCRT_F32 || type == DCRT_BF16 || type == DCRT_F16;
}

int64_t sizeOf(int32_t type) {
  return type == DCRT_I64 ? 8 : (type == DCRT_BF16 || type == DCRT_F16) ? 2 : 4;
}
} // namespace

cudaError_t convert(const void *src, int32_t srcType, void *dst,
                    int32_t dstType, int64_t numel, cudaStream_t stream) {
  if (numel == 0)
    return cudaSuccess;
  if (srcType == dstType)
    return cudaMemcpyAsync(dst, src, numel * sizeOf(srcType),
                           cudaMemcpyDeviceToDevice, stream);
  if (isFloat(srcType) != isFloat(dstType))
    return cudaErrorInvalidValue;
  if (isFloat(srcType))
    convertFloats<<<blocksFor(numel), threadsPerBlock, 0, stream>>>(
        src, srcType, dst, dstType, numel);
  else
    convertIntegers<<<blocksFor(numel), threadsPerBlock, 0, stream>>>(
        src, srcType, dst, dstType, numel);
  return cudaGetLastError();
}

cudaError_t packSlots(const void *grad, int32_t gradType, int64_t fullNumel,
                      int64_t localNumel, int64_t world, int64_t block,
                      int64_t segment, float *bucket, cudaStream_t stream) {
  int64_t total = world * localNumel;
  if (total == 0)
    return cudaSuccess;
  packSlotsKernel<<<blocksFor(total), threadsPerBlock, 0, stream>>>(
      grad, gradType, fullNumel, localNumel, world, block, segment, bucket);
  return cudaGetLastError();
}

} // namespace dcrt::cuda
