//===- moe-kernels-check.cu - the mixture-of-experts calls on a GPU -------===//
//
// `DCRT_BACKEND=cuda mpirun -n 1 moe-kernels-check [--no-bench] [--quick]`
// on a GPU machine (runtime/test/gpu/run.sh runs it; DCRT_BACKEND=host runs
// the checks on the host backend, as ctest does; --quick keeps to small
// shapes, for the sanitizers):
//  1. every call against the references of MoeReference.h (written from
//     the op descriptions, independently of the runtime): dcrt_topk,
//     dcrt_group_by_expert, dcrt_gather_rows and dcrt_scatter_add_rows bit
//     for bit (the bits dcrt.h pins down, the host backend's too), on
//     random and skewed routings (every assignment to one expert, experts
//     without rows, dropped ids, k = experts), ties, NaNs and infinities,
//     both index dtypes, padded row strides and unaligned slices;
//     dcrt_grouped_matmul (and transpose_rhs) and dcrt_grouped_weight_grad
//     within f32 accumulation of a double reference, f32/bf16/f16, the
//     tensor-core and CUDA-core kernels (odd shapes, unaligned pointers),
//     sliced weight gradients, accumulation, infinities in the rows past
//     the last end (which count nowhere); a second call bit-identical;
//     padding untouched everywhere;
//  2. (GPU) the grouped products at the bench's shapes against cuBLASLt
//     (dcrt_matmul) on each expert's rows, balanced and all to one expert;
//  3. (GPU) a mixture-of-experts layer's forward and backward (top-k,
//     grouping, gather, two grouped products, scatter, the gradients)
//     captured as one CUDA graph and replayed after the router's scores
//     changed: bit-identical to the same calls run directly on the new
//     scores (the routing is read on the device only);
//  4. (GPU) unless --no-bench: grouped products in TFLOP/s beside
//     cuBLASLt's dense product of the same FLOPs (balanced routing, bf16,
//     Mixtral-like shapes; the issue's target: 80%), on sm_90 also on the
//     cp.async wgmma kernel (DCRT_MOE_TMA=0) beside the TMA one, and with
//     every row on one expert; the routing kernels in GB/s beside
//     cudaMemcpy device to device (target: 80%). Timed as CUDA graphs of
//     repeated calls.
// Prints one line per check ("ok" or "FAIL"), "bench" lines, and
// "moe-kernels-check: all passed" (exit 0) or "moe-kernels-check: FAILED"
// (exit 1).
//
//===----------------------------------------------------------------------===//
#include "CudaCheck.h"
#include "GpuCheck.h"
#include "MoeReference.h"

#include "dcrt/core.hpp"
#include "dcrt/dcrt.h"
#include "dcrt/dtype.hpp"
#include "dcrt/error.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

using namespace dcrt;
using namespace dcrt::test;

