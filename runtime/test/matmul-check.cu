//===- matmul-check.cu - dcrt_matmul and dcrt_launch_kernel on a GPU ------===//
//
// `DCRT_BACKEND=cuda mpirun -n 1 matmul-check [--fatbin PATH] [--no-bench]
//  [--coresident-overflow] [--check-finite]`
// on a GPU machine (runtime/test/gpu/run.sh runs it):
//  1. every descriptor of the shared set (MatmulReference.h) on the cuda
//     backend against a double reference on random data: f32 inputs within
//     1e-5 (relative to the sum of |a b|: fp32 accumulation, no TF32),
//     bf16/f16 inputs within 1e-4 plus C's rounding; padding of C untouched.
//     Some again with pointers off 256-byte alignment (another plan);
//  2. a kernel of a fatbin built at build time (add-one-kernel.cu) launched
//     with dcrt_launch_kernel, then a step of one matmul and one launch
//     captured with dcrt::captureStep and replayed twice: both calls are
//     capturable once warmed up; the same kernel through
//     dcrt_launch_kernel_coresident (all of its 8 blocks resident);
//  3. unless --no-bench, TFLOP/s of the GEMMs of one linear layer at config
//     A's shapes (M = 8192 tokens, K = 4096, N = 4096, 14336, 128256; bf16
//     inputs, f32 and bf16 outputs; forward X W^T, backward dY W and dY^T X)
//     plus one f32 GEMM.
// Prints one line per check and "matmul-check: all passed" (exit 0) or
// "matmul-check: FAILED" (exit 1).
// `--coresident-overflow` instead launches it with 2^20 blocks that must
// all be resident: the runtime must refuse it with its error (exit non-zero)
// before it launches.
// `--check-finite` instead runs dcrt_check_finite's kernel (dcrt_init with
// DCRT_INIT_CHECK_FINITE) on NaNs and infinities planted in device buffers
// of f32, bf16 and f16, aligned (16-byte loads) and not, with elements past
// the last whole vector: dcrt_first_nonfinite names the step's first
// failing check with its kind and count, DCRT_FINITE_ALLOW_INF lets
// infinities pass; then in captured steps replayed, each reporting its own
// sites ("finite-check: all passed" or "finite-check: FAILED").
//
//===----------------------------------------------------------------------===//
#include "CudaCheck.h"
#include "GpuCheck.h"
#include "MatmulReference.h"

#include "dcrt/core.hpp"
#include "dcrt/dcrt.h"
#include "dcrt/dtype.hpp"
#include "dcrt/error.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#ifndef MATMUL_CHECK_FATBIN
#define MATMUL_CHECK_FATBIN "add-one.fatbin"
#endif

using namespace dcrt;
using namespace dcrt::test;

