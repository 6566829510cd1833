//===- CudaMoe.cpp - the cuda backend's mixture-of-experts calls ----------===//
//
// dcrt_topk, dcrt_group_by_expert, dcrt_gather_rows, dcrt_scatter_add_rows,
// dcrt_grouped_matmul and dcrt_grouped_weight_grad on the compute stream,
// with the kernels of MoeKernels.cu. The host never reads the routing: a
// launch's configuration comes from the descriptor, so that a captured step
// replays them as they are.
//
// Workspaces (device memory, counted in MemoryStats::moeWorkspace): the
// group-by counts and ticket per (assignments, experts), the scatter's
// per-row source lists per table_rows, and the sliced weight gradient's
// f32 partial sums per (rows, experts, k, p). Each is allocated by the
// first call that needs it (zeroed on the compute stream) and kept until
// dcrt_finalize: graphs captured later hold its address. Calls with the
// same sizes share one; they run one after the other on the compute stream.
// As with matmul plans, make each descriptor's first call outside a CUDA
// graph capture.
//
// The grouped products' tensor-core kernels are the wgmma ones on sm_90
// GPUs (H100, H200: fed by TMA, MoeWgmmaTma.cu), else the mma.sync one.
// DCRT_MOE_TMA=0 in the environment runs both products on the cp.async
// wgmma kernel (MoeWgmma.cu), DCRT_MOE_WGMMA=0 picks the mma.sync kernel on
// sm_90, DCRT_MOE_SIMT=1 the CUDA-core kernel for every shape: fallbacks
// should a tensor-core kernel misbehave on some GPU, and references for
// them. DCRT_MOE_TMA is read at each call (the others once), so that
// moe-kernels-check times both wgmma kernels in one process.
//
//===----------------------------------------------------------------------===//
#include "CudaBackend.h"

#include "CudaCheck.h"
#include "Moe.h"
#include "MoeKernels.h"

#include "dcrt/error.hpp"

#include <climits>
#include <cstdlib>
#include <cstring>

using namespace dcrt;
using namespace dcrt::detail;
namespace moe = dcrt::cuda::moe;

struct dcrt::detail::MoeWorkspaces {
  struct Memory {
    void *pointer = nullptr;
    int64_t bytes = 0;
  };
  std::unordered_map<PlanKey<2>, std::pair<moe::GroupByExpertLayout, Memory>,
                     PlanKeyHash>
      groups;
  std::unordered_map<PlanKey<1>, Memory, PlanKeyHash> scatters;
  std::unordered_map<PlanKey<4>, std::pair<moe::GroupedPlan, Memory>,
                     PlanKeyHash>
      gradients;
  int64_t bytes = 0, allocations = 0;
  int multiprocessors = 0;
  moe::GroupedKernels kernels;
};

void MoeWorkspacesDeleter::operator()(MoeWorkspaces *workspaces) const {
  delete workspaces;
}

namespace {

/// A failed launch ends the job naming the call and its descriptor.
void checkLaunch(cudaError_t status, const char *caller,
                 const std::string &what) {
  if (status != cudaSuccess)
    fatal("%s: launching its kernels failed: %s (%s)", caller,
          cuda::describeCudaError(status).c_str(), what.c_str());
}

} // namespace

MoeWorkspaces &CudaBackend::moeWorkspaces() {
  if (!moeState) {
    moeState.reset(new MoeWorkspaces);
    DCRT_CUDA_CHECK(cudaDeviceGetAttribute(
        &moeState->multiprocessors, cudaDevAttrMultiProcessorCount, device));
    // wgmma runs on sm_90 alone (its kernel is compiled for sm_90a).
    int major = 0, minor = 0;
    DCRT_CUDA_CHECK(cudaDeviceGetAttribute(
        &major, cudaDevAttrComputeCapabilityMajor, device));
    DCRT_CUDA_CHECK(cudaDeviceGetAttribute(
        &minor, cudaDevAttrComputeCapabilityMinor, device));
    const char *simt = std::getenv("DCRT_MOE_SIMT");
    const char *wgmma = std::getenv("DCRT_MOE_WGMMA");
    moeState->kernels.tensorCores = !(simt && std::strcmp(simt, "1") == 0);
    moeState->kernels.wgmma =
        major == 9 && minor == 0 && !(wgmma && std::strcmp(wgmma, "0") == 0);
    moeState->kernels.multiprocessors = moeState->multiprocessors;
  }
  return *moeState;
}

void *CudaBackend::moeAllocate(int64_t bytes, const char *caller,
                               const std::string &what) {
  void *pointer = nullptr;
  cudaError_t status = cudaMalloc(&pointer, static_cast<size_t>(bytes));
  if (status != cudaSuccess)
    fatal("%s: out of device memory: %lld bytes of workspace for %s: %s",
          caller, static_cast<long long>(bytes), what.c_str(),
          cuda::describeCudaError(status).c_str());
  // On the compute stream, before any kernel that reads it.
  DCRT_CUDA_CHECK(
      cudaMemsetAsync(pointer, 0, static_cast<size_t>(bytes), compute));
  MoeWorkspaces &w = moeWorkspaces();
  w.bytes += bytes;
  ++w.allocations;
  return pointer;
}

void CudaBackend::tearDownMoe() {
  if (!moeState)
    return;
  for (auto &[key, entry] : moeState->groups)
    cudaFree(entry.second.pointer);
  for (auto &[key, memory] : moeState->scatters)
    cudaFree(memory.pointer);
  for (auto &[key, entry] : moeState->gradients)
    cudaFree(entry.second.pointer);
  moeState.reset();
}

