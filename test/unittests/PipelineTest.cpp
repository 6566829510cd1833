//===- PipelineTest.cpp - embed dc's pipeline as another compiler would ---===//
#include "dc/Dialect/DC/IR/DCDialect.h"
#include "dc/Pipelines/Pipelines.h"
#include "dc/Registration/Registration.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

using namespace mlir;

namespace {

constexpr const char *kStep = R"mlir(
func.func @step(%w: tensor<64x64xf32> {dc.param = #dc.param<id = 0>},
                %x: tensor<64x64xf32>)
    -> (tensor<64x64xf32> {dc.loss}, tensor<64x64xf32> {dc.grad = #dc.grad<param = 0>}) {
  %e = tensor.empty() : tensor<64x64xf32>
  %y = linalg.matmul ins(%x, %w : tensor<64x64xf32>, tensor<64x64xf32>)
                     outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %g = linalg.matmul ins(%y, %w : tensor<64x64xf32>, tensor<64x64xf32>)
                     outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  return %y, %g : tensor<64x64xf32>, tensor<64x64xf32>
}
)mlir";

class PipelineTest : public ::testing::Test {
protected:
  PipelineTest() {
    DialectRegistry registry;
    dc::registerDCDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }
  MLIRContext context;
};

TEST_F(PipelineTest, BuildsTheSamePipelineDcOptRuns) {
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kStep, &context);
  ASSERT_TRUE(module);
  PassManager pm(&context);
  dc::Zero3PipelineOptions options;
  options.worldSize = 4;
  options.target = "cpu";
  dc::buildZero3Pipeline(pm, options);
  ASSERT_TRUE(succeeded(pm.run(*module)));

  auto fn = module->lookupSymbol<func::FuncOp>("step");
  auto shard = dyn_cast<dc::ShardType>(fn.getArgumentTypes()[0]);
  ASSERT_TRUE(shard);
  EXPECT_EQ(shard.getLocal(), 64 * 64 / 4);
  EXPECT_TRUE(isa<dc::ShardType>(fn.getResultTypes()[1]));

  // dc-zero3 gathers w before each matmul; dc-prefetch moves the first
  // gather to the top, above the tensor.empty; dc-selective-gather (16 GiB
  // of cpu memory to spare) keeps w gathered from the first matmul to the
  // second instead of gathering it again. One gather of one shard, one
  // wait, both matmuls on the gathered w, the gradient's reduce-scatter
  // issued before w's release, and end_backward waiting for it.
  Block &body = fn.getBody().front();
  std::vector<std::string> names;
  for (Operation &op : body)
    names.push_back(op.getName().getStringRef().str());
  ASSERT_EQ(names,
            (std::vector<std::string>{
                "dc.gather_start", "tensor.empty", "dc.wait", "linalg.matmul",
                "linalg.matmul", "dc.reduce_scatter_start", "dc.release",
                "dc.end_backward", "func.return"}));
  auto op = [&](size_t index) { return &*std::next(body.begin(), index); };
  auto gather = cast<dc::GatherStartOp>(op(0));
  ASSERT_EQ(gather.getShards().size(), 1u);
  EXPECT_EQ(gather.getShards()[0], fn.getArgument(0));
  EXPECT_FALSE(gather.getPersistent());
  auto wait = cast<dc::WaitOp>(op(2));
  EXPECT_EQ(wait.getFuture(), gather.getFutures()[0]);
  Value full = wait.getResult();
  EXPECT_EQ(op(3)->getOperand(0), fn.getArgument(1));
  EXPECT_EQ(op(3)->getOperand(1), full);
  EXPECT_EQ(op(4)->getOperand(0), op(3)->getResult(0));
  EXPECT_EQ(op(4)->getOperand(1), full);
  auto reduce = cast<dc::ReduceScatterStartOp>(op(5));
  EXPECT_EQ(reduce.getKind(), mlir::shard::ReductionKind::Average);
  ASSERT_EQ(reduce->getNumOperands(), 1u);
  EXPECT_EQ(reduce->getOperand(0), op(4)->getResult(0));
  EXPECT_EQ(cast<dc::ReleaseOp>(op(6)).getValue(), full);
  auto endBackward = cast<dc::EndBackwardOp>(op(7));
  ASSERT_EQ(endBackward->getNumOperands(), 1u);
  EXPECT_EQ(endBackward->getOperand(0), reduce->getResult(0));
  EXPECT_EQ(op(8)->getOperand(0), op(3)->getResult(0));
  EXPECT_EQ(op(8)->getOperand(1), endBackward->getResult(0));
}

TEST_F(PipelineTest, AnImpossibleBudgetFailsTheRun) {
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kStep, &context);
  ASSERT_TRUE(module);
  PassManager pm(&context);
  dc::Zero3PipelineOptions options;
  options.worldSize = 2;
  options.memoryBudget = "1KiB";
  dc::buildZero3Pipeline(pm, options);
  std::string message;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    message = diag.str();
    return success();
  });
  EXPECT_TRUE(failed(pm.run(*module)));
  // Live all step: the arguments, the 8 KiB shard of w and x (24 KiB); the
  // largest op, the second matmul, adds the gathered w, its input y (the
  // loss, returned: live from its matmul on) and its result (48 KiB).
  EXPECT_EQ(message, "memory budget 1.00 KiB (1024 B) is below this step's "
                     "floor of 72.00 KiB (73728 B) (arguments plus the "
                     "largest single op)");
}

} // namespace