namespace {
/// Host bytes in a device buffer `offset` bytes past a 256-aligned base
/// (the buffer keeps the allocation alive).
struct DeviceCopy {
  Buffer buffer;
  char *data;
};
DeviceCopy toDevice(const std::vector<unsigned char> &host, int64_t offset) {
  DeviceCopy copied{Buffer(static_cast<int64_t>(host.size()) + 256,
                           MemoryKind::Device, "matmul-check operand"),
                    nullptr};
  copied.data = copied.buffer.as<char>() + offset;
  copy(copied.data, host.data(), static_cast<int64_t>(host.size()));
  return copied;
}

/// 1e-5 for f32 inputs, 1e-4 for bf16/f16 ones (plus C's rounding, which
/// checkMatmulResult adds).
double toleranceFor(const dcrt_matmul_desc &d) {
  return d.a_dtype == DCRT_F32 ? 1e-5 : 1e-4;
}

/// Runs `c` on the device with A, B and C `offset` elements past 256-byte
/// alignment; checks C against the reference.
void checkCase(const MatmulCase &c, unsigned seed, int64_t offset) {
  MatmulData data = randomOperands(c.desc, seed);
  int64_t abSize = dtypeSize(static_cast<int32_t>(c.desc.a_dtype));
  int64_t cSize = dtypeSize(static_cast<int32_t>(c.desc.c_dtype));
  DeviceCopy a = toDevice(data.a, offset * abSize),
             b = toDevice(data.b, offset * abSize),
             out = toDevice(data.c, offset * cSize);
  dcrt_matmul(&c.desc, a.data, b.data, out.data);
  synchronize();
  std::vector<unsigned char> result(data.c.size());
  copy(result.data(), out.data, static_cast<int64_t>(result.size()));
  double worst = 0;
  std::string mismatch = checkMatmulResult(c.desc, data, result.data(),
                                           toleranceFor(c.desc), &worst);
  char detail[128];
  std::snprintf(detail, sizeof(detail), "max error %.3g of sum|ab|", worst);
  report(mismatch.empty(),
         "matmul " + c.name + (offset ? " (pointers off alignment)" : ""),
         mismatch.empty() ? detail : mismatch);
}

std::vector<char> readFile(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  if (!file)
    fatal("matmul-check: cannot read the fatbin %s", path.c_str());
  return std::vector<char>(std::istreambuf_iterator<char>(file), {});
}

/// What the captured step does: one accumulating matmul, one kernel.
struct CapturedStep {
  dcrt_matmul_desc desc;
  void *a, *b, *c;
  const std::vector<char> *binary;
  float *x;
  int n;
  void run() {
    dcrt_matmul(&desc, a, b, c);
    int64_t dims[6] = {(n + 127) / 128, 1, 1, 128, 1, 1};
    void *args[] = {&x, &n};
    dcrt_launch_kernel(binary->data(), static_cast<int64_t>(binary->size()),
                       "dcrt_test_add_one", dims, 0, args);
  }
};

void checkKernelsAndCapture(const std::string &fatbin) {
  std::vector<char> binary = readFile(fatbin);
  const int n = 1000;
  std::vector<float> start(n);
  for (int i = 0; i < n; ++i)
    start[i] = static_cast<float>(i);
  Buffer x(n * 4, MemoryKind::Device, "matmul-check x");
  copy(x.data(), start.data(), n * 4);

  MatmulShape shape;
  shape.m = 64;
  shape.n = 48;
  shape.k = 80;
  shape.accumulate = true;
  CapturedStep step{makeMatmul(shape), nullptr,       nullptr, nullptr,
                    &binary,           x.as<float>(), n};
  MatmulData data = randomOperands(step.desc, 7);
  std::fill(data.c.begin(), data.c.end(), 0); // C starts at 0
  DeviceCopy a = toDevice(data.a, 0), b = toDevice(data.b, 0),
             c = toDevice(data.c, 0);
  step.a = a.data;
  step.b = b.data;
  step.c = c.data;

  // Warm-up outside the capture: loads the binary, plans the matmul.
  step.run();
  synchronize();
  std::vector<float> got(n);
  copy(got.data(), x.data(), n * 4);
  bool ok = true;
  for (int i = 0; i < n; ++i)
    ok = ok && got[i] == start[i] + 1;
  report(ok,
         "dcrt_launch_kernel dcrt_test_add_one (fatbin " +
             std::to_string(binary.size()) + " bytes)",
         ok ? "" : "x[i] != i + 1");

  StepGraph graph = captureStep(
      [](void *context) { static_cast<CapturedStep *>(context)->run(); },
      &step);
  replay(graph);
  replay(graph);
  synchronize();
  copy(got.data(), x.data(), n * 4);
  ok = true;
  for (int i = 0; i < n; ++i)
    ok = ok && got[i] == start[i] + 3;
  report(ok, "captured launch replayed twice", ok ? "" : "x[i] != i + 3");
  // C = 3 A B after the warm-up and two replays: (3 A) B from C = 0.
  std::vector<unsigned char> result(data.c.size());
  copy(result.data(), c.data, static_cast<int64_t>(result.size()));
  MatmulData tripled = data;
  std::vector<float> wide(data.a.size() / 4);
  std::memcpy(wide.data(), data.a.data(), data.a.size());
  for (float &value : wide)
    value *= 3;
  std::memcpy(tripled.a.data(), wide.data(), data.a.size());
  std::string mismatch =
      checkMatmulResult(step.desc, tripled, result.data(), 1e-5);
  report(mismatch.empty(), "captured accumulating matmul replayed twice",
         mismatch);
}

__global__ void fillRandom(void *data, int32_t dtype, int64_t count,
                           uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    float value = (h & 0xffff) / 32768.0f - 1.0f; // [-1, 1)
    if (dtype == DCRT_F32) {
      static_cast<float *>(data)[i] = value;
    } else { // bf16: truncate
      static_cast<uint16_t *>(data)[i] =
          static_cast<uint16_t>(__float_as_uint(value) >> 16);
    }
  }
}