namespace {

bool onHost = false; // the host backend: checks only
bool small = false;  // the host backend or --quick: smaller shapes
/// The grouped products run on the TMA wgmma kernel (sm_90, DCRT_MOE_TMA
/// not 0): the bench times the cp.async one beside it.
bool tmaKernel = false;

cudaStream_t stream() {
  return static_cast<cudaStream_t>(dcrt_compute_stream());
}

/// Bytes in device memory, `offset` bytes past a 256-byte aligned base
/// (unaligned slices).
struct DeviceBytes {
  Buffer buffer;
  char *data = nullptr;
  int64_t size = 0;
};

DeviceBytes upload(const Bytes &host, int64_t offset = 0) {
  DeviceBytes d;
  d.buffer = Buffer(static_cast<int64_t>(host.size()) + offset + 256,
                    MemoryKind::Device, "moe-kernels-check operand");
  d.data = d.buffer.as<char>() + offset;
  d.size = static_cast<int64_t>(host.size());
  if (!host.empty())
    copy(d.data, host.data(), d.size);
  return d;
}

Bytes download(const DeviceBytes &d) {
  synchronize();
  Bytes host(static_cast<size_t>(d.size));
  copy(host.data(), d.data, d.size);
  return host;
}

/// Bytes filled with `byte` (a pattern the call must overwrite or keep).
Bytes pattern(int64_t bytes, unsigned char byte) {
  return Bytes(static_cast<size_t>(bytes), byte);
}

std::string name(int32_t dtype) { return dtypeName(dtype); }

/// The first failure of a group of cases, for one report line.
struct Verdict {
  std::string failure;
  void check(const std::string &mismatch, const std::string &what) {
    if (failure.empty() && !mismatch.empty())
      failure = what + ": " + mismatch;
  }
};

//===----------------------------------------------------------------------===//
// 1. Every call against its reference
//===----------------------------------------------------------------------===//

void checkTopk() {
  std::mt19937 rng(11);
  struct Shape {
    int64_t rows, experts, k, pad;
  };
  const Shape shapes[] = {{4099, 8, 2, 0}, {1000, 64, 8, 3}, {777, 160, 6, 0},
                          {500, 8, 8, 1},  {300, 1, 1, 0},   {257, 33, 5, 2}};
  for (int32_t dtype : {DCRT_F32, DCRT_BF16, DCRT_F16})
    for (int32_t indexType : {DCRT_I32, DCRT_I64}) {
      Verdict v;
      for (const Shape &s : shapes)
        for (Scores kind : {Scores::Uniform, Scores::Ties, Scores::Special}) {
          dcrt_topk_desc d =
              makeTopk(dtype, indexType, s.rows, s.experts, s.k, s.pad);
          Bytes scores = topkScores(d, kind, rng);
          Bytes values = pattern(d.rows * d.values_ld * dtypeSize(dtype), 0xab);
          Bytes indices =
              pattern(d.rows * d.indices_ld * dtypeSize(indexType), 0xcd);
          DeviceBytes dScores = upload(scores), dValues = upload(values),
                      dIndices = upload(indices);
          dcrt_topk(&d, dScores.data, dValues.data, dIndices.data);
          v.check(checkTopkResult(d, scores, values, download(dValues), indices,
                                  download(dIndices)),
                  "rows " + std::to_string(s.rows) + " experts " +
                      std::to_string(s.experts) + " k " + std::to_string(s.k) +
                      (kind == Scores::Ties      ? " (ties)"
                       : kind == Scores::Special ? " (NaN, inf, -0)"
                                                 : ""));
        }
      report(v.failure.empty(),
             "dcrt_topk " + name(dtype) + " scores, " + name(indexType) +
                 " indices: 6 shapes (k = experts, 1 expert, padded), "
                 "uniform, tied and NaN/inf/-0 scores",
             v.failure);
    }
}

void checkGroupByExpert() {
  std::mt19937 rng(12);
  struct Shape {
    int64_t n, experts;
  };
  const Shape shapes[] = {{16384, 8},  {1, 1},       {100, 7},
                          {4097, 257}, {300007, 64}, {50000, 1024}};
  const Routing routings[] = {Routing::Random,    Routing::Balanced,
                              Routing::OneExpert, Routing::Empty,
                              Routing::Dropped,   Routing::Skewed};
  const int32_t types[][3] = {{DCRT_I64, DCRT_I64, DCRT_I64},
                              {DCRT_I32, DCRT_I32, DCRT_I64},
                              {DCRT_I64, DCRT_I32, DCRT_I32}};
  for (const Shape &s : shapes) {
    if (small && s.n > 20000)
      continue;
    Verdict v;
    int t = 0;
    for (Routing routing : routings) {
      const int32_t *type = types[t++ % 3];
      dcrt_group_by_expert_desc d{};
      d.struct_size = sizeof(d);
      d.ids_dtype = type[0];
      d.order_dtype = type[1];
      d.ends_dtype = type[2];
      d.assignments = s.n;
      d.experts = s.experts;
      std::vector<int64_t> ids = routingIds(routing, s.n, s.experts, rng);
      DeviceBytes dIds = upload(indexBytes(ids, type[0])),
                  dOrder = upload(pattern(s.n * dtypeSize(type[1]), 0xee)),
                  dEnds = upload(pattern(s.experts * dtypeSize(type[2]), 0xee));
      dcrt_group_by_expert(&d, dIds.data, dOrder.data, dEnds.data);
      Grouping want = referenceGrouping(ids, s.experts);
      std::vector<int64_t> order = indexValues(download(dOrder), type[1]);
      std::vector<int64_t> ends = indexValues(download(dEnds), type[2]);
      std::string what = std::string(routingName(routing)) + ", " +
                         name(type[0]) + " ids, " + name(type[1]) + " order, " +
                         name(type[2]) + " ends";
      for (size_t p = 0; p < order.size() && v.failure.empty(); ++p)
        if (order[p] != want.order[p])
          v.check("order[" + std::to_string(p) +
                      "] = " + std::to_string(order[p]) + ", want " +
                      std::to_string(want.order[p]),
                  what);
      for (size_t e = 0; e < ends.size() && v.failure.empty(); ++e)
        if (ends[e] != want.ends[e])
          v.check("ends[" + std::to_string(e) +
                      "] = " + std::to_string(ends[e]) + ", want " +
                      std::to_string(want.ends[e]),
                  what);
    }
    report(v.failure.empty(),
           "dcrt_group_by_expert " + std::to_string(s.n) + " ids, " +
               std::to_string(s.experts) +
               " experts: stable order and ends, 6 routings (one workspace, "
               "reused)",
           v.failure);
  }
}

/// The combine's index for `tokens` tokens of k choices: the token of each
/// sorted assignment, some out of range when `dropped`.
std::vector<int64_t> combineIndex(int64_t tokens, int64_t k, int64_t experts,
                                  bool dropped, std::mt19937 &rng) {
  std::vector<int64_t> ids =
      routingIds(Routing::Random, tokens * k, experts, rng);
  Grouping g = referenceGrouping(ids, experts);
  std::vector<int64_t> index(g.order.size());
  for (size_t p = 0; p < index.size(); ++p)
    index[p] = g.order[p] / k;
  if (dropped)
    for (size_t p = 0; p < index.size(); p += 5)
      index[p] = p % 2 ? -1 : tokens + static_cast<int64_t>(p);
  return index;
}

struct RowMapCase {
  const char *what;
  int32_t dtype, indexType;
  int64_t tokens, k, width, padSource, padResult;
  int64_t offset; // source and result this many elements off alignment
  bool dropped;
};

const RowMapCase kRowMapCases[] = {
    {"16-byte rows", DCRT_BF16, DCRT_I64, 4096, 2, 2048, 0, 0, 0, false},
    {"padded slices, dropped", DCRT_BF16, DCRT_I32, 1000, 3, 520, 8, 16, 0,
     true},
    {"7-wide rows (2-byte units)", DCRT_F16, DCRT_I64, 500, 2, 7, 3, 1, 0,
     true},
    {"24-byte rows (4-byte units)", DCRT_F32, DCRT_I32, 300, 3, 6, 2, 0, 0,
     false},
    {"unaligned slices", DCRT_BF16, DCRT_I64, 333, 3, 64, 0, 0, 1, true},
    {"f32 16-byte rows", DCRT_F32, DCRT_I64, 777, 2, 1024, 4, 0, 0, false},
};

void checkGatherAndScatter(bool scatter) {
  std::mt19937 rng(scatter ? 14 : 13);
  Verdict v;
  std::string names;
  for (const RowMapCase &c : kRowMapCases) {
    if (small && c.width * c.tokens > 4000000)
      continue;
    names += std::string(names.empty() ? "" : ", ") + c.what;
    const int64_t n = c.tokens * c.k, size = dtypeSize(c.dtype);
    std::vector<int64_t> index = combineIndex(c.tokens, c.k, 8, c.dropped, rng);
    if (scatter && c.dropped) // repeats beyond k: token 3 named 40 times more
      for (size_t p = 7; p < index.size() && p < 7 + 40 * 13; p += 13)
        index[p] = 3;
    dcrt_row_map_desc d = makeRowMap(c.dtype, c.indexType, n, c.tokens, c.width,
                                     c.padSource, c.padResult);
    int64_t sourceRows = scatter ? n : c.tokens;
    int64_t resultRows = scatter ? c.tokens : n;
    Bytes source = randomFloats(c.dtype, sourceRows * d.source_ld, rng);
    Bytes result = randomFloats(c.dtype, resultRows * d.result_ld, rng);
    DeviceBytes dSource = upload(source, c.offset * size),
                dIndex = upload(indexBytes(index, c.indexType)),
                dResult = upload(result, c.offset * size);
    Bytes want;
    if (scatter) {
      dcrt_scatter_add_rows(&d, dSource.data, dIndex.data, dResult.data);
      want = referenceScatterAdd(d, source, index, result);
    } else {
      dcrt_gather_rows(&d, dSource.data, dIndex.data, dResult.data);
      want = referenceGather(d, source, index, result);
    }
    v.check(firstDifference(download(dResult), want, size),
            std::string(c.what) + " (" + name(c.dtype) + ")");
  }
  if (scatter) {
    // Every source row to one result row; the other rows none.
    const int64_t n = small ? 512 : 4096, tokens = 64, width = 256;
    std::vector<int64_t> index(static_cast<size_t>(n), 5);
    dcrt_row_map_desc d =
        makeRowMap(DCRT_BF16, DCRT_I64, n, tokens, width, 0, 0);
    Bytes source = randomFloats(DCRT_BF16, n * width, rng);
    Bytes result = randomFloats(DCRT_BF16, tokens * width, rng);
    DeviceBytes dSource = upload(source), dIndex = upload(indexBytes(index, 4)),
                dResult = upload(result);
    dcrt_scatter_add_rows(&d, dSource.data, dIndex.data, dResult.data);
    v.check(firstDifference(download(dResult),
                            referenceScatterAdd(d, source, index, result), 2),
            "every row to one");
    names += ", every row to one";
  }
  report(v.failure.empty(),
         std::string(scatter ? "dcrt_scatter_add_rows (f32 sums in source "
                               "order, bit for bit)"
                             : "dcrt_gather_rows (bit for bit)") +
             ": " + names,
         v.failure);
}

struct GroupedCase {
  std::string what;
  GroupedShape shape;
  bool weightGrad;
  int64_t offset;  // elements off alignment (another kernel)
  bool big;        // skipped on the host backend
  bool infPastEnd; // lhs and rhs rows past the last end all +Inf
};

std::vector<GroupedCase> groupedCases() {
  std::vector<GroupedCase> cases;
  auto add = [&](std::string what, GroupedShape s, int form, int64_t offset,
                 bool big) {
    s.transposeRhs = form == 1;
    const char *forms[] = {"forward", "forward transpose_rhs",
                           "weight gradient"};
    cases.push_back({std::string(forms[form]) + ", " + what, s, form == 2,
                     offset, big, false});
  };
  for (int form = 0; form < 3; ++form) {
    for (int32_t dtype : {DCRT_BF16, DCRT_F16}) {
      GroupedShape s;
      s.dtype = dtype;
      s.rows = 1000;
      s.experts = 5;
      s.k = 136;
      s.p = 264;
      add(name(dtype) + " 1000 x 136 x 264, 5 experts (tensor cores)", s, form,
          0, false);
    }
    GroupedShape s;
    s.dtype = DCRT_BF16;
    s.endsType = DCRT_I32;
    s.rows = 777;
    s.experts = 3;
    s.k = 72;
    s.p = 200;
    s.padLhs = 8;
    s.padRhs = 16;
    s.padOut = 24;
    s.gapRhs = 8;
    s.gapOut = 32;
    s.accumulate = true;
    add("bf16 padded slices, i32 ends, accumulate (tensor cores)", s, form, 0,
        false);
    add("bf16 the same 2 bytes off alignment (CUDA cores)", s, form, 1, false);
    s = GroupedShape{};
    s.dtype = DCRT_F32;
    s.rows = 600;
    s.experts = 4;
    s.k = 40;
    s.p = 72;
    add("f32 600 x 40 x 72, 4 experts (CUDA cores)", s, form, 0, false);
    s.dtype = DCRT_BF16;
    s.rows = 500;
    s.experts = 3;
    s.k = 37;
    s.p = 45;
    add("bf16 500 x 37 x 45 (odd: CUDA cores)", s, form, 0, false);
    s = GroupedShape{};
    s.dtype = DCRT_BF16;
    s.rows = 4096;
    s.experts = 8;
    s.k = 512;
    s.p = 384;
    add("bf16 4096 x 512 x 384, 8 experts (tensor cores)", s, form, 0, true);
    // More tiles than an H100 has SMs: a persistent block (the TMA
    // forward) takes several, and 64 experts' partial tiles end anywhere.
    s.rows = 8192;
    s.experts = 64;
    s.k = 128;
    s.p = 520;
    add("bf16 8192 x 128 x 520, 64 experts (tensor cores, 3 column tiles)", s,
        form, 0, true);
  }
  // A weight gradient in one slice (few rows), and many slices.
  GroupedShape s;
  s.dtype = DCRT_BF16;
  s.rows = 255;
  s.experts = 4;
  s.k = 136;
  s.p = 264;
  add("bf16 255 rows (one slice)", s, 2, 0, false);
  s.rows = 4096;
  s.experts = 2;
  s.k = 128;
  s.p = 128;
  add("bf16 4096 rows, one 128 x 128 tile per expert (16 slices)", s, 2, 0,
      false);
  // The TMA kernel loads whole 64-row steps from each expert's (slice's)
  // first row and zeroes the rows past its end in shared memory: in both
  // operands, or 0 x Inf would reach the sums.
  s.rows = 1000;
  s.experts = 5;
  s.k = 136;
  s.p = 264;
  add("bf16 1000 x 136 x 264, +Inf in every row past the last end", s, 2, 0,
      false);
  cases.back().infPastEnd = true;
  return cases;
}

/// Sets every element of rows `first` ... (row stride `ld`) to +Inf.
void poisonRowsFrom(Bytes &data, int32_t dtype, int64_t ld, int64_t first) {
  const int64_t size = dtypeSize(dtype);
  const int64_t count = static_cast<int64_t>(data.size()) / size;
  const float inf = INFINITY;
  for (int64_t i = first * ld; i < count; ++i)
    convert(&inf, DCRT_F32, data.data() + i * size, dtype, 1);
}

void checkGrouped() {
  const Routing routings[] = {Routing::Random,    Routing::Balanced,
                              Routing::OneExpert, Routing::Empty,
                              Routing::Dropped,   Routing::Skewed};
  unsigned seed = 100;
  for (const GroupedCase &c : groupedCases()) {
    if (small && c.big)
      continue;
    Verdict v;
    double worst = 0;
    int tried = 0;
    for (Routing routing : routings) {
      // The large shapes' double references are the slow part: 3 routings.
      if (c.big && routing != Routing::Balanced &&
          routing != Routing::OneExpert && routing != Routing::Dropped)
        continue;
      ++tried;
      std::mt19937 rng(seed++);
      const GroupedShape &s = c.shape;
      dcrt_grouped_matmul_desc d =
          c.weightGrad ? makeGroupedWeightGrad(s) : makeGroupedForward(s);
      std::vector<int64_t> ids = routingIds(routing, s.rows, s.experts, rng);
      std::vector<int64_t> ends = referenceGrouping(ids, s.experts).ends;
      int64_t size = dtypeSize(s.dtype), offset = c.offset * size;
      Bytes lhs = randomFloats(s.dtype, groupedLhsElements(d), rng);
      Bytes rhs =
          randomFloats(s.dtype, groupedRhsElements(d, c.weightGrad), rng);
      if (c.infPastEnd) {
        poisonRowsFrom(lhs, s.dtype, d.lhs_ld, ends.back());
        poisonRowsFrom(rhs, s.dtype, d.rhs_ld, ends.back());
      }
      Bytes out =
          randomFloats(s.dtype, groupedOutElements(d, c.weightGrad), rng);
      DeviceBytes dLhs = upload(lhs, offset), dRhs = upload(rhs, offset),
                  dEnds = upload(indexBytes(ends, s.endsType)),
                  dOut = upload(out, offset), dAgain = upload(out, offset);
      auto call = [&](void *target) {
        if (c.weightGrad)
          dcrt_grouped_weight_grad(&d, dLhs.data, dRhs.data, dEnds.data,
                                   target);
        else
          dcrt_grouped_matmul(&d, dLhs.data, dRhs.data, dEnds.data, target);
      };
      call(dOut.data);
      call(dAgain.data);
      Bytes got = download(dOut);
      GroupedReference r =
          referenceGrouped(d, c.weightGrad, lhs, rhs, ends, out);
      double error = 0;
      v.check(checkGrouped(d, c.weightGrad, r, out, got, 1e-5, &error),
              routingName(routing));
      v.check(firstDifference(download(dAgain), got, size),
              std::string(routingName(routing)) + ": a second call differs");
      worst = std::max(worst, error);
    }
    char detail[128];
    // The bound is tight by design: rounding alone reaches 1.0 x half an
    // ulp (the host backend's own results show 0.9-1.0 here).
    std::snprintf(detail, sizeof(detail),
                  "largest error %.2f x the bound (half an ulp of the output "
                  "+ 1e-5 x sum|ab|)",
                  worst);
    report(v.failure.empty(),
           "grouped " + c.what + ", " + std::to_string(tried) +
               " routings, twice bit-identical",
           v.failure.empty() ? detail : v.failure);
  }
}

//===----------------------------------------------------------------------===//
// Device-side helpers (GPU only)
//===----------------------------------------------------------------------===//

__global__ void fillKernel(void *data, int32_t dtype, int64_t count,
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
    if (dtype == DCRT_F32)
      static_cast<float *>(data)[i] = value;
    else // bf16, truncated
      static_cast<uint16_t *>(data)[i] =
          static_cast<uint16_t>(__float_as_uint(value) >> 16);
  }
}

