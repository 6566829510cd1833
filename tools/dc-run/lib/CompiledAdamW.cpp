//===- CompiledAdamW.cpp - the state of a step that runs AdamW itself -----===//
#include "CompiledAdamW.h"

#include "HostAccess.h"

#include "dcrt/dcrt.h"
#include "dcrt/dtype.hpp"
#include "dcrt/error.hpp"

#include <cmath>
#include <cstring>

using namespace dcrun;

CompiledAdamW::CompiledAdamW(const StepSpec &step, ParamRegistry &registry)
    : lr(sizeof(double), dcrt::MemoryKind::Device, "the learning rate"),
      stepCount(sizeof(int64_t), dcrt::MemoryKind::Device, "the step count"),
      squares(sizeof(double), dcrt::MemoryKind::Device,
              "the squared gradient norm") {
  for (const TensorSpec &arg : step.args) {
    if (arg.kind != TensorKind::OptState)
      continue;
    Param *param = registry.find(arg.param);
    if (!param)
      dcrt::fatal("internal: optimizer state of unknown parameter %d",
                  arg.param);
    State &state = states.emplace_back();
    state.param = param;
    state.name = arg.state == "exp_avg"      ? "exp_avg"
                 : arg.state == "exp_avg_sq" ? "exp_avg_sq"
                                             : "master";
    state.dtype = arg.dtype;
    // State the step keeps in host memory (pinned on a device backend) is
    // uploaded for its update and written back by the step itself.
    state.buffer = dcrt::Buffer(arg.bufferNumel() * dcrt::dtypeSize(arg.dtype),
                                arg.onHost ? dcrt::MemoryKind::Host
                                           : dcrt::MemoryKind::Device,
                                arg.name.c_str());
  }
}

void *CompiledAdamW::bufferOf(const TensorSpec &tensor) {
  switch (tensor.kind) {
  case TensorKind::LearningRate:
    return lr.data();
  case TensorKind::StepCount:
    return stepCount.data();
  case TensorKind::GradSquares:
    return squares.data();
  case TensorKind::OptState:
    for (State &state : states)
      if (state.param->spec.id == tensor.param && state.name == tensor.state)
        return state.buffer.data();
    break;
  default:
    break;
  }
  dcrt::fatal("internal: no optimizer buffer for '%s'", tensor.name.c_str());
}

void CompiledAdamW::setStep(double rate, int64_t step) {
  writeFromHost(lr, sizeof(double),
                [&](void *host) { std::memcpy(host, &rate, sizeof(double)); });
  writeFromHost(stepCount, sizeof(int64_t),
                [&](void *host) { std::memcpy(host, &step, sizeof(int64_t)); });
}

double CompiledAdamW::squaredNorm() const {
  double value = 0;
  readToHost(squares, sizeof(double), [&](const void *host) {
    std::memcpy(&value, host, sizeof(double));
  });
  return value;
}

double CompiledAdamW::gradientSquares(ParamRegistry &) {
  dcrt::fatal("internal: the step computes its own gradient norm");
}

/// The registry's fp32 values of `state` (its real elements).
static std::vector<float> &hostValues(Param &param, std::string_view state) {
  return state == "exp_avg"      ? param.expAvg
         : state == "exp_avg_sq" ? param.expAvgSq
                                 : param.master;
}

void CompiledAdamW::loadState(ParamRegistry &) {
  // Straight from the host copies (converted where the state is bf16), the
  // padding past the real elements zeroed: one copy of each state's bytes,
  // as the device AdamW uploads it.
  for (State &state : states) {
    const std::vector<float> &values = hostValues(*state.param, state.name);
    auto valid = static_cast<int64_t>(values.size());
    int64_t validBytes = valid * dcrt::dtypeSize(state.dtype);
    auto *device = static_cast<char *>(state.buffer.data());
    if (validBytes == 0) {
      // A rank past a small parameter's elements: padding only.
    } else if (state.dtype == DCRT_F32) {
      dcrt::copy(device, values.data(), validBytes);
    } else {
      std::vector<unsigned char> converted(static_cast<size_t>(validBytes));
      dcrt::convert(values.data(), DCRT_F32, converted.data(), state.dtype,
                    valid);
      dcrt::copy(device, converted.data(), validBytes);
    }
    int64_t padding = state.buffer.size() - validBytes;
    if (padding > 0) {
      std::vector<unsigned char> zeros(static_cast<size_t>(padding), 0);
      dcrt::copy(device + validBytes, zeros.data(), padding);
    }
  }
}

void CompiledAdamW::storeState(ParamRegistry &registry) {
  for (State &state : states) {
    std::vector<float> &values = hostValues(*state.param, state.name);
    readToHost(state.buffer, state.buffer.size(), [&](const void *host) {
      dcrt::convert(host, state.dtype, values.data(), DCRT_F32,
                    static_cast<int64_t>(values.size()));
    });
  }
  // A parameter without a master state is its own master.
  for (Param &param : registry.params()) {
    bool hasMaster = false;
    for (const State &state : states)
      hasMaster |= state.param == &param && state.name == "master";
    if (hasMaster || !param.spec.hasGrad)
      continue;
    readToHost(param.data, param.validNumel * dcrt::dtypeSize(param.spec.dtype),
               [&](const void *host) {
                 dcrt::convert(host, param.spec.dtype, param.master.data(),
                               DCRT_F32, param.validNumel);
               });
  }
}

AdamWConfig dcrun::compiledAdamWConfig(const CompiledOptimizer &compiled,
                                       const AdamWConfig &given) {
  AdamWConfig defaults, config = given;
  auto take = [&](const char *option, double &value, double defaultValue,
                  double compiledValue) {
    if (value != defaultValue && value != compiledValue)
      dcrt::fatal("%s %g, but the step was compiled with its optimizer "
                  "inside for %g: recompile it (dc-compile %s) or leave the "
                  "option out",
                  option, value, compiledValue, option);
    value = compiledValue;
  };
  take("--beta1", config.beta1, defaults.beta1, compiled.beta1);
  take("--beta2", config.beta2, defaults.beta2, compiled.beta2);
  take("--eps", config.eps, defaults.eps, compiled.eps);
  take("--weight-decay", config.weightDecay, defaults.weightDecay,
       compiled.weightDecay);
  take("--clip-grad-norm", config.maxGradNorm, defaults.maxGradNorm,
       compiled.maxGradNorm);
  auto takeDtype = [&](const char *option, dcrt_dtype &value,
                       dcrt_dtype compiledValue) {
    if (value != DCRT_F32 && value != compiledValue)
      dcrt::fatal("%s %s, but the step was compiled with its optimizer "
                  "inside for %s: recompile it (dc-compile %s) or leave the "
                  "option out",
                  option, dcrt::dtypeName(value),
                  dcrt::dtypeName(compiledValue), option);
    value = compiledValue;
  };
  takeDtype("--master-dtype", config.masterDtype, compiled.masterDtype);
  takeDtype("--moment-dtype", config.momentDtype, compiled.momentDtype);
  return config;
}

int64_t dcrun::compiledMicroBatches(const StepSpec &step, int64_t given) {
  if (!step.optimizer)
    return given;
  int64_t compiled = step.optimizer->microBatches;
  if (given != 1 && given != compiled)
    dcrt::fatal("--micro-batches %lld, but the step was compiled with its "
                "optimizer inside for %lld (its update uses their mean): "
                "recompile it (dc-compile --micro-batches %lld) or leave the "
                "option out",
                static_cast<long long>(given), static_cast<long long>(compiled),
                static_cast<long long>(given));
  return compiled;
}
