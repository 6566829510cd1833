//===- DeviceAdamW.cpp - AdamW with its state in device memory ------------===//
//
// The master copies and both moments live in device memory, beside the
// shards, in the dtypes the config asks for (a bf16 master is the bf16
// parameter itself); each step is one fused kernel per parameter on the
// compute stream (after the step's entry, before the next one), with no
// copy. The registry's host copies (fp32) are refreshed only for
// checkpoints (storeState).
//
//===----------------------------------------------------------------------===//
#include "AdamW.h"
#include "CudaCheck.h"
#include "Params.h"

#include "dcrt/core.hpp"
#include "dcrt/dtype.hpp"
#include "dcrt/error.hpp"

#include <cmath>
#include <vector>

using namespace dcrun;

namespace {
class DeviceAdamW : public Optimizer {
public:
  explicit DeviceAdamW(const AdamWConfig &config)
      : masterType(config.masterDtype), momentType(config.momentDtype) {}

  void loadState(ParamRegistry &registry) override {
    states.clear();
    for (Param &param : registry.params()) {
      State &state = states.emplace_back();
      int64_t momentBytes = param.validNumel * dcrt::dtypeSize(momentType);
      state.expAvg =
          dcrt::Buffer(momentBytes, dcrt::MemoryKind::Device, "AdamW moments");
      state.expAvgSq =
          dcrt::Buffer(momentBytes, dcrt::MemoryKind::Device, "AdamW moments");
      upload(state.expAvg.data(), param.expAvg, momentType);
      upload(state.expAvgSq.data(), param.expAvgSq, momentType);
      if (sharesMaster(param))
        continue; // the parameter's data, which refreshData wrote
      state.master = dcrt::Buffer(param.validNumel * int64_t(sizeof(float)),
                                  dcrt::MemoryKind::Device, "a master copy");
      upload(state.master.data(), param.master, DCRT_F32);
    }
  }

  void storeState(ParamRegistry &registry) override {
    size_t i = 0;
    for (Param &param : registry.params()) {
      const State &state = states.at(i++);
      download(param.expAvg, state.expAvg.data(), momentType);
      download(param.expAvgSq, state.expAvgSq.data(), momentType);
      download(param.master,
               sharesMaster(param) ? param.data.data() : state.master.data(),
               sharesMaster(param) ? param.spec.dtype : DCRT_F32);
    }
  }

  double gradientSquares(ParamRegistry &registry) override {
    auto stream = static_cast<cudaStream_t>(dcrt::computeStream());
    if (!sums.data()) {
      sums = dcrt::Buffer(int64_t(sizeof(double)) * registry.params().size(),
                          dcrt::MemoryKind::Device, "gradient norms");
      normWorkspace = dcrt::Buffer(cuda::normWorkspaceBytes(),
                                   dcrt::MemoryKind::Device, "gradient norms");
      DCRT_CUDA_CHECK_WHAT(cudaMemsetAsync(sums.data(), 0, sums.size(), stream),
                           "computing the gradient norm");
      DCRT_CUDA_CHECK_WHAT(cudaMemsetAsync(normWorkspace.data(), 0,
                                           normWorkspace.size(), stream),
                           "computing the gradient norm");
    }
    size_t i = 0;
    for (Param &param : registry.params()) {
      if (param.spec.hasGrad)
        DCRT_CUDA_CHECK_WHAT(
            cuda::sumOfSquares(gradientOf(param, i), gradientType(param),
                               param.validNumel, sums.as<double>() + i,
                               normWorkspace.data(), stream),
            "computing the gradient norm");
      ++i;
    }
    // The step's one synchronization besides the loss read-back.
    std::vector<double> perParam(registry.params().size());
    dcrt::copy(perParam.data(), sums.data(), sums.size());
    // Of the mean: the sums' squares over count^2.
    double scale2 = meanScale == 0 ? 1.0 : meanScale * meanScale;
    double squares = 0;
    i = 0;
    for (Param &param : registry.params())
      squares += shareOfSquaredNorm(param, perParam[i++] * scale2);
    return squares;
  }

