//===- AssertTest.cpp - DC_ASSERT is live in the tested build -------------===//
//
// These fail where the build under test has dc's assertions off: the tests
// are meant to run the invariant checks (docs/hardening.md).
//
//===----------------------------------------------------------------------===//
#include "AnalysisTestUtils.h"

#include "dc/Analysis/CostModel.h"
#include "dc/Analysis/StreamSimulator.h"
#include "dc/Support/Assert.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace dc;
using namespace dc::unittest;

namespace {

TEST(Assertions, EnabledInTheTestedBuild) {
  EXPECT_EQ(DC_ENABLE_ASSERTIONS, 1)
      << "configure with -DDC_ENABLE_ASSERTIONS=ON: the tests run dc's "
         "invariant checks";
  EXPECT_TRUE(dc::assertionsEnabled())
      << "dc's libraries were compiled without DC_ASSERT";
}

TEST(AssertionsDeathTest, FailurePrintsWhereWhatAndWhyThenAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  int value = 1;
  DC_ASSERT(value == 1, "holds: nothing happens");
  EXPECT_DEATH(DC_ASSERT(value == 2, "the test's invariant"),
               "dc: assertion failed at .*AssertTest\\.cpp:[0-9]+: "
               "value == 2: the test's invariant");
  EXPECT_DEATH(DC_UNREACHABLE("the test's unreachable code"),
               "dc: unreachable code reached at .*AssertTest\\.cpp:[0-9]+: "
               "the test's unreachable code");
}

// A check inside a library (DCAnalysis), not one expanded in this file: the
// simulator given the costs of another function.
class AssertionsInLibraryDeathTest : public AnalysisTest {};

TEST_F(AssertionsInLibraryDeathTest, SimulatorChecksOneCostPerOp) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto module = parse(R"mlir(
!t = tensor<64x64xf32>
func.func @f(%x: !t) -> !t {
  %e = tensor.empty() : !t
  %y = linalg.matmul ins(%x, %x : !t, !t) outs(%e : !t) -> !t
  return %y : !t
}
)mlir");
  func::FuncOp fn = getFunc(*module, "f");
  FailureOr<MemoryTimeline> timeline = MemoryTimeline::compute(fn);
  ASSERT_TRUE(succeeded(timeline));
  CostModel model(makeExactTarget());
  std::vector<OpCost> costs = model.estimateFunction(fn);
  ASSERT_EQ(costs.size(), timeline->getOps().size());
  StreamSimulator simulator(model);
  EXPECT_GT(simulator.run(*timeline, costs).stepSeconds, 0.0);
  costs.pop_back();
  EXPECT_DEATH(simulator.run(*timeline, costs),
               "dc: assertion failed at .*StreamSimulator\\.cpp:[0-9]+: "
               "costs.size\\(\\) == ops.size\\(\\): one cost per op");
}

} // namespace
