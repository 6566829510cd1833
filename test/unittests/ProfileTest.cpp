//===- ProfileTest.cpp - measured per-op times ----------------------------===//
#include "AnalysisTestUtils.h"

#include "dc/Analysis/CostModel.h"
#include "dc/Target/TargetDescription.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace dc;
using namespace dc::unittest;

namespace {

//===----------------------------------------------------------------------===//
// Profiles
//===----------------------------------------------------------------------===//

TEST(ProfileTest, ParsesAndRejectsMalformedProfiles) {
  llvm::Expected<Profile> profile =
      Profile::fromJSON(R"({"ops": {"step:0": 1.5e-5, "bwd:12": 0}})");
  ASSERT_TRUE(bool(profile)) << errorText(profile.takeError());
  EXPECT_EQ(profile->secondsByOpId.size(), 2u);
  EXPECT_EQ(profile->secondsByOpId.lookup("step:0"), 1.5e-5);

  auto errorOf = [](llvm::StringRef text) {
    llvm::Expected<Profile> parsed = Profile::fromJSON(text);
    return parsed ? std::string("(no error)") : errorText(parsed.takeError());
  };
  EXPECT_EQ(errorOf(R"({"ops": {}, "steps": 3})"),
            "unknown field \"steps\" in profile (expected only \"ops\")");
  EXPECT_EQ(errorOf(R"({"ops": [1]})"),
            "profile field \"ops\" must be an object of "
            "\"<function>:<ordinal>\": seconds");
  EXPECT_EQ(errorOf(R"({"ops": {"step": 1}})"),
            "profile key \"step\" is not \"<function>:<ordinal>\"");
  EXPECT_EQ(errorOf(R"({"ops": {"step:x": 1}})"),
            "profile key \"step:x\" is not \"<function>:<ordinal>\"");
  EXPECT_EQ(errorOf(R"({"ops": {"step:1": -1}})"),
            "profile time of \"step:1\" must be a non-negative number "
            "(seconds)");
  EXPECT_EQ(errorOf("3").rfind("a profile must be a JSON object", 0), 0u);
  EXPECT_EQ(errorOf("{").rfind("invalid JSON: ", 0), 0u);
  EXPECT_EQ(errorText(Profile::load("/no/such/profile.json").takeError())
                .rfind("cannot read profile '/no/such/profile.json': ", 0),
            0u);
}

TEST_F(AnalysisTest, ProfileKeysSkipDCOpsAndOverrideEstimates) {
  auto module = parse(R"mlir(
shard.grid @world(shape = 2)
!w = !dc.shard<tensor<16x16xf32>, @world[0], local = 128>
func.func @step(%w: !w, %x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %e = tensor.empty() : tensor<4x16xf32>
  %f = dc.gather_start %w : !w -> !dc.future<tensor<16x16xf32>>
  %full = dc.wait %f : !dc.future<tensor<16x16xf32>>
  %y = linalg.matmul ins(%x, %full : tensor<4x16xf32>, tensor<16x16xf32>)
                     outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  dc.release %full : tensor<16x16xf32>
  %z = linalg.add ins(%y, %y : tensor<4x16xf32>, tensor<4x16xf32>)
                  outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %z : tensor<4x16xf32>
}
)mlir");
  func::FuncOp fn = getFunc(*module, "step");
  EXPECT_EQ(getProfileKey(opAt(fn, 0)), "step:0");
  EXPECT_EQ(getProfileKey(opAt(fn, 1)), "");
  EXPECT_EQ(getProfileKey(opAt(fn, 3)), "step:1");
  EXPECT_EQ(getProfileKey(opAt(fn, 5)), "step:2");
  EXPECT_EQ(getProfileKey(opAt(fn, 6)), "step:3");
  EXPECT_EQ(getProfileKey(fn), "");

  Profile profile =
      cantFail(Profile::fromJSON(R"({"ops": {"step:1": 0.25, "other:2": 9}})"));
  TargetDescription target = cantFail(TargetDescription::getPreset("h200"));
  CostModel measured(target, &profile);
  CostModel estimated(target);
  OpCost matmul = measured.estimate(opAt(fn, 3));
  EXPECT_EQ(matmul.seconds, 0.25);
  EXPECT_EQ(matmul.flops, 2.0 * 4 * 16 * 16);
  // Only the profiled op changes; another function's entries do not apply.
  EXPECT_EQ(measured.estimate(opAt(fn, 5)).seconds,
            estimated.estimate(opAt(fn, 5)).seconds);
  std::vector<OpCost> all = measured.estimateFunction(fn);
  EXPECT_EQ(all[3].seconds, 0.25);
  EXPECT_EQ(all[5].seconds, estimated.estimate(opAt(fn, 5)).seconds);
}

} // namespace
