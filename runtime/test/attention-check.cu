//===- attention-check.cu - dcrt_attention_* on a GPU ---------------------===//
//
// `DCRT_BACKEND=cuda mpirun -n 1 attention-check [--no-bench]
// [--deterministic]` on a GPU
// machine (runtime/test/gpu/run.sh runs it):
//  1. dcrt_attention_fwd and dcrt_attention_bwd (cuDNN) on random data,
//     causal and not, bf16 (and f16 on a small shape), with as many
//     key/value heads as query heads and with fewer (grouped-query
//     attention, batch_kv < batch: a small shape and Llama-3-70B's 64 query
//     heads over 8), against a naive f32 reference on the GPU (one block
//     per query row, then one per key row, summing dk and dv over the query
//     entries of a group) over the first batch entries: o, dq, dk, dv within
//     2e-2 of the largest |reference| (bf16 outputs), lse within 2e-2 absolute.
//     Outputs are poisoned with NaN first, so an unwritten element fails;
//     The backward runs twice more into fresh buffers: with --deterministic
//     (DCRT_INIT_DETERMINISTIC) dq, dk and dv must be bit-identical to the
//     first run's; without it the line says whether they were;
//  2. the strided layout (heads > 0) as dc-compile passes it: q, k, v
//     column slices of a fused [B*S, 3HD] projection, dq, dk, dv into the
//     slices of a wider gradient buffer, against the dense call on
//     transposed copies (bf16, B 2, S 512, H 8, D 128): bit-identical is
//     reported, agreement within 2e-2 required, and the gradient buffer's
//     other columns must stay untouched;
//  3. unless --no-bench, the time of forward and backward on the shapes of
//     configs A and B (dc-gen-llama: batch * heads x seq x head_dim), of
//     a 128-head A and of 70b's grouped-query attention, and of A read from
//     a fused projection (A-fused, strided), in TFLOP/s: 4 B S^2 D for the
//     forward, 10 B S^2 D for the backward (its five products), halved when
//     causal.
// Prints one line per check and "attention-check: all passed" (exit 0) or
// "attention-check: FAILED" (exit 1).
//
//===----------------------------------------------------------------------===//
#include "CudaCheck.h"
#include "GpuCheck.h"
#include "dcrt/core.hpp"
#include "dcrt/dcrt.h"
#include "dcrt/error.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

using namespace dcrt;
using namespace dcrt::test;

namespace {
cudaStream_t stream() {
  return static_cast<cudaStream_t>(dcrt_compute_stream());
}

__device__ float load(const void *base, int32_t dtype, int64_t i) {
  if (dtype == DCRT_BF16)
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(base)[i]);
  if (dtype == DCRT_F16)
    return __half2float(static_cast<const __half *>(base)[i]);
  return static_cast<const float *>(base)[i];
}

__global__ void fillRandom(void *data, int32_t dtype, int64_t count,
                           uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    h *= 3266489917u;
    h ^= h >> 16;
    float value = (h & 0xffff) / 32768.0f - 1.0f; // [-1, 1)
    if (dtype == DCRT_BF16)
      static_cast<__nv_bfloat16 *>(data)[i] = __float2bfloat16(value);
    else
      static_cast<__half *>(data)[i] = __float2half(value);
  }
}

/// batch (of q) x seq x dim; k and v have batch / group entries (query
/// entry b reads key/value entry b / group).
struct Shape {
  int64_t batch, seq, dim, group = 1;
  int64_t kvBatch() const { return batch / group; }
};