void fillDevice(void *data, int32_t dtype, int64_t count, uint32_t seed) {
  fillKernel<<<2048, 256, 0, stream()>>>(data, dtype, count, seed);
  DCRT_CUDA_CHECK_WHAT(cudaGetLastError(), "filling an operand");
}

/// Milliseconds per call of `body` (the same calls each time), timed as a
/// CUDA graph of `reps` calls after one direct warm-up call.
double timeCalls(const std::function<void()> &body, int reps) {
  body(); // plans, workspaces
  synchronize();
  struct Context {
    const std::function<void()> *body;
    int reps;
  } context{&body, reps};
  StepGraph graph = captureStep(
      [](void *p) {
        auto *c = static_cast<Context *>(p);
        for (int r = 0; r < c->reps; ++r)
          (*c->body)();
      },
      &context);
  replay(graph); // warm
  synchronize();
  cudaEvent_t begin, end;
  DCRT_CUDA_CHECK(cudaEventCreate(&begin));
  DCRT_CUDA_CHECK(cudaEventCreate(&end));
  DCRT_CUDA_CHECK(cudaEventRecord(begin, stream()));
  replay(graph);
  DCRT_CUDA_CHECK(cudaEventRecord(end, stream()));
  DCRT_CUDA_CHECK(cudaEventSynchronize(end));
  float ms = 0;
  DCRT_CUDA_CHECK(cudaEventElapsedTime(&ms, begin, end));
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
  return ms / reps;
}

