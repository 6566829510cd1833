//===- Params.cpp - parameters, deterministic init and AdamW --------------===//
#include "Params.h"

#include "HostAccess.h"

#include "Random.h"

#include "dcrt/adamw.hpp"
#include "dcrt/dtype.hpp"
#include "dcrt/error.hpp"

#include <algorithm>
#include <cmath>
#include <thread>

using namespace dcrt;
using namespace dcrun;

int64_t dcrun::shardNumel(int64_t fullNumel, int64_t ranks) {
  return (fullNumel + ranks - 1) / ranks;
}

void dcrun::adamwUpdate(float *master, const float *grad, float *expAvg,
                        float *expAvgSq, int64_t numel,
                        const AdamWConfig &config, int64_t step) {
  if (step < 1)
    fatal("AdamW step %lld: steps count from 1", static_cast<long long>(step));
  dcrt::AdamWStepConstants constants =
      dcrt::adamwStepConstants(config.lr, config.beta1, config.beta2,
                               config.eps, config.weightDecay, step);
  for (int64_t i = 0; i < numel; ++i)
    dcrt::adamwElement(constants, grad[i], expAvg[i], expAvgSq[i], master[i],
                       config.momentDtype, config.masterDtype);
}

int64_t dcrun::stateBytesPerElement(const AdamWConfig &config) {
  // A bf16 master is the bf16 parameter itself.
  int64_t master = config.masterDtype == DCRT_F32 ? 4 : 0;
  return master + 2 * dtypeSize(config.momentDtype);
}

float dcrun::roundToStateDtype(float value, dcrt_dtype dtype) {
  return dcrt::roundToState(value, dtype);
}

