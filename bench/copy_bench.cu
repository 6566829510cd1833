// copy_bench: pinned host <-> device copy bandwidth, and whether copies slow
// compute. Grounds the host-link terms of dc's cost model (hostLinkBandwidth,
// hostLinkLatency; docs/cost-model.md), which assumes one host-to-device and
// one device-to-host stream that run concurrently with each other and with
// compute.
//
// Measures, on dedicated non-blocking streams, with CUDA events:
//   (a) device-to-host alone, (b) host-to-device alone,
//   (c) both directions at once on two streams (GB/s of each),
//   for 1 MiB, 8 MiB, 64 MiB, 256 MiB and 1 GiB copies, plus the per-copy
//   time of queued 4 KiB copies (the fixed cost of one copy);
//   (d) a bf16 GEMM loop (cublasGemmEx, 8192^3 by default) alone and while
//   1 GiB copies run in both directions: the GEMM slowdown, and the copy GB/s
//   while the GEMM runs;
//   (e) launch-bound compute: the host launches 20000 tiny kernels as fast
//   as it can on a stream of their own (as a compiled step does between its
//   large ops), alone and while 1 GiB copies run host-to-device (the device
//   reading host memory, as reloads do) or device-to-host: the GPU's
//   microseconds per kernel and the host's per launch;
//   (f) a memory-bound kernel (y = a x + y over 256 MiB fp32
//   vectors, float4 accesses) alone, while 1 GiB copies run device-to-host,
//   host-to-device, and both: the slowdown per direction of work that, like
//   norms and elementwise ops, shares device memory bandwidth with the
//   copies (copyComputeSlowdown in the target printed last is the GEMM's
//   per direction, as the h200 preset takes it).
// Each measurement of a size queues k back-to-back copies (k * size >= 256 MiB,
// at most 64 copies) so that one sample lasts milliseconds and the streams of
// (c) overlap for nearly all of it; GB/s = k * size / elapsed (1e9 bytes/s).
// Samples: warm-up first, then the median of --reps repetitions.
//
// Build: nvcc -O2 -arch=sm_90 -o copy_bench bench/copy_bench.cu -lcublas
// Run:   ./copy_bench [--quick] [--device N] [--reps N] [--gemm-n N] [--json
// FILE] Prints a table, then one JSON object on the last line.

// No libdcrt here: a failed CUDA call prints the check's message and exits.
// Relative, so that the one nvcc line above builds it.
#define DCRT_CUDA_CHECK_PROGRAM "copy_bench"
#include "../runtime/cuda/CudaCheck.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <initializer_list>
#include <string>
#include <vector>

namespace {

void fail(const char *what, const char *detail, const char *file, int line) {
  std::fprintf(stderr, "copy_bench: error: %s failed: %s (%s:%d)\n", what,
               detail, file, line);
  std::exit(1);
}

#define CUBLAS_CHECK(call)                                                     \
  do {                                                                         \
    cublasStatus_t st_ = (call);                                               \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                          \
      fail(#call, cublasGetStatusString(st_), __FILE__, __LINE__);             \
  } while (0)

constexpr size_t KiB = size_t(1) << 10;
constexpr size_t MiB = size_t(1) << 20;
constexpr size_t GiB = size_t(1) << 30;

struct Options {
  bool quick = false;
  int device = 0;
  int reps = 7;
  int gemmN = 8192;
  std::string jsonPath;
};

void usage(const char *argv0) {
  std::fprintf(stderr,
               "usage: %s [--quick] [--device N] [--reps N] [--gemm-n N] "
               "[--json FILE]\n"
               "  --quick   sizes 1 MiB, 64 MiB, 1 GiB and 3 repetitions\n",
               argv0);
}

Options parseOptions(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char *name) -> const char * {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "copy_bench: error: %s needs a value\n", name);
        usage(argv[0]);
        std::exit(2);
      }
      return argv[++i];
    };
    auto number = [&](const char *name, int lo) {
      const char *v = value(name);
      char *end = nullptr;
      long n = std::strtol(v, &end, 10);
      if (!end || *end || n < lo || n > (1 << 20)) {
        std::fprintf(stderr,
                     "copy_bench: error: %s %s: expected an integer >= %d\n",
                     name, v, lo);
        std::exit(2);
      }
      return int(n);
    };
    if (a == "--quick")
      o.quick = true;
    else if (a == "--device")
      o.device = number("--device", 0);
    else if (a == "--reps")
      o.reps = number("--reps", 1);
    else if (a == "--gemm-n")
      o.gemmN = number("--gemm-n", 256);
    else if (a == "--json")
      o.jsonPath = value("--json");
    else if (a == "-h" || a == "--help") {
      usage(argv[0]);
      std::exit(0);
    } else {
      std::fprintf(stderr, "copy_bench: error: unknown argument '%s'\n",
                   argv[i]);
      usage(argv[0]);
      std::exit(2);
    }
  }
  if (o.quick && o.reps == 7)
    o.reps = 3;
  return o;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double gbps(double bytes, double ms) { return bytes / (ms * 1e-3) / 1e9; }