/// ends for `rows` sorted rows: balanced (equal shares), or all on expert
/// `experts / 2`.
std::vector<int64_t> benchEnds(int64_t rows, int64_t experts, bool oneExpert) {
  std::vector<int64_t> ends(static_cast<size_t>(experts));
  for (int64_t e = 0; e < experts; ++e)
    ends[static_cast<size_t>(e)] =
        oneExpert ? (e >= experts / 2 ? rows : 0) : rows * (e + 1) / experts;
  return ends;
}

/// One grouped product of the bench: the forms of a Mixtral-like expert
/// MLP with model dim D and hidden dim F on N sorted rows.
struct BenchForm {
  std::string what;
  int64_t k, p;
  bool transposeRhs, weightGrad;
};

std::vector<BenchForm> benchForms(int64_t D, int64_t F) {
  return {{"up   x W1^T  [N,D]x[E,F,D]^T", D, F, true, false},
          {"down h W2^T  [N,F]x[E,D,F]^T", F, D, true, false},
          {"dx   dh W1   [N,F]x[E,F,D]", F, D, false, false},
          {"dW1  dh^T x  [N,F]^T[N,D]", F, D, false, true}};
}

/// The dense product of the same FLOPs (cuBLASLt): [N, K] x [K, P], or
/// the weight gradient's [N, K]^T [N, P].
dcrt_matmul_desc denseOf(const dcrt_grouped_matmul_desc &g, bool weightGrad) {
  dcrt_matmul_desc d{};
  d.batch = 1;
  d.a_dtype = d.b_dtype = d.c_dtype = g.dtype;
  if (weightGrad) {
    d.m = g.k;
    d.n = g.p;
    d.k = g.rows;
    d.trans_a = 1;
    d.lda = g.lhs_ld;
    d.ldb = g.rhs_ld;
  } else {
    d.m = g.rows;
    d.n = g.p;
    d.k = g.k;
    d.trans_b = g.transpose_rhs;
    d.lda = g.lhs_ld;
    d.ldb = g.rhs_ld;
  }
  d.ldc = g.out_ld;
  return d;
}

/// Device buffers of one grouped product at the bench's shapes.
struct GroupedBuffers {
  dcrt_grouped_matmul_desc desc;
  bool weightGrad;
  Buffer lhs, rhs, out, ends;
};

