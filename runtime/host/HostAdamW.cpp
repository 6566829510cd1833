//===- HostAdamW.cpp - dcrt_grad_squares and dcrt_adamw on the host -------===//
//
// The trainer's host AdamW (dcrt/adamw.hpp) over one rank's slot: the
// same double arithmetic, so a step that updates its own parameters gives
// the bits dc-run's trainer gives.
//
//===----------------------------------------------------------------------===//
#include "AdamW.h"

#include "dcrt/adamw.hpp"
#include "dcrt/dtype.hpp"
#include "dcrt/error.hpp"

#include <cmath>
#include <cstring>
#include <vector>

using namespace dcrt;
using namespace dcrt::detail;

void dcrt::detail::hostGradSquares(const dcrt_adamw_desc &desc,
                                   const AdamWSlot &slot, const void *grad,
                                   const double *squaresIn,
                                   double *squaresOut) {
  auto gradType = static_cast<int32_t>(desc.grad_dtype);
  double sum = 0;
  for (int64_t i = 0; i < slot.valid; ++i) {
    double g = loadAsDouble(grad, gradType, i);
    sum += g * g;
  }
  // Of the mean where the gradient is a sum over micro-batches: the sum's
  // squares over count^2, as the trainer scales them.
  if (desc.micro_batches > 1) {
    double scale = meanScale(desc);
    sum *= scale * scale;
  }
  // A replica adds 0, or NaN where it is not finite (0 * inf is NaN).
  double share = slot.counts ? sum : 0.0 * sum;
  *squaresOut = *squaresIn + share;
}

namespace {

/// `numel` elements of `dtype` from `src` to `dst` (skipped when they are
/// the same buffer).
void copyElements(void *dst, const void *src, int64_t numel, int32_t dtype) {
  if (dst != src && numel > 0)
    std::memmove(dst, src, static_cast<size_t>(numel * dtypeSize(dtype)));
}

} // namespace

void dcrt::detail::hostAdamW(const dcrt_adamw_desc &desc, const AdamWSlot &slot,
                             const void *param, const void *grad,
                             const void *master, const void *expAvg,
                             const void *expAvgSq, double lr, int64_t step,
                             double squares, void *paramOut, void *masterOut,
                             void *expAvgOut, void *expAvgSqOut) {
  auto paramType = static_cast<int32_t>(desc.param_dtype);
  auto gradType = static_cast<int32_t>(desc.grad_dtype);
  auto momentType = static_cast<int32_t>(desc.moment_dtype);
  bool separateMaster = desc.master_dtype == DCRT_F32;
  int64_t local = desc.local_numel;
  // Everything the update does not write keeps its value: all of it when
  // the update is skipped, the padding otherwise.
  copyElements(paramOut, param, local, paramType);
  copyElements(expAvgOut, expAvg, local, momentType);
  copyElements(expAvgSqOut, expAvgSq, local, momentType);
  if (separateMaster)
    copyElements(masterOut, master, local, DCRT_F32);
  if (!std::isfinite(squares) || slot.valid == 0)
    return;
  if (step < 1)
    fatal("dcrt_adamw: step %lld; steps count from 1",
          static_cast<long long>(step));
  AdamWStepConstants constants = adamwStepConstants(
      lr, desc.beta1, desc.beta2, desc.eps, desc.weight_decay, step);
  double scale = adamwClipScale(std::sqrt(squares), desc.max_grad_norm);
  if (desc.micro_batches > 1)
    scale *= meanScale(desc);
  // The master's dtype: the parameter's own when it is its own master.
  int32_t masterType = separateMaster ? DCRT_F32 : paramType;
  std::vector<float> g(slot.valid), m(slot.valid), v(slot.valid), w(slot.valid);
  convert(grad, gradType, g.data(), DCRT_F32, slot.valid);
  convert(expAvgOut, momentType, m.data(), DCRT_F32, slot.valid);
  convert(expAvgSqOut, momentType, v.data(), DCRT_F32, slot.valid);
  convert(separateMaster ? masterOut : paramOut, masterType, w.data(), DCRT_F32,
          slot.valid);
  for (int64_t i = 0; i < slot.valid; ++i) {
    // As the trainer scales its fp32 gradients before the update.
    float scaled = scale != 1.0 ? static_cast<float>(g[i] * scale) : g[i];
    adamwElement(constants, scaled, m[i], v[i], w[i], momentType, masterType);
  }
  convert(m.data(), DCRT_F32, expAvgOut, momentType, slot.valid);
  convert(v.data(), DCRT_F32, expAvgSqOut, momentType, slot.valid);
  if (separateMaster)
    convert(w.data(), DCRT_F32, masterOut, DCRT_F32, slot.valid);
  convert(w.data(), DCRT_F32, paramOut, paramType, slot.valid);
}

void dcrt::detail::hostGradAccumulate(const dcrt_adamw_desc &desc,
                                      const void *grad, const float *sumIn,
                                      float *sumOut) {
  auto gradType = static_cast<int32_t>(desc.grad_dtype);
  std::vector<float> g(static_cast<size_t>(desc.local_numel));
  convert(grad, gradType, g.data(), DCRT_F32, desc.local_numel);
  for (int64_t i = 0; i < desc.local_numel; ++i)
    sumOut[i] = sumIn[i] + g[i];
}