/// One block per query row (b, i) of the first `batches` entries: lse,
/// o, delta = sum dO o (with the o under test, as the backward sees it) and
/// dq, all in f32. Scores live in shared memory (seq floats).
__global__ void referenceRows(const void *q, const void *k, const void *v,
                              const void *oIn, const float *lseIn,
                              const void *dO, int32_t dtype, Shape s,
                              float scale, int causal, float *lse, float *o,
                              float *delta, float *dq) {
  extern __shared__ float scores[];
  __shared__ float partial[256];
  int64_t row = blockIdx.x, b = row / s.seq, i = row % s.seq;
  int64_t D = s.dim, N = s.seq, keys = causal ? i + 1 : N;
  const int64_t qBase = (b * s.seq + i) * D, kBase = (b / s.group) * N * D;
  // Scores.
  for (int64_t j = threadIdx.x; j < keys; j += blockDim.x) {
    float sum = 0;
    for (int64_t d = 0; d < D; ++d)
      sum += load(q, dtype, qBase + d) * load(k, dtype, kBase + j * D + d);
    scores[j] = scale * sum;
  }
  __syncthreads();
  float max = -INFINITY;
  for (int64_t j = threadIdx.x; j < keys; j += blockDim.x)
    max = fmaxf(max, scores[j]);
  partial[threadIdx.x] = max;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w)
      partial[threadIdx.x] =
          fmaxf(partial[threadIdx.x], partial[threadIdx.x + w]);
    __syncthreads();
  }
  max = partial[0];
  __syncthreads();
  float sum = 0;
  for (int64_t j = threadIdx.x; j < keys; j += blockDim.x)
    sum += expf(scores[j] - max);
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w)
      partial[threadIdx.x] += partial[threadIdx.x + w];
    __syncthreads();
  }
  float rowLse = max + logf(partial[0]);
  if (threadIdx.x == 0)
    lse[row] = rowLse;
  // delta with the o under test.
  float dot = 0;
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x)
    dot += load(dO, dtype, qBase + d) * load(oIn, dtype, qBase + d);
  __syncthreads();
  partial[threadIdx.x] = dot;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w)
      partial[threadIdx.x] += partial[threadIdx.x + w];
    __syncthreads();
  }
  float rowDelta = partial[0];
  if (threadIdx.x == 0)
    delta[row] = rowDelta;
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    float acc = 0;
    for (int64_t j = 0; j < keys; ++j)
      acc += expf(scores[j] - rowLse) * load(v, dtype, kBase + j * D + d);
    o[row * D + d] = acc;
  }
  __syncthreads();
  // dq with the lse under test: ds = scale p (dO v_j - delta).
  float given = lseIn[row];
  for (int64_t j = threadIdx.x; j < keys; j += blockDim.x) {
    float dp = 0;
    for (int64_t d = 0; d < D; ++d)
      dp += load(dO, dtype, qBase + d) * load(v, dtype, kBase + j * D + d);
    scores[j] = scale * expf(scores[j] - given) * (dp - rowDelta);
  }
  __syncthreads();
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    float acc = 0;
    for (int64_t j = 0; j < keys; ++j)
      acc += scores[j] * load(k, dtype, kBase + j * D + d);
    dq[row * D + d] = acc;
  }
}

/// One block per key row (kb, j): dv = sum_i p dO_i, dk = sum_i ds q_i over
/// the query rows of every query entry b of the group kb (b / group = kb).
__global__ void referenceKeys(const void *q, const void *k, const void *v,
                              const float *lseIn, const float *delta,
                              const void *dO, int32_t dtype, Shape s,
                              float scale, int causal, float *dk, float *dv) {
  extern __shared__ float weights[]; // p then ds, 2 * seq floats
  int64_t row = blockIdx.x, kb = row / s.seq, j = row % s.seq;
  int64_t D = s.dim, M = s.seq;
  const int64_t kBase = (kb * s.seq + j) * D;
  float *p = weights, *ds = weights + M;
  int64_t first = causal ? j : 0;
  for (int64_t b = kb * s.group; b < (kb + 1) * s.group; ++b) {
    const int64_t qBase = b * M * D;
    __syncthreads(); // the previous entry's weights are read
    for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
      if (i < first) {
        p[i] = ds[i] = 0;
        continue;
      }
      float z = 0, dp = 0;
      for (int64_t d = 0; d < D; ++d) {
        z += load(q, dtype, qBase + i * D + d) * load(k, dtype, kBase + d);
        dp += load(dO, dtype, qBase + i * D + d) * load(v, dtype, kBase + d);
      }
      p[i] = expf(scale * z - lseIn[b * M + i]);
      ds[i] = scale * p[i] * (dp - delta[b * M + i]);
    }
    __syncthreads();
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
      float accV = 0, accK = 0;
      for (int64_t i = first; i < M; ++i) {
        accV += p[i] * load(dO, dtype, qBase + i * D + d);
        accK += ds[i] * load(q, dtype, qBase + i * D + d);
      }
      bool firstOfGroup = b == kb * s.group;
      dv[row * D + d] = firstOfGroup ? accV : dv[row * D + d] + accV;
      dk[row * D + d] = firstOfGroup ? accK : dk[row * D + d] + accK;
    }
  }
}