GroupedBuffers benchBuffers(const BenchForm &f, int64_t rows, int64_t experts,
                            uint32_t seed) {
  GroupedShape s;
  s.dtype = DCRT_BF16;
  s.rows = rows;
  s.experts = experts;
  s.k = f.k;
  s.p = f.p;
  s.transposeRhs = f.transposeRhs;
  GroupedBuffers b;
  b.weightGrad = f.weightGrad;
  b.desc = f.weightGrad ? makeGroupedWeightGrad(s) : makeGroupedForward(s);
  int64_t lhs = groupedLhsElements(b.desc),
          rhs = groupedRhsElements(b.desc, f.weightGrad),
          out = groupedOutElements(b.desc, f.weightGrad);
  b.lhs = Buffer(lhs * 2, MemoryKind::Device, "bench lhs");
  b.rhs = Buffer(rhs * 2, MemoryKind::Device, "bench rhs");
  b.out = Buffer(out * 2, MemoryKind::Device, "bench out");
  b.ends = Buffer(experts * 8, MemoryKind::Device, "bench ends");
  fillDevice(b.lhs.data(), DCRT_BF16, lhs, seed);
  fillDevice(b.rhs.data(), DCRT_BF16, rhs, seed + 1);
  return b;
}

void setEnds(GroupedBuffers &b, const std::vector<int64_t> &ends) {
  copy(b.ends.data(), ends.data(), static_cast<int64_t>(ends.size()) * 8);
}

void runGrouped(const GroupedBuffers &b, void *out) {
  if (b.weightGrad)
    dcrt_grouped_weight_grad(&b.desc, b.lhs.data(), b.rhs.data(), b.ends.data(),
                             out);
  else
    dcrt_grouped_matmul(&b.desc, b.lhs.data(), b.rhs.data(), b.ends.data(),
                        out);
}

/// The same product as cuBLASLt calls on each expert's rows (host-known
/// ends), into `out` (zeroed first: rows past the end and empty experts).
void runPerExpert(const GroupedBuffers &b, const std::vector<int64_t> &ends,
                  void *out) {
  const dcrt_grouped_matmul_desc &g = b.desc;
  DCRT_CUDA_CHECK(cudaMemsetAsync(
      out, 0, static_cast<size_t>(groupedOutElements(g, b.weightGrad) * 2),
      stream()));
  const auto *lhs = b.lhs.as<uint16_t>();
  const auto *rhs = b.rhs.as<uint16_t>();
  auto *target = static_cast<uint16_t *>(out);
  for (int64_t e = 0; e < g.experts; ++e) {
    int64_t first = e == 0 ? 0 : ends[static_cast<size_t>(e - 1)];
    int64_t rows = ends[static_cast<size_t>(e)] - first;
    if (rows <= 0)
      continue;
    dcrt_matmul_desc d = denseOf(g, b.weightGrad);
    if (b.weightGrad) {
      d.k = rows;
      dcrt_matmul(&d, lhs + first * g.lhs_ld, rhs + first * g.rhs_ld,
                  target + e * g.out_expert_stride);
    } else {
      d.m = rows;
      dcrt_matmul(&d, lhs + first * g.lhs_ld, rhs + e * g.rhs_expert_stride,
                  target + first * g.out_ld);
    }
  }
}

/// The largest |a - b| over (|b| + the mean |b|), bf16 buffers of `count`.
double compareBf16(const Buffer &a, const Buffer &b, int64_t count) {
  synchronize();
  std::vector<uint16_t> x(static_cast<size_t>(count)),
      y(static_cast<size_t>(count));
  copy(x.data(), a.data(), count * 2);
  copy(y.data(), b.data(), count * 2);
  std::vector<float> fx(x.size()), fy(y.size());
  convert(x.data(), DCRT_BF16, fx.data(), DCRT_F32, count);
  convert(y.data(), DCRT_BF16, fy.data(), DCRT_F32, count);
  double mean = 0;
  for (float v : fy)
    mean += std::fabs(v);
  mean /= static_cast<double>(count);
  double worst = 0;
  for (size_t i = 0; i < fx.size(); ++i) {
    double error = std::fabs(double(fx[i]) - fy[i]) / (std::fabs(fy[i]) + mean);
    if (!(error <= worst)) // NaN too
      worst = std::isnan(error) ? INFINITY : error;
  }
  return worst;
}

//===----------------------------------------------------------------------===//
// 2. The bench's shapes against cuBLASLt per expert
//===----------------------------------------------------------------------===//

void checkAgainstCublas(int64_t rows, int64_t experts, int64_t D, int64_t F) {
  uint32_t seed = 500;
  for (const BenchForm &f : benchForms(D, F)) {
    if (f.what.rfind("down", 0) == 0)
      continue; // the same kernel as "up"
    GroupedBuffers b = benchBuffers(f, rows, experts, seed += 7);
    int64_t count = groupedOutElements(b.desc, f.weightGrad);
    Buffer reference(count * 2, MemoryKind::Device, "cuBLASLt per expert");
    for (bool oneExpert : {false, true}) {
      std::vector<int64_t> ends = benchEnds(rows, experts, oneExpert);
      setEnds(b, ends);
      runGrouped(b, b.out.data());
      runPerExpert(b, ends, reference.data());
      double worst = compareBf16(b.out, reference, count);
      char detail[128];
      std::snprintf(detail, sizeof(detail),
                    "max |grouped - cuBLASLt| %.2g of |cuBLASLt| + its mean",
                    worst);
      // Both round f32 sums of different orders to bf16 (2^-8 relative).
      report(worst <= 1.6e-2,
             "grouped " + f.what + " N=" + std::to_string(rows) +
                 " E=" + std::to_string(experts) + " K=" + std::to_string(f.k) +
                 " P=" + std::to_string(f.p) +
                 (oneExpert ? ", all rows on one expert" : ", balanced") +
                 " against cuBLASLt per expert",
             detail);
    }
  }
}

//===----------------------------------------------------------------------===//
// 3. A layer's forward and backward in one CUDA graph
//===----------------------------------------------------------------------===//

__global__ void tokensKernel(const int64_t *order, int64_t k, int64_t n,
                             int64_t *tokens) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    tokens[i] = order[i] / k;
}

