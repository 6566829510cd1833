//===- Assert.cpp - what a failed DCRT_ASSERT does ------------------------===//
#include "dcrt/assert.hpp"
#include "dcrt/error.hpp"

#include <cstdlib>

bool dcrt::assertionsEnabled() { return DC_ENABLE_ASSERTIONS; }

void dcrt::detail::assertionFailed(const char *file, int line,
                                   const char *condition, const char *message) {
  try {
    fatal("assertion failed at %s:%d: %s: %s", file, line, condition, message);
  } catch (...) {
    // The abort hook threw to hand control back (a fuzzer's: input
    // rejected). A broken invariant is a bug, not a rejected input: crash.
    std::abort();
  }
}
