//===- MemoryTimelineTest.cpp - live bytes at each op ---------------------===//
#include "AnalysisTestUtils.h"

#include "dc/Analysis/MemoryTimeline.h"
#include "dc/Dialect/DC/IR/DCDialect.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace dc;
using namespace dc::unittest;

namespace {

//===----------------------------------------------------------------------===//
// Memory timeline
//===----------------------------------------------------------------------===//

constexpr llvm::StringLiteral kTimelineIR = R"mlir(
shard.grid @world(shape = 2)
!w = !dc.shard<tensor<16x16xf32>, @world[0], local = 128>
func.func @step(%w: !w, %x: tensor<4x16xf32>) -> (tensor<4x16xf32>, !w) {
  %f = dc.gather_start %w : !w -> !dc.future<tensor<16x16xf32>>
  %full = dc.wait %f : !dc.future<tensor<16x16xf32>>
  %e = tensor.empty() : tensor<4x16xf32>
  %y = linalg.matmul ins(%x, %full : tensor<4x16xf32>, tensor<16x16xf32>)
                     outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  dc.release %full : tensor<16x16xf32>
  %o = dc.offload_start %y : tensor<4x16xf32>
  %h = dc.wait %o : !dc.future<!dc.host<tensor<4x16xf32>>>
  %gw = arith.constant dense<1.0> : tensor<16x16xf32>
  %r = dc.reduce_scatter_start sum %gw : tensor<16x16xf32> -> !dc.future<!w>
  %l = dc.reload_start %h : !dc.host<tensor<4x16xf32>>
  %back = dc.wait %l : !dc.future<tensor<4x16xf32>>
  %s = dc.end_backward %r : !dc.future<!w>
  return %back, %s : tensor<4x16xf32>, !w
}

func.func @persistent(%w: !w) -> tensor<16x16xf32> {
  %f = dc.gather_start %w {persistent} : !w -> !dc.future<tensor<16x16xf32>>
  %full = dc.wait %f : !dc.future<tensor<16x16xf32>>
  %e = tensor.empty() : tensor<16x16xf32>
  %y = linalg.add ins(%full, %full : tensor<16x16xf32>, tensor<16x16xf32>)
                  outs(%e : tensor<16x16xf32>) -> tensor<16x16xf32>
  return %y : tensor<16x16xf32>
}

func.func @views(%x: tensor<4x16xf32>) -> tensor<64xf32> {
  %e = tensor.empty() : tensor<4x16xf32>
  %y = linalg.add ins(%x, %x : tensor<4x16xf32>, tensor<4x16xf32>)
                  outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %c = tensor.collapse_shape %y [[0, 1]] : tensor<4x16xf32> into tensor<64xf32>
  %e2 = tensor.empty() : tensor<64xf32>
  %z = linalg.add ins(%c, %c : tensor<64xf32>, tensor<64xf32>)
                  outs(%e2 : tensor<64xf32>) -> tensor<64xf32>
  return %z : tensor<64xf32>
}
)mlir";

TEST_F(AnalysisTest, TimelineOfGatherOffloadAndReduceScatter) {
  auto module = parse(kTimelineIR);
  FailureOr<MemoryTimeline> timeline =
      MemoryTimeline::compute(getFunc(*module, "step"));
  ASSERT_TRUE(succeeded(timeline));
  // Whole function: the arguments %w (512) and %x (256).
  EXPECT_EQ(timeline->getBaseDeviceBytes(), 768);
  // 0-4: the gathered 1 KiB until its release; the matmul's tensor.empty
  // init allocates nothing (the matmul writes its result in place);
  // 3-6: %y until its offload is waited; 7-11: the gradient until
  // end_backward waits its reduce-scatter; the returned values from where
  // they are made to the end: the reduced shard (512) from its start (8),
  // the reloaded tensor (256) from its reload (9).
  std::vector<int64_t> expected = {1792, 1792, 1792, 2048, 2048, 1024, 1024,
                                   1792, 2304, 2560, 2560, 2560, 1536};
  EXPECT_EQ(deviceBytes(*timeline), expected);
  EXPECT_EQ(timeline->getPeakDeviceBytes(), 2560);
  EXPECT_EQ(timeline->getPeakIndex(), 9u);
  // The host copy lives from its offload to the wait of its reload.
  for (size_t i = 0; i < 13; ++i)
    EXPECT_EQ(timeline->hostBytesAt(i), i >= 5 && i <= 10 ? 256 : 0) << i;
  EXPECT_EQ(timeline->getPeakHostBytes(), 256);
  // end_backward touches the gradient and the reduced shard.
  EXPECT_EQ(timeline->getFloorBytes(), 768 + 1024 + 512);

  Operation *matmul = timeline->getOps()[3];
  EXPECT_EQ(timeline->indexOf(matmul), 3u);
  const Buffer *gathered = nullptr;
  for (const Buffer &buffer : timeline->getBuffers())
    if (buffer.value.getDefiningOp() == timeline->getOps()[0])
      gathered = &buffer;
  ASSERT_TRUE(gathered);
  EXPECT_EQ(gathered->bytes, 1024);
  EXPECT_EQ(gathered->begin, 0u);
  EXPECT_EQ(gathered->end, 4u);
}