/// A mixture-of-experts layer without the routing weights' scaling (linalg
/// in dc): x [T, D] bf16, router scores [T, E] f32, W1 [E, F, D], W2
/// [E, D, F]; forward y = sum over choices of W2 (W1 x), backward from dy.
struct Layer {
  int64_t T, E, k, D, F, N;
  Buffer scores, x, w1, w2, dy;
  // Step values.
  Buffer values, choices, order, ends, tokens, rows, h, out, y, dOut, dh, dw2,
      dw1, dRows, dx;

  Layer(int64_t T, int64_t E, int64_t k, int64_t D, int64_t F)
      : T(T), E(E), k(k), D(D), F(F), N(T * k) {
    auto device = [](int64_t bytes) {
      return Buffer(bytes, MemoryKind::Device, "moe layer");
    };
    scores = device(T * E * 4);
    x = device(T * D * 2);
    w1 = device(E * F * D * 2);
    w2 = device(E * D * F * 2);
    dy = device(T * D * 2);
    values = device(T * k * 4);
    choices = device(T * k * 8);
    order = device(N * 8);
    ends = device(E * 8);
    tokens = device(N * 8);
    rows = device(N * D * 2);
    h = device(N * F * 2);
    out = device(N * D * 2);
    y = device(T * D * 2);
    dOut = device(N * D * 2);
    dh = device(N * F * 2);
    dw2 = device(E * D * F * 2);
    dw1 = device(E * F * D * 2);
    dRows = device(N * D * 2);
    dx = device(T * D * 2);
  }

  void step() {
    dcrt_topk_desc top = makeTopk(DCRT_F32, DCRT_I64, T, E, k, 0);
    dcrt_topk(&top, scores.data(), values.data(), choices.data());
    dcrt_group_by_expert_desc group{};
    group.struct_size = sizeof(group);
    group.ids_dtype = group.order_dtype = group.ends_dtype = DCRT_I64;
    group.assignments = N;
    group.experts = E;
    dcrt_group_by_expert(&group, choices.data(), order.data(), ends.data());
    if (onHost) {
      for (int64_t i = 0; i < N; ++i)
        tokens.as<int64_t>()[i] = order.as<int64_t>()[i] / k;
    } else {
      tokensKernel<<<64, 256, 0, stream()>>>(order.as<int64_t>(), k, N,
                                             tokens.as<int64_t>());
      DCRT_CUDA_CHECK_WHAT(cudaGetLastError(), "the tokens kernel");
    }
    dcrt_row_map_desc toRows = makeRowMap(DCRT_BF16, DCRT_I64, N, T, D, 0, 0);
    dcrt_gather_rows(&toRows, x.data(), tokens.data(), rows.data());
    GroupedShape s;
    s.dtype = DCRT_BF16;
    s.rows = N;
    s.experts = E;
    s.transposeRhs = true;
    s.k = D;
    s.p = F;
    dcrt_grouped_matmul_desc up = makeGroupedForward(s);
    dcrt_grouped_matmul(&up, rows.data(), w1.data(), ends.data(), h.data());
    s.k = F;
    s.p = D;
    dcrt_grouped_matmul_desc down = makeGroupedForward(s);
    dcrt_grouped_matmul(&down, h.data(), w2.data(), ends.data(), out.data());
    dcrt_scatter_add_rows(&toRows, out.data(), tokens.data(), y.data());
    // Backward.
    dcrt_gather_rows(&toRows, dy.data(), tokens.data(), dOut.data());
    s.transposeRhs = false;
    s.k = D; // dh = dOut W2[e] ([N, D] x [D, F])
    s.p = F;
    dcrt_grouped_matmul_desc backDown = makeGroupedForward(s);
    dcrt_grouped_matmul(&backDown, dOut.data(), w2.data(), ends.data(),
                        dh.data());
    s.k = D; // dW2[e] = dOut^T h: [D, F]
    s.p = F;
    dcrt_grouped_matmul_desc gradDown = makeGroupedWeightGrad(s);
    dcrt_grouped_weight_grad(&gradDown, dOut.data(), h.data(), ends.data(),
                             dw2.data());
    s.k = F; // dW1[e] = dh^T rows: [F, D]
    s.p = D;
    dcrt_grouped_matmul_desc gradUp = makeGroupedWeightGrad(s);
    dcrt_grouped_weight_grad(&gradUp, dh.data(), rows.data(), ends.data(),
                             dw1.data());
    s.k = F; // dRows = dh W1[e] ([N, F] x [F, D])
    s.p = D;
    dcrt_grouped_matmul_desc backUp = makeGroupedForward(s);
    dcrt_grouped_matmul(&backUp, dh.data(), w1.data(), ends.data(),
                        dRows.data());
    dcrt_scatter_add_rows(&toRows, dRows.data(), tokens.data(), dx.data());
  }

  /// Every value of the step, as bytes.
  std::vector<Bytes> snapshot() {
    synchronize();
    std::vector<Bytes> all;
    for (Buffer *b : {&values, &choices, &order, &ends, &tokens, &rows, &h,
                      &out, &y, &dOut, &dh, &dw2, &dw1, &dRows, &dx}) {
      Bytes bytes(static_cast<size_t>(b->size()));
      copy(bytes.data(), b->data(), b->size());
      all.push_back(std::move(bytes));
    }
    return all;
  }
};

const char *kLayerValues[] = {"values", "choices", "order", "ends",  "tokens",
                              "rows",   "h",       "out",   "y",     "dOut",
                              "dh",     "dW2",     "dW1",   "dRows", "dx"};

void setScores(Layer &layer, unsigned seed, bool skewed) {
  std::mt19937 rng(seed);
  std::vector<float> scores(static_cast<size_t>(layer.T * layer.E));
  std::uniform_real_distribution<float> dist(0, 1);
  for (size_t i = 0; i < scores.size(); ++i)
    scores[i] = dist(rng) + (skewed && i % layer.E == 3 ? 2.0f : 0.0f);
  copy(layer.scores.data(), scores.data(),
       static_cast<int64_t>(scores.size()) * 4);
}

