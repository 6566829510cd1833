//===- Assert.h - dc's invariant checks, live in Release builds -*- C++ -*-===//
//
// DC_ASSERT(condition, "message") checks an invariant of dc's own code: what
// holds whatever the input. Bad input must get a diagnostic, never reach an
// assertion. With DC_ENABLE_ASSERTIONS=1 (the CMake option of that name,
// default ON) a failed check prints file:line, the condition and the message
// to stderr and aborts (LLVM's signal handler, where a tool installed it,
// then prints the stack and the pass that ran). With 0 it compiles to nothing
// but its arguments are still type-checked, so a check cannot rot.
//
// Not assert(): NDEBUG must stay defined in a build against apt's Release
// LLVM (docs/hardening.md says why), which would compile assert() out.
//
// The runtime, which builds without LLVM, has its own: DCRT_ASSERT
// (dcrt/assert.hpp), which ends every rank of the job.
//
//===----------------------------------------------------------------------===//
#ifndef DC_SUPPORT_ASSERT_H
#define DC_SUPPORT_ASSERT_H

// DC_ENABLE_ASSERTIONS, 0 or 1, as CMake configured it (in the build tree).
#include "dc/Support/AssertConfig.h"

namespace dc {

/// Whether dc's libraries were compiled with assertions (what the tests
/// check: a header's macro alone would only tell about the test's own file).
bool assertionsEnabled();

namespace detail {
/// Prints "dc: assertion failed at <file>:<line>: <condition>: <message>"
/// (no condition: "dc: unreachable code reached at ...") and aborts.
[[noreturn]] void assertionFailed(const char *file, int line,
                                  const char *condition, const char *message);
} // namespace detail
} // namespace dc

// `"" message` accepts only a string literal: the message says which
// invariant broke, and costs nothing until it does.
#if DC_ENABLE_ASSERTIONS
#define DC_ASSERT(condition, message)                                          \
  ((condition) ? static_cast<void>(0)                                          \
               : ::dc::detail::assertionFailed(__FILE__, __LINE__, #condition, \
                                               "" message))
/// Code that an invariant makes unreachable (instead of llvm_unreachable,
/// which is undefined behaviour in a Release LLVM's headers).
#define DC_UNREACHABLE(message)                                                \
  ::dc::detail::assertionFailed(__FILE__, __LINE__, nullptr, "" message)
#else
// Never evaluated, but a use: a helper only a check calls is not reported
// as unused (as clang's -Wunneeded-internal-declaration does under sizeof).
#define DC_ASSERT(condition, message)                                          \
  (static_cast<void>(false && (condition)),                                    \
   static_cast<void>(sizeof("" message)))
#define DC_UNREACHABLE(message)                                                \
  (static_cast<void>(sizeof("" message)), __builtin_unreachable())
#endif

#endif // DC_SUPPORT_ASSERT_H
