//===- add-one-kernel.cu - a tiny kernel for dcrt_launch_kernel -----------===//
//
// Built at build time into a fatbin (nvcc -fatbin -arch=sm_90), as MLIR's
// gpu-module-to-binary would embed one in an artifact; matmul-check loads
// it from the file and launches it through dcrt_launch_kernel.
//
//===----------------------------------------------------------------------===//

extern "C" __global__ void dcrt_test_add_one(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    x[i] += 1.0f;
}