static bool endsWith(const std::string &text, const char *suffix) {
  std::string_view tail(suffix);
  return text.size() >= tail.size() &&
         text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

float dcrun::initialValue(const InitOptions &options, const ParamSpec &spec,
                          int64_t index) {
  if (endsWith(spec.name, "bias"))
    return 0.0f;
  if (spec.shape.size() == 1 && spec.name.find("norm") != std::string::npos)
    return 1.0f;
  return static_cast<float>(
      options.std * standardNormal(options.seed, static_cast<uint64_t>(spec.id),
                                   static_cast<uint64_t>(index)));
}

ParamRegistry::ParamRegistry(int32_t rank, int32_t worldSize,
                             std::vector<int64_t> gridShape)
    : rank_(rank), worldSize_(worldSize), gridShape_(std::move(gridShape)) {
  if (worldSize < 1 || rank < 0 || rank >= worldSize)
    fatal("ParamRegistry: rank %d of %d", rank, worldSize);
  if (gridShape_.empty())
    gridShape_ = {worldSize};
  int64_t ranks = 1;
  for (int64_t size : gridShape_)
    ranks *= size;
  if (ranks != worldSize)
    fatal("ParamRegistry: a grid of %lld ranks for a world of %d",
          static_cast<long long>(ranks), worldSize);
}

/// The stride of `axis` in the row-major rank numbering of `grid`.
static int64_t strideOf(const std::vector<int64_t> &grid, int64_t axis) {
  int64_t stride = 1;
  for (size_t a = axis + 1; a < grid.size(); ++a)
    stride *= grid[a];
  return stride;
}

int32_t ParamRegistry::ownerOfSlot(const Param &param, int64_t index) const {
  if (!param.spec.sharded)
    return 0;
  int64_t rank = 0;
  // The last shard axis varies fastest, as in shardIndex.
  for (auto axis = param.spec.shardAxes.rbegin();
       axis != param.spec.shardAxes.rend(); ++axis) {
    rank += index % gridShape_[*axis] * strideOf(gridShape_, *axis);
    index /= gridShape_[*axis];
  }
  return static_cast<int32_t>(rank);
}

Param &ParamRegistry::add(ParamSpec spec) {
  for (const Param &other : params_) {
    if (other.spec.id == spec.id)
      fatal("parameter id %d appears twice ('%s' and '%s')", spec.id,
            other.spec.name.c_str(), spec.name.c_str());
    if (other.spec.name == spec.name)
      fatal("parameter name '%s' appears twice (ids %d and %d)",
            spec.name.c_str(), other.spec.id, spec.id);
  }
  if (!isFloatDType(spec.dtype) || !isFloatDType(spec.gradDtype))
    fatal("parameter '%s' is %s with %s gradients; parameters are trained "
          "in floating point",
          spec.name.c_str(), dtypeName(spec.dtype), dtypeName(spec.gradDtype));
  Param &param = params_.emplace_back();
  param.fullNumel = 1;
  for (int64_t dim : spec.shape) {
    if (dim < 0)
      fatal("parameter '%s' has a negative dimension", spec.name.c_str());
    param.fullNumel *= dim;
  }
  if (spec.sharded) {
    if (spec.shardAxes.empty())
      for (size_t axis = 0; axis < gridShape_.size(); ++axis)
        spec.shardAxes.push_back(static_cast<int64_t>(axis));
    for (size_t i = 0; i < spec.shardAxes.size(); ++i)
      if (spec.shardAxes[i] < 0 ||
          spec.shardAxes[i] >= int64_t(gridShape_.size()) ||
          std::count(spec.shardAxes.begin(), spec.shardAxes.begin() + i,
                     spec.shardAxes[i]))
        fatal("parameter '%s': shard axes are not distinct axes of the "
              "%zu-axis grid",
              spec.name.c_str(), gridShape_.size());
    // The slot is the rank's index over the shard axes in their order (the
    // first varying slowest); it owns the slot where its coordinates on
    // the other axes are 0.
    auto coordinateOn = [&](int64_t axis) {
      return rank_ / strideOf(gridShape_, axis) % gridShape_[axis];
    };
    for (int64_t axis : spec.shardAxes) {
      param.shardIndex =
          param.shardIndex * gridShape_[axis] + coordinateOn(axis);
      param.shardRanks *= gridShape_[axis];
    }
    for (size_t axis = 0; axis < gridShape_.size(); ++axis) {
      bool sharded =
          std::find(spec.shardAxes.begin(), spec.shardAxes.end(),
                    static_cast<int64_t>(axis)) != spec.shardAxes.end();
      if (!sharded && coordinateOn(axis) != 0)
        param.owner = false;
    }
    param.localNumel = shardNumel(param.fullNumel, param.shardRanks);
    param.offset = param.shardIndex * param.localNumel;
    param.validNumel = std::clamp<int64_t>(param.fullNumel - param.offset, 0,
                                           param.localNumel);
  } else {
    param.localNumel = param.validNumel = param.fullNumel;
    param.owner = rank_ == 0;
  }
  const char *name = spec.name.c_str();
  // A parameter the step keeps in host memory gets memory its uploads copy
  // from at full bandwidth (pinned on a device backend); its gradient, a
  // reduce-scatter's output, is device memory like any other.
  param.data =
      Buffer(param.localNumel * dtypeSize(spec.dtype),
             spec.onHost ? MemoryKind::Host : MemoryKind::Device, name);
  if (!spec.updatedByStep)
    param.grad = Buffer(param.localNumel * dtypeSize(spec.gradDtype),
                        MemoryKind::Device, name);
  param.master.assign(param.validNumel, 0.0f);
  param.expAvg.assign(param.validNumel, 0.0f);
  param.expAvgSq.assign(param.validNumel, 0.0f);
  param.spec = std::move(spec);
  return param;
}

Param *ParamRegistry::find(int32_t id) {
  for (Param &param : params_)
    if (param.spec.id == id)
      return &param;
  return nullptr;
}

void ParamRegistry::initialize(const InitOptions &options) {
  // Each value is a function of (seed, parameter, index) alone, so threads
  // fill disjoint ranges and the result does not depend on their number.
  // One thread took over a minute for config B's 1.9e9 elements.
  const int64_t workers =
      std::max<int64_t>(1, std::thread::hardware_concurrency());
  constexpr int64_t kMinChunk = int64_t(1) << 18;
  for (Param &param : params_) {
    int64_t numel = param.validNumel;
    int64_t chunk = std::max(kMinChunk, (numel + workers - 1) / workers);
    auto fill = [&](int64_t begin) {
      int64_t end = std::min(numel, begin + chunk);
      for (int64_t i = begin; i < end; ++i)
        param.master[i] = initialValue(options, param.spec, param.offset + i);
    };
    std::vector<std::thread> threads;
    for (int64_t begin = chunk; begin < numel; begin += chunk)
      threads.emplace_back(fill, begin);
    fill(0);
    for (std::thread &thread : threads)
      thread.join();
    std::fill(param.expAvg.begin(), param.expAvg.end(), 0.0f);
    std::fill(param.expAvgSq.begin(), param.expAvgSq.end(), 0.0f);
  }
  refreshData();
}

void ParamRegistry::refreshData() {
  for (Param &param : params_)
    param.refreshData();
}

void Param::refreshData() {
  writeFromHost(data, validNumel * dtypeSize(spec.dtype), [&](void *host) {
    convert(master.data(), DCRT_F32, host, spec.dtype, validNumel);
  });
}

double dcrun::clipScale(double globalNorm, double maxNorm) {
  return dcrt::adamwClipScale(globalNorm, maxNorm);
}

double dcrun::shareOfSquaredNorm(const Param &param, double sumOfSquares) {
  // 0 for a replica, but a non-finite one still shows (0 * inf is NaN):
  // replicas that diverged must not hide a NaN.
  return param.owner ? sumOfSquares : 0.0 * sumOfSquares;
}

void HostAdamW::readGradients(ParamRegistry &registry) {
  gradients.clear();
  for (Param &param : registry.params()) {
    std::vector<float> &gradient = gradients.emplace_back();
    if (!param.spec.hasGrad)
      continue;
    gradient.resize(param.validNumel);
    readToHost(param.grad, param.validNumel * dtypeSize(param.spec.gradDtype),
               [&](const void *host) {
                 convert(host, param.spec.gradDtype, gradient.data(), DCRT_F32,
                         param.validNumel);
               });
  }
}

void HostAdamW::accumulate(ParamRegistry &registry, int64_t index,
                           int64_t count) {
  if (index < 0 || index >= count)
    fatal("micro-batch %lld of %lld", static_cast<long long>(index),
          static_cast<long long>(count));
  if (index == 0) {
    gradients.clear();
    for (Param &param : registry.params())
      gradients.emplace_back(param.spec.hasGrad ? param.validNumel : 0, 0.0f);
  }
  bool last = index == count - 1;
  size_t i = 0;
  std::vector<float> shard;
  for (Param &param : registry.params()) {
    std::vector<float> &sum = gradients.at(i++);
    if (!param.spec.hasGrad || (param.spec.stepAccumulates && !last))
      continue;
    shard.resize(param.validNumel);
    readToHost(param.grad, param.validNumel * dtypeSize(param.spec.gradDtype),
               [&](const void *host) {
                 convert(host, param.spec.gradDtype, shard.data(), DCRT_F32,
                         param.validNumel);
               });
    for (int64_t k = 0; k < param.validNumel; ++k)
      sum[k] += shard[k];
  }
  meanScale = last ? 1.0 / static_cast<double>(count) : 0.0;
}

double HostAdamW::gradientSquares(ParamRegistry &registry) {
  if (meanScale == 0)
    readGradients(registry);
  // Of the mean: the sums' squares over count^2.
  double scale2 = meanScale == 0 ? 1.0 : meanScale * meanScale;
  double squares = 0;
  size_t i = 0;
  for (Param &param : registry.params()) {
    const std::vector<float> &gradient = gradients.at(i++);
    if (!param.spec.hasGrad)
      continue;
    double sum = 0;
    for (float g : gradient)
      sum += double(g) * g;
    squares += shareOfSquaredNorm(param, sum * scale2);
  }
  return squares;
}

void HostAdamW::step(ParamRegistry &registry, const AdamWConfig &config,
                     int64_t step, double gradScale) {
  // The gradients gradientSquares read (or the sums accumulate made), or
  // read now.
  if (gradients.size() != registry.params().size())
    readGradients(registry);
  if (meanScale != 0)
    gradScale *= meanScale;
  size_t i = 0;
  for (Param &param : registry.params()) {
    std::vector<float> &gradient = gradients[i++];
    if (!param.spec.hasGrad)
      continue;
    if (gradScale != 1.0)
      for (float &g : gradient)
        g = static_cast<float>(g * gradScale);
    adamwUpdate(param.master.data(), gradient.data(), param.expAvg.data(),
                param.expAvgSq.data(), param.validNumel, config, step);
    param.refreshData();
  }
  gradients.clear(); // the next step reads (or sums) its own
  meanScale = 0;
}

std::unique_ptr<Optimizer> dcrun::createAdamW(const AdamWConfig &config) {
  if (!dcrt::deviceIsHost())
    if (std::unique_ptr<Optimizer> device = createDeviceAdamW(config))
      return device;
  return std::make_unique<HostAdamW>();
}
