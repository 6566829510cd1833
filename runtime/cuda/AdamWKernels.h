//===- AdamWKernels.h - the cuda backend's optimizer kernels --------------===//
//
// The device side of dcrt_grad_squares and dcrt_adamw (AdamWKernels.cu).
// The learning rate, the step and the squared norm are read on the device
// when the kernels run, so that a captured step replays with new values.
// Each call enqueues on `stream` and returns the first launch error.
//
//===----------------------------------------------------------------------===//
#ifndef DCRT_CUDA_ADAMWKERNELS_H
#define DCRT_CUDA_ADAMWKERNELS_H

#include "dcrt/dcrt.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace dcrt::cuda::adamw {

/// Bytes of the workspace gradSquares needs: zero-filled once before the
/// first call, then reusable by every call on the same stream.
int64_t squaresWorkspaceBytes();

/// *out = *in + (counts ? s : 0 * s), s the sum of squares of the first
/// `valid` gradient elements in double, added in a fixed order (the same
/// gradients give the same bits), times 1 / micro_batches^2 where the
/// gradient is a sum over micro-batches.
cudaError_t gradSquares(const dcrt_adamw_desc &desc, int64_t valid, bool counts,
                        const void *grad, const double *in, double *out,
                        void *workspace, cudaStream_t stream);

/// The update of the first `valid` elements of the *_out buffers, which
/// hold the inputs' values already (the caller copies them). In fp32 like
/// PyTorch's fused AdamW, the step's constants computed in double from
/// *lr, *step and *squares as the host does (the gradient scaled by
/// clipping and by 1 / micro_batches); skipped when *squares is not
/// finite.
cudaError_t update(const dcrt_adamw_desc &desc, int64_t valid, const void *grad,
                   const double *lr, const int64_t *step, const double *squares,
                   void *param, void *master, void *expAvg, void *expAvgSq,
                   cudaStream_t stream);

/// sumOut = sumIn + grad (converted to fp32) over desc.local_numel
/// elements.
cudaError_t accumulate(const dcrt_adamw_desc &desc, const void *grad,
                       const float *sumIn, float *sumOut, cudaStream_t stream);

} // namespace dcrt::cuda::adamw

#endif // DCRT_CUDA_ADAMWKERNELS_H