void checkCapturedLayer() {
  const int64_t T = small ? 64 : 2048, E = 8, k = 2, D = small ? 64 : 512,
                F = small ? 96 : 768;
  Layer layer(T, E, k, D, F);
  std::mt19937 rng(21);
  auto fill = [&](Buffer &b) {
    Bytes bytes = randomFloats(DCRT_BF16, b.size() / 2, rng);
    copy(b.data(), bytes.data(), b.size());
  };
  for (Buffer *b : {&layer.x, &layer.w1, &layer.w2, &layer.dy})
    fill(*b);
  // The routing parts of a direct step against the references.
  setScores(layer, 1, false);
  layer.step();
  std::vector<Bytes> first = layer.snapshot();
  {
    Bytes scores(static_cast<size_t>(T * E * 4));
    copy(scores.data(), layer.scores.data(), T * E * 4);
    std::vector<int64_t> want = referenceTopk(scores, DCRT_F32, T, E, E, k);
    std::vector<int64_t> choices = indexValues(first[1], DCRT_I64);
    Grouping g = referenceGrouping(choices, E);
    bool ok = choices == want && indexValues(first[2], DCRT_I64) == g.order &&
              indexValues(first[3], DCRT_I64) == g.ends;
    report(ok, "a layer's routing (top-k, grouping) as the references", "");
  }
  if (onHost || !canCaptureSteps())
    return;
  // Captured once, replayed for new scores (a skewed router too).
  auto run = [](void *p) { static_cast<Layer *>(p)->step(); };
  StepGraph graph = captureStep(run, &layer);
  for (auto [seed, skewed] : {std::pair<unsigned, bool>{2, false}, {3, true}}) {
    setScores(layer, seed, skewed);
    replay(graph);
    std::vector<Bytes> replayed = layer.snapshot();
    layer.step();
    std::vector<Bytes> direct = layer.snapshot();
    std::string mismatch;
    for (size_t i = 0; i < direct.size() && mismatch.empty(); ++i)
      if (replayed[i] != direct[i])
        mismatch = std::string(kLayerValues[i]) + " differs";
    bool moved = replayed[3] != first[3]; // another routing than the capture's
    report(mismatch.empty() && moved,
           std::string("a layer's forward and backward as one CUDA graph, "
                       "replayed for new scores") +
               (skewed ? " (skewed router)" : "") +
               ": bit-identical to direct calls",
           !moved ? "the new scores routed as the captured ones (no test)"
                  : mismatch);
  }
}

//===----------------------------------------------------------------------===//
// 4. Benchmarks
//===----------------------------------------------------------------------===//

void benchGrouped(int64_t rows, int64_t experts, int64_t D, int64_t F,
                  bool allForms) {
  uint32_t seed = 900;
  for (const BenchForm &f : benchForms(D, F)) {
    if (!allForms && f.what.rfind("up", 0) != 0)
      continue;
    GroupedBuffers b = benchBuffers(f, rows, experts, seed += 3);
    dcrt_matmul_desc dense = denseOf(b.desc, f.weightGrad);
    double flops = 2.0 * rows * f.k * f.p;
    setEnds(b, benchEnds(rows, experts, false));
    double grouped = timeCalls([&] { runGrouped(b, b.out.data()); }, 10);
    double cublas = timeCalls(
        [&] { dcrt_matmul(&dense, b.lhs.data(), b.rhs.data(), b.out.data()); },
        10);
    // The previous kernel, for comparison: the runtime reads DCRT_MOE_TMA
    // at each call (the graph keeps the kernel it captured).
    std::string previous;
    if (tmaKernel) {
      setenv("DCRT_MOE_TMA", "0", 1);
      double cpAsync = timeCalls([&] { runGrouped(b, b.out.data()); }, 10);
      unsetenv("DCRT_MOE_TMA");
      char line[160];
      std::snprintf(line, sizeof(line),
                    "; cp.async wgmma kernel (DCRT_MOE_TMA=0) %.3f ms %.1f "
                    "TFLOP/s = %.0f%% of dense",
                    cpAsync, flops / cpAsync * 1e-9, 100.0 * cublas / cpAsync);
      previous = line;
    }
    setEnds(b, benchEnds(rows, experts, true));
    double skewed = timeCalls([&] { runGrouped(b, b.out.data()); }, 10);
    std::printf("bench grouped %s N=%lld E=%lld K=%lld P=%lld bf16: %.3f ms "
                "%.1f TFLOP/s; cuBLASLt dense same FLOPs %.3f ms %.1f TFLOP/s; "
                "grouped/dense %.0f%% (target 80%%)%s; all rows on one expert "
                "%.1f TFLOP/s\n",
                f.what.c_str(), static_cast<long long>(rows),
                static_cast<long long>(experts), static_cast<long long>(f.k),
                static_cast<long long>(f.p), grouped, flops / grouped * 1e-9,
                cublas, flops / cublas * 1e-9, 100.0 * cublas / grouped,
                previous.c_str(), flops / skewed * 1e-9);
    std::fflush(stdout);
  }
}

/// Device-to-device cudaMemcpy of `bytes` (read and written once each), in
/// GB/s counting both.
double copyBandwidth(int64_t bytes) {
  Buffer from(bytes, MemoryKind::Device, "bench copy"),
      to(bytes, MemoryKind::Device, "bench copy");
  double ms = timeCalls(
      [&] {
        DCRT_CUDA_CHECK(cudaMemcpyAsync(to.data(), from.data(),
                                        static_cast<size_t>(bytes),
                                        cudaMemcpyDeviceToDevice, stream()));
      },
      20);
  return 2.0 * bytes / ms * 1e-6;
}

void benchLine(const char *what, int64_t bytes, double ms, double peak) {
  double rate = bytes / ms * 1e-6;
  double same = copyBandwidth(std::max<int64_t>(bytes / 2, 256));
  std::printf("bench route %-52s %9.1f us %7.1f GB/s = %3.0f%% of a large "
              "cudaMemcpy D2D (%.0f GB/s; a copy of these bytes: %.0f GB/s; "
              "target 80%%)\n",
              what, ms * 1e3, rate, 100.0 * rate / peak, peak, same);
  std::fflush(stdout);
}