// Deterministic values in [-1, 1) from a hash of the index: random-looking
// data, as a real GEMM sees (zeros draw less power and run faster).
__global__ void fillBf16(__nv_bfloat16 *p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    p[i] = __float2bfloat16(float(h >> 8) * (2.0f / 16777216.0f) - 1.0f);
  }
}

// Holds its stream for `ns` nanoseconds. Streams that wait for an event
// recorded after it start together, once the host has queued all their work.
__global__ void spin(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

// (f)'s memory-bound work: y = a x + y, 16-byte accesses, grid-stride.
__global__ void axpy(const float4 *x, float4 *y, size_t n4, float a) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n4;
       i += size_t(gridDim.x) * blockDim.x) {
    float4 u = x[i], v = y[i];
    y[i] =
        make_float4(a * u.x + v.x, a * u.y + v.y, a * u.z + v.z, a * u.w + v.w);
  }
}

// The smallest useful kernel: (e) measures launches, not work.
__global__ void tick(float *x) { x[threadIdx.x] += 1.0f; }

// Records `go` on `gate` behind a 2 ms spin; each stream of `waiters` waits
// for it, so what is queued on them next starts together.
void releaseTogether(cudaStream_t gate, cudaEvent_t go,
                     std::initializer_list<cudaStream_t> waiters) {
  spin<<<1, 1, 0, gate>>>(2000000ull);
  DCRT_CUDA_CHECK(cudaGetLastError());
  DCRT_CUDA_CHECK(cudaEventRecord(go, gate));
  for (cudaStream_t s : waiters)
    DCRT_CUDA_CHECK(cudaStreamWaitEvent(s, go, 0));
}

// One direction of copies: a dedicated stream, its buffers and events.
struct CopyStream {
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  void *dst = nullptr;
  const void *src = nullptr;
  cudaMemcpyKind kind = cudaMemcpyDefault;

  void init(void *d, const void *s, cudaMemcpyKind k) {
    dst = d;
    src = s;
    kind = k;
    DCRT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    DCRT_CUDA_CHECK(cudaEventCreate(&start));
    DCRT_CUDA_CHECK(cudaEventCreate(&stop));
  }
  void destroy() {
    DCRT_CUDA_CHECK(cudaEventDestroy(start));
    DCRT_CUDA_CHECK(cudaEventDestroy(stop));
    DCRT_CUDA_CHECK(cudaStreamDestroy(stream));
  }
  // Queue `count` copies of `bytes` between the two events.
  void enqueue(size_t bytes, int count) {
    DCRT_CUDA_CHECK(cudaEventRecord(start, stream));
    for (int i = 0; i < count; ++i)
      DCRT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, stream));
    DCRT_CUDA_CHECK(cudaEventRecord(stop, stream));
  }
  double elapsedMs() const {
    float ms = 0;
    DCRT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    return ms;
  }
};

int copiesPerSample(size_t bytes) {
  size_t k = (256 * MiB + bytes - 1) / bytes;
  return int(std::max<size_t>(1, std::min<size_t>(k, 64)));
}

// Median ms of `count` queued copies on one stream.
double timeOneWay(CopyStream &s, size_t bytes, int count, int reps) {
  s.enqueue(bytes, count); // warm-up
  DCRT_CUDA_CHECK(cudaStreamSynchronize(s.stream));
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    s.enqueue(bytes, count);
    DCRT_CUDA_CHECK(cudaStreamSynchronize(s.stream));
    ms.push_back(s.elapsedMs());
  }
  return median(ms);
}

// Both directions at once, released together; the median ms of each.
void timeBothWays(CopyStream &d2h, CopyStream &h2d, cudaStream_t gate,
                  cudaEvent_t go, size_t bytes, int count, int reps,
                  double &d2hMs, double &h2dMs) {
  std::vector<double> a, b;
  for (int r = 0; r <= reps; ++r) { // r == 0 is the warm-up
    releaseTogether(gate, go, {d2h.stream, h2d.stream});
    d2h.enqueue(bytes, count);
    h2d.enqueue(bytes, count);
    DCRT_CUDA_CHECK(cudaStreamSynchronize(d2h.stream));
    DCRT_CUDA_CHECK(cudaStreamSynchronize(h2d.stream));
    if (r > 0) {
      a.push_back(d2h.elapsedMs());
      b.push_back(h2d.elapsedMs());
    }
  }
  d2hMs = median(a);
  h2dMs = median(b);
}

