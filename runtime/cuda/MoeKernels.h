//===- MoeKernels.h - the cuda backend's mixture-of-experts kernels -------===//
//
// The device side of dcrt_topk, dcrt_group_by_expert, dcrt_gather_rows,
// dcrt_scatter_add_rows, dcrt_grouped_matmul and dcrt_grouped_weight_grad
// (MoeKernels.cu). Every launch's configuration comes from the descriptor
// alone (the worst case over routings); the routing is read on the device
// only. Each call enqueues on `stream` and returns the first launch error.
// Workspaces are the caller's (CudaMoe.cpp keeps one per descriptor):
// device memory of the size the matching *Layout / *Plan function says,
// allocated before the first call; the group-by workspace's first 4 bytes
// must be zero then (its kernels leave them zero again).
//
//===----------------------------------------------------------------------===//
#ifndef DCRT_CUDA_MOEKERNELS_H
#define DCRT_CUDA_MOEKERNELS_H

#include "dcrt/dcrt.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace dcrt::cuda::moe {

cudaError_t topk(const dcrt_topk_desc &desc, const void *scores, void *values,
                 void *indices, cudaStream_t stream);

/// The counting sort's chunks: `chunks` blocks of `tilesPerChunk` tiles of
/// 256 assignments, (experts + 1) x chunks counts in the workspace.
struct GroupByExpertLayout {
  int64_t chunks = 0, tilesPerChunk = 0, workspaceBytes = 0;
};
GroupByExpertLayout groupByExpertLayout(const dcrt_group_by_expert_desc &desc);
/// The largest `experts` groupByExpert takes (its shared memory).
constexpr int64_t kMaxGroupExperts = 1024;
cudaError_t groupByExpert(const dcrt_group_by_expert_desc &desc,
                          const GroupByExpertLayout &layout, void *workspace,
                          const void *ids, void *order, void *ends,
                          cudaStream_t stream);

cudaError_t gatherRows(const dcrt_row_map_desc &desc, const void *source,
                       const void *index, void *result, cudaStream_t stream);

/// The scatter's workspace: each result row's count of sources and up to
/// 16 of them.
int64_t scatterAddWorkspaceBytes(const dcrt_row_map_desc &desc);
cudaError_t scatterAddRows(const dcrt_row_map_desc &desc, void *workspace,
                           const void *source, const void *index, void *result,
                           cudaStream_t stream);

/// How a grouped product runs. `slices` (weight gradient only) splits each
/// expert's rows into that many parts whose f32 partial sums (in the
/// workspace) are added in order; chosen from the descriptor and the SM
/// count only.
struct GroupedPlan {
  int64_t slices = 1;
  int64_t workspaceBytes = 0;
};
GroupedPlan planGrouped(const dcrt_grouped_matmul_desc &desc, bool weightGrad,
                        int multiprocessors);
/// Whether a tensor-core kernel takes `desc` with these pointers (bf16 or
/// f16, 16-byte aligned rows); else the CUDA-core kernel runs.
bool groupedUsesTensorCores(const dcrt_grouped_matmul_desc &desc,
                            bool weightGrad, const void *lhs, const void *rhs,
                            const void *out);
/// The kernels a grouped product may run on: with tensorCores false the
/// CUDA-core kernel whatever the shape (DCRT_MOE_SIMT=1); else, where
/// groupedUsesTensorCores, Hopper's wgmma kernels (sm_90a: an sm_90 GPU
/// only) when `wgmma`, or the mma.sync one. With wgmma, both products run
/// on the TMA kernel (MoeWgmmaTma.cu, one persistent block per SM of the
/// `multiprocessors`) when `tma` and tensor maps describe their operands,
/// else on the cp.async one (MoeWgmma.cu).
struct GroupedKernels {
  bool tensorCores = true;
  bool wgmma = false;
  bool tma = false;
  int multiprocessors = 0;
};
cudaError_t groupedMatmul(const dcrt_grouped_matmul_desc &desc,
                          const GroupedPlan &plan, void *workspace,
                          const GroupedKernels &kernels, const void *lhs,
                          const void *rhs, const void *ends, void *out,
                          cudaStream_t stream);
cudaError_t groupedWeightGrad(const dcrt_grouped_matmul_desc &desc,
                              const GroupedPlan &plan, void *workspace,
                              const GroupedKernels &kernels, const void *lhs,
                              const void *rhs, const void *ends, void *out,
                              cudaStream_t stream);

} // namespace dcrt::cuda::moe

#endif // DCRT_CUDA_MOEKERNELS_H