/// A device buffer of `count` elements of `bytes` each.
struct Device {
  Buffer buffer;
  Device(int64_t count, int64_t bytes, const char *what)
      : buffer(count * bytes, MemoryKind::Device, what) {}
  void *data() { return buffer.data(); }
};

std::vector<float> hostCopy(const void *device, int32_t dtype, int64_t count) {
  int64_t size = dtype == DCRT_F32 ? 4 : 2;
  std::vector<unsigned char> raw(static_cast<size_t>(count * size));
  copy(raw.data(), device, count * size);
  std::vector<float> out(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    if (dtype == DCRT_F32) {
      std::memcpy(&out[i], &raw[i * 4], 4);
      continue;
    }
    uint16_t bits;
    std::memcpy(&bits, &raw[i * 2], 2);
    if (dtype == DCRT_BF16) {
      uint32_t wide = uint32_t(bits) << 16;
      std::memcpy(&out[i], &wide, 4);
    } else {
      __half h;
      std::memcpy(&h, &bits, 2);
      out[i] = __half2float(h);
    }
  }
  return out;
}

/// max |got - want| / max |want| (NaN if any value is NaN); `absolute`
/// leaves out the division.
double maxError(const std::vector<float> &got, const std::vector<float> &want,
                bool absolute = false) {
  double worst = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(got[i]) || std::isnan(want[i]))
      return NAN;
    worst = std::max(worst, std::fabs(double(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(double(want[i])));
  }
  return absolute ? worst : worst / std::max(scale, 1e-30);
}

dcrt_attention_desc makeDesc(int32_t dtype, const Shape &s, bool causal) {
  dcrt_attention_desc d{};
  d.struct_size = sizeof(d);
  d.dtype = dtype;
  d.batch = s.batch;
  d.batch_kv = s.kvBatch();
  d.seq_q = d.seq_k = s.seq;
  d.head_dim = s.dim;
  d.causal = causal;
  float scale = 1.0f / std::sqrt(static_cast<float>(s.dim));
  uint32_t bits;
  std::memcpy(&bits, &scale, 4);
  d.scale_f32_bits = bits;
  return d;
}

struct Operands {
  Device q, k, v, o, lse, dO, dq, dk, dv;
  Operands(const Shape &s)
      : q(s.batch * s.seq * s.dim, 2, "q"),
        k(s.kvBatch() * s.seq * s.dim, 2, "k"),
        v(s.kvBatch() * s.seq * s.dim, 2, "v"),
        o(s.batch * s.seq * s.dim, 2, "o"), lse(s.batch * s.seq, 4, "lse"),
        dO(s.batch * s.seq * s.dim, 2, "dO"),
        dq(s.batch * s.seq * s.dim, 2, "dq"),
        dk(s.kvBatch() * s.seq * s.dim, 2, "dk"),
        dv(s.kvBatch() * s.seq * s.dim, 2, "dv") {}
};

void fill(Device &device, int32_t dtype, int64_t count, uint32_t seed) {
  fillRandom<<<1024, 256, 0, stream()>>>(device.data(), dtype, count, seed);
  DCRT_CUDA_CHECK_WHAT(cudaGetLastError(), "filling an operand");
}

bool deterministicMode = false;

/// Whether two device buffers hold the same bytes.
bool sameBytes(Device &a, Device &b) {
  std::vector<unsigned char> x(a.buffer.size()), y(b.buffer.size());
  copy(x.data(), a.data(), static_cast<int64_t>(x.size()));
  copy(y.data(), b.data(), static_cast<int64_t>(y.size()));
  return x == y;
}

