//===- assert.hpp - libdcrt's and dc-run's invariant checks -----*- C++ -*-===//
//
// DCRT_ASSERT(condition, "message"): the runtime's DC_ASSERT
// (include/dc/Support/Assert.h), for code built without LLVM. It checks an
// invariant of the runtime's own code; bad input (an artifact, a checkpoint,
// an option) gets fatal()'s error instead. With DC_ENABLE_ASSERTIONS=1 (the
// CMake option, default ON) a failed check goes through fatal(): it names
// the rank, file:line, the condition and the message, and ends every rank of
// the job. With 0 it compiles to nothing but still type-checks.
//
//===----------------------------------------------------------------------===//
#ifndef DCRT_ASSERT_HPP
#define DCRT_ASSERT_HPP

// DC_ENABLE_ASSERTIONS, 0 or 1, as CMake configured it (in the build tree).
#include "dcrt/assert-config.hpp"

namespace dcrt {

/// Whether libdcrt was compiled with assertions (what the tests check).
bool assertionsEnabled();

namespace detail {
/// fatal("assertion failed at <file>:<line>: <condition>: <message>"); an
/// abort hook that throws (a fuzzer's, which survives rejected input) cannot
/// resume after a broken invariant: the process aborts instead.
[[noreturn]] void assertionFailed(const char *file, int line,
                                  const char *condition, const char *message);
} // namespace detail
} // namespace dcrt

// `"" message` accepts only a string literal.
#if DC_ENABLE_ASSERTIONS
#define DCRT_ASSERT(condition, message)                                        \
  ((condition) ? static_cast<void>(0)                                          \
               : ::dcrt::detail::assertionFailed(__FILE__, __LINE__,           \
                                                 #condition, "" message))
#else
// Never evaluated, but a use: a helper only a check calls is not reported
// as unused (as clang's -Wunneeded-internal-declaration does under sizeof).
#define DCRT_ASSERT(condition, message)                                        \
  (static_cast<void>(false && (condition)),                                    \
   static_cast<void>(sizeof("" message)))
#endif

#endif // DCRT_ASSERT_HPP