void fill(void *data, int32_t dtype, int64_t count, uint32_t seed) {
  fillRandom<<<1024, 256, 0,
               static_cast<cudaStream_t>(dcrt_compute_stream())>>>(data, dtype,
                                                                   count, seed);
  DCRT_CUDA_CHECK_WHAT(cudaGetLastError(), "filling an operand");
}

void bench() {
  const int64_t M = 8192, K = 4096, ns[] = {4096, 14336, 128256};
  struct Gemm {
    std::string name;
    dcrt_matmul_desc desc;
  };
  std::vector<Gemm> gemms;
  for (int64_t N : ns)
    for (int32_t out : {DCRT_F32, DCRT_BF16}) {
      std::string suffix =
          std::string(" N=") + std::to_string(N) + " bf16->" + dtypeName(out);
      MatmulShape s;
      s.abType = DCRT_BF16;
      s.cType = out;
      s.m = M, s.n = N, s.k = K, s.transB = true; // Y = X W^T, W: N x K
      gemms.push_back({"forward X W^T" + suffix, makeMatmul(s)});
      s = MatmulShape{};
      s.abType = DCRT_BF16;
      s.cType = out;
      s.m = M, s.n = K, s.k = N; // dX = dY W
      gemms.push_back({"backward dY W" + suffix, makeMatmul(s)});
      s = MatmulShape{};
      s.abType = DCRT_BF16;
      s.cType = out;
      s.m = N, s.n = K, s.k = M, s.transA = true; // dW = dY^T X
      gemms.push_back({"backward dY^T X" + suffix, makeMatmul(s)});
    }
  MatmulShape f32;
  f32.m = M, f32.n = 4096, f32.k = K, f32.transB = true;
  gemms.push_back({"forward X W^T N=4096 f32->f32 (no TF32)", makeMatmul(f32)});

  int64_t maxA = 0, maxB = 0, maxC = 0;
  for (const Gemm &g : gemms) {
    int64_t ab = dtypeSize(static_cast<int32_t>(g.desc.a_dtype));
    maxA = std::max(maxA, elementsA(g.desc) * ab);
    maxB = std::max(maxB, elementsB(g.desc) * ab);
    maxC = std::max(maxC, elementsC(g.desc) *
                              dtypeSize(static_cast<int32_t>(g.desc.c_dtype)));
  }
  Buffer a(maxA, MemoryKind::Device, "bench A"),
      b(maxB, MemoryKind::Device, "bench B"),
      c(maxC, MemoryKind::Device, "bench C");
  auto stream = static_cast<cudaStream_t>(dcrt_compute_stream());
  cudaEvent_t begin, end;
  DCRT_CUDA_CHECK(cudaEventCreate(&begin));
  DCRT_CUDA_CHECK(cudaEventCreate(&end));
  int32_t filledAs = -1;
  for (const Gemm &g : gemms) {
    auto ab = static_cast<int32_t>(g.desc.a_dtype);
    if (ab != filledAs) {
      fill(a.data(), ab, maxA / dtypeSize(ab), 1);
      fill(b.data(), ab, maxB / dtypeSize(ab), 2);
      filledAs = ab;
    }
    dcrt_matmul(&g.desc, a.data(), b.data(), c.data()); // plans, warms up
    const int reps = 5;
    DCRT_CUDA_CHECK(cudaEventRecord(begin, stream));
    for (int r = 0; r < reps; ++r)
      dcrt_matmul(&g.desc, a.data(), b.data(), c.data());
    DCRT_CUDA_CHECK(cudaEventRecord(end, stream));
    DCRT_CUDA_CHECK(cudaEventSynchronize(end));
    float ms = 0;
    DCRT_CUDA_CHECK(cudaEventElapsedTime(&ms, begin, end));
    double seconds = ms * 1e-3 / reps;
    double flops = 2.0 * g.desc.batch * g.desc.m * g.desc.n * g.desc.k;
    std::printf("bench %-44s m %6lld n %6lld k %6lld: %8.3f ms %7.1f "
                "TFLOP/s\n",
                g.name.c_str(), static_cast<long long>(g.desc.m),
                static_cast<long long>(g.desc.n),
                static_cast<long long>(g.desc.k), seconds * 1e3,
                flops / seconds * 1e-12);
    std::fflush(stdout);
  }
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
  MemoryStats stats = memoryStats();
  std::printf("matmul workspace: %lld bytes reserved\n",
              static_cast<long long>(stats.matmulWorkspace.reserved));
}
/// dcrt_launch_kernel_coresident: a grid whose blocks all fit at once runs
/// as a plain launch; with `overflow`, one of 2^20 blocks that must all be
/// resident is refused before it launches (the process ends with the
/// runtime's error, which run.sh checks).
void checkCoresident(const std::string &fatbin, bool overflow) {
  std::vector<char> binary = readFile(fatbin);
  const int n = 1000;
  std::vector<float> start(n);
  for (int i = 0; i < n; ++i)
    start[i] = static_cast<float>(2 * i);
  Buffer x(n * 4, MemoryKind::Device, "matmul-check coresident x");
  copy(x.data(), start.data(), n * 4);
  float *data = x.as<float>();
  int count = n;
  void *args[] = {&data, &count};
  int64_t blocks = overflow ? int64_t(1) << 20 : (n + 127) / 128;
  int64_t dims[6] = {blocks, 1, 1, 128, 1, 1};
  dcrt_launch_kernel_coresident(binary.data(),
                                static_cast<int64_t>(binary.size()),
                                "dcrt_test_add_one", dims, 0, args, blocks);
  synchronize();
  std::vector<float> got(n);
  copy(got.data(), x.data(), n * 4);
  bool ok = true;
  for (int i = 0; i < n; ++i)
    ok = ok && got[i] == start[i] + 1;
  report(ok && !overflow,
         "dcrt_launch_kernel_coresident dcrt_test_add_one, " +
             std::to_string(blocks) + " blocks resident",
         overflow ? "launched although they cannot all be resident"
         : ok     ? ""
                  : "x[i] != 2 i + 1");
}