void checkCase(const std::string &name, int32_t dtype, const Shape &s,
               bool causal, int64_t checkBatches, uint32_t seed) {
  dcrt_attention_desc desc = makeDesc(dtype, s, causal);
  Operands x(s);
  int64_t n = s.batch * s.seq * s.dim, nKV = s.kvBatch() * s.seq * s.dim;
  fill(x.q, dtype, n, seed);
  fill(x.k, dtype, nKV, seed + 1);
  fill(x.v, dtype, nKV, seed + 2);
  fill(x.dO, dtype, n, seed + 3);
  for (Device *out : {&x.o, &x.lse, &x.dq, &x.dk, &x.dv})
    DCRT_CUDA_CHECK_WHAT(
        cudaMemsetAsync(out->data(), 0xff, out->buffer.size(), stream()),
        "poisoning an output");
  dcrt_attention_fwd(&desc, x.q.data(), x.k.data(), x.v.data(), x.o.data(),
                     static_cast<float *>(x.lse.data()));
  dcrt_attention_bwd(&desc, x.q.data(), x.k.data(), x.v.data(), x.o.data(),
                     static_cast<float *>(x.lse.data()), x.dO.data(),
                     x.dq.data(), x.dk.data(), x.dv.data());
  // Repeated backwards (two, so a rare reordering is likelier to show).
  int repeatsIdentical = 0;
  for (int repeat = 0; repeat < 2; ++repeat) {
    Device dq(n, 2, "dq again"), dk(nKV, 2, "dk again"), dv(nKV, 2, "dv again");
    dcrt_attention_bwd(&desc, x.q.data(), x.k.data(), x.v.data(), x.o.data(),
                       static_cast<float *>(x.lse.data()), x.dO.data(),
                       dq.data(), dk.data(), dv.data());
    synchronize();
    repeatsIdentical +=
        sameBytes(dq, x.dq) && sameBytes(dk, x.dk) && sameBytes(dv, x.dv);
  }
  bool repeatable = repeatsIdentical == 2;

  // Whole groups: checkBatches is a multiple of the group.
  Shape r{checkBatches, s.seq, s.dim, s.group};
  int64_t rows = checkBatches * s.seq, m = rows * s.dim;
  int64_t kvRows = r.kvBatch() * s.seq, mKV = kvRows * s.dim;
  Device lse(rows, 4, "ref lse"), o(m, 4, "ref o"), delta(rows, 4, "delta"),
      dq(m, 4, "ref dq"), dk(mKV, 4, "ref dk"), dv(mKV, 4, "ref dv");
  float scale = 1.0f / std::sqrt(static_cast<float>(s.dim));
  referenceRows<<<rows, 256, s.seq * 4, stream()>>>(
      x.q.data(), x.k.data(), x.v.data(), x.o.data(),
      static_cast<float *>(x.lse.data()), x.dO.data(), dtype, r, scale, causal,
      static_cast<float *>(lse.data()), static_cast<float *>(o.data()),
      static_cast<float *>(delta.data()), static_cast<float *>(dq.data()));
  DCRT_CUDA_CHECK_WHAT(cudaGetLastError(), "referenceRows");
  referenceKeys<<<kvRows, 256, 2 * s.seq * 4, stream()>>>(
      x.q.data(), x.k.data(), x.v.data(), static_cast<float *>(x.lse.data()),
      static_cast<float *>(delta.data()), x.dO.data(), dtype, r, scale, causal,
      static_cast<float *>(dk.data()), static_cast<float *>(dv.data()));
  DCRT_CUDA_CHECK_WHAT(cudaGetLastError(), "referenceKeys");
  synchronize();

  auto got = [&](Device &d, int32_t type, int64_t count) {
    return hostCopy(d.data(), type, count);
  };
  double eO = maxError(got(x.o, dtype, m), got(o, DCRT_F32, m));
  double eLse =
      maxError(got(x.lse, DCRT_F32, rows), got(lse, DCRT_F32, rows), true);
  double eDq = maxError(got(x.dq, dtype, m), got(dq, DCRT_F32, m));
  double eDk = maxError(got(x.dk, dtype, mKV), got(dk, DCRT_F32, mKV));
  double eDv = maxError(got(x.dv, dtype, mKV), got(dv, DCRT_F32, mKV));
  // Every element written (the batches the reference leaves out too).
  bool written = true;
  for (Device *out : {&x.o, &x.dq})
    for (float value : got(*out, dtype, n))
      written = written && !std::isnan(value);
  for (Device *out : {&x.dk, &x.dv})
    for (float value : got(*out, dtype, nKV))
      written = written && !std::isnan(value);
  for (float value : got(x.lse, DCRT_F32, s.batch * s.seq))
    written = written && !std::isnan(value);
  bool ok = written && eO <= 2e-2 && eLse <= 2e-2 && eDq <= 2e-2 &&
            eDk <= 2e-2 && eDv <= 2e-2 && (repeatable || !deterministicMode);
  char detail[320];
  std::snprintf(detail, sizeof(detail),
                "max error o %.2e lse %.2e (abs) dq %.2e dk %.2e dv %.2e (of "
                "max |ref|, %lld of %lld batches checked); backward repeated "
                "%s%s",
                eO, eLse, eDq, eDk, eDv, static_cast<long long>(checkBatches),
                static_cast<long long>(s.batch),
                repeatable ? "bit-identical" : "DIFFERS",
                written ? "" : "; NaN or unwritten elements");
  char what[192];
  std::snprintf(what, sizeof(what),
                "attention %s %s %s B*H %lld (kv %lld) S %lld D %lld",
                name.c_str(), dtype == DCRT_BF16 ? "bf16" : "f16",
                causal ? "causal" : "full", static_cast<long long>(s.batch),
                static_cast<long long>(s.kvBatch()),
                static_cast<long long>(s.seq), static_cast<long long>(s.dim));
  report(ok, what, detail);
}

