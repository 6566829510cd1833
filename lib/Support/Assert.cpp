//===- Assert.cpp - what a failed DC_ASSERT does --------------------------===//
#include "dc/Support/Assert.h"

#include <cstdio>
#include <cstdlib>

bool dc::assertionsEnabled() { return DC_ENABLE_ASSERTIONS; }

void dc::detail::assertionFailed(const char *file, int line,
                                 const char *condition, const char *message) {
  // One fprintf to unbuffered stderr: nothing of it is lost to the abort.
  if (condition)
    std::fprintf(stderr, "dc: assertion failed at %s:%d: %s: %s\n", file, line,
                 condition, message);
  else
    std::fprintf(stderr, "dc: unreachable code reached at %s:%d: %s\n", file,
                 line, message);
  // abort, not exit: a crash to a fuzzer, a stack trace from LLVM's signal
  // handler, and no fatal-error handler can take it for a clean error.
  std::abort();
}
