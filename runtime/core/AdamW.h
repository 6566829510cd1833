//===- AdamW.h - the optimizer calls: checks, this rank's slot, host loops ===//
//
// What every backend shares about dcrt_grad_squares and dcrt_adamw
// (dcrt.h): the descriptor check core/Runtime.cpp runs before forwarding,
// which of the buffers' elements are this rank's and whether it counts
// them in the norm, and the host backend's loops (host/HostAdamW.cpp),
// declared here so that unit tests call them without a job.
//
//===----------------------------------------------------------------------===//
#ifndef DCRT_CORE_ADAMW_H
#define DCRT_CORE_ADAMW_H

#include "dcrt/dcrt.h"

#include <cstdint>
#include <string>

namespace dcrt::detail {

class Job;

/// The struct_size of the descriptor's first version (without
/// distinct_axes and micro_batches, read as 0).
constexpr int64_t kAdamWDescV1Size = 104;

/// This rank's part of a parameter: its first `valid` elements are real
/// (the rest of local_numel is padding), and `counts` says whether this
/// rank counts them in the global norm (one rank of those holding the
/// slot).
struct AdamWSlot {
  int64_t valid = 0;
  bool counts = true;
};

/// Every field, for error messages.
std::string describeAdamW(const dcrt_adamw_desc &desc);

/// Fatal (naming `caller` and the descriptor) unless the descriptor is
/// one dcrt_adamw runs: known dtypes (the parameter and gradient f32,
/// bf16 or f16; moments f32 or bf16; a master f32, and none only where the
/// parameter keeps the state's precision), local_numel the slot of
/// full_numel over the axis' ranks (or full_numel when not sharded),
/// betas in [0, 1), eps and the norm >= 0. Returns the descriptor read
/// (struct_size bytes of it) and sets `slot` for this rank of `job`.
dcrt_adamw_desc checkAdamW(const dcrt_adamw_desc *desc, const Job &job,
                           AdamWSlot &slot, const char *caller);

/// What the summed gradient is multiplied by to be the mean: 1 /
/// micro_batches, 1 without accumulation.
double meanScale(const dcrt_adamw_desc &desc);

/// The host loops (dcrt.h's semantics; `slot` as checkAdamW set it).
void hostGradSquares(const dcrt_adamw_desc &desc, const AdamWSlot &slot,
                     const void *grad, const double *squaresIn,
                     double *squaresOut);
void hostAdamW(const dcrt_adamw_desc &desc, const AdamWSlot &slot,
               const void *param, const void *grad, const void *master,
               const void *expAvg, const void *expAvgSq, double lr,
               int64_t step, double squares, void *paramOut, void *masterOut,
               void *expAvgOut, void *expAvgSqOut);
void hostGradAccumulate(const dcrt_adamw_desc &desc, const void *grad,
                        const float *sumIn, float *sumOut);

} // namespace dcrt::detail

#endif // DCRT_CORE_ADAMW_H