// A planner moves and inserts ops and states what that does to the
// buffers; each edit must leave the timeline a recomputation would give.
TEST_F(AnalysisTest, TimelineEditsMatchARecomputedTimeline) {
  auto module = parse(kTimelineIR);
  func::FuncOp step = getFunc(*module, "step");
  FailureOr<MemoryTimeline> timeline = MemoryTimeline::compute(step);
  ASSERT_TRUE(succeeded(timeline));
  auto opAt = [&](size_t i) { return timeline->getOps()[i]; };
  // The reload (9) earlier, before the constant (7): its destination is
  // live from there, the peak moves with it.
  ASSERT_TRUE(isa<ReloadStartOp>(opAt(9)));
  timeline->moveOp(9, 7);
  EXPECT_TRUE(timeline->equalsRecomputed(step));
  EXPECT_TRUE(isa<ReloadStartOp>(opAt(7)));
  EXPECT_EQ(timeline->getPeakDeviceBytes(), 2560);
  EXPECT_EQ(timeline->getPeakIndex(), 9u);
  // And back later, before the reload's wait (10).
  timeline->moveOp(7, 10);
  EXPECT_TRUE(timeline->equalsRecomputed(step));
  EXPECT_TRUE(isa<ReloadStartOp>(opAt(9)));
  // The gather's release (4) later, before the offload's wait (6): the
  // gathered buffer, which it ends, stays live over the offload.
  ASSERT_TRUE(isa<ReleaseOp>(opAt(4)));
  timeline->moveOp(4, 6);
  EXPECT_TRUE(timeline->equalsRecomputed(step));
  EXPECT_EQ(timeline->deviceBytesAt(4), 2048);
  // An op that allocates and reads nothing, inserted before the matmul:
  // live with what spans it.
  OpBuilder builder(opAt(3));
  auto empty = tensor::EmptyOp::create(
      builder, step.getLoc(), ArrayRef<int64_t>{4, 16}, builder.getF32Type());
  timeline->insertOp(empty, 3);
  EXPECT_TRUE(timeline->equalsRecomputed(step));
  EXPECT_EQ(timeline->indexOf(empty), 3u);
  EXPECT_EQ(timeline->getOps().size(), 14u);
  // A stale edit is caught: the IR moved, the timeline not.
  opAt(10)->moveBefore(opAt(8));
  EXPECT_FALSE(timeline->equalsRecomputed(step));
}

