//===- AdamW.h - the fused AdamW kernel of dc-run's cuda optimizer --------===//
#ifndef DC_RUN_CUDA_ADAMW_H
#define DC_RUN_CUDA_ADAMW_H

#include <cuda_runtime.h>

#include <cstdint>

namespace dcrun::cuda {

struct AdamWStep {
  double lr, beta1, beta2, eps, weightDecay;
  int64_t step;           // counts from 1
  double gradScale = 1.0; // gradient clipping's factor
};

/// Blocks of the norm kernel at most: its workspace holds a partial sum
/// for each.
constexpr int64_t kNormBlocks = 1024;

/// Bytes of the workspace sumOfSquares needs: zero-filled once before the
/// first call, then reusable by every call on the same stream.
int64_t normWorkspaceBytes();

/// Writes the sum of squares of `numel` gradient elements (`gradType`) to
/// *sum (a device double), for the global gradient norm. The order of the
/// additions is fixed: the same gradients give the same bits.
cudaError_t sumOfSquares(const void *grad, int32_t gradType, int64_t numel,
                         double *sum, void *workspace, cudaStream_t stream);

/// One AdamW step over `numel` elements in one pass: reads the gradient
/// (`gradType`: f32, bf16 or f16), updates the master copy (`masterType`:
/// f32, or bf16 when the master is the bf16 parameter `data` itself) and
/// both moments (`momentType`: f32 or bf16) in place, and writes the
/// compute copy `data` (`dataType`) the artifact reads. The update is the
/// host AdamW's (torch.optim.AdamW: decoupled weight decay, bias-corrected
/// moments) computed in fp32, as PyTorch's fused AdamW does, with what is
/// kept rounded to the state's dtypes; the host computes in double, so
/// the two agree to a few fp32 roundings.
cudaError_t adamwStep(void *master, int32_t masterType, const void *grad,
                      int32_t gradType, void *expAvg, void *expAvgSq,
                      int32_t momentType, void *data, int32_t dataType,
                      int64_t numel, const AdamWStep &config,
                      cudaStream_t stream);

/// Gradient accumulation over micro-batches: sum[i] = g[i] (`overwrite`,
/// the first micro-batch) or sum[i] + g[i], in fp32, for `numel` gradient
/// elements of `gradType` (f32, bf16 or f16). The same fp32 additions as
/// the host's, so both backends sum to the same bits.
cudaError_t accumulateGradient(float *sum, const void *grad, int32_t gradType,
                               int64_t numel, bool overwrite,
                               cudaStream_t stream);

} // namespace dcrun::cuda

#endif // DC_RUN_CUDA_ADAMW_H