void benchRouting() {
  const double peak = copyBandwidth(int64_t(1) << 30);
  std::mt19937 rng(31);
  for (auto [T, E, k] :
       {std::tuple<int64_t, int64_t, int64_t>{8192, 8, 2}, {1 << 20, 64, 8}}) {
    dcrt_topk_desc d = makeTopk(DCRT_F32, DCRT_I64, T, E, k, 0);
    Buffer scores(T * E * 4, MemoryKind::Device, "bench scores"),
        values(T * k * 4, MemoryKind::Device, "bench values"),
        indices(T * k * 8, MemoryKind::Device, "bench indices");
    fillDevice(scores.data(), DCRT_F32, T * E, 5);
    double ms = timeCalls(
        [&] { dcrt_topk(&d, scores.data(), values.data(), indices.data()); },
        20);
    char what[96];
    std::snprintf(what, sizeof(what), "topk f32 T=%lld E=%lld k=%lld",
                  static_cast<long long>(T), static_cast<long long>(E),
                  static_cast<long long>(k));
    benchLine(what, T * E * 4 + T * k * 12, ms, peak);
  }
  for (auto [N, E] : {std::pair<int64_t, int64_t>{16384, 8}, {1 << 20, 64}}) {
    dcrt_group_by_expert_desc d{};
    d.struct_size = sizeof(d);
    d.ids_dtype = d.order_dtype = d.ends_dtype = DCRT_I64;
    d.assignments = N;
    d.experts = E;
    std::vector<int64_t> ids = routingIds(Routing::Random, N, E, rng);
    Buffer dIds(N * 8, MemoryKind::Device, "bench ids"),
        order(N * 8, MemoryKind::Device, "bench order"),
        ends(E * 8, MemoryKind::Device, "bench ends");
    copy(dIds.data(), ids.data(), N * 8);
    double ms = timeCalls(
        [&] {
          dcrt_group_by_expert(&d, dIds.data(), order.data(), ends.data());
        },
        20);
    char what[96];
    std::snprintf(what, sizeof(what), "group_by_expert i64 N=%lld E=%lld",
                  static_cast<long long>(N), static_cast<long long>(E));
    // Reads the ids twice (count, place), writes order.
    benchLine(what, N * 8 * 3, ms, peak);
  }
  for (int64_t D : {2048, 4096}) {
    const int64_t T = 8192, k = 2, N = T * k;
    std::vector<int64_t> index = combineIndex(T, k, 8, false, rng);
    Buffer dIndex(N * 8, MemoryKind::Device, "bench index"),
        tokens(T * D * 2, MemoryKind::Device, "bench tokens"),
        rows(N * D * 2, MemoryKind::Device, "bench rows");
    copy(dIndex.data(), index.data(), N * 8);
    fillDevice(tokens.data(), DCRT_BF16, T * D, 7);
    fillDevice(rows.data(), DCRT_BF16, N * D, 8);
    dcrt_row_map_desc d = makeRowMap(DCRT_BF16, DCRT_I64, N, T, D, 0, 0);
    double gather = timeCalls(
        [&] {
          dcrt_gather_rows(&d, tokens.data(), dIndex.data(), rows.data());
        },
        20);
    double scatter = timeCalls(
        [&] {
          dcrt_scatter_add_rows(&d, rows.data(), dIndex.data(), tokens.data());
        },
        20);
    char what[96];
    std::snprintf(what, sizeof(what), "gather_rows bf16 %lld of %lld x %lld",
                  static_cast<long long>(N), static_cast<long long>(T),
                  static_cast<long long>(D));
    benchLine(what, N * D * 2 * 2 + N * 8, gather, peak);
    std::snprintf(what, sizeof(what),
                  "scatter_add_rows bf16 %lld x %lld into %lld",
                  static_cast<long long>(N), static_cast<long long>(D),
                  static_cast<long long>(T));
    benchLine(what, N * D * 2 + T * D * 2 + N * 8, scatter, peak);
  }
}

} // namespace

int main(int argc, char **argv) {
  bool benchmark = true, quick = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--no-bench")
      benchmark = false;
    else if (arg == "--quick")
      quick = true;
    else
      fatal("usage: moe-kernels-check [--no-bench] [--quick]");
  }
  setErrorPrefix("moe-kernels-check");
  dcrt_init_options options{};
  options.struct_size = sizeof(options);
  options.device = -1;
  dcrt_init(&options);
  onHost = deviceIsHost();
  small = onHost || quick;
  auto start = std::chrono::steady_clock::now();
  std::printf("moe-kernels-check on the %s backend%s\n", dcrt_backend_name(),
              onHost  ? " (checks only, smaller shapes)"
              : quick ? " (--quick: smaller shapes)"
                      : "");
  if (!onHost) {
    // The runtime's choice (CudaMoe.cpp): wgmma on sm_90 unless
    // DCRT_MOE_WGMMA=0 (fed by TMA unless DCRT_MOE_TMA=0), CUDA cores
    // everywhere with DCRT_MOE_SIMT=1.
    int device = 0, major = 0, minor = 0;
    DCRT_CUDA_CHECK(cudaGetDevice(&device));
    DCRT_CUDA_CHECK(cudaDeviceGetAttribute(
        &major, cudaDevAttrComputeCapabilityMajor, device));
    DCRT_CUDA_CHECK(cudaDeviceGetAttribute(
        &minor, cudaDevAttrComputeCapabilityMinor, device));
    const char *simt = std::getenv("DCRT_MOE_SIMT");
    const char *wgmma = std::getenv("DCRT_MOE_WGMMA");
    bool cudaCores = simt && std::string(simt) == "1";
    const char *tma = std::getenv("DCRT_MOE_TMA");
    bool hopper =
        major == 9 && minor == 0 && !(wgmma && std::string(wgmma) == "0");
    tmaKernel = !cudaCores && hopper && !(tma && std::string(tma) == "0");
    std::printf("grouped products' tensor-core kernel: %s (sm_%d%d%s%s%s%s)\n",
                cudaCores   ? "none, CUDA cores (DCRT_MOE_SIMT=1)"
                : tmaKernel ? "wgmma fed by TMA"
                : hopper    ? "wgmma fed by cp.async"
                            : "mma.sync",
                major, minor, wgmma ? ", DCRT_MOE_WGMMA=" : "",
                wgmma ? wgmma : "", tma ? ", DCRT_MOE_TMA=" : "",
                tma ? tma : "");
  }
  checkTopk();
  checkGroupByExpert();
  checkGatherAndScatter(false);
  checkGatherAndScatter(true);
  checkGrouped();
  if (!small)
    checkAgainstCublas(16384, 8, 2048, 5632);
  checkCapturedLayer();
  if (!onHost && benchmark) {
    benchGrouped(16384, 8, 2048, 5632, true);
    benchGrouped(16384, 8, 4096, 14336, false);
    benchRouting();
  }
  MemoryStats stats = memoryStats();
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  std::printf("moe workspaces: %lld bytes in %lld allocations; %.1f s\n",
              static_cast<long long>(stats.moeWorkspace.reserved),
              static_cast<long long>(stats.moeWorkspace.systemAllocations),
              seconds);
  bool passed = gpuCheckFailures() == 0;
  std::printf("moe-kernels-check: %s\n", passed ? "all passed" : "FAILED");
  dcrt_finalize();
  return passed ? 0 : 1;
}
