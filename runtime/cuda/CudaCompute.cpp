//===- CudaCompute.cpp - the cuda backend's compute: cuBLASLt, kernels ----===//
//
// dcrt_matmul: cuBLASLt with fp32 accumulation (CUBLAS_COMPUTE_32F: f32
// inputs stay full fp32, no TF32), scale type f32, alpha 1, beta =
// accumulate. Row-major C = op(A) op(B) is the column-major product
// C^T = op(B)^T op(A)^T, so cuBLASLt's first operand is B's memory and its
// second A's, each described as the column-major view of the stored
// row-major matrix (rows and columns swapped, the same leading dimension).
// A batch is strided (stride 0: one matrix for every batch). The heuristic
// runs once per descriptor and pointer alignment class; the plan is cached.
//
// dcrt_launch_kernel: the artifact's fatbin/cubin is loaded with the CUDA
// runtime's library API (cudaLibraryLoadData) the first time its address is
// seen, kernels are looked up by name once (cudaLibraryGetKernel) and
// launched with cudaLaunchKernel, which takes a cudaKernel_t in place of a
// function pointer. A kernel whose blocks wait for each other
// (dcrt_launch_kernel_coresident) is first checked to fit: the occupancy
// API's blocks per SM times the SMs.
//
// Both enqueue on the compute stream and never synchronize. Only a
// descriptor's or a kernel's first call does host-side setup (no device
// allocation, no stream work): make it outside a CUDA graph capture.
//
//===----------------------------------------------------------------------===//
#include "CudaBackend.h"

#include "CudaCheck.h"
#include "Matmul.h"

#include "dcrt/error.hpp"

#include <climits>
#include <cstring>

using namespace dcrt;
using namespace dcrt::detail;

namespace {

/// Every cuBLASLt call is checked: a failure ends the job naming the call,
/// cuBLASLt's status and the matmul.
void checkLt(cublasStatus_t status, const char *what,
             const dcrt_matmul_desc *desc) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return;
  fatal("cuBLASLt failed in %s: %s (%s)%s%s", what,
        cublasLtGetStatusString(status), cublasLtGetStatusName(status),
        desc ? " for the matmul " : "",
        desc ? describeMatmul(*desc).c_str() : "");
}

cudaDataType_t cudaTypeOf(int64_t dtype) {
  switch (dtype) {
  case DCRT_BF16:
    return CUDA_R_16BF;
  case DCRT_F16:
    return CUDA_R_16F;
  default:
    return CUDA_R_32F;
  }
}

/// The largest power of two (at most 256) that divides the address.
int64_t alignmentOf(const void *pointer) {
  auto address = reinterpret_cast<uintptr_t>(pointer);
  uintptr_t lowest = address & (~address + 1);
  return lowest == 0 || lowest > 256 ? 256 : static_cast<int64_t>(lowest);
}

/// The column-major view of a stored row-major matrix: rows and columns
/// swapped, the same leading dimension; strided over `batch` matrices.
cublasLtMatrixLayout_t layoutOf(const dcrt_matmul_desc &desc, int64_t dtype,
                                StoredMatrix stored, int64_t ld,
                                int64_t batchStride) {
  cublasLtMatrixLayout_t layout = nullptr;
  checkLt(cublasLtMatrixLayoutCreate(&layout, cudaTypeOf(dtype),
                                     static_cast<uint64_t>(stored.cols),
                                     static_cast<uint64_t>(stored.rows), ld),
          "cublasLtMatrixLayoutCreate", &desc);
  if (desc.batch > 1) {
    auto count = static_cast<int32_t>(desc.batch);
    checkLt(cublasLtMatrixLayoutSetAttribute(layout,
                                             CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                             &count, sizeof(count)),
            "setting CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT", &desc);
    checkLt(cublasLtMatrixLayoutSetAttribute(
                layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                &batchStride, sizeof(batchStride)),
            "setting CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET", &desc);
  }
  return layout;
}

void setOperation(cublasLtMatmulDesc_t operation,
                  cublasLtMatmulDescAttributes_t attribute, int64_t transpose,
                  const dcrt_matmul_desc &desc) {
  cublasOperation_t value = transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
  checkLt(cublasLtMatmulDescSetAttribute(operation, attribute, &value,
                                         sizeof(value)),
          "setting the matmul's transposes", &desc);
}

void setPreference(cublasLtMatmulPreference_t preference,
                   cublasLtMatmulPreferenceAttributes_t attribute,
                   int64_t alignment, const dcrt_matmul_desc &desc) {
  auto value = static_cast<uint32_t>(alignment);
  checkLt(cublasLtMatmulPreferenceSetAttribute(preference, attribute, &value,
                                               sizeof(value)),
          "setting the heuristic's alignment", &desc);
}

} // namespace

//===----------------------------------------------------------------------===//
// Setting up and tearing down
//===----------------------------------------------------------------------===//

