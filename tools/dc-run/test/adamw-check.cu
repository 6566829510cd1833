//===- adamw-check.cu - the AdamW kernel against the host AdamW -----------===//
//
// Three AdamW steps of the fused kernel on random data (bf16 gradients and
// compute copy, weight decay on) against dcrun::adamwUpdate, with the state
// in fp32, with bf16 moments, and all bf16 (the master is the bf16 data):
// fp32 state must agree to 1e-6 relative and each bf16 copy be its master
// rounded; bf16 state to one bf16 rounding step. The gradient norm's sum of
// squares against a double sum on the host (1e-12 relative) and bit for bit
// against a second run. Then both kernels' bandwidth on 2^28 elements (bf16
// gradients, fp32 state). Needs a GPU; runtime/test/gpu/run.sh runs it.
//
//===----------------------------------------------------------------------===//
#include "AdamW.h"
#include "CudaCheck.h"
#include "Params.h"

#include "dcrt/dtype.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

namespace {
template <typename T> T *device(const std::vector<T> &host) {
  T *pointer = nullptr;
  cudaMalloc(&pointer, host.size() * sizeof(T));
  cudaMemcpy(pointer, host.data(), host.size() * sizeof(T),
             cudaMemcpyHostToDevice);
  return pointer;
}

template <typename T> std::vector<T> back(const T *pointer, size_t n) {
  std::vector<T> host(n);
  cudaMemcpy(host.data(), pointer, n * sizeof(T), cudaMemcpyDeviceToHost);
  return host;
}

double maxRelative(const std::vector<float> &a, const std::vector<float> &b) {
  double worst = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::fabs(double(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(double(a[i])));
  }
  return worst / std::max(scale, 1e-30);
}

/// Three AdamW steps of the kernel against adamwUpdate with the state in
/// `masterType` / `momentType` (a bf16 master is the bf16 data itself).
bool check(dcrt_dtype masterType, dcrt_dtype momentType) {
  const int64_t n = (int64_t(1) << 22) + 17;
  std::mt19937 random(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  dcrun::AdamWConfig config;
  config.lr = 1e-3;
  config.weightDecay = 0.1;
  config.masterDtype = masterType;
  config.momentDtype = momentType;
  std::vector<float> master(n), expAvg(n, 0.0f), expAvgSq(n, 0.0f);
  std::vector<uint16_t> data(n);
  for (int64_t i = 0; i < n; ++i) {
    master[i] = dcrun::roundToStateDtype(0.02f * normal(random), masterType);
    data[i] = dcrt::floatToBF16(master[i]);
  }
  const int64_t momentBytes = n * dcrt::dtypeSize(momentType);
  std::vector<unsigned char> zeros(momentBytes, 0);
  float *dMaster = device(master);
  unsigned char *dAvg = device(zeros), *dAvgSq = device(zeros);
  uint16_t *dData = device(data), *dGrad = nullptr;
  cudaMalloc(&dGrad, n * 2);
  bool shared = masterType == DCRT_BF16;
  for (int64_t step = 1; step <= 3; ++step) {
    std::vector<uint16_t> grad(n);
    std::vector<float> gradFloat(n);
    for (int64_t i = 0; i < n; ++i) {
      grad[i] = dcrt::floatToBF16(normal(random) * 1e-2f);
      gradFloat[i] = dcrt::bf16ToFloat(grad[i]);
    }
    cudaMemcpy(dGrad, grad.data(), n * 2, cudaMemcpyHostToDevice);
    dcrun::cuda::AdamWStep kernelConfig{config.lr,          config.beta1,
                                        config.beta2,       config.eps,
                                        config.weightDecay, step};
    cudaError_t status = dcrun::cuda::adamwStep(
        shared ? static_cast<void *>(dData) : dMaster, masterType, dGrad,
        DCRT_BF16, dAvg, dAvgSq, momentType, dData, DCRT_BF16, n, kernelConfig,
        nullptr);
    if (status != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) {
      std::printf("adamw-check: kernel failed: %s\n",
                  dcrt::cuda::describeCudaError(cudaGetLastError()).c_str());
      return false;
    }
    dcrun::adamwUpdate(master.data(), gradFloat.data(), expAvg.data(),
                       expAvgSq.data(), n, config, step);
  }
  auto asFloats = [&](const unsigned char *pointer, dcrt_dtype dtype) {
    std::vector<unsigned char> raw = back(pointer, n * dcrt::dtypeSize(dtype));
    std::vector<float> values(n);
    dcrt::convert(raw.data(), dtype, values.data(), DCRT_F32, n);
    return values;
  };
  std::vector<float> deviceMaster =
      shared ? asFloats(reinterpret_cast<unsigned char *>(dData), DCRT_BF16)
             : back(dMaster, n);
  double masterError = maxRelative(master, deviceMaster);
  double avgError = maxRelative(expAvg, asFloats(dAvg, momentType));
  double avgSqError = maxRelative(expAvgSq, asFloats(dAvgSq, momentType));
  std::vector<uint16_t> deviceData = back(dData, n);
  // The bf16 compute copy is exactly the device master rounded.
  int64_t dataMismatches = 0;
  for (int64_t i = 0; i < n; ++i)
    dataMismatches += deviceData[i] != dcrt::floatToBF16(deviceMaster[i]);
  // fp32 state (fp32 arithmetic on the device, double on the host) agrees
  // to a few fp32 roundings; bf16 state, rounded from values that agree
  // that closely, may differ by one bf16 step where the two sit on either
  // side of a rounding boundary.
  double tolerance = momentType == DCRT_BF16 || shared ? 8e-3 : 1e-6;
  bool ok = masterError <= tolerance && avgError <= tolerance &&
            avgSqError <= tolerance && (shared || dataMismatches == 0);
  std::printf("adamw-check: %s master, %s moments: %lld elements, 3 steps: "
              "master %.2e, moments %.2e / %.2e (max relative), bf16 copies "
              "not their master rounded: %lld: %s\n",
              dcrt::dtypeName(masterType), dcrt::dtypeName(momentType),
              static_cast<long long>(n), masterError, avgError, avgSqError,
              static_cast<long long>(dataMismatches), ok ? "ok" : "FAILED");
  cudaFree(dMaster);
  cudaFree(dAvg);
  cudaFree(dAvgSq);
  cudaFree(dData);
  cudaFree(dGrad);
  return ok;
}
/// sumOfSquares on bf16 gradients of several sizes (one block, a partial
/// last iteration, more elements than the kernel's threads) against a
/// double sum on the host, and run twice: the same bits.
bool checkNorm() {
  std::mt19937 random(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  void *workspace = nullptr;
  double *sum = nullptr;
  cudaMalloc(&workspace, dcrun::cuda::normWorkspaceBytes());
  cudaMemset(workspace, 0, dcrun::cuda::normWorkspaceBytes());
  cudaMalloc(&sum, sizeof(double));
  bool ok = true;
  for (int64_t n :
       {int64_t(1), int64_t(2048), int64_t(1000003), (int64_t(1) << 24) + 5}) {
    std::vector<uint16_t> grad(n);
    double expected = 0;
    for (int64_t i = 0; i < n; ++i) {
      grad[i] = dcrt::floatToBF16(normal(random));
      double g = dcrt::bf16ToFloat(grad[i]);
      expected += g * g;
    }
    uint16_t *dGrad = device(grad);
    double runs[2];
    for (double &run : runs) {
      if (dcrun::cuda::sumOfSquares(dGrad, DCRT_BF16, n, sum, workspace,
                                    nullptr) != cudaSuccess)
        ok = false;
      run = back(sum, 1)[0];
    }
    double error = std::fabs(runs[0] - expected) / std::max(expected, 1e-300);
    bool good = error <= 1e-12 && runs[0] == runs[1];
    std::printf("adamw-check: sum of squares of %lld bf16 values: %.17g "
                "(host %.17g, relative %.1e), second run %s: %s\n",
                static_cast<long long>(n), runs[0], expected, error,
                runs[0] == runs[1] ? "identical" : "DIFFERENT",
                good ? "ok" : "FAILED");
    ok &= good;
    cudaFree(dGrad);
  }
  cudaFree(workspace);
  cudaFree(sum);
  return ok;
}

/// One step through the 16-byte path (buffers from element 0, aligned)
/// and through the scalar path (the same values one element into each
/// buffer, misaligned): the same bits in every output.
bool checkPathsAgree() {
  const int64_t n = 100003;
  std::mt19937 random(13);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> master(n), avg(n), avgSq(n);
  std::vector<uint16_t> grad(n), data(n);
  for (int64_t i = 0; i < n; ++i) {
    master[i] = 0.02f * normal(random);
    avg[i] = 1e-3f * normal(random);
    avgSq[i] = 1e-6f * std::fabs(normal(random));
    grad[i] = dcrt::floatToBF16(1e-2f * normal(random));
    data[i] = dcrt::floatToBF16(master[i]);
  }
  // One leading element moves every buffer off its 16-byte alignment.
  auto shifted = [](auto values, int64_t by) {
    values.insert(values.begin(), by, values.front());
    return values;
  };
  dcrun::cuda::AdamWStep config{1e-3, 0.9, 0.999, 1e-8, 0.1, 3, 0.5};
  std::vector<float> results[2][3];
  std::vector<uint16_t> dataResults[2];
  for (int64_t at = 0; at < 2; ++at) {
    float *dMaster = device(shifted(master, at));
    float *dAvg = device(shifted(avg, at));
    float *dAvgSq = device(shifted(avgSq, at));
    uint16_t *dGrad = device(shifted(grad, at));
    uint16_t *dData = device(shifted(data, at));
    if (dcrun::cuda::adamwStep(dMaster + at, DCRT_F32, dGrad + at, DCRT_BF16,
                               dAvg + at, dAvgSq + at, DCRT_F32, dData + at,
                               DCRT_BF16, n, config, nullptr) != cudaSuccess)
      return false;
    results[at][0] = back(dMaster + at, n);
    results[at][1] = back(dAvg + at, n);
    results[at][2] = back(dAvgSq + at, n);
    dataResults[at] = back(dData + at, n);
    cudaFree(dMaster);
    cudaFree(dAvg);
    cudaFree(dAvgSq);
    cudaFree(dGrad);
    cudaFree(dData);
  }
  int64_t differing = 0;
  for (int k = 0; k < 3; ++k)
    for (int64_t i = 0; i < n; ++i)
      differing += std::memcmp(&results[0][k][i], &results[1][k][i], 4) != 0;
  for (int64_t i = 0; i < n; ++i)
    differing += dataResults[0][i] != dataResults[1][i];
  std::printf("adamw-check: 16-byte and scalar paths, %lld elements: %lld "
              "values differ: %s\n",
              static_cast<long long>(n), static_cast<long long>(differing),
              differing == 0 ? "ok" : "FAILED");
  return differing == 0;
}

/// GB/s of the AdamW step (fp32 master and moments: 28 bytes an element
/// with bf16 gradient and data) and of the norm (2 bytes an element) on
/// 2^28 elements, the median of 5 runs after a warm-up.
void bench() {
  const int64_t n = int64_t(1) << 28;
  void *grad, *data, *master, *avg, *avgSq, *workspace;
  double *sum;
  cudaMalloc(&grad, n * 2);
  cudaMalloc(&data, n * 2);
  cudaMalloc(&master, n * 4);
  cudaMalloc(&avg, n * 4);
  cudaMalloc(&avgSq, n * 4);
  cudaMalloc(&workspace, dcrun::cuda::normWorkspaceBytes());
  cudaMalloc(&sum, sizeof(double));
  cudaMemset(grad, 0, n * 2);
  cudaMemset(master, 0, n * 4);
  cudaMemset(avg, 0, n * 4);
  cudaMemset(avgSq, 0, n * 4);
  cudaMemset(workspace, 0, dcrun::cuda::normWorkspaceBytes());
  cudaEvent_t begin, end;
  cudaEventCreate(&begin);
  cudaEventCreate(&end);
  auto time = [&](auto launch) {
    std::vector<float> ms;
    for (int run = 0; run < 6; ++run) {
      cudaEventRecord(begin);
      launch();
      cudaEventRecord(end);
      cudaEventSynchronize(end);
      float elapsed = 0;
      cudaEventElapsedTime(&elapsed, begin, end);
      if (run > 0)
        ms.push_back(elapsed);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  };
  dcrun::cuda::AdamWStep config{1e-3, 0.9, 0.999, 1e-8, 0.0, 1};
  float adamw = time([&] {
    dcrun::cuda::adamwStep(master, DCRT_F32, grad, DCRT_BF16, avg, avgSq,
                           DCRT_F32, data, DCRT_BF16, n, config, nullptr);
  });
  // One element in: every buffer misaligned, the scalar path.
  float scalar = time([&] {
    dcrun::cuda::adamwStep(static_cast<float *>(master) + 1, DCRT_F32,
                           static_cast<uint16_t *>(grad) + 1, DCRT_BF16,
                           static_cast<float *>(avg) + 1,
                           static_cast<float *>(avgSq) + 1, DCRT_F32,
                           static_cast<uint16_t *>(data) + 1, DCRT_BF16, n - 1,
                           config, nullptr);
  });
  float norm = time([&] {
    dcrun::cuda::sumOfSquares(grad, DCRT_BF16, n, sum, workspace, nullptr);
  });
  std::printf("bench adamw-check: %lld elements: AdamW step %.3f ms (%.0f "
              "GB/s; scalar path %.3f ms, %.0f GB/s), sum of squares %.3f ms "
              "(%.0f GB/s)\n",
              static_cast<long long>(n), adamw, 28.0 * n / adamw * 1e-6, scalar,
              28.0 * n / scalar * 1e-6, norm, 2.0 * n / norm * 1e-6);
  for (void *pointer : {grad, data, master, avg, avgSq, workspace})
    cudaFree(pointer);
  cudaFree(sum);
}
} // namespace

int main() {
  bool ok = check(DCRT_F32, DCRT_F32);
  ok &= check(DCRT_F32, DCRT_BF16);
  ok &= check(DCRT_BF16, DCRT_BF16);
  ok &= checkPathsAgree();
  ok &= checkNorm();
  bench();
  return ok ? 0 : 1;
}
