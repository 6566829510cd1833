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

#include "dcrt/dcrt.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

namespace dcrun::cuda {
namespace {

constexpr int kThreads = 256;
/// Elements a thread moves per stream at once on the vectorized path.
constexpr int kPack = 8;

int64_t elementBytes(int32_t type) { return type == DCRT_F32 ? 4 : 2; }

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

/// kPack consecutive values (16-byte aligned) into floats, and back.
__device__ void loadPack(const float *data, float *out) {
  float4 a = reinterpret_cast<const float4 *>(data)[0];
  float4 b = reinterpret_cast<const float4 *>(data)[1];
  out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w;
  out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
}
__device__ void loadPack(const __nv_bfloat16 *data, float *out) {
  uint4 raw = *reinterpret_cast<const uint4 *>(data);
  const auto *pairs = reinterpret_cast<const __nv_bfloat162 *>(&raw);
  for (int k = 0; k < kPack / 2; ++k) {
    float2 pair = __bfloat1622float2(pairs[k]);
    out[2 * k] = pair.x, out[2 * k + 1] = pair.y;
  }
}
__device__ void storePack(float *data, const float *in) {
  reinterpret_cast<float4 *>(data)[0] = make_float4(in[0], in[1], in[2], in[3]);
  reinterpret_cast<float4 *>(data)[1] = make_float4(in[4], in[5], in[6], in[7]);
}
__device__ void storePack(__nv_bfloat16 *data, const float *in) {
  uint4 raw;
  auto *pairs = reinterpret_cast<__nv_bfloat162 *>(&raw);
  for (int k = 0; k < kPack / 2; ++k)
    pairs[k] = __floats2bfloat162_rn(in[2 * k], in[2 * k + 1]);
  *reinterpret_cast<uint4 *>(data) = raw;
}

/// The update's constants, from AdamWStep, in fp32.
struct Update {
  float beta1, oneMinusBeta1, beta2, oneMinusBeta2, eps, decay, stepSize,
      correction2, gradScale;
};

/// One element, in fp32 like PyTorch's fused AdamW (in double, the divide
/// and square root made the kernel compute-bound: 2.6 TB/s instead of 3.9
/// on an H200). The host AdamW computes in double: the two agree to a few
/// fp32 roundings. Every operation is an explicitly rounded intrinsic, so
/// the compiler contracts nothing differently in the two kernels that
/// inline it (it did: the paths differed in the last bit).
__device__ void adamwElement(const Update &u, float grad, float &avg,
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

/// Calls `body` with a value of the C++ type of `type` (f32 or bf16): what
/// it returns (true if nothing); false for other types.
template <typename Body> bool withType(int32_t type, Body &&body) {
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

bool aligned(const void *pointer) {
  return reinterpret_cast<uintptr_t>(pointer) % 16 == 0;
}

/// Blocks for a grid-stride loop over `items`: at least one, at most `cap`.
int64_t gridFor(int64_t items, int64_t cap) {
  int64_t blocks = (items + kThreads - 1) / kThreads;
  return blocks < 1 ? 1 : blocks < cap ? blocks : cap;
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

/// The sum of `value` over the block's threads, in a fixed order.
__device__ double blockSum(double value, double *shared) {
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
__device__ double threadSquares(const void *grad, int32_t gradType,
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
