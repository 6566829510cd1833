//===- GpuCheck.h - the GPU check programs' reporting -----------*- C++ -*-===//
//
// What matmul-check and attention-check share: one "ok"/"FAIL" line per
// check, a count of failures for the exit status, and CUDA errors as fatal
// errors naming the program.
//
//===----------------------------------------------------------------------===//
#ifndef DCRT_TEST_GPUCHECK_H
#define DCRT_TEST_GPUCHECK_H

#include "dcrt/error.hpp"

#include <cuda_runtime.h>

#include <cstdio>
#include <string>

namespace dcrt::test {

/// Checks that failed so far.
inline int &gpuCheckFailures() {
  static int failures = 0;
  return failures;
}

/// One line per check, flushed (a crash later keeps it).
inline void report(bool ok, const std::string &what,
                   const std::string &detail) {
  std::printf("%s %s%s%s\n", ok ? "ok  " : "FAIL", what.c_str(),
              detail.empty() ? "" : ": ", detail.c_str());
  std::fflush(stdout);
  gpuCheckFailures() += ok ? 0 : 1;
}

/// `program: what: CUDA's message`, fatal.
inline void checkCuda(const char *program, cudaError_t status,
                      const char *what) {
  if (status != cudaSuccess)
    fatal("%s: %s: %s", program, what, cudaGetErrorString(status));
}

} // namespace dcrt::test

#endif // DCRT_TEST_GPUCHECK_H
