//===- CudaAdamW.cpp - the cuda backend's optimizer calls -----------------===//
//
// dcrt_grad_squares and dcrt_adamw on the compute stream, with the kernels
// of AdamWKernels.cu. The scalars (learning rate, step, squared norm) are
// read on the device, so a captured step replays them as they are. Outputs
// that are not the inputs' buffers get the inputs' values first (a copy on
// the same stream); the kernel then updates the real elements in place.
// Make the first dcrt_grad_squares call outside a CUDA graph capture: it
// allocates the norm's workspace.
//
//===----------------------------------------------------------------------===//
#include "CudaBackend.h"

#include "AdamWKernels.h"
#include "CudaCheck.h"

#include "dcrt/dtype.hpp"
#include "dcrt/error.hpp"

using namespace dcrt;
using namespace dcrt::detail;

namespace {

void checkLaunch(cudaError_t status, const char *caller,
                 const dcrt_adamw_desc &desc) {
  if (status != cudaSuccess)
    fatal("%s: launching its kernels failed: %s (%s)", caller,
          cuda::describeCudaError(status).c_str(), describeAdamW(desc).c_str());
}

} // namespace

void CudaBackend::gradSquares(const dcrt_adamw_desc &desc,
                              const AdamWSlot &slot, const void *grad,
                              const double *squaresIn, double *squaresOut) {
  const char *caller = "dcrt_grad_squares";
  if (!squaresWorkspace) {
    auto bytes = static_cast<size_t>(cuda::adamw::squaresWorkspaceBytes());
    cudaError_t status = cudaMalloc(&squaresWorkspace, bytes);
    if (status != cudaSuccess)
      fatal("%s: out of device memory: %lld bytes of workspace: %s", caller,
            static_cast<long long>(bytes),
            cuda::describeCudaError(status).c_str());
    DCRT_CUDA_CHECK(cudaMemsetAsync(squaresWorkspace, 0, bytes, compute));
  }
  checkLaunch(cuda::adamw::gradSquares(desc, slot.valid, slot.counts, grad,
                                       squaresIn, squaresOut, squaresWorkspace,
                                       compute),
              caller, desc);
}

void CudaBackend::gradAccumulate(const dcrt_adamw_desc &desc, const void *grad,
                                 const float *sumIn, float *sumOut) {
  checkLaunch(cuda::adamw::accumulate(desc, grad, sumIn, sumOut, compute),
              "dcrt_grad_accumulate", desc);
}

void CudaBackend::adamw(const dcrt_adamw_desc &desc, const AdamWSlot &slot,
                        const void *param, const void *grad, const void *master,
                        const void *expAvg, const void *expAvgSq,
                        const double *lr, const int64_t *step,
                        const double *squares, void *paramOut, void *masterOut,
                        void *expAvgOut, void *expAvgSqOut) {
  auto copy = [&](void *dst, const void *src, int64_t dtype) {
    if (dst == src || desc.local_numel == 0)
      return;
    DCRT_CUDA_CHECK(cudaMemcpyAsync(
        dst, src,
        static_cast<size_t>(desc.local_numel *
                            dtypeSize(static_cast<int32_t>(dtype))),
        cudaMemcpyDeviceToDevice, compute));
  };
  copy(paramOut, param, desc.param_dtype);
  copy(expAvgOut, expAvg, desc.moment_dtype);
  copy(expAvgSqOut, expAvgSq, desc.moment_dtype);
  if (desc.master_dtype == DCRT_F32)
    copy(masterOut, master, DCRT_F32);
  checkLaunch(cuda::adamw::update(desc, slot.valid, grad, lr, step, squares,
                                  paramOut, masterOut, expAvgOut, expAvgSqOut,
                                  compute),
              "dcrt_adamw", desc);
}