struct Gemm {
  cublasHandle_t handle = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  __nv_bfloat16 *a = nullptr, *b = nullptr, *c = nullptr;
  int n = 0;

  void init(int size) {
    n = size;
    size_t elems = size_t(n) * n;
    DCRT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    DCRT_CUDA_CHECK(cudaEventCreate(&start));
    DCRT_CUDA_CHECK(cudaEventCreate(&stop));
    DCRT_CUDA_CHECK(cudaMalloc(&a, elems * sizeof(__nv_bfloat16)));
    DCRT_CUDA_CHECK(cudaMalloc(&b, elems * sizeof(__nv_bfloat16)));
    DCRT_CUDA_CHECK(cudaMalloc(&c, elems * sizeof(__nv_bfloat16)));
    fillBf16<<<1024, 256, 0, stream>>>(a, elems, 1u);
    DCRT_CUDA_CHECK(cudaGetLastError());
    fillBf16<<<1024, 256, 0, stream>>>(b, elems, 2u);
    DCRT_CUDA_CHECK(cudaGetLastError());
    CUBLAS_CHECK(cublasCreate(&handle));
    CUBLAS_CHECK(cublasSetStream(handle, stream));
    DCRT_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  void destroy() {
    CUBLAS_CHECK(cublasDestroy(handle));
    DCRT_CUDA_CHECK(cudaFree(a));
    DCRT_CUDA_CHECK(cudaFree(b));
    DCRT_CUDA_CHECK(cudaFree(c));
    DCRT_CUDA_CHECK(cudaEventDestroy(start));
    DCRT_CUDA_CHECK(cudaEventDestroy(stop));
    DCRT_CUDA_CHECK(cudaStreamDestroy(stream));
  }
  double flops() const { return 2.0 * n * double(n) * n; }
  // Queue `iters` GEMMs (bf16 in and out, fp32 accumulation) between the
  // events.
  void enqueue(int iters) {
    const float alpha = 1.0f, beta = 0.0f;
    DCRT_CUDA_CHECK(cudaEventRecord(start, stream));
    for (int i = 0; i < iters; ++i)
      CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n,
                                &alpha, a, CUDA_R_16BF, n, b, CUDA_R_16BF, n,
                                &beta, c, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT));
    DCRT_CUDA_CHECK(cudaEventRecord(stop, stream));
  }
  double elapsedMs() const {
    float ms = 0;
    DCRT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    return ms;
  }
};

struct SizeResult {
  size_t bytes;
  int count;
  double d2hMs, h2dMs, bothD2hMs, bothH2dMs;
};

std::string isoDate() {
  char buf[64];
  std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::string sizeName(size_t bytes) {
  char buf[32];
  if (bytes >= GiB)
    std::snprintf(buf, sizeof buf, "%zu GiB", bytes / GiB);
  else if (bytes >= MiB)
    std::snprintf(buf, sizeof buf, "%zu MiB", bytes / MiB);
  else
    std::snprintf(buf, sizeof buf, "%zu KiB", bytes / KiB);
  return buf;
}

} // namespace

