//===- CudaCheck.h - the one check of a CUDA runtime call -------*- C++ -*-===//
//
// Every CUDA runtime call in dc (libdcrt's cuda backend, dc-run's device
// AdamW, the GPU check programs, the benches) is checked here, so that a
// failure reads the same wherever it happens:
//
//   CUDA error: <the call, or what it did>: <CUDA's description> (<the
//   error's name>) at <file>:<line>
//
// and ends the job as every other fatal error does (dcrt::fatal: a message,
// then every rank aborts). Code that handles an error itself, or that adds
// context only known at run time (a kernel's name, the bytes asked for),
// keeps its own message but names the error with describeCudaError().
//
// A program that does not link libdcrt (bench/copy_bench.cu) defines
// DCRT_CUDA_CHECK_PROGRAM to its name before including this: a failure then
// prints "<name>: error: <message>" and exits 1, as fatal() does in a
// process of its own.
//
// Not installed: only dc's own CUDA code includes it (libdcrt exports this
// folder to the build tree's users of dcrt).
//
//===----------------------------------------------------------------------===//
#ifndef DCRT_CUDA_CUDACHECK_H
#define DCRT_CUDA_CUDACHECK_H

#include <cuda_runtime_api.h>

#include <cstring>
#include <string>

#ifdef DCRT_CUDA_CHECK_PROGRAM
#include <cstdio>
#include <cstdlib>
#else
#include "dcrt/error.hpp"
#endif

namespace dcrt::cuda {

/// "<CUDA's description> (<the error's name>)", e.g. "out of memory
/// (cudaErrorMemoryAllocation)": how every message names a CUDA error.
inline std::string describeCudaError(cudaError_t status) {
  return std::string(cudaGetErrorString(status)) + " (" +
         cudaGetErrorName(status) + ")";
}

/// Ends the job with the message above; `what` is the call's text or what
/// it did, `file` and `line` where.
[[noreturn]] inline void failCuda(cudaError_t status, const char *what,
                                  const char *file, int line) {
  // The file's name, not the build machine's path to it.
  const char *slash = std::strrchr(file, '/');
  std::string error = describeCudaError(status);
#ifdef DCRT_CUDA_CHECK_PROGRAM
  std::fprintf(stderr, "%s: error: CUDA error: %s: %s at %s:%d\n",
               DCRT_CUDA_CHECK_PROGRAM, what, error.c_str(),
               slash ? slash + 1 : file, line);
  std::exit(1);
#else
  dcrt::fatal("CUDA error: %s: %s at %s:%d", what, error.c_str(),
              slash ? slash + 1 : file, line);
#endif
}

inline void checkCuda(cudaError_t status, const char *what, const char *file,
                      int line) {
  if (status != cudaSuccess)
    failCuda(status, what, file, line);
}

} // namespace dcrt::cuda

/// DCRT_CUDA_CHECK(cudaEventRecord(event, stream)): fatal, naming the call,
/// unless it returns cudaSuccess.
#define DCRT_CUDA_CHECK(call)                                                  \
  ::dcrt::cuda::checkCuda((call), #call, __FILE__, __LINE__)

/// DCRT_CUDA_CHECK_WHAT(status, "an offload copy"): the same for a result
/// that says more as what the caller did (a const char *).
#define DCRT_CUDA_CHECK_WHAT(call, what)                                       \
  ::dcrt::cuda::checkCuda((call), (what), __FILE__, __LINE__)

#endif // DCRT_CUDA_CUDACHECK_H