void CudaBackend::setUpCompute() {
  checkLt(cublasLtCreate(&lt), "cublasLtCreate", nullptr);
  cudaError_t status =
      cudaMalloc(&matmulWorkspace, static_cast<size_t>(matmulWorkspaceBytes));
  if (status != cudaSuccess)
    fatal("out of device memory: %lld bytes for the matmul workspace: %s",
          static_cast<long long>(matmulWorkspaceBytes),
          cuda::describeCudaError(status).c_str());
}

void CudaBackend::tearDownCompute() {
  tearDownAttention();
  tearDownMoe();
  if (squaresWorkspace)
    cudaFree(squaresWorkspace);
  squaresWorkspace = nullptr;
  for (auto &[key, plan] : matmulPlans) {
    cublasLtMatrixLayoutDestroy(plan.first);
    cublasLtMatrixLayoutDestroy(plan.second);
    cublasLtMatrixLayoutDestroy(plan.output);
    cublasLtMatmulDescDestroy(plan.operation);
  }
  matmulPlans.clear();
  if (lt)
    cublasLtDestroy(lt);
  lt = nullptr;
  if (matmulWorkspace)
    cudaFree(matmulWorkspace);
  matmulWorkspace = nullptr;
  for (auto &[address, binary] : binaries)
    cudaLibraryUnload(binary.library);
  binaries.clear();
}

//===----------------------------------------------------------------------===//
// dcrt_matmul
//===----------------------------------------------------------------------===//

MatmulPlan CudaBackend::planMatmul(const dcrt_matmul_desc &d,
                                   const MatmulKey &key) {
  if (d.batch > INT32_MAX)
    fatal("dcrt_matmul: a batch of %lld matrices is more than cuBLASLt "
          "takes (%s)",
          static_cast<long long>(d.batch), describeMatmul(d).c_str());
  MatmulPlan plan;
  checkLt(
      cublasLtMatmulDescCreate(&plan.operation, CUBLAS_COMPUTE_32F, CUDA_R_32F),
      "cublasLtMatmulDescCreate", &d);
  // C^T = op(B)^T op(A)^T: the first operand is B's memory, transposed
  // (from its column-major view) exactly when op(B) is.
  setOperation(plan.operation, CUBLASLT_MATMUL_DESC_TRANSA, d.trans_b, d);
  setOperation(plan.operation, CUBLASLT_MATMUL_DESC_TRANSB, d.trans_a, d);
  plan.first = layoutOf(d, d.b_dtype, storedB(d), d.ldb, d.batch_stride_b);
  plan.second = layoutOf(d, d.a_dtype, storedA(d), d.lda, d.batch_stride_a);
  plan.output = layoutOf(d, d.c_dtype, storedC(d), d.ldc, d.batch_stride_c);

  cublasLtMatmulPreference_t preference = nullptr;
  checkLt(cublasLtMatmulPreferenceCreate(&preference),
          "cublasLtMatmulPreferenceCreate", &d);
  uint64_t workspaceBytes = matmulWorkspaceBytes;
  checkLt(cublasLtMatmulPreferenceSetAttribute(
              preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
              &workspaceBytes, sizeof(workspaceBytes)),
          "setting the heuristic's workspace", &d);
  // key.fields[16..18]: the alignment of A's, B's and C's pointers.
  setPreference(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                key.fields[17], d);
  setPreference(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                key.fields[16], d);
  setPreference(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                key.fields[18], d);
  setPreference(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                key.fields[18], d);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      lt, plan.operation, plan.first, plan.second, plan.output, plan.output,
      preference, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(preference);
  checkLt(status, "cublasLtMatmulAlgoGetHeuristic", &d);
  if (found < 1 || result.state != CUBLAS_STATUS_SUCCESS)
    fatal("dcrt_matmul: cuBLASLt has no algorithm for the matmul %s "
          "(pointers aligned to %lld, %lld, %lld bytes; %s)",
          describeMatmul(d).c_str(), static_cast<long long>(key.fields[16]),
          static_cast<long long>(key.fields[17]),
          static_cast<long long>(key.fields[18]),
          found < 1 ? "the heuristic returned none"
                    : cublasLtGetStatusString(result.state));
  plan.algorithm = result.algo;
  return plan;
}

void CudaBackend::matmul(const dcrt_matmul_desc &d, const void *a,
                         const void *b, void *c) {
  MatmulKey key;
  static_assert(sizeof(dcrt_matmul_desc) == 16 * sizeof(int64_t),
                "dcrt_matmul_desc is 16 int64_t fields");
  std::memcpy(key.fields, &d, sizeof(d));
  key.fields[16] = alignmentOf(a);
  key.fields[17] = alignmentOf(b);
  key.fields[18] = alignmentOf(c);
  auto plan = matmulPlans.find(key);
  if (plan == matmulPlans.end())
    plan = matmulPlans.emplace(key, planMatmul(d, key)).first;
  const MatmulPlan &p = plan->second;
  const float alpha = 1.0f, beta = d.accumulate ? 1.0f : 0.0f;
  checkLt(cublasLtMatmul(lt, p.operation, &alpha, b, p.first, a, p.second,
                         &beta, c, p.output, c, p.output, &p.algorithm,
                         matmulWorkspace,
                         static_cast<size_t>(matmulWorkspaceBytes), compute),
          "cublasLtMatmul", &d);
}

