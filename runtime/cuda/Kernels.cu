//===- Kernels.cu - the cuda backend's own device kernels -----------------===//
#include "Kernels.h"

#include "Finite.h"

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

using detail::countBits;
using detail::FloatBits;
using detail::NonFiniteCounts;

/// Counts the elements in one 32-bit word: an f32, or two 16-bit floats.
__device__ void countWord(uint32_t word, bool halves, FloatBits masks,
                          NonFiniteCounts &counts) {
  if (!halves) {
    countBits(word, masks, counts);
    return;
  }
  countBits(word & 0xffffu, masks, counts);
  countBits(word >> 16, masks, counts);
}

/// Reads 16 bytes at a time where the buffer is 16-byte aligned (the step
/// arena's and the pools' buffers are 256-byte aligned; a view into one may
/// not be), then the elements past the last whole vector one by one.
__global__ void checkFiniteKernel(const void *data, int32_t dtype,
                                  int64_t numel, int allowInf,
                                  unsigned sequence, const char *site,
                                  FiniteRecord *record) {
  // Taken by an earlier check: only the step's first is reported. The
  // value is the same for every thread (this launch can only lower it to
  // its own number), so whole warps return together.
  if (*static_cast<volatile unsigned *>(&record->first) < sequence)
    return;
  bool halves = dtype != DCRT_F32;
  int elementBytes = halves ? 2 : 4;
  FloatBits masks = detail::floatBitsOf(dtype);
  NonFiniteCounts counts;
  int64_t thread = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  int64_t threads = int64_t(gridDim.x) * blockDim.x;
  int64_t vectors = reinterpret_cast<uintptr_t>(data) % 16 == 0
                        ? numel * elementBytes / 16
                        : 0;
  const auto *vector = static_cast<const uint4 *>(data);
  for (int64_t i = thread; i < vectors; i += threads) {
    uint4 words = vector[i];
    countWord(words.x, halves, masks, counts);
    countWord(words.y, halves, masks, counts);
    countWord(words.z, halves, masks, counts);
    countWord(words.w, halves, masks, counts);
  }
  for (int64_t i = vectors * 16 / elementBytes + thread; i < numel;
       i += threads)
    countBits(halves ? static_cast<const uint16_t *>(data)[i]
                     : static_cast<const uint32_t *>(data)[i],
              masks, counts);
  if (allowInf)
    counts.infinities = 0;
  // One atomic per warp that found something (none on a finite output).
  unsigned long long nans = counts.nans, infinities = counts.infinities;
  for (int offset = 16; offset > 0; offset /= 2) {
    nans += __shfl_down_sync(0xffffffffu, nans, offset);
    infinities += __shfl_down_sync(0xffffffffu, infinities, offset);
  }
  if (threadIdx.x % 32 != 0 || (nans == 0 && infinities == 0))
    return;
  atomicAdd(&record->nans, nans);
  atomicAdd(&record->infinities, infinities);
  atomicMin(&record->first, sequence);
  record->site = site; // every writer stores the same address
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

cudaError_t checkFinite(const void *data, int32_t dtype, int64_t numel,
                        bool allowInf, unsigned sequence, const char *site,
                        FiniteRecord *record, cudaStream_t stream) {
  if (numel == 0)
    return cudaSuccess;
  // A thread per 16 bytes (at most: blocksFor bounds the grid).
  int64_t work = (numel * (dtype == DCRT_F32 ? 4 : 2) + 15) / 16;
  checkFiniteKernel<<<blocksFor(work), threadsPerBlock, 0, stream>>>(
      data, dtype, numel, allowInf ? 1 : 0, sequence, site, record);
  return cudaGetLastError();
}

} // namespace dcrt::cuda