/// Values of one buffer of dcrt_check_finite: `count` elements of `dtype`,
/// 1.5 but where `planted` says, on the device `offset` elements past
/// 256-byte alignment (1: no 16-byte loads).
struct Planted {
  Buffer buffer;
  void *data;
  int64_t count;
  int32_t dtype;

  Planted(int32_t dtype, int64_t count, int64_t offset)
      : buffer((count + offset) * dtypeSize(dtype) + 256, MemoryKind::Device,
               "finite-check values"),
        data(buffer.as<char>() + offset * dtypeSize(dtype)), count(count),
        dtype(dtype) {
    plant({});
  }

  /// Writes 1.5 everywhere but at the given (index, value) pairs.
  void plant(const std::vector<std::pair<int64_t, float>> &values) {
    std::vector<float> wide(count, 1.5f);
    for (auto [index, value] : values)
      wide[index] = value;
    std::vector<uint16_t> narrow(count);
    for (int64_t i = 0; i < count; ++i)
      narrow[i] =
          dtype == DCRT_BF16 ? floatToBF16(wide[i]) : floatToHalf(wide[i]);
    copy(data,
         dtype == DCRT_F32 ? static_cast<void *>(wide.data())
                           : static_cast<void *>(narrow.data()),
         count * dtypeSize(dtype));
  }

  void check(const char *site, int32_t flags = 0) const {
    dcrt_check_finite(data, count, dtype, flags, site);
  }
};

/// dcrt_first_nonfinite as "site: what count", or "none".
std::string firstNonFinite() {
  const char *what = nullptr;
  int64_t count = 0;
  const char *site = dcrt_first_nonfinite(&what, &count);
  return site ? std::string(site) + ": " + what + " " + std::to_string(count)
              : "none";
}

void expectFirst(const std::string &what, const std::string &expected) {
  std::string got = firstNonFinite();
  report(got == expected, what, got == expected ? "" : "got " + got);
}

/// A captured step of two checks, ended as an entry ends its step.
struct CheckedStep {
  const Planted *first, *second;
  const char *firstSite, *secondSite;
  void run() const {
    first->check(firstSite);
    second->check(secondSite);
    dcrt_end_step();
  }
};

