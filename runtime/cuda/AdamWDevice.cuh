//===- AdamWDevice.cuh - the AdamW kernels' shared device code --*- CUDA
//-*-===//
//
// What the runtime's optimizer kernels (AdamWKernels.cu) and dc-run's
// trainer AdamW (tools/dc-run/cuda/AdamW.cu) share: element loads and
// stores of f32, bf16 and f16, the 16-byte packs of the vectorized paths,
// one element's fp32 update, the grid sizes and the fixed-order block sums
// of the norm. One definition, so that both compute the same bits.
//
//===----------------------------------------------------------------------===//
#ifndef DCRT_CUDA_ADAMWDEVICE_CUH
#define DCRT_CUDA_ADAMWDEVICE_CUH

#include "dcrt/dcrt.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace dcrt::cuda::adamw {

constexpr int kThreads = 256;
/// Elements a thread moves per stream at once on the vectorized path.
constexpr int kPack = 8;
__device__ inline float load(const void *data, int64_t type, int64_t i) {
  if (type == DCRT_BF16)
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(data)[i]);
  if (type == DCRT_F16)
    return __half2float(static_cast<const __half *>(data)[i]);
  return static_cast<const float *>(data)[i];
}

__device__ inline void store(void *data, int64_t type, int64_t i, float value) {
  if (type == DCRT_BF16)
    static_cast<__nv_bfloat16 *>(data)[i] = __float2bfloat16_rn(value);
  else if (type == DCRT_F16)
    static_cast<__half *>(data)[i] = __float2half_rn(value);
  else
    static_cast<float *>(data)[i] = value;
}

/// kPack consecutive values (16-byte aligned) into floats, and back.
__device__ inline void loadPack(const float *data, float *out) {
  float4 a = reinterpret_cast<const float4 *>(data)[0];
  float4 b = reinterpret_cast<const float4 *>(data)[1];
  out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w;
  out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
}
__device__ inline void loadPack(const __nv_bfloat16 *data, float *out) {
  uint4 raw = *reinterpret_cast<const uint4 *>(data);
  const auto *pairs = reinterpret_cast<const __nv_bfloat162 *>(&raw);
  for (int k = 0; k < kPack / 2; ++k) {
    float2 pair = __bfloat1622float2(pairs[k]);
    out[2 * k] = pair.x, out[2 * k + 1] = pair.y;
  }
}
__device__ inline void storePack(float *data, const float *in) {
  reinterpret_cast<float4 *>(data)[0] = make_float4(in[0], in[1], in[2], in[3]);
  reinterpret_cast<float4 *>(data)[1] = make_float4(in[4], in[5], in[6], in[7]);
}
__device__ inline void storePack(__nv_bfloat16 *data, const float *in) {
  uint4 raw;
  auto *pairs = reinterpret_cast<__nv_bfloat162 *>(&raw);
  for (int k = 0; k < kPack / 2; ++k)
    pairs[k] = __floats2bfloat162_rn(in[2 * k], in[2 * k + 1]);
  *reinterpret_cast<uint4 *>(data) = raw;
}

/// The update's constants in fp32, and whether to update at all.
struct Update {
  float beta1, oneMinusBeta1, beta2, oneMinusBeta2, eps, decay, stepSize,
      correction2, gradScale;
  bool skip;
};

/// One element, in fp32 like PyTorch's fused AdamW. Every operation is an
/// explicitly rounded intrinsic, so the compiler contracts nothing
/// differently in the two kernels that inline it.
__device__ inline void adamwElement(const Update &u, float grad, float &avg,
                                    float &avgSq, float &master) {
  float g = __fmul_rn(grad, u.gradScale);
  avg = __fmaf_rn(u.beta1, avg, __fmul_rn(u.oneMinusBeta1, g));
  avgSq =
      __fmaf_rn(u.beta2, avgSq, __fmul_rn(__fmul_rn(u.oneMinusBeta2, g), g));
  float denominator =
      __fadd_rn(__fdiv_rn(__fsqrt_rn(avgSq), u.correction2), u.eps);
  master = __fsub_rn(__fmul_rn(master, u.decay),
                     __fdiv_rn(__fmul_rn(u.stepSize, avg), denominator));
}

/// Calls `body` with a value of the C++ type of `type` (f32 or bf16): what
/// it returns (true if nothing); false for other types.
template <typename Body> inline bool withType(int64_t type, Body &&body) {
  auto call = [&](auto tag) -> bool {
    if constexpr (std::is_same_v<decltype(body(tag)), bool>)
      return body(tag);
    else
      return body(tag), true;
  };
  if (type == DCRT_F32)
    return call(float{});
  if (type == DCRT_BF16)
    return call(__nv_bfloat16{});
  return false;
}

inline bool aligned(const void *pointer) {
  return reinterpret_cast<uintptr_t>(pointer) % 16 == 0;
}

/// Blocks for a grid-stride loop over `items`: at least one, at most `cap`.
inline int64_t gridFor(int64_t items, int64_t cap) {
  int64_t blocks = (items + kThreads - 1) / kThreads;
  return blocks < 1 ? 1 : blocks < cap ? blocks : cap;
}

/// The sum of `value` over the block's threads, in a fixed order.
__device__ inline double blockSum(double value, double *shared) {
  shared[threadIdx.x] = value;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride)
      shared[threadIdx.x] += shared[threadIdx.x + stride];
    __syncthreads();
  }
  return shared[0];
}

/// This thread's squares: packs of kPack elements (16-byte loads) when
/// `Grad` is a type, else one element at a time.
template <typename Grad>
__device__ inline double threadSquares(const void *grad, int64_t gradType,
                                       int64_t numel) {
  const int64_t first = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  double local = 0;
  int64_t scalarFrom = 0;
  if constexpr (!std::is_void_v<Grad>) {
    const int64_t packs = numel / kPack;
    for (int64_t p = first; p < packs; p += stride) {
      float g[kPack];
      loadPack(static_cast<const Grad *>(grad) + p * kPack, g);
#pragma unroll
      for (int k = 0; k < kPack; ++k)
        local += double(g[k]) * g[k];
    }
    scalarFrom = packs * kPack;
  }
  for (int64_t i = scalarFrom + first; i < numel; i += stride) {
    double g = load(grad, gradType, i);
    local += g * g;
  }
  return local;
}

} // namespace dcrt::cuda::adamw

#endif // DCRT_CUDA_ADAMWDEVICE_CUH