/// Rows of a strided operand (2-byte elements, strides {outer, head, seq},
/// `heads` entries per outer index) copied into a dense [entries, seq, dim]
/// buffer.
__global__ void gatherRows(const uint16_t *strided, uint16_t *dense,
                           int64_t entries, int64_t heads, int64_t seq,
                           int64_t dim, int64_t outerStride, int64_t headStride,
                           int64_t seqStride) {
  int64_t count = entries * seq * dim;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < count;
       e += int64_t(gridDim.x) * blockDim.x) {
    int64_t d = e % dim, row = e / dim, i = row % seq, n = row / seq;
    dense[e] = strided[n / heads * outerStride + n % heads * headStride +
                       i * seqStride + d];
  }
}

/// What dc-compile passes with heads > 0 (dcrt.h): q, k and v column
/// slices of one fused [B*S, 3HD] projection output, o and dO [B, S, H, D],
/// dq, dk and dv written into the same slices of a gradient buffer with
/// kPad more columns on either side (which must stay untouched).
struct FusedOperands {
  static constexpr int64_t kPad = 8; // 16 bytes: the slices stay aligned
  int64_t B, S, H, D, HD, W, GW;
  Device qkv, o, dO, lse, grads;
  dcrt_attention_desc desc;
  FusedOperands(int32_t dtype, int64_t B, int64_t S, int64_t H, int64_t D,
                bool causal)
      : B(B), S(S), H(H), D(D), HD(H * D), W(3 * HD), GW(W + 2 * kPad),
        qkv(B * S * W, 2, "fused qkv"), o(B * S * HD, 2, "o"),
        dO(B * S * HD, 2, "dO"), lse(B * H * S, 4, "lse"),
        grads(B * S * GW, 2, "fused gradients") {
    desc = makeDesc(dtype, {B * H, S, D}, causal);
    desc.heads = H;
    const int64_t fused[3] = {S * W, D, W}, bshd[3] = {S * HD, D, HD},
                  grad[3] = {S * GW, D, GW};
    for (int64_t *field : {desc.q_strides, desc.k_strides, desc.v_strides})
      std::memcpy(field, fused, sizeof(fused));
    for (int64_t *field : {desc.o_strides, desc.do_strides})
      std::memcpy(field, bshd, sizeof(bshd));
    for (int64_t *field : {desc.dq_strides, desc.dk_strides, desc.dv_strides})
      std::memcpy(field, grad, sizeof(grad));
  }
  char *column(Device &buffer, int64_t first) {
    return static_cast<char *>(buffer.data()) + first * 2;
  }
  void *q() { return column(qkv, 0); }
  void *k() { return column(qkv, HD); }
  void *v() { return column(qkv, 2 * HD); }
  void *dq() { return column(grads, kPad); }
  void *dk() { return column(grads, kPad + HD); }
  void *dv() { return column(grads, kPad + 2 * HD); }
  void forward() {
    dcrt_attention_fwd(&desc, q(), k(), v(), o.data(),
                       static_cast<float *>(lse.data()));
  }
  void backward() {
    dcrt_attention_bwd(&desc, q(), k(), v(), o.data(),
                       static_cast<float *>(lse.data()), dO.data(), dq(), dk(),
                       dv());
  }
  /// A dense [B*H, S, D] copy of the operand at `data` with `strides`.
  void gather(const void *data, const int64_t *strides, Device &dense) {
    gatherRows<<<1024, 256, 0, stream()>>>(
        static_cast<const uint16_t *>(data),
        static_cast<uint16_t *>(dense.data()), B * H, H, S, D, strides[0],
        strides[1], strides[2]);
    DCRT_CUDA_CHECK_WHAT(cudaGetLastError(), "gatherRows");
  }
};