PoolStats CudaBackend::moeStats() const {
  PoolStats stats;
  if (moeState) {
    stats.live = stats.highWater = stats.reserved = moeState->bytes;
    stats.systemAllocations = moeState->allocations;
  }
  return stats;
}

void CudaBackend::topk(const dcrt_topk_desc &d, const void *scores,
                       void *values, void *indices) {
  checkLaunch(moe::topk(d, scores, values, indices, compute), "dcrt_topk",
              describeTopk(d));
}

void CudaBackend::groupByExpert(const dcrt_group_by_expert_desc &d,
                                const void *ids, void *order, void *ends) {
  const char *caller = "dcrt_group_by_expert";
  if (d.experts > moe::kMaxGroupExperts || d.assignments > INT_MAX)
    fatal("%s: the cuda backend sorts at most %lld experts and %d "
          "assignments (%s)",
          caller, static_cast<long long>(moe::kMaxGroupExperts), INT_MAX,
          describeGroupByExpert(d).c_str());
  MoeWorkspaces &w = moeWorkspaces();
  PlanKey<2> key{{d.assignments, d.experts}};
  auto entry = w.groups.find(key);
  if (entry == w.groups.end()) {
    moe::GroupByExpertLayout layout = moe::groupByExpertLayout(d);
    MoeWorkspaces::Memory memory{
        moeAllocate(layout.workspaceBytes, caller, describeGroupByExpert(d)),
        layout.workspaceBytes};
    entry = w.groups.emplace(key, std::make_pair(layout, memory)).first;
  }
  checkLaunch(moe::groupByExpert(d, entry->second.first,
                                 entry->second.second.pointer, ids, order, ends,
                                 compute),
              caller, describeGroupByExpert(d));
}

void CudaBackend::gatherRows(const dcrt_row_map_desc &d, const void *source,
                             const void *index, void *result) {
  checkLaunch(moe::gatherRows(d, source, index, result, compute),
              "dcrt_gather_rows", describeRowMap(d));
}

void CudaBackend::scatterAddRows(const dcrt_row_map_desc &d, const void *source,
                                 const void *index, void *result) {
  const char *caller = "dcrt_scatter_add_rows";
  if (d.indexed_rows > INT_MAX)
    fatal("%s: the cuda backend takes at most 2^31 - 1 source rows (%s)",
          caller, describeRowMap(d).c_str());
  MoeWorkspaces &w = moeWorkspaces();
  PlanKey<1> key{{d.table_rows}};
  auto entry = w.scatters.find(key);
  if (entry == w.scatters.end()) {
    int64_t bytes = moe::scatterAddWorkspaceBytes(d);
    entry =
        w.scatters
            .emplace(key,
                     MoeWorkspaces::Memory{
                         moeAllocate(bytes, caller, describeRowMap(d)), bytes})
            .first;
  }
  checkLaunch(moe::scatterAddRows(d, entry->second.pointer, source, index,
                                  result, compute),
              caller, describeRowMap(d));
}

namespace {

/// The kernels of this call: DCRT_MOE_TMA=0 keeps off the TMA kernel.
moe::GroupedKernels callKernels(const moe::GroupedKernels &kernels) {
  moe::GroupedKernels call = kernels;
  const char *tma = std::getenv("DCRT_MOE_TMA");
  call.tma = !(tma && std::strcmp(tma, "0") == 0);
  return call;
}

} // namespace

void CudaBackend::groupedMatmul(const dcrt_grouped_matmul_desc &d,
                                const void *lhs, const void *rhs,
                                const void *ends, void *out) {
  MoeWorkspaces &w = moeWorkspaces();
  moe::GroupedPlan plan = moe::planGrouped(d, false, w.multiprocessors);
  moe::GroupedKernels kernels = callKernels(w.kernels);
  checkLaunch(moe::groupedMatmul(d, plan, nullptr, kernels, lhs, rhs, ends, out,
                                 compute),
              "dcrt_grouped_matmul", describeGroupedMatmul(d));
}

void CudaBackend::groupedWeightGrad(const dcrt_grouped_matmul_desc &d,
                                    const void *lhs, const void *rhs,
                                    const void *ends, void *out) {
  const char *caller = "dcrt_grouped_weight_grad";
  if (d.experts > 65535)
    fatal("%s: the cuda backend takes at most 65535 experts (%s)", caller,
          describeGroupedMatmul(d).c_str());
  MoeWorkspaces &w = moeWorkspaces();
  PlanKey<4> key{{d.rows, d.experts, d.k, d.p}};
  auto entry = w.gradients.find(key);
  if (entry == w.gradients.end()) {
    moe::GroupedPlan plan = moe::planGrouped(d, true, w.multiprocessors);
    MoeWorkspaces::Memory memory;
    if (plan.workspaceBytes > 0)
      memory = {
          moeAllocate(plan.workspaceBytes, caller, describeGroupedMatmul(d)),
          plan.workspaceBytes};
    entry = w.gradients.emplace(key, std::make_pair(plan, memory)).first;
  }
  checkLaunch(moe::groupedWeightGrad(
                  d, entry->second.first, entry->second.second.pointer,
                  callKernels(w.kernels), lhs, rhs, ends, out, compute),
              caller, describeGroupedMatmul(d));
}
