//===- GpuCheck.h - the GPU check programs' reporting -----------*- C++ -*-===//
//
// What matmul-check and attention-check share: one "ok"/"FAIL" line per
// check and a count of failures for the exit status (CUDA errors are
// DCRT_CUDA_CHECK's, CudaCheck.h).
//
//===----------------------------------------------------------------------===//
#ifndef DCRT_TEST_GPUCHECK_H
#define DCRT_TEST_GPUCHECK_H

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

} // namespace dcrt::test

#endif // DCRT_TEST_GPUCHECK_H
