//===- adamw.hpp - AdamW's arithmetic on the host ---------------*- C++ -*-===//
//
// One definition of the host AdamW's arithmetic, in double, for the two
// places that run it: dc-run's trainer (HostAdamW) and the host backend's
// dcrt_adamw (the update inside a compiled step). Both must give the same
// bits: a compiled step's update is checked against the trainer's.
//
//===----------------------------------------------------------------------===//
#ifndef DCRT_ADAMW_HPP
#define DCRT_ADAMW_HPP

#include "dcrt/dtype.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace dcrt {

/// What one step's update needs besides the element's own values.
struct AdamWStepConstants {
  double beta1, beta2, eps;
  double decay;       // 1 - lr * weight_decay
  double stepSize;    // lr / (1 - beta1^step)
  double correction2; // sqrt(1 - beta2^step)
};

/// `step` counts from 1.
inline AdamWStepConstants adamwStepConstants(double lr, double beta1,
                                             double beta2, double eps,
                                             double weightDecay, int64_t step) {
  double t = static_cast<double>(step);
  return {beta1,
          beta2,
          eps,
          1.0 - lr * weightDecay,
          lr / (1.0 - std::pow(beta1, t)),
          std::sqrt(1.0 - std::pow(beta2, t))};
}

/// The scale clipping applies: min(1, maxNorm / (norm + 1e-6)), 1 when
/// clipping is off (maxNorm 0), as torch.nn.utils.clip_grad_norm_.
inline double adamwClipScale(double globalNorm, double maxNorm) {
  if (maxNorm <= 0)
    return 1.0;
  return std::min(1.0, maxNorm / (globalNorm + 1e-6));
}

/// `value` as state of `dtype` keeps it (bf16: rounded to nearest even).
inline float roundToState(float value, int32_t dtype) {
  return dtype == DCRT_BF16 ? bf16ToFloat(floatToBF16(value)) : value;
}

/// One element's update: the gradient (already scaled by clipping and
/// rounded to fp32), the moments and the master, each rounded to the
/// dtype that keeps it. The step uses the moments as computed; what is
/// kept is rounded, as the device kernel does.
inline void adamwElement(const AdamWStepConstants &c, float grad, float &expAvg,
                         float &expAvgSq, float &master, int32_t momentDtype,
                         int32_t masterDtype) {
  // A bf16 master is the bf16 parameter: an fp32 value not on its grid (an
  // initial value, a loaded one) is what the parameter holds, rounded.
  master = roundToState(master, masterDtype);
  double g = grad;
  double m = c.beta1 * expAvg + (1.0 - c.beta1) * g;
  double v = c.beta2 * expAvgSq + (1.0 - c.beta2) * g * g;
  expAvg = roundToState(static_cast<float>(m), momentDtype);
  expAvgSq = roundToState(static_cast<float>(v), momentDtype);
  double denominator = std::sqrt(v) / c.correction2 + c.eps;
  master = roundToState(
      static_cast<float>(master * c.decay - c.stepSize * m / denominator),
      masterDtype);
}

} // namespace dcrt

#endif // DCRT_ADAMW_HPP