/// The strided (fused-projection) form against cuDNN's dense graphs on
/// transposed copies: bit-identical is reported, not required (the
/// backward's dQ accumulates with atomics unless deterministic); o, lse,
/// dq, dk, dv must agree within the bf16 tolerance of checkCase, the
/// gradient buffer's other columns keep their poison and its slices have
/// none left.
void checkStridedCase(const std::string &name, int32_t dtype, int64_t B,
                      int64_t S, int64_t H, int64_t D, bool causal,
                      uint32_t seed) {
  FusedOperands x(dtype, B, S, H, D, causal);
  const int64_t n = B * H * S * D, rows = B * H * S;
  fill(x.qkv, dtype, B * S * x.W, seed);
  fill(x.dO, dtype, n, seed + 1);
  for (Device *out : {&x.o, &x.lse, &x.grads})
    DCRT_CUDA_CHECK_WHAT(
        cudaMemsetAsync(out->data(), 0xff, out->buffer.size(), stream()),
        "poisoning an output");
  // The dense call on transposed copies.
  Shape shape{B * H, S, D};
  Operands dense(shape);
  const dcrt_attention_desc &sd = x.desc;
  x.gather(x.q(), sd.q_strides, dense.q);
  x.gather(x.k(), sd.k_strides, dense.k);
  x.gather(x.v(), sd.v_strides, dense.v);
  x.gather(x.dO.data(), sd.do_strides, dense.dO);
  dcrt_attention_desc dd = makeDesc(dtype, shape, causal);
  dcrt_attention_fwd(&dd, dense.q.data(), dense.k.data(), dense.v.data(),
                     dense.o.data(), static_cast<float *>(dense.lse.data()));
  dcrt_attention_bwd(&dd, dense.q.data(), dense.k.data(), dense.v.data(),
                     dense.o.data(), static_cast<float *>(dense.lse.data()),
                     dense.dO.data(), dense.dq.data(), dense.dk.data(),
                     dense.dv.data());
  x.forward();
  x.backward();
  // The strided outputs, gathered dense.
  Operands got(shape);
  x.gather(x.o.data(), sd.o_strides, got.o);
  x.gather(x.dq(), sd.dq_strides, got.dq);
  x.gather(x.dk(), sd.dk_strides, got.dk);
  x.gather(x.dv(), sd.dv_strides, got.dv);
  synchronize();

  auto error = [&](Device &a, Device &b, int32_t type, int64_t count,
                   bool absolute = false) {
    return maxError(hostCopy(a.data(), type, count),
                    hostCopy(b.data(), type, count), absolute);
  };
  double eO = error(got.o, dense.o, dtype, n);
  double eLse = error(x.lse, dense.lse, DCRT_F32, rows, true);
  double eDq = error(got.dq, dense.dq, dtype, n);
  double eDk = error(got.dk, dense.dk, dtype, n);
  double eDv = error(got.dv, dense.dv, dtype, n);
  std::string identical;
  for (auto [what, a, b] :
       {std::tuple<const char *, Device *, Device *>{"o", &got.o, &dense.o},
        {"lse", &x.lse, &dense.lse},
        {"dq", &got.dq, &dense.dq},
        {"dk", &got.dk, &dense.dk},
        {"dv", &got.dv, &dense.dv}})
    identical += std::string(" ") + what + (sameBytes(*a, *b) ? " =" : " !=");
  // The gradient buffer: poison (0xffff) left exactly outside the slices,
  // nowhere inside.
  std::vector<uint16_t> grads(static_cast<size_t>(B * S * x.GW));
  copy(grads.data(), x.grads.data(), x.grads.buffer.size());
  int64_t touched = 0, unwritten = 0;
  for (int64_t row = 0; row < B * S; ++row)
    for (int64_t c = 0; c < x.GW; ++c) {
      bool poisoned = grads[row * x.GW + c] == 0xffff;
      bool inside = c >= FusedOperands::kPad && c < FusedOperands::kPad + x.W;
      touched += !inside && !poisoned;
      unwritten += inside && poisoned;
    }
  bool ok = eO <= 2e-2 && eLse <= 2e-2 && eDq <= 2e-2 && eDk <= 2e-2 &&
            eDv <= 2e-2 && touched == 0 && unwritten == 0;
  char detail[384];
  std::snprintf(
      detail, sizeof(detail),
      "against the dense call on transposed copies: max error o %.2e lse "
      "%.2e (abs) dq %.2e dk %.2e dv %.2e; bit-identical:%s; gradient "
      "buffer: %lld elements outside the slices changed, %lld inside "
      "unwritten",
      eO, eLse, eDq, eDk, eDv, identical.c_str(),
      static_cast<long long>(touched), static_cast<long long>(unwritten));
  char what[192];
  std::snprintf(what, sizeof(what),
                "attention strided %s %s %s B %lld S %lld H %lld D %lld "
                "(q/k/v slices of [B*S, 3HD])",
                name.c_str(), dtype == DCRT_BF16 ? "bf16" : "f16",
                causal ? "causal" : "full", static_cast<long long>(B),
                static_cast<long long>(S), static_cast<long long>(H),
                static_cast<long long>(D));
  report(ok, what, detail);
}

