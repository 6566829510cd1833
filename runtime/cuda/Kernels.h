//===- Kernels.h - the cuda backend's own device kernels ------------------===//
//
// The small kernels collectives need around NCCL: dtype conversion (fp32
// master shards to bf16 before a gather, gradients to fp32 before a
// reduce-scatter and back), packing gradients into a bucket's padded slots;
// and dcrt_check_finite's count of NaNs and infinities. Each enqueues on
// `stream` and returns the launch's error code.
//
//===----------------------------------------------------------------------===//
#ifndef DCRT_CUDA_KERNELS_H
#define DCRT_CUDA_KERNELS_H

#include <cuda_runtime.h>

#include <cstdint>

namespace dcrt::cuda {

/// dst[i] = (dstType) src[i] for i < numel; float types among f32, bf16,
/// f16, or integer types among i32, i64 (same type: a copy).
cudaError_t convert(const void *src, int32_t srcType, void *dst,
                    int32_t dstType, int64_t numel, cudaStream_t stream);

/// Packs a gradient of `fullNumel` elements into its slots of a bucket in
/// fp32: for each rank r of `world`, elements [r*local, (r+1)*local) go to
/// bucket[r*block + segment ...], converted, the padding past fullNumel
/// zeroed.
cudaError_t packSlots(const void *grad, int32_t gradType, int64_t fullNumel,
                      int64_t localNumel, int64_t world, int64_t block,
                      int64_t segment, float *bucket, cudaStream_t stream);

/// What dcrt_check_finite's kernels found in a step, in device memory:
/// `first` is the sequence number of the step's first check that found a
/// non-finite value (noneFound: none yet), `nans` and `infinities` that
/// output's counts, `site` that check's site (a host address, stored as
/// the check was launched with it).
struct FiniteRecord {
  static constexpr unsigned noneFound = 0xffffffffu;
  unsigned first;
  unsigned padding;
  unsigned long long nans;
  unsigned long long infinities;
  const char *site;
};

/// Check `sequence` of the step: counts the NaNs and (unless allowInf) the
/// infinities of `numel` elements of `dtype` (f32, bf16 or f16) at `data`
/// and, if there are any, records them with `site` in `record`, unless a
/// check with a lower number did first. The checks of a step run in their
/// order on one stream, so one that finds the record taken by an earlier
/// one returns at once.
cudaError_t checkFinite(const void *data, int32_t dtype, int64_t numel,
                        bool allowInf, unsigned sequence, const char *site,
                        FiniteRecord *record, cudaStream_t stream);

} // namespace dcrt::cuda

#endif // DCRT_CUDA_KERNELS_H