TEST_F(AnalysisTest, TimelineKeepsPersistentGathersAndAliasesViews) {
  auto module = parse(kTimelineIR);
  FailureOr<MemoryTimeline> persistent =
      MemoryTimeline::compute(getFunc(*module, "persistent"));
  ASSERT_TRUE(succeeded(persistent));
  // Base: the shard (512); the persistent gather (1024) never ends; the
  // returned sum (1024) lives from the add; the add's empty init allocates
  // nothing.
  EXPECT_EQ(deviceBytes(*persistent),
            (std::vector<int64_t>{1536, 1536, 1536, 2560, 2560}));
  EXPECT_EQ(persistent->getPeakIndex(), 3u);
  EXPECT_EQ(persistent->getFloorBytes(), 512 + 1024 + 1024);

  FailureOr<MemoryTimeline> views =
      MemoryTimeline::compute(getFunc(*module, "views"));
  ASSERT_TRUE(succeeded(views));
  // The collapsed tensor is %y's buffer, which lives until %z reads it;
  // the empties allocate nothing: buffers are %x, %y and %z (returned,
  // from where it is made).
  EXPECT_EQ(views->getBuffers().size(), 3u);
  EXPECT_EQ(deviceBytes(*views),
            (std::vector<int64_t>{256, 512, 512, 512, 768, 512}));
  EXPECT_EQ(views->getPeakDeviceBytes(), 768);
  EXPECT_EQ(views->getPeakIndex(), 4u);
}

TEST_F(AnalysisTest, TimelineKeepsAnAllReduceInputUntilItsWait) {
  auto module = parse(R"mlir(
shard.grid @world(shape = 2)
func.func @step(%x: tensor<16xf32>) -> tensor<16xf32> {
  %e = tensor.empty() : tensor<16xf32>
  %g = linalg.add ins(%x, %x : tensor<16xf32>, tensor<16xf32>)
                  outs(%e : tensor<16xf32>) -> tensor<16xf32>
  %r = dc.all_reduce_start sum %g on @world[0] : tensor<16xf32>
  %e2 = tensor.empty() : tensor<16xf32>
  %y = linalg.add ins(%x, %x : tensor<16xf32>, tensor<16xf32>)
                  outs(%e2 : tensor<16xf32>) -> tensor<16xf32>
  %s = dc.wait %r : !dc.future<tensor<16xf32>>
  %e3 = tensor.empty() : tensor<16xf32>
  %z = linalg.add ins(%s, %y : tensor<16xf32>, tensor<16xf32>)
                  outs(%e3 : tensor<16xf32>) -> tensor<16xf32>
  return %z : tensor<16xf32>
}
)mlir");
  FailureOr<MemoryTimeline> timeline =
      MemoryTimeline::compute(getFunc(*module, "step"));
  ASSERT_TRUE(succeeded(timeline));
  // The runtime reads %g until the all-reduce is waited (op 5), as for
  // every other start: it is live at the second add (op 4).
  const Buffer *input = nullptr;
  for (const Buffer &buffer : timeline->getBuffers())
    if (buffer.value.getDefiningOp() == timeline->getOps()[1])
      input = &buffer;
  ASSERT_TRUE(input);
  EXPECT_EQ(input->begin, 1u);
  EXPECT_GE(input->end, 5u);
}

TEST_F(AnalysisTest, TimelineRejectsDynamicShapesAndBranches) {
  auto module = parse(R"mlir(
func.func @dynamic(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  return %x : tensor<?x4xf32>
}
func.func @dynamicOp(%n: index) {
  %e = tensor.empty(%n) : tensor<?xf32>
  return
}
func.func @branchy(%x: tensor<4xf32>) -> tensor<4xf32> {
  cf.br ^next
^next:
  return %x : tensor<4xf32>
}
)mlir");
  std::string message;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    message = diag.str();
    return success();
  });
  EXPECT_TRUE(failed(MemoryTimeline::compute(getFunc(*module, "dynamic"))));
  EXPECT_EQ(message, "cannot plan the memory of 'dynamic': argument #0 has "
                     "the dynamically shaped type 'tensor<?x4xf32>' (dc needs "
                     "static shapes)");
  EXPECT_TRUE(failed(MemoryTimeline::compute(getFunc(*module, "dynamicOp"))));
  EXPECT_EQ(message, "cannot plan the memory of 'dynamicOp': result #0 of "
                     "tensor.empty has the dynamically shaped type "
                     "'tensor<?xf32>' (dc needs static shapes)");
  EXPECT_TRUE(failed(MemoryTimeline::compute(getFunc(*module, "branchy"))));
  EXPECT_EQ(message, "cannot plan the memory of 'branchy': its body has 2 "
                     "blocks, dc plans straight-line steps (one block)");
}

} // namespace