  void accumulate(ParamRegistry &registry, int64_t index,
                  int64_t count) override {
    if (index < 0 || index >= count)
      dcrt::fatal("micro-batch %lld of %lld", static_cast<long long>(index),
                  static_cast<long long>(count));
    auto stream = static_cast<cudaStream_t>(dcrt::computeStream());
    // fp32 sums in device memory beside the shards, made once.
    if (gradientSums.size() != registry.params().size()) {
      gradientSums.clear();
      for (Param &param : registry.params())
        gradientSums.emplace_back((param.spec.hasGrad ? param.validNumel : 0) *
                                      int64_t(sizeof(float)),
                                  dcrt::MemoryKind::Device, "gradient sums");
    }
    bool last = index == count - 1;
    size_t i = 0;
    for (Param &param : registry.params()) {
      dcrt::Buffer &sum = gradientSums[i++];
      // A parameter the step sums itself: only the last entry writes it.
      if (!param.spec.hasGrad || (param.spec.stepAccumulates && !last))
        continue;
      bool overwrite = index == 0 || param.spec.stepAccumulates;
      cudaError_t status = cuda::accumulateGradient(
          sum.as<float>(), param.grad.data(), param.spec.gradDtype,
          param.validNumel, overwrite, stream);
      if (status != cudaSuccess)
        dcrt::fatal("accumulating the gradient of '%s': %s",
                    param.spec.name.c_str(),
                    dcrt::cuda::describeCudaError(status).c_str());
    }
    meanScale = last ? 1.0 / static_cast<double>(count) : 0.0;
  }

  void step(ParamRegistry &registry, const AdamWConfig &config, int64_t step,
            double gradScale) override {
    if (states.size() != registry.params().size())
      dcrt::fatal("the device AdamW has no state for %zu parameters (loadState "
                  "was not called)",
                  registry.params().size());
    auto stream = static_cast<cudaStream_t>(dcrt::computeStream());
    if (meanScale != 0)
      gradScale *= meanScale;
    cuda::AdamWStep kernelConfig{config.lr,  config.beta1,       config.beta2,
                                 config.eps, config.weightDecay, step,
                                 gradScale};
    size_t i = 0;
    for (Param &param : registry.params()) {
      State &state = states[i++];
      if (!param.spec.hasGrad || param.validNumel == 0)
        continue;
      bool shared = sharesMaster(param);
      cudaError_t status = cuda::adamwStep(
          shared ? param.data.data() : state.master.data(),
          shared ? param.spec.dtype : DCRT_F32, gradientOf(param, i - 1),
          gradientType(param), state.expAvg.data(), state.expAvgSq.data(),
          momentType, param.data.data(), param.spec.dtype, param.validNumel,
          kernelConfig, stream);
      if (status != cudaSuccess)
        dcrt::fatal("the AdamW kernel failed on '%s': %s",
                    param.spec.name.c_str(),
                    dcrt::cuda::describeCudaError(status).c_str());
    }
    meanScale = 0; // the next step writes (or sums) its own
  }

private:
  /// What the update reads of parameter `i`: its fp32 gradient sum after
  /// micro-batches, else the shard the entry wrote.
  const void *gradientOf(const Param &param, size_t i) const {
    return meanScale != 0 ? gradientSums.at(i).data() : param.grad.data();
  }
  dcrt_dtype gradientType(const Param &param) const {
    return meanScale != 0 ? DCRT_F32 : param.spec.gradDtype;
  }

  /// A bf16 master is the parameter's own bf16 data (dc-run checks that
  /// every parameter is bf16 when it is asked for).
  bool sharesMaster(const Param &) const { return masterType == DCRT_BF16; }

  /// Host fp32 values into device memory of `dtype`.
  static void upload(void *device, const std::vector<float> &host,
                     dcrt_dtype dtype) {
    if (dtype == DCRT_F32)
      return dcrt::copy(device, host.data(),
                        static_cast<int64_t>(host.size() * sizeof(float)));
    std::vector<unsigned char> converted(host.size() * dcrt::dtypeSize(dtype));
    dcrt::convert(host.data(), DCRT_F32, converted.data(), dtype,
                  static_cast<int64_t>(host.size()));
    dcrt::copy(device, converted.data(),
               static_cast<int64_t>(converted.size()));
  }

  /// Device memory of `dtype` into host fp32 values.
  static void download(std::vector<float> &host, const void *device,
                       dcrt_dtype dtype) {
    if (dtype == DCRT_F32)
      return dcrt::copy(host.data(), device,
                        static_cast<int64_t>(host.size() * sizeof(float)));
    std::vector<unsigned char> raw(host.size() * dcrt::dtypeSize(dtype));
    dcrt::copy(raw.data(), device, static_cast<int64_t>(raw.size()));
    dcrt::convert(raw.data(), dtype, host.data(), DCRT_F32,
                  static_cast<int64_t>(host.size()));
  }

  dcrt_dtype masterType, momentType;
  dcrt::Buffer sums, normWorkspace;
  /// Per parameter, the fp32 sum of the micro-batches' gradient shards.
  std::vector<dcrt::Buffer> gradientSums;
  /// 1 / micro-batches once gradientSums hold this step's sums, else 0.
  double meanScale = 0;
  struct State {
    dcrt::Buffer master, expAvg, expAvgSq; // no master when it is shared
  };
  std::vector<State> states;
};
} // namespace

std::unique_ptr<Optimizer> dcrun::createDeviceAdamW(const AdamWConfig &config) {
  return std::make_unique<DeviceAdamW>(config);
}