//===----------------------------------------------------------------------===//
// dcrt_launch_kernel
//===----------------------------------------------------------------------===//

void CudaBackend::launchKernel(const void *binary, int64_t binaryBytes,
                               const char *kernel, const int64_t *dims,
                               int32_t sharedBytes, void **args,
                               int64_t coresidentBlocks) {
  auto loaded = binaries.find(binary);
  if (loaded == binaries.end()) {
    LoadedBinary fresh;
    fresh.bytes = binaryBytes;
    cudaError_t status = cudaLibraryLoadData(&fresh.library, binary, nullptr,
                                             nullptr, 0, nullptr, nullptr, 0);
    if (status != cudaSuccess)
      fatal("dcrt_launch_kernel: cannot load the GPU binary of kernel %s "
            "(%lld bytes at %p; a fatbin or cubin for this GPU?): %s",
            kernel, static_cast<long long>(binaryBytes), binary,
            cuda::describeCudaError(status).c_str());
    loaded = binaries.emplace(binary, std::move(fresh)).first;
  } else if (loaded->second.bytes != binaryBytes) {
    fatal("dcrt_launch_kernel: kernel %s: the binary at %p was loaded with "
          "%lld bytes, now it has %lld",
          kernel, binary, static_cast<long long>(loaded->second.bytes),
          static_cast<long long>(binaryBytes));
  }
  LoadedBinary &library = loaded->second;
  auto entry = library.kernels.find(kernel);
  if (entry == library.kernels.end()) {
    LoadedBinary::Kernel fresh;
    cudaError_t status =
        cudaLibraryGetKernel(&fresh.handle, library.library, kernel);
    if (status != cudaSuccess)
      fatal("dcrt_launch_kernel: no kernel %s in the GPU binary at %p (%lld "
            "bytes): %s",
            kernel, binary, static_cast<long long>(binaryBytes),
            cuda::describeCudaError(status).c_str());
    entry = library.kernels.emplace(kernel, fresh).first;
  }
  LoadedBinary::Kernel &k = entry->second;
  const void *function = reinterpret_cast<const void *>(k.handle);
  if (sharedBytes > k.sharedBytesAllowed) {
    // More than 48 KiB of dynamic shared memory is opted into per kernel.
    cudaError_t status = cudaFuncSetAttribute(
        function, cudaFuncAttributeMaxDynamicSharedMemorySize, sharedBytes);
    if (status != cudaSuccess)
      fatal("dcrt_launch_kernel: kernel %s cannot have %d bytes of dynamic "
            "shared memory: %s",
            kernel, sharedBytes, cuda::describeCudaError(status).c_str());
    k.sharedBytesAllowed = sharedBytes;
  }
  dim3 grid(static_cast<unsigned>(dims[0]), static_cast<unsigned>(dims[1]),
            static_cast<unsigned>(dims[2]));
  dim3 block(static_cast<unsigned>(dims[3]), static_cast<unsigned>(dims[4]),
             static_cast<unsigned>(dims[5]));
  if (coresidentBlocks > 0) {
    int64_t threads = int64_t(block.x) * block.y * block.z;
    if (k.residentBlocks == 0 || k.residentThreads != threads ||
        k.residentSharedBytes != sharedBytes) {
      // Per SM, for this block shape and shared memory, times the SMs this
      // process sees (a MIG slice's own).
      int perSM = 0, sms = 0;
      cudaError_t status = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
          &perSM, function, static_cast<int>(threads),
          static_cast<size_t>(sharedBytes));
      if (status == cudaSuccess)
        status = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount,
                                        device);
      if (status != cudaSuccess)
        fatal("dcrt_launch_kernel_coresident: kernel %s: cannot ask how many "
              "of its blocks fit at once: %s",
              kernel, cuda::describeCudaError(status).c_str());
      k.residentBlocks = int64_t(perSM) * sms;
      k.residentThreads = threads;
      k.residentSharedBytes = sharedBytes;
    }
    if (coresidentBlocks > k.residentBlocks)
      fatal("dcrt_launch_kernel_coresident: kernel %s needs %lld of its "
            "blocks on the GPU at once (they wait for each other), but this "
            "GPU holds %lld of them (%lld threads and %d bytes of shared "
            "memory each); it would never end. Compile it with "
            "dc-compile --finishing-blocks at most that, or without "
            "--finishing-passes",
            kernel, static_cast<long long>(coresidentBlocks),
            static_cast<long long>(k.residentBlocks),
            static_cast<long long>(threads), sharedBytes);
  }
  cudaError_t status = cudaLaunchKernel(
      function, grid, block, args, static_cast<size_t>(sharedBytes), compute);
  if (status != cudaSuccess)
    fatal("dcrt_launch_kernel: launching kernel %s (grid {%u, %u, %u}, block "
          "{%u, %u, %u}, %d bytes of shared memory) failed: %s",
          kernel, grid.x, grid.y, grid.z, block.x, block.y, block.z,
          sharedBytes, cuda::describeCudaError(status).c_str());
}