void checkFiniteValues() {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  // Sizes past a whole number of 16-byte vectors: the tail is read one by
  // one; large enough for many blocks of the grid-stride loop.
  const int64_t n = (int64_t(1) << 20) + 3;
  Planted a(DCRT_F32, n, 0), b(DCRT_BF16, n, 1), c(DCRT_F32, n, 0),
      d(DCRT_F16, n, 0);
  a.check("a");
  b.check("b");
  c.check("c");
  expectFirst("finite outputs: nothing reported", "none");

  b.plant({{0, nan}, {n / 2, -nan}, {n - 1, nan}, {7, inf}});
  c.plant({{5, inf}});
  a.check("a");
  b.check("b");
  c.check("c");
  expectFirst("a bf16 NaN (unaligned) before an f32 infinity: the first check",
              "b: NaN 3");
  a.check("a");
  expectFirst("reported once: the next step starts clean", "none");

  // Infinities in 16-byte vectors and in the tail (f16 overflows to one).
  d.plant({{1, inf}, {n - 2, -inf}, {n / 3, 1e6f}});
  a.check("a");
  d.check("d");
  c.check("c");
  expectFirst("f16 infinities, vectors and tail", "d: infinity 3");
  d.check("d (a mask)", DCRT_FINITE_ALLOW_INF);
  expectFirst("DCRT_FINITE_ALLOW_INF lets infinities pass", "none");
  d.plant({{1, inf}, {n - 1, nan}});
  d.check("d (a mask)", DCRT_FINITE_ALLOW_INF);
  expectFirst("... but not a NaN", "d (a mask): NaN 1");

  // Captured steps (the two forms of a micro-batched step): each replay
  // reports the sites its own capture launched with, under the same
  // sequence numbers.
  b.plant({});
  c.plant({});
  CheckedStep one{&a, &b, "form 1: a", "form 1: b"};
  CheckedStep two{&c, &b, "form 2: c", "form 2: b"};
  auto run = [](void *step) { static_cast<CheckedStep *>(step)->run(); };
  StepGraph graphOne = captureStep(run, &one);
  StepGraph graphTwo = captureStep(run, &two);
  expectFirst("a capture runs no check", "none");
  replay(graphOne);
  replay(graphTwo);
  expectFirst("captured checks of finite outputs", "none");
  b.plant({{3, nan}, {4, nan}});
  replay(graphTwo);
  expectFirst("a captured check's site comes from its capture",
              "form 2: b: NaN 2");
  c.plant({{9, -inf}});
  replay(graphTwo);
  expectFirst("the first captured check that finds one",
              "form 2: c: infinity 1");
  replay(graphOne);
  expectFirst("the other capture's sites", "form 1: b: NaN 2");
}

} // namespace

int main(int argc, char **argv) {
  std::string fatbin = MATMUL_CHECK_FATBIN;
  bool benchmark = true, overflow = false, finite = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--fatbin" && i + 1 < argc)
      fatbin = argv[++i];
    else if (arg == "--no-bench")
      benchmark = false;
    else if (arg == "--coresident-overflow")
      overflow = true;
    else if (arg == "--check-finite")
      finite = true;
    else
      fatal("usage: matmul-check [--fatbin PATH] [--no-bench] "
            "[--coresident-overflow] [--check-finite]");
  }
  setErrorPrefix("matmul-check");
  dcrt_init_options options{};
  options.struct_size = sizeof(options);
  options.device = -1;
  options.flags = finite ? DCRT_INIT_CHECK_FINITE : 0;
  dcrt_init(&options);
  if (deviceIsHost())
    fatal("matmul-check checks a GPU backend: run it with DCRT_BACKEND=cuda");
  if (finite) {
    checkFiniteValues();
    bool passed = gpuCheckFailures() == 0;
    std::printf("finite-check: %s\n", passed ? "all passed" : "FAILED");
    dcrt_finalize();
    return passed ? 0 : 1;
  }
  if (overflow) {
    // Ends in the runtime's fatal error; reaching the end is the failure.
    checkCoresident(fatbin, true);
    std::printf("matmul-check: FAILED (no error)\n");
    return 1;
  }

  unsigned seed = 1;
  std::vector<MatmulCase> cases = matmulCases();
  for (const MatmulCase &c : cases)
    checkCase(c, seed++, 0);
  // Repeated calls reuse the cached plan.
  checkCase(cases[0], seed++, 0);
  checkKernelsAndCapture(fatbin);
  checkCoresident(fatbin, false);
  // The same descriptors with A, B and C one element off 256-byte
  // alignment: a plan of its own (cuBLASLt's alignment preference). Last
  // among the checks: a descriptor cuBLASLt has no algorithm for ends the
  // program.
  for (const MatmulCase &c : cases)
    if (c.desc.m >= 128 || c.name.rfind("f32 plain", 0) == 0)
      checkCase(c, seed++, 1);
  if (benchmark)
    bench();

  bool passed = gpuCheckFailures() == 0;
  std::printf("matmul-check: %s\n", passed ? "all passed" : "FAILED");
  dcrt_finalize();
  return passed ? 0 : 1;
}
