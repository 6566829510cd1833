//===- adamw-check.cu - the AdamW kernel against the host AdamW -----------===//
//
// Three AdamW steps of the fused kernel on random data (fp32 master, bf16
// gradients and compute copy, weight decay on) against dcrun::adamwUpdate:
// the masters and moments must agree to 1e-6 relative, the bf16 copies
// exactly. Needs a GPU; runtime/test/gpu/run.sh runs it.
//
//===----------------------------------------------------------------------===//
#include "AdamW.h"
#include "Params.h"

#include "dcrt/dtype.hpp"

#include <cmath>
#include <cstdio>
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
} // namespace

int main() {
  const int64_t n = (int64_t(1) << 22) + 17;
  std::mt19937 random(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> master(n), expAvg(n, 0.0f), expAvgSq(n, 0.0f);
  for (float &value : master)
    value = 0.02f * normal(random);
  dcrun::AdamWConfig config;
  config.lr = 1e-3;
  config.weightDecay = 0.1;
  float *dMaster = device(master), *dAvg = device(expAvg),
        *dAvgSq = device(expAvgSq);
  uint16_t *dData = nullptr, *dGrad = nullptr;
  cudaMalloc(&dData, n * 2);
  cudaMalloc(&dGrad, n * 2);
  std::vector<uint16_t> data(n);
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
    cudaError_t status =
        dcrun::cuda::adamwStep(dMaster, dGrad, DCRT_BF16, dAvg, dAvgSq, dData,
                               DCRT_BF16, n, kernelConfig, nullptr);
    if (status != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) {
      std::printf("adamw-check: kernel failed: %s\n",
                  cudaGetErrorString(cudaGetLastError()));
      return 1;
    }
    dcrun::adamwUpdate(master.data(), gradFloat.data(), expAvg.data(),
                       expAvgSq.data(), n, config, step);
  }
  double masterError = maxRelative(master, back(dMaster, n));
  double avgError = maxRelative(expAvg, back(dAvg, n));
  double avgSqError = maxRelative(expAvgSq, back(dAvgSq, n));
  std::vector<uint16_t> deviceData = back(dData, n);
  int64_t dataMismatches = 0;
  for (int64_t i = 0; i < n; ++i)
    dataMismatches += deviceData[i] != dcrt::floatToBF16(master[i]);
  bool ok = masterError <= 1e-6 && avgError <= 1e-6 && avgSqError <= 1e-6 &&
            dataMismatches == 0;
  std::printf("adamw-check: %lld elements, 3 steps: master %.2e, moments "
              "%.2e / %.2e (max relative), bf16 copies differing: %lld: %s\n",
              static_cast<long long>(n), masterError, avgError, avgSqError,
              static_cast<long long>(dataMismatches), ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