float timeMs(cudaEvent_t begin, cudaEvent_t end, int reps,
             const std::function<void()> &body) {
  body(); // warm-up: plans
  synchronize();
  std::vector<float> times;
  for (int round = 0; round < 3; ++round) {
    DCRT_CUDA_CHECK(cudaEventRecord(begin, stream()));
    for (int r = 0; r < reps; ++r)
      body();
    DCRT_CUDA_CHECK(cudaEventRecord(end, stream()));
    DCRT_CUDA_CHECK(cudaEventSynchronize(end));
    float ms = 0;
    DCRT_CUDA_CHECK(cudaEventElapsedTime(&ms, begin, end));
    times.push_back(ms / reps);
  }
  std::sort(times.begin(), times.end());
  return times[1]; // the median of three rounds
}

/// Times `forward` and `backward` (attention of shape `s`) and prints one
/// line.
void benchLine(const std::string &name, const Shape &s, bool causal,
               const std::function<void()> &forward,
               const std::function<void()> &backward) {
  cudaEvent_t begin, end;
  DCRT_CUDA_CHECK(cudaEventCreate(&begin));
  DCRT_CUDA_CHECK(cudaEventCreate(&end));
  const int reps = 10;
  float fwd = timeMs(begin, end, reps, forward);
  float bwd = timeMs(begin, end, reps, backward);
  double work = double(s.batch) * s.seq * s.seq * s.dim * (causal ? 0.5 : 1);
  std::printf(
      "bench dc%s %-8s B*H %4lld kv %4lld S %5lld D %4lld %-6s fwd %8.3f ms "
      "%6.1f TFLOP/s  bwd %8.3f ms %6.1f TFLOP/s  fwd+bwd %8.3f ms "
      "%6.1f TFLOP/s\n",
      deterministicMode ? "-det" : "", name.c_str(),
      static_cast<long long>(s.batch), static_cast<long long>(s.kvBatch()),
      static_cast<long long>(s.seq), static_cast<long long>(s.dim),
      causal ? "causal" : "full", fwd, 4 * work / fwd * 1e-9, bwd,
      10 * work / bwd * 1e-9, fwd + bwd, 14 * work / (fwd + bwd) * 1e-9);
  std::fflush(stdout);
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
}

