//===- RankFailurePrinter.h - failures of every rank of an MPI test ------===//
//
// A GoogleTest listener for the multi-rank tests: ranks other than 0 print
// only their failures, prefixed with the rank (rank 0 keeps the default
// printer).
//
//===----------------------------------------------------------------------===//
#ifndef DCRT_TEST_RANKFAILUREPRINTER_H
#define DCRT_TEST_RANKFAILUREPRINTER_H

#include "dcrt/dcrt.h"

#include <gtest/gtest.h>

#include <cstdio>

/// Prints only failures, prefixed with the rank, on ranks other than 0.
class FailurePrinter : public testing::EmptyTestEventListener {
  void OnTestPartResult(const testing::TestPartResult &result) override {
    if (result.failed())
      std::fprintf(stderr, "rank %d: %s:%d: %s\n", dcrt_rank(),
                   result.file_name() ? result.file_name() : "?",
                   result.line_number(), result.summary());
  }
};

#endif // DCRT_TEST_RANKFAILUREPRINTER_H