int main(int argc, char **argv) {
  Options opt = parseOptions(argc, argv);

  int ndev = 0;
  cudaError_t err = cudaGetDeviceCount(&ndev);
  if (err != cudaSuccess || ndev == 0) {
    std::fprintf(stderr, "copy_bench: error: no CUDA device (%s)\n",
                 err != cudaSuccess ? dcrt::cuda::describeCudaError(err).c_str()
                                    : "0 devices");
    return 1;
  }
  if (opt.device >= ndev) {
    std::fprintf(stderr,
                 "copy_bench: error: --device %d but only %d device(s)\n",
                 opt.device, ndev);
    return 1;
  }
  DCRT_CUDA_CHECK(cudaSetDevice(opt.device));
  cudaDeviceProp prop;
  DCRT_CUDA_CHECK(cudaGetDeviceProperties(&prop, opt.device));
  int copyEngines = 0, driver = 0, runtime = 0;
  DCRT_CUDA_CHECK(cudaDeviceGetAttribute(
      &copyEngines, cudaDevAttrAsyncEngineCount, opt.device));
  DCRT_CUDA_CHECK(cudaDriverGetVersion(&driver));
  DCRT_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  char pci[32] = "";
  DCRT_CUDA_CHECK(cudaDeviceGetPCIBusId(pci, sizeof pci, opt.device));

  std::vector<size_t> sizes =
      opt.quick
          ? std::vector<size_t>{1 * MiB, 64 * MiB, 1 * GiB}
          : std::vector<size_t>{1 * MiB, 8 * MiB, 64 * MiB, 256 * MiB, 1 * GiB};
  const size_t maxBytes = GiB; // also the size of the copies against the GEMM

  std::printf("copy_bench: %s (sm_%d%d, PCI %s), %d copy engine(s), driver "
              "%d, runtime %d, %s\n",
              prop.name, prop.major, prop.minor, pci, copyEngines, driver,
              runtime, isoDate().c_str());
  std::printf("pinned host memory (cudaHostAlloc), non-blocking streams, "
              "median of %d, GB/s = 1e9 bytes/s\n\n",
              opt.reps);
  std::fflush(stdout);

  // Separate buffers per direction so concurrent copies touch distinct memory.
  void *hostSrc = nullptr, *hostDst = nullptr, *devSrc = nullptr,
       *devDst = nullptr;
  err = cudaHostAlloc(&hostSrc, maxBytes, cudaHostAllocDefault);
  if (err != cudaSuccess) {
    std::fprintf(stderr,
                 "copy_bench: error: cannot pin %zu MiB of host memory (%s)\n",
                 maxBytes / MiB, dcrt::cuda::describeCudaError(err).c_str());
    return 1;
  }
  DCRT_CUDA_CHECK(cudaHostAlloc(&hostDst, maxBytes, cudaHostAllocDefault));
  std::memset(hostSrc, 0x5a, maxBytes); // touch every page
  std::memset(hostDst, 0, maxBytes);
  DCRT_CUDA_CHECK(cudaMalloc(&devSrc, maxBytes));
  DCRT_CUDA_CHECK(cudaMalloc(&devDst, maxBytes));
  DCRT_CUDA_CHECK(cudaMemset(devSrc, 0x3c, maxBytes));
  DCRT_CUDA_CHECK(cudaMemset(devDst, 0, maxBytes));
  DCRT_CUDA_CHECK(cudaDeviceSynchronize());

  CopyStream d2h, h2d;
  d2h.init(hostDst, devSrc, cudaMemcpyDeviceToHost);
  h2d.init(devDst, hostSrc, cudaMemcpyHostToDevice);
  cudaStream_t gate;
  cudaEvent_t go;
  DCRT_CUDA_CHECK(cudaStreamCreateWithFlags(&gate, cudaStreamNonBlocking));
  DCRT_CUDA_CHECK(cudaEventCreateWithFlags(&go, cudaEventDisableTiming));

  // The fixed cost of one copy: queued 4 KiB copies, per copy.
  const int smallCount = 64;
  double smallD2hUs =
      timeOneWay(d2h, 4 * KiB, smallCount, opt.reps) * 1e3 / smallCount;
  double smallH2dUs =
      timeOneWay(h2d, 4 * KiB, smallCount, opt.reps) * 1e3 / smallCount;

  // (a), (b), (c)
  std::vector<SizeResult> results;
  std::printf("%-8s %6s | %10s %10s | %12s %12s | %10s %10s\n", "size",
              "copies", "D2H GB/s", "H2D GB/s", "both: D2H", "both: H2D",
              "D2H us/cp", "H2D us/cp");
  for (size_t bytes : sizes) {
    SizeResult r{};
    r.bytes = bytes;
    r.count = copiesPerSample(bytes);
    r.d2hMs = timeOneWay(d2h, bytes, r.count, opt.reps);
    r.h2dMs = timeOneWay(h2d, bytes, r.count, opt.reps);
    timeBothWays(d2h, h2d, gate, go, bytes, r.count, opt.reps, r.bothD2hMs,
                 r.bothH2dMs);
    double total = double(bytes) * r.count;
    std::printf("%-8s %6d | %10.1f %10.1f | %12.1f %12.1f | %10.1f %10.1f\n",
                sizeName(bytes).c_str(), r.count, gbps(total, r.d2hMs),
                gbps(total, r.h2dMs), gbps(total, r.bothD2hMs),
                gbps(total, r.bothH2dMs), r.d2hMs * 1e3 / r.count,
                r.h2dMs * 1e3 / r.count);
    std::fflush(stdout);
    results.push_back(r);
  }
  std::printf(
      "4 KiB copies, queued: %.2f us per D2H copy, %.2f us per H2D copy\n\n",
      smallD2hUs, smallH2dUs);

  // (d) GEMM alone, against 1 GiB copies in both directions, and the copies
  // under the GEMM. The three kinds of sample alternate, so clock and power
  // drift reach all of them alike.
  Gemm gemm;
  gemm.init(opt.gemmN);
  gemm.enqueue(3); // cuBLAS's heuristics and first launches
  DCRT_CUDA_CHECK(cudaStreamSynchronize(gemm.stream));
  gemm.enqueue(1);
  DCRT_CUDA_CHECK(cudaStreamSynchronize(gemm.stream));
  double oneGemmMs = std::max(gemm.elapsedMs(), 1e-3);
  // Half a second of GEMMs first, so the clocks have settled.
  gemm.enqueue(std::max(3, int(std::ceil(500.0 / oneGemmMs))));
  DCRT_CUDA_CHECK(cudaStreamSynchronize(gemm.stream));
  gemm.enqueue(1);
  DCRT_CUDA_CHECK(cudaStreamSynchronize(gemm.stream));
  oneGemmMs = std::max(gemm.elapsedMs(), 1e-3);
  // About 60 ms of GEMMs per sample, at least 5.
  const int gemmIters = std::max(5, int(std::ceil(60.0 / oneGemmMs)));
  // The slower direction's 1 GiB copy time, measured alone, sizes the loops:
  // for the slowdown, enough copies in each direction to outlast the GEMM
  // loop; for the copies under load, a GEMM loop that outlasts two 1 GiB
  // copies in each direction.
  const double copyMs =
      std::max(timeOneWay(d2h, GiB, 1, 1), timeOneWay(h2d, GiB, 1, 1));
  const int coverCopies =
      int(std::ceil(1.25 * gemmIters * oneGemmMs / copyMs)) + 1;
  const int loadCopies = 2;
  const int coverGemms = std::max(
      gemmIters, int(std::ceil(1.25 * loadCopies * copyMs / oneGemmMs)) + 1);
  std::vector<double> aloneMs, withMs, loadD2h, loadH2d;
  for (int r = 0; r <= opt.reps; ++r) { // r == 0 is the warm-up
    releaseTogether(gate, go, {gemm.stream});
    gemm.enqueue(gemmIters);
    DCRT_CUDA_CHECK(cudaDeviceSynchronize());
    double alone = gemm.elapsedMs();

    releaseTogether(gate, go, {d2h.stream, h2d.stream, gemm.stream});
    d2h.enqueue(GiB, coverCopies);
    h2d.enqueue(GiB, coverCopies);
    gemm.enqueue(gemmIters);
    DCRT_CUDA_CHECK(cudaDeviceSynchronize());
    double with = gemm.elapsedMs();

    releaseTogether(gate, go, {d2h.stream, h2d.stream, gemm.stream});
    gemm.enqueue(coverGemms);
    d2h.enqueue(GiB, loadCopies);
    h2d.enqueue(GiB, loadCopies);
    DCRT_CUDA_CHECK(cudaDeviceSynchronize());
    if (r > 0) {
      aloneMs.push_back(alone);
      withMs.push_back(with);
      loadD2h.push_back(d2h.elapsedMs());
      loadH2d.push_back(h2d.elapsedMs());
    }
  }
  double gemmAloneMs = median(aloneMs);
  double gemmWithMs = median(withMs);
  double loadD2hGbps = gbps(double(GiB) * loadCopies, median(loadD2h));
  double loadH2dGbps = gbps(double(GiB) * loadCopies, median(loadH2d));
  double slowdownPct = (gemmWithMs / gemmAloneMs - 1.0) * 100.0;
  double tflopsAlone = gemm.flops() * gemmIters / (gemmAloneMs * 1e-3) / 1e12;
  double tflopsWith = gemm.flops() * gemmIters / (gemmWithMs * 1e-3) / 1e12;

  std::printf(
      "bf16 GEMM %dx%dx%d (cublasGemmEx, fp32 accumulate), %d per sample:\n",
      gemm.n, gemm.n, gemm.n, gemmIters);
  std::printf("  alone:                  %9.2f ms  (%.1f TFLOP/s)\n",
              gemmAloneMs, tflopsAlone);
  std::printf(
      "  with 1 GiB copies both ways: %4.2f ms  (%.1f TFLOP/s), slowdown "
      "%.2f%%\n",
      gemmWithMs, tflopsWith, slowdownPct);
  std::printf("  copies while the GEMM runs: D2H %.1f GB/s, H2D %.1f GB/s\n\n",
              loadD2hGbps, loadH2dGbps);

  // (e) Launch-bound compute, alone and under copies in each direction.
  const int launchCount = 20000;
  cudaStream_t launches;
  cudaEvent_t launchStart, launchStop;
  float *tickData = nullptr;
  DCRT_CUDA_CHECK(cudaStreamCreateWithFlags(&launches, cudaStreamNonBlocking));
  DCRT_CUDA_CHECK(cudaEventCreate(&launchStart));
  DCRT_CUDA_CHECK(cudaEventCreate(&launchStop));
  DCRT_CUDA_CHECK(cudaMalloc(&tickData, 32 * sizeof(float)));
  DCRT_CUDA_CHECK(cudaMemset(tickData, 0, 32 * sizeof(float)));
  // One loop: GPU us per kernel (events), host us per launch.
  auto launchLoop = [&](double &gpuUs, double &hostUs) {
    DCRT_CUDA_CHECK(cudaEventRecord(launchStart, launches));
    auto begin = std::chrono::steady_clock::now();
    for (int i = 0; i < launchCount; ++i)
      tick<<<1, 32, 0, launches>>>(tickData);
    auto end = std::chrono::steady_clock::now();
    DCRT_CUDA_CHECK(cudaGetLastError());
    DCRT_CUDA_CHECK(cudaEventRecord(launchStop, launches));
    DCRT_CUDA_CHECK(cudaEventSynchronize(launchStop));
    float ms = 0;
    DCRT_CUDA_CHECK(cudaEventElapsedTime(&ms, launchStart, launchStop));
    gpuUs = ms * 1e3 / launchCount;
    hostUs = std::chrono::duration<double, std::micro>(end - begin).count() /
             launchCount;
  };
  double gpuUs = 0, hostUs = 0;
  launchLoop(gpuUs, hostUs); // warm-up; sizes the copies below
  const int launchCover =
      int(std::ceil(1.5 * gpuUs * launchCount * 1e-3 / copyMs)) + 1;
  std::vector<double> gpuAlone, hostAlone, gpuH2d, hostH2d, gpuD2h, hostD2h;
  for (int r = 0; r < opt.reps; ++r) {
    launchLoop(gpuUs, hostUs);
    gpuAlone.push_back(gpuUs);
    hostAlone.push_back(hostUs);
    h2d.enqueue(GiB, launchCover);
    launchLoop(gpuUs, hostUs);
    DCRT_CUDA_CHECK(cudaDeviceSynchronize());
    gpuH2d.push_back(gpuUs);
    hostH2d.push_back(hostUs);
    d2h.enqueue(GiB, launchCover);
    launchLoop(gpuUs, hostUs);
    DCRT_CUDA_CHECK(cudaDeviceSynchronize());
    gpuD2h.push_back(gpuUs);
    hostD2h.push_back(hostUs);
  }
  std::printf("%d tiny kernels launched back to back (GPU us per kernel, "
              "host us per launch):\n",
              launchCount);
  std::printf("  alone:               %6.2f us  (host %.2f)\n",
              median(gpuAlone), median(hostAlone));
  std::printf("  during H2D copies:   %6.2f us  (host %.2f)\n", median(gpuH2d),
              median(hostH2d));
  std::printf("  during D2H copies:   %6.2f us  (host %.2f)\n\n",
              median(gpuD2h), median(hostD2h));
  DCRT_CUDA_CHECK(cudaFree(tickData));
  DCRT_CUDA_CHECK(cudaEventDestroy(launchStart));
  DCRT_CUDA_CHECK(cudaEventDestroy(launchStop));
  DCRT_CUDA_CHECK(cudaStreamDestroy(launches));

  // (f) Memory-bound work alone and under copies: D2H only, H2D only, both.
  // Each kind of sample in turn within a repetition, like (d).
  const size_t axpyBytes = 256 * MiB;
  const size_t axpyN4 = axpyBytes / sizeof(float4);
  float4 *axpyX = nullptr, *axpyY = nullptr;
  cudaStream_t axpyStream;
  cudaEvent_t axpyStart, axpyStop;
  DCRT_CUDA_CHECK(cudaMalloc(&axpyX, axpyBytes));
  DCRT_CUDA_CHECK(cudaMalloc(&axpyY, axpyBytes));
  DCRT_CUDA_CHECK(cudaMemset(axpyX, 0, axpyBytes));
  DCRT_CUDA_CHECK(cudaMemset(axpyY, 0, axpyBytes));
  DCRT_CUDA_CHECK(
      cudaStreamCreateWithFlags(&axpyStream, cudaStreamNonBlocking));
  DCRT_CUDA_CHECK(cudaEventCreate(&axpyStart));
  DCRT_CUDA_CHECK(cudaEventCreate(&axpyStop));
  int axpyBlocks = 0;
  DCRT_CUDA_CHECK(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&axpyBlocks, axpy, 256, 0));
  axpyBlocks *= prop.multiProcessorCount;
  auto axpyLoop = [&](int iters) {
    DCRT_CUDA_CHECK(cudaEventRecord(axpyStart, axpyStream));
    for (int i = 0; i < iters; ++i)
      axpy<<<axpyBlocks, 256, 0, axpyStream>>>(axpyX, axpyY, axpyN4, 0.5f);
    DCRT_CUDA_CHECK(cudaGetLastError());
    DCRT_CUDA_CHECK(cudaEventRecord(axpyStop, axpyStream));
  };
  auto axpyMs = [&] {
    float ms = 0;
    DCRT_CUDA_CHECK(cudaEventElapsedTime(&ms, axpyStart, axpyStop));
    return double(ms);
  };
  axpyLoop(20);
  DCRT_CUDA_CHECK(cudaStreamSynchronize(axpyStream));
  const double oneAxpyMs = std::max(axpyMs() / 20, 1e-3);
  // About 60 ms a sample; copies enough to outlast it.
  const int axpyIters = std::max(20, int(std::ceil(60.0 / oneAxpyMs)));
  const int axpyCover =
      int(std::ceil(1.25 * axpyIters * oneAxpyMs / copyMs)) + 1;
  std::vector<double> axpyAlone, axpyD2h, axpyH2d, axpyBoth;
  for (int r = 0; r <= opt.reps; ++r) { // r == 0 is the warm-up
    double sample[4];
    for (int kind = 0; kind < 4; ++kind) {
      releaseTogether(gate, go, {d2h.stream, h2d.stream, axpyStream});
      if (kind == 1 || kind == 3)
        d2h.enqueue(GiB, axpyCover);
      if (kind == 2 || kind == 3)
        h2d.enqueue(GiB, axpyCover);
      axpyLoop(axpyIters);
      DCRT_CUDA_CHECK(cudaDeviceSynchronize());
      sample[kind] = axpyMs();
    }
    if (r > 0) {
      axpyAlone.push_back(sample[0]);
      axpyD2h.push_back(sample[1]);
      axpyH2d.push_back(sample[2]);
      axpyBoth.push_back(sample[3]);
    }
  }
  const double axpyAloneMs = median(axpyAlone);
  auto slowerPct = [&](const std::vector<double> &ms) {
    return (median(ms) / axpyAloneMs - 1.0) * 100.0;
  };
  const double axpyD2hPct = slowerPct(axpyD2h), axpyH2dPct = slowerPct(axpyH2d),
               axpyBothPct = slowerPct(axpyBoth);
  const double axpyGbps = gbps(3.0 * axpyBytes * axpyIters, axpyAloneMs);
  std::printf("memory-bound kernel (y = a x + y, 2 x 256 MiB fp32), %d per "
              "sample:\n",
              axpyIters);
  std::printf("  alone:               %8.2f ms  (%.0f GB/s)\n", axpyAloneMs,
              axpyGbps);
  std::printf("  with D2H copies:     %8.2f ms  slowdown %.2f%%\n",
              median(axpyD2h), axpyD2hPct);
  std::printf("  with H2D copies:     %8.2f ms  slowdown %.2f%%\n",
              median(axpyH2d), axpyH2dPct);
  std::printf("  with both:           %8.2f ms  slowdown %.2f%%\n\n",
              median(axpyBoth), axpyBothPct);
  DCRT_CUDA_CHECK(cudaFree(axpyX));
  DCRT_CUDA_CHECK(cudaFree(axpyY));
  DCRT_CUDA_CHECK(cudaEventDestroy(axpyStart));
  DCRT_CUDA_CHECK(cudaEventDestroy(axpyStop));
  DCRT_CUDA_CHECK(cudaStreamDestroy(axpyStream));

  // What dc's target description would take (docs/cost-model.md): the
  // one-way bandwidth of the largest copy, and the fixed cost of a copy.
  const SizeResult &big = results.back();
  double bigTotal = double(big.bytes) * big.count;
  double linkGbps =
      std::min(gbps(bigTotal, big.d2hMs), gbps(bigTotal, big.h2dMs));
  double linkLatencyUs = std::max(smallD2hUs, smallH2dUs);
  // The GEMM's slowdown under copies both ways, per direction (a fraction).
  double copyComputeSlowdown = std::max(0.0, slowdownPct / 100.0 / 2.0);
  std::printf("dc target: hostLinkBandwidth %.4g (%.1f GB/s), hostLinkLatency "
              "%.4g (%.2f us), copyComputeSlowdown %.4g\n",
              linkGbps * 1e9, linkGbps, linkLatencyUs * 1e-6, linkLatencyUs,
              copyComputeSlowdown);

  // JSON, one line.
  std::string json;
  char buf[1024];
  auto add = [&](const char *fmt, auto... args) {
    std::snprintf(buf, sizeof buf, fmt, args...);
    json += buf;
  };
  std::string name = prop.name;
  for (char &ch : name)
    if (ch == '"' || ch == '\\')
      ch = ' ';
  add("{\"bench\": \"copy_bench\", \"date\": \"%s\", \"gpu\": \"%s\", "
      "\"pci\": \"%s\", \"sm\": \"%d%d\", \"copy_engines\": %d, "
      "\"driver\": %d, \"runtime\": %d, \"reps\": %d, \"quick\": %s, ",
      isoDate().c_str(), name.c_str(), pci, prop.major, prop.minor, copyEngines,
      driver, runtime, opt.reps, opt.quick ? "true" : "false");
  add("\"small_copy_us\": {\"bytes\": %zu, \"d2h\": %.3f, \"h2d\": %.3f}, ",
      4 * KiB, smallD2hUs, smallH2dUs);
  json += "\"sizes\": [";
  for (size_t i = 0; i < results.size(); ++i) {
    const SizeResult &r = results[i];
    double total = double(r.bytes) * r.count;
    add("%s{\"bytes\": %zu, \"copies_per_sample\": %d, \"d2h_GBps\": %.2f, "
        "\"h2d_GBps\": %.2f, \"both_d2h_GBps\": %.2f, \"both_h2d_GBps\": %.2f, "
        "\"d2h_us_per_copy\": %.2f, \"h2d_us_per_copy\": %.2f}",
        i ? ", " : "", r.bytes, r.count, gbps(total, r.d2hMs),
        gbps(total, r.h2dMs), gbps(total, r.bothD2hMs),
        gbps(total, r.bothH2dMs), r.d2hMs * 1e3 / r.count,
        r.h2dMs * 1e3 / r.count);
  }
  json += "], ";
  add("\"gemm\": {\"n\": %d, \"iters\": %d, \"alone_ms\": %.3f, "
      "\"alone_tflops\": %.1f, \"with_copies_ms\": %.3f, "
      "\"with_copies_tflops\": "
      "%.1f, \"slowdown_pct\": %.2f, \"copy_bytes\": %zu, "
      "\"copies_per_direction\": "
      "%d, \"d2h_GBps_during_gemm\": %.2f, \"h2d_GBps_during_gemm\": %.2f}, ",
      gemm.n, gemmIters, gemmAloneMs, tflopsAlone, gemmWithMs, tflopsWith,
      slowdownPct, GiB, coverCopies, loadD2hGbps, loadH2dGbps);
  add("\"launches\": {\"kernels\": %d, \"alone_gpu_us\": %.3f, "
      "\"alone_host_us\": %.3f, \"h2d_gpu_us\": %.3f, \"h2d_host_us\": %.3f, "
      "\"d2h_gpu_us\": %.3f, \"d2h_host_us\": %.3f}, ",
      launchCount, median(gpuAlone), median(hostAlone), median(gpuH2d),
      median(hostH2d), median(gpuD2h), median(hostD2h));
  add("\"memory_bound\": {\"bytes\": %zu, \"iters\": %d, \"alone_ms\": %.3f, "
      "\"alone_GBps\": %.1f, \"d2h_slowdown_pct\": %.2f, "
      "\"h2d_slowdown_pct\": %.2f, \"both_slowdown_pct\": %.2f}, ",
      axpyBytes, axpyIters, axpyAloneMs, axpyGbps, axpyD2hPct, axpyH2dPct,
      axpyBothPct);
  add("\"target\": {\"base\": \"h200\", \"name\": \"measured-host-link\", "
      "\"hostLinkBandwidth\": %.4g, \"hostLinkLatency\": %.4g, "
      "\"copyComputeSlowdown\": %.4g}}",
      linkGbps * 1e9, linkLatencyUs * 1e-6, copyComputeSlowdown);
  std::printf("%s\n", json.c_str());
  std::fflush(stdout);
  if (!opt.jsonPath.empty()) {
    FILE *f = std::fopen(opt.jsonPath.c_str(), "w");
    if (!f || std::fprintf(f, "%s\n", json.c_str()) < 0 ||
        std::fclose(f) != 0) {
      std::fprintf(stderr, "copy_bench: error: cannot write %s: %s\n",
                   opt.jsonPath.c_str(), std::strerror(errno));
      return 1;
    }
  }

  gemm.destroy();
  d2h.destroy();
  h2d.destroy();
  DCRT_CUDA_CHECK(cudaEventDestroy(go));
  DCRT_CUDA_CHECK(cudaStreamDestroy(gate));
  DCRT_CUDA_CHECK(cudaFree(devSrc));
  DCRT_CUDA_CHECK(cudaFree(devDst));
  DCRT_CUDA_CHECK(cudaFreeHost(hostSrc));
  DCRT_CUDA_CHECK(cudaFreeHost(hostDst));
  return 0;
}
