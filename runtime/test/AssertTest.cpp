//===- AssertTest.cpp - DCRT_ASSERT is live in the tested build -----------===//
//
// These fail where the build under test has dc's assertions off: the tests
// are meant to run the invariant checks (docs/hardening.md). dcrt-probe's
// broken-invariant scenario checks that a failure ends every rank.
//
//===----------------------------------------------------------------------===//
#include "Internal.h"

#include "dcrt/assert.hpp"

#include <gtest/gtest.h>

namespace {
struct Rejected {};
void throwRejected() { throw Rejected(); }

TEST(AssertTest, EnabledInTheTestedBuild) {
  EXPECT_EQ(DC_ENABLE_ASSERTIONS, 1)
      << "configure with -DDC_ENABLE_ASSERTIONS=ON: the tests run dc's "
         "invariant checks";
  EXPECT_TRUE(dcrt::assertionsEnabled())
      << "libdcrt was compiled without DCRT_ASSERT";
}

TEST(AssertDeathTest, FailureIsAFatalErrorNamingTheInvariant) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  int value = 1;
  DCRT_ASSERT(value == 1, "holds: nothing happens");
  EXPECT_DEATH(DCRT_ASSERT(value == 2, "the test's invariant"),
               "error: assertion failed at .*AssertTest\\.cpp:[0-9]+: "
               "value == 2: the test's invariant");
}

// fatal() returns control through an abort hook that throws (how the
// checkpoint fuzzer survives rejected input); a broken invariant must not.
TEST(AssertDeathTest, AThrowingAbortHookDoesNotResumeAfterIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        dcrt::detail::setAbortHook(throwRejected);
        try {
          DCRT_ASSERT(false, "the test's invariant");
        } catch (const Rejected &) {
        }
        dcrt::detail::setAbortHook(nullptr);
      },
      "error: assertion failed at .*: false: the test's invariant");
}
} // namespace
