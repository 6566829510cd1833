//===- AssertOffTest.cpp - DC_ASSERT compiled out -------------------------===//
//
// What -DDC_ENABLE_ASSERTIONS=OFF builds, in this one file (which includes
// nothing else of dc's, so nothing inline differs from the other files):
// the checks compile, type-check their arguments and evaluate nothing.
//
//===----------------------------------------------------------------------===//
#define DC_ENABLE_ASSERTIONS 0
#include "dc/Support/Assert.h"

#include <gtest/gtest.h>

namespace {
int evaluations = 0;
bool countedFalse() {
  ++evaluations;
  return false;
}

int unreachableOr(int value) {
  if (value >= 0)
    return value;
  DC_UNREACHABLE("compiles as a non-returning statement");
}

TEST(AssertionsOff, NothingIsEvaluated) {
  DC_ASSERT(countedFalse(), "not evaluated, not checked");
  EXPECT_EQ(evaluations, 0);
  EXPECT_EQ(unreachableOr(3), 3);
}
} // namespace
