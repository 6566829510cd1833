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
//  2. unless --no-bench, the time of forward and backward on the shapes of
//     configs A and B (dc-gen-llama: batch * heads x seq x head_dim), of
//     a 128-head A and of 70b's grouped-query attention, in TFLOP/s: 4 B S^2 D
//     for the forward, 10 B S^2 D for the backward (its five products), halved
//     when causal.
// Prints one line per check and "attention-check: all passed" (exit 0) or
// "attention-check: FAILED" (exit 1).
//
//===----------------------------------------------------------------------===//
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
#include <vector>

using namespace dcrt;
using namespace dcrt::test;

namespace {
void checkCuda(cudaError_t status, const char *what) {
  test::checkCuda("attention-check", status, what);
}

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
  checkCuda(cudaGetLastError(), "filling an operand");
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
    checkCuda(cudaMemsetAsync(out->data(), 0xff, out->buffer.size(), stream()),
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
  checkCuda(cudaGetLastError(), "referenceRows");
  referenceKeys<<<kvRows, 256, 2 * s.seq * 4, stream()>>>(
      x.q.data(), x.k.data(), x.v.data(), static_cast<float *>(x.lse.data()),
      static_cast<float *>(delta.data()), x.dO.data(), dtype, r, scale, causal,
      static_cast<float *>(dk.data()), static_cast<float *>(dv.data()));
  checkCuda(cudaGetLastError(), "referenceKeys");
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

float timeMs(cudaEvent_t begin, cudaEvent_t end, int reps,
             const std::function<void()> &body) {
  body(); // warm-up: plans
  synchronize();
  std::vector<float> times;
  for (int round = 0; round < 3; ++round) {
    checkCuda(cudaEventRecord(begin, stream()), "cudaEventRecord");
    for (int r = 0; r < reps; ++r)
      body();
    checkCuda(cudaEventRecord(end, stream()), "cudaEventRecord");
    checkCuda(cudaEventSynchronize(end), "cudaEventSynchronize");
    float ms = 0;
    checkCuda(cudaEventElapsedTime(&ms, begin, end), "cudaEventElapsedTime");
    times.push_back(ms / reps);
  }
  std::sort(times.begin(), times.end());
  return times[1]; // the median of three rounds
}

void bench(const std::string &name, const Shape &s, bool causal) {
  dcrt_attention_desc desc = makeDesc(DCRT_BF16, s, causal);
  Operands x(s);
  int64_t n = s.batch * s.seq * s.dim, nKV = s.kvBatch() * s.seq * s.dim;
  fill(x.q, DCRT_BF16, n, 11);
  fill(x.k, DCRT_BF16, nKV, 12);
  fill(x.v, DCRT_BF16, nKV, 13);
  fill(x.dO, DCRT_BF16, n, 14);
  cudaEvent_t begin, end;
  checkCuda(cudaEventCreate(&begin), "cudaEventCreate");
  checkCuda(cudaEventCreate(&end), "cudaEventCreate");
  auto forward = [&] {
    dcrt_attention_fwd(&desc, x.q.data(), x.k.data(), x.v.data(), x.o.data(),
                       static_cast<float *>(x.lse.data()));
  };
  auto backward = [&] {
    dcrt_attention_bwd(&desc, x.q.data(), x.k.data(), x.v.data(), x.o.data(),
                       static_cast<float *>(x.lse.data()), x.dO.data(),
                       x.dq.data(), x.dk.data(), x.dv.data());
  };
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
  }
  if (benchmark)
    for (const Case &c : shapes)
      for (bool causal : {true, false})
        bench(c.name, c.shape, causal);
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
