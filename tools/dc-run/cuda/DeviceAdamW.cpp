//===- DeviceAdamW.cpp - AdamW with its state in device memory ------------===//
//
// The fp32 master copies and both moments live in device memory, beside
// the shards; each step is one fused kernel per parameter on the compute
// stream (after the step's entry, before the next one), with no copy and
// no host synchronization. The registry's host copies are refreshed only
// for checkpoints (storeState).
//
//===----------------------------------------------------------------------===//
#include "AdamW.h"
#include "Params.h"

#include "dcrt/core.hpp"
#include "dcrt/error.hpp"

#include <cmath>
#include <vector>

using namespace dcrun;

namespace {
class DeviceAdamW : public Optimizer {
public:
  void loadState(ParamRegistry &registry) override {
    states.clear();
    for (Param &param : registry.params()) {
      int64_t bytes = param.validNumel * int64_t(sizeof(float));
      State &state = states.emplace_back();
      state.master =
          dcrt::Buffer(bytes, dcrt::MemoryKind::Device, "a master copy");
      state.expAvg =
          dcrt::Buffer(bytes, dcrt::MemoryKind::Device, "AdamW moments");
      state.expAvgSq =
          dcrt::Buffer(bytes, dcrt::MemoryKind::Device, "AdamW moments");
      dcrt::copy(state.master.data(), param.master.data(), bytes);
      dcrt::copy(state.expAvg.data(), param.expAvg.data(), bytes);
      dcrt::copy(state.expAvgSq.data(), param.expAvgSq.data(), bytes);
    }
  }

  void storeState(ParamRegistry &registry) override {
    size_t i = 0;
    for (Param &param : registry.params()) {
      const State &state = states.at(i++);
      int64_t bytes = param.validNumel * int64_t(sizeof(float));
      dcrt::copy(param.master.data(), state.master.data(), bytes);
      dcrt::copy(param.expAvg.data(), state.expAvg.data(), bytes);
      dcrt::copy(param.expAvgSq.data(), state.expAvgSq.data(), bytes);
    }
  }

  void step(ParamRegistry &registry, const AdamWConfig &config,
            int64_t step) override {
    if (states.size() != registry.params().size())
      dcrt::fatal("the device AdamW has no state for %zu parameters (loadState "
                  "was not called)",
                  registry.params().size());
    auto stream = static_cast<cudaStream_t>(dcrt::computeStream());
    cuda::AdamWStep kernelConfig{config.lr,  config.beta1,       config.beta2,
                                 config.eps, config.weightDecay, step};
    if (config.maxGradNorm > 0)
      kernelConfig.gradScale = clip(registry, config.maxGradNorm, stream);
    size_t i = 0;
    for (Param &param : registry.params()) {
      State &state = states[i++];
      if (!param.spec.hasGrad || param.validNumel == 0)
        continue;
      cudaError_t status = cuda::adamwStep(
          state.master.as<float>(), param.grad.data(), param.spec.gradDtype,
          state.expAvg.as<float>(), state.expAvgSq.as<float>(),
          param.data.data(), param.spec.dtype, param.validNumel, kernelConfig,
          stream);
      if (status != cudaSuccess)
        dcrt::fatal("the AdamW kernel failed on '%s': %s",
                    param.spec.name.c_str(), cudaGetErrorString(status));
    }
  }

private:
  /// The global norm (one device sum per parameter, one all-reduce on the
  /// host: the step's only synchronization) and the clipping scale.
  double clip(ParamRegistry &registry, double maxNorm, cudaStream_t stream) {
    if (!sums.data())
      sums = dcrt::Buffer(int64_t(sizeof(double)) * registry.params().size(),
                          dcrt::MemoryKind::Device, "gradient norms");
    check(cudaMemsetAsync(sums.data(), 0, sums.size(), stream));
    size_t i = 0;
    for (Param &param : registry.params()) {
      if (param.spec.hasGrad)
        check(cuda::addSumOfSquares(param.grad.data(), param.spec.gradDtype,
                                    param.validNumel, sums.as<double>() + i,
                                    stream));
      ++i;
    }
    std::vector<double> perParam(registry.params().size());
    dcrt::copy(perParam.data(), sums.data(), sums.size());
    double squares = 0;
    i = 0;
    for (Param &param : registry.params())
      squares += shareOfSquaredNorm(param, perParam[i++], registry.worldSize());
    dcrt::allReduceSum(&squares, 1);
    gradNorm = std::sqrt(squares);
    return clipScale(gradNorm, maxNorm);
  }

  static void check(cudaError_t status) {
    if (status != cudaSuccess)
      dcrt::fatal("computing the gradient norm: %s",
                  cudaGetErrorString(status));
  }

  dcrt::Buffer sums;
  struct State {
    dcrt::Buffer master, expAvg, expAvgSq;
  };
  std::vector<State> states;
};
} // namespace

std::unique_ptr<Optimizer> dcrun::createDeviceAdamW() {
  return std::make_unique<DeviceAdamW>();
}
