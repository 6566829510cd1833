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
  int gathers = 0, reductions = 0;
  fn.walk([&](Operation *op) {
    gathers += isa<dc::GatherStartOp>(op);
    reductions += isa<dc::ReduceScatterStartOp>(op);
  });
  EXPECT_GE(gathers, 1);
  EXPECT_EQ(reductions, 1);
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
  EXPECT_NE(message.find("below this step's floor"), std::string::npos)
      << message;
}

} // namespace
