//===- AdamW.cpp - the optimizer calls' checks and this rank's slot -------===//
#include "AdamW.h"

#include "Backend.h"
#include "Descriptor.h"
#include "Job.h"

#include "dcrt/dtype.hpp"
#include "dcrt/error.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

using namespace dcrt;
using namespace dcrt::detail;

namespace {

long long ll(int64_t value) { return static_cast<long long>(value); }

/// A dtype field for a message: -1 is the master's "none".
const char *nameOf(int64_t dtype) {
  return dtype == -1 ? "none" : descriptorDTypeName(dtype);
}

bool isTensorFloat(int64_t dtype) {
  return dtype == DCRT_F32 || dtype == DCRT_BF16 || dtype == DCRT_F16;
}

bool isStateFloat(int64_t dtype) {
  return dtype == DCRT_F32 || dtype == DCRT_BF16;
}

} // namespace

std::string dcrt::detail::describeAdamW(const dcrt_adamw_desc &d) {
  char text[512];
  std::snprintf(text, sizeof(text),
                "full_numel %lld, local_numel %lld, shard_axis %lld, param "
                "%s, grad %s, master %s, moments %s, beta1 %g, beta2 %g, eps "
                "%g, weight_decay %g, max_grad_norm %g, distinct_axes %#llx, "
                "micro_batches %lld, struct_size %lld",
                ll(d.full_numel), ll(d.local_numel), ll(d.shard_axis),
                nameOf(d.param_dtype), nameOf(d.grad_dtype),
                nameOf(d.master_dtype), nameOf(d.moment_dtype), d.beta1,
                d.beta2, d.eps, d.weight_decay, d.max_grad_norm,
                ll(d.distinct_axes), ll(d.micro_batches), ll(d.struct_size));
  return text;
}

dcrt_adamw_desc dcrt::detail::checkAdamW(const dcrt_adamw_desc *desc,
                                         const Job &job, AdamWSlot &slot,
                                         const char *caller) {
  dcrt_adamw_desc d = readDescriptor(desc, kAdamWDescV1Size, caller);
  auto bad = [&](const char *why) {
    fatal("%s: %s (%s)", caller, why, describeAdamW(d).c_str());
  };
  if (!isTensorFloat(d.param_dtype) || !isTensorFloat(d.grad_dtype))
    bad("the parameter and its gradient must be f32, bf16 or f16");
  if (!isStateFloat(d.moment_dtype))
    bad("the moments must be f32 or bf16");
  if (d.master_dtype != -1 && d.master_dtype != DCRT_F32)
    bad("a separate master copy must be f32");
  // Without a separate master the parameter holds the master: it must be
  // as precise as the state it is updated with.
  if (d.master_dtype == -1 && d.param_dtype == DCRT_F16)
    bad("an f16 parameter needs an f32 master copy");
  if (d.full_numel < 0 || d.local_numel < 0)
    bad("negative element counts");
  if (!(d.beta1 >= 0 && d.beta1 < 1) || !(d.beta2 >= 0 && d.beta2 < 1) ||
      !(d.eps >= 0) || !std::isfinite(d.weight_decay) ||
      !(d.max_grad_norm >= 0) || !std::isfinite(d.max_grad_norm))
    bad("betas must lie in [0, 1), eps and max_grad_norm be >= 0 and finite");
  if (d.micro_batches < 0)
    bad("micro_batches must be >= 0");
  int axes = static_cast<int>(job.gridShape().size());
  if (d.distinct_axes < 0 || (axes < 63 && d.distinct_axes >> axes != 0))
    bad("distinct_axes names an axis the grid does not have");
  auto distinct = [&](int axis) { return (d.distinct_axes >> axis) & 1; };
  slot = {};
  // The ranks that differ from this one only on axes that neither split
  // the parameter nor hold different blocks of it hold the same slot: the
  // one at coordinate 0 on each of them counts it.
  auto countsOnce = [&](int splitAxis) {
    for (int axis = 0; axis < axes; ++axis)
      if (axis != splitAxis && !distinct(axis) && job.coordinate(axis) != 0)
        return false;
    return true;
  };
  if (d.shard_axis == DCRT_NOT_SHARDED) {
    if (d.local_numel != d.full_numel)
      bad("a parameter that is not sharded has local_numel == full_numel");
    slot.valid = d.full_numel;
    slot.counts = countsOnce(-1);
    return d;
  }
  int group = job.groupOf(static_cast<int32_t>(d.shard_axis));
  if (group < 0 || d.shard_axis < DCRT_ALL_AXES)
    bad("shard_axis names no axis of the grid");
  if (group < axes && distinct(group))
    bad("distinct_axes holds the axis the parameter is split over");
  if (group == axes && d.distinct_axes != 0)
    bad("a parameter split over every axis has no distinct_axes");
  int64_t ranks = job.axisSize(group);
  checkShard(d.local_numel, d.full_numel, static_cast<int32_t>(ranks), caller,
             0);
  slot.valid = validInSlot(d.full_numel, d.local_numel, job.coordinate(group));
  slot.counts = group == axes || countsOnce(group);
  return d;
}

double dcrt::detail::meanScale(const dcrt_adamw_desc &desc) {
  return desc.micro_batches > 1 ? 1.0 / static_cast<double>(desc.micro_batches)
                                : 1.0;
}
