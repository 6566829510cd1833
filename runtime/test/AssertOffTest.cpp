//===- AssertOffTest.cpp - DCRT_ASSERT compiled out -----------------------===//
//
// What -DDC_ENABLE_ASSERTIONS=OFF builds, in this one file (which includes
// nothing else of the runtime's, so nothing inline differs from the other
// files): the checks compile, type-check their arguments and evaluate
// nothing.
//
//===----------------------------------------------------------------------===//
#define DC_ENABLE_ASSERTIONS 0
#include "dcrt/assert.hpp"

#include <gtest/gtest.h>

namespace {
int evaluations = 0;
bool countedFalse() {
  ++evaluations;
  return false;
}

TEST(AssertOffTest, NothingIsEvaluated) {
  DCRT_ASSERT(countedFalse(), "not evaluated, not checked");
  EXPECT_EQ(evaluations, 0);
}
} // namespace
