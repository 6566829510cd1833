//===- DialectTest.cpp - build dc IR through the C++ API
//--------------------===//
#include "dc/Dialect/DC/IR/DCDialect.h"
#include "dc/Registration/Registration.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

#include <gtest/gtest.h>

using namespace mlir;

namespace {

class DialectTest : public ::testing::Test {
protected:
  DialectTest() {
    DialectRegistry registry;
    dc::registerDCDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }

  /// A module with `shard.grid @world(shape = <worldSize>)` and an empty
  /// function whose first argument is a shard of `logical`.
  OwningOpRef<ModuleOp> makeModule(int64_t worldSize, RankedTensorType logical,
                                   int64_t local, func::FuncOp &fn) {
    OpBuilder b(&context);
    Location loc = b.getUnknownLoc();
    auto module = ModuleOp::create(loc);
    b.setInsertionPointToEnd(module.getBody());
    shard::GridOp::create(b, loc, "world", ArrayRef<int64_t>{worldSize});
    auto shard = dc::ShardType::get(&context, logical,
                                    FlatSymbolRefAttr::get(&context, "world"),
                                    /*axis=*/0, local);
    fn = func::FuncOp::create(b, loc, "step",
                              b.getFunctionType({shard}, {logical}));
    fn.setArgAttr(0, dc::kParamAttrName,
                  dc::ParamAttr::get(&context, 0, StringAttr()));
    fn.addEntryBlock();
    return module;
  }

  MLIRContext context;
};

TEST_F(DialectTest, ShardTypeLocalSizeAndBytes) {
  auto logical = RankedTensorType::get({1000, 3}, Float32Type::get(&context));
  auto shard = dc::ShardType::get(
      &context, logical, FlatSymbolRefAttr::get(&context, "world"), 0, 1500);
  EXPECT_EQ(shard.getLocalTensorType(),
            RankedTensorType::get({1500}, Float32Type::get(&context)));
  EXPECT_EQ(shard.getLocalBytes(), 6000);
  EXPECT_EQ(dc::shardLocalSize(3000, 2), 1500);
  EXPECT_EQ(dc::shardLocalSize(3000, 7), 429); // 7 * 429 = 3003: padded
}

TEST_F(DialectTest, ShardTypeGroupOfItsAxes) {
  auto logical = RankedTensorType::get({16}, Float32Type::get(&context));
  auto grid = FlatSymbolRefAttr::get(&context, "world");
  auto one = dc::ShardType::get(&context, logical, grid, {1}, 8);
  EXPECT_EQ(one.getGroupAxis(), 1);
  EXPECT_TRUE(one.isSplitOver(1));
  EXPECT_FALSE(one.isSplitOver(0));
  // Several axes (verified IR: all of the grid's) are the runtime's group
  // of the whole grid, DCRT_ALL_AXES.
  auto all = dc::ShardType::get(&context, logical, grid, {0, 1}, 2);
  EXPECT_EQ(all.getAxes(), ArrayRef<int64_t>({0, 1}));
  EXPECT_EQ(all.getGroupAxis(), dc::kAllGridAxes);
  EXPECT_TRUE(all.isSplitOver(0) && all.isSplitOver(1));
  EXPECT_NE(one, all);
}

TEST_F(DialectTest, GatherWaitReleaseVerifies) {
  auto logical = RankedTensorType::get({6, 5}, Float32Type::get(&context));
  func::FuncOp fn;
  auto module = makeModule(/*worldSize=*/4, logical, /*local=*/8, fn);
  OpBuilder b = OpBuilder::atBlockEnd(&fn.getBody().front());
  Location loc = b.getUnknownLoc();
  auto start = dc::GatherStartOp::create(
      b, loc, TypeRange{dc::FutureType::get(logical)},
      ValueRange{fn.getArgument(0)}, /*persistent=*/false);
  auto wait = dc::WaitOp::create(b, loc, start.getFutures()[0]);
  // Type inference: the wait's result is the future's value type.
  EXPECT_EQ(wait.getResult().getType(), logical);
  auto copy = arith::AddFOp::create(b, loc, wait.getResult(), wait.getResult());
  dc::ReleaseOp::create(b, loc, wait.getResult());
  func::ReturnOp::create(b, loc, copy.getResult());
  EXPECT_TRUE(succeeded(verify(*module)));
}

TEST_F(DialectTest, WrongLocalSizeIsRejectedAgainstTheGrid) {
  auto logical = RankedTensorType::get({6, 5}, Float32Type::get(&context));
  func::FuncOp fn;
  // ceil(30 / 4) = 8, not 7.
  auto module = makeModule(/*worldSize=*/4, logical, /*local=*/7, fn);
  OpBuilder b = OpBuilder::atBlockEnd(&fn.getBody().front());
  Location loc = b.getUnknownLoc();
  auto start = dc::GatherStartOp::create(
      b, loc, TypeRange{dc::FutureType::get(logical)},
      ValueRange{fn.getArgument(0)}, /*persistent=*/false);
  auto wait = dc::WaitOp::create(b, loc, start.getFutures()[0]);
  func::ReturnOp::create(b, loc, wait.getResult());

  std::string message;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    message = diag.str();
    return success();
  });
  EXPECT_TRUE(failed(verify(*module)));
  EXPECT_NE(message.find("local size 7 but ceil(30 / 4) = 8"),
            std::string::npos)
      << message;
}

TEST_F(DialectTest, EndBackwardInfersShardResults) {
  auto logical = RankedTensorType::get({8}, Float32Type::get(&context));
  func::FuncOp fn;
  auto module = makeModule(/*worldSize=*/2, logical, /*local=*/4, fn);
  auto shardType = cast<dc::ShardType>(fn.getArgument(0).getType());
  OpBuilder b = OpBuilder::atBlockEnd(&fn.getBody().front());
  Location loc = b.getUnknownLoc();
  Value grad = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(logical, b.getF32FloatAttr(1.0f)));
  auto reduce = dc::ReduceScatterStartOp::create(
      b, loc, TypeRange{dc::FutureType::get(shardType)},
      shard::ReductionKind::Average, ValueRange{grad});
  auto flush = dc::EndBackwardOp::create(b, loc, reduce.getFutures());
  ASSERT_EQ(flush.getShards().size(), 1u);
  EXPECT_EQ(flush.getShards()[0].getType(), shardType);
  fn.setType(b.getFunctionType({shardType}, {shardType}));
  func::ReturnOp::create(b, loc, flush.getShards()[0]);
  EXPECT_TRUE(succeeded(verify(*module)));
}

TEST_F(DialectTest, ReleaseOfANonGatheredTensorIsRejected) {
  auto logical = RankedTensorType::get({8}, Float32Type::get(&context));
  func::FuncOp fn;
  auto module = makeModule(/*worldSize=*/2, logical, /*local=*/4, fn);
  OpBuilder b = OpBuilder::atBlockEnd(&fn.getBody().front());
  Location loc = b.getUnknownLoc();
  Value value = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(logical, b.getF32FloatAttr(0.0f)));
  dc::ReleaseOp::create(b, loc, value);
  func::ReturnOp::create(b, loc, value);
  ScopedDiagnosticHandler handler(&context,
                                  [](Diagnostic &) { return success(); });
  EXPECT_TRUE(failed(verify(*module)));
}

} // namespace