void bench(const std::string &name, const Shape &s, bool causal) {
  dcrt_attention_desc desc = makeDesc(DCRT_BF16, s, causal);
  Operands x(s);
  int64_t n = s.batch * s.seq * s.dim, nKV = s.kvBatch() * s.seq * s.dim;
  fill(x.q, DCRT_BF16, n, 11);
  fill(x.k, DCRT_BF16, nKV, 12);
  fill(x.v, DCRT_BF16, nKV, 13);
  fill(x.dO, DCRT_BF16, n, 14);
  benchLine(
      name, s, causal,
      [&] {
        dcrt_attention_fwd(&desc, x.q.data(), x.k.data(), x.v.data(),
                           x.o.data(), static_cast<float *>(x.lse.data()));
      },
      [&] {
        dcrt_attention_bwd(&desc, x.q.data(), x.k.data(), x.v.data(),
                           x.o.data(), static_cast<float *>(x.lse.data()),
                           x.dO.data(), x.dq.data(), x.dk.data(), x.dv.data());
      });
}

/// The fused-projection strided form (FusedOperands) of B sequences of H
/// heads, to set beside bench's dense line of the same shape.
void benchStrided(const std::string &name, int64_t B, int64_t S, int64_t H,
                  int64_t D, bool causal) {
  FusedOperands x(DCRT_BF16, B, S, H, D, causal);
  fill(x.qkv, DCRT_BF16, B * S * x.W, 15);
  fill(x.dO, DCRT_BF16, B * S * x.HD, 16);
  benchLine(
      name, {B * H, S, D}, causal, [&] { x.forward(); }, [&] { x.backward(); });
}
} // namespace

int main(int argc, char **argv) {
  bool benchmark = true;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--no-bench")
      benchmark = false;
    else if (arg == "--deterministic")
      deterministicMode = true;
    else
      fatal("usage: attention-check [--no-bench] [--deterministic]");
  }
  setErrorPrefix("attention-check");
  dcrt_init_options options{};
  options.struct_size = sizeof(options);
  options.device = -1;
  options.flags = deterministicMode ? DCRT_INIT_DETERMINISTIC : 0;
  dcrt_init(&options);
  if (deviceIsHost())
    fatal("attention-check checks a GPU backend: run it with "
          "DCRT_BACKEND=cuda");

  struct Case {
    std::string name;
    Shape shape;
  };
  // Configs A and B of dc-gen-llama (batch * heads, seq, head_dim), A
  // with 32 heads, and 70b's attention (64 query heads over 8 key/value
  // heads, one sequence of 4096).
  std::vector<Case> shapes = {{"A", {4 * 16, 2048, 128}},
                              {"B", {1 * 32, 1024, 128}},
                              {"A-32h", {4 * 32, 2048, 128}},
                              {"70b-gqa", {1 * 64, 4096, 128, 8}}};
  uint32_t seed = 1;
  for (bool causal : {true, false}) {
    checkCase("small", DCRT_BF16, {3, 256, 64}, causal, 3, seed += 10);
    checkCase("small", DCRT_F16, {3, 256, 64}, causal, 3, seed += 10);
    // Grouped-query attention: 2 key/value entries for 6 query entries.
    checkCase("small-gqa", DCRT_BF16, {6, 256, 64, 3}, causal, 6, seed += 10);
    checkCase("small-gqa", DCRT_F16, {6, 256, 64, 3}, causal, 6, seed += 10);
    for (const Case &c : shapes)
      checkCase(c.name, DCRT_BF16, c.shape, causal, 2 * c.shape.group,
                seed += 10);
    // heads > 0: q/k/v slices of a fused projection, 8 heads of 128.
    checkStridedCase("fused", DCRT_BF16, 2, 512, 8, 128, causal, seed += 10);
  }
  if (benchmark) {
    for (const Case &c : shapes)
      for (bool causal : {true, false})
        bench(c.name, c.shape, causal);
    // Config A's attention read in place from a fused projection.
    for (bool causal : {true, false})
      benchStrided("A-fused", 4, 2048, 16, 128, causal);
  }
  MemoryStats stats = memoryStats();
  std::printf(
      "attention workspaces: %lld bytes reserved in %lld graphs\n",
      static_cast<long long>(stats.attentionWorkspace.reserved),
      static_cast<long long>(stats.attentionWorkspace.systemAllocations));

  bool passed = gpuCheckFailures() == 0;
  std::printf("attention-check: %s\n", passed ? "all passed" : "FAILED");
  dcrt_finalize();
  return passed ? 0 : 1;
}
