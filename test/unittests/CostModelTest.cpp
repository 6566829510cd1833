//===- CostModelTest.cpp - FLOPs, bytes and times of ops ------------------===//
#include "AnalysisTestUtils.h"

#include "dc/Analysis/CostModel.h"
#include "dc/Analysis/MemoryTimeline.h"
#include "dc/Dialect/DC/IR/TypeSizes.h"
#include "dc/Target/TargetDescription.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace mlir;
using namespace dc;
using namespace dc::unittest;

namespace {

//===----------------------------------------------------------------------===//
// FLOPs, bytes and compute time
//===----------------------------------------------------------------------===//

constexpr llvm::StringLiteral kComputeIR = R"mlir(
#id = affine_map<(i) -> (i)>
#mk = affine_map<(i, k) -> (i, k)>
#k = affine_map<(i, k) -> (k)>
#m = affine_map<(i, k) -> (i)>
func.func @compute(%a: tensor<64x32xf32>, %b: tensor<32x16xf32>,
                   %ba: tensor<4x8x16xbf16>, %bb: tensor<4x16x8xbf16>,
                   %x: tensor<128xf32>, %y: tensor<128xf32>, %v: tensor<32xf32>)
    -> (tensor<64x16xf32>, tensor<4x8x8xbf16>, tensor<128xf32>, tensor<64xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<64x16xf32>) -> tensor<64x16xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<64x32xf32>, tensor<32x16xf32>)
                      outs(%z : tensor<64x16xf32>) -> tensor<64x16xf32>
  %eb = tensor.empty() : tensor<4x8x8xbf16>
  %bmm = linalg.batch_matmul ins(%ba, %bb : tensor<4x8x16xbf16>, tensor<4x16x8xbf16>)
                             outs(%eb : tensor<4x8x8xbf16>) -> tensor<4x8x8xbf16>
  %ex = tensor.empty() : tensor<128xf32>
  %g = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%x, %y : tensor<128xf32>, tensor<128xf32>) outs(%ex : tensor<128xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %mul = arith.mulf %p, %q : f32
    %exp = math.exp %p : f32
    %sum = arith.addf %mul, %exp : f32
    linalg.yield %sum : f32
  } -> tensor<128xf32>
  %ev = tensor.empty() : tensor<64xf32>
  %mv = linalg.generic {indexing_maps = [#mk, #k, #m], iterator_types = ["parallel", "reduction"]}
      ins(%a, %v : tensor<64x32xf32>, tensor<32xf32>) outs(%ev : tensor<64xf32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %mul = arith.mulf %p, %q : f32
    %sum = arith.addf %acc, %mul : f32
    linalg.yield %sum : f32
  } -> tensor<64xf32>
  return %mm, %bmm, %g, %mv : tensor<64x16xf32>, tensor<4x8x8xbf16>, tensor<128xf32>, tensor<64xf32>
}
)mlir";

TEST_F(AnalysisTest, CountsExactFlopsAndBytesOfLinalgOps) {
  auto module = parse(kComputeIR);
  func::FuncOp fn = getFunc(*module, "compute");
  Operation *fill = opAt(fn, 2), *matmul = opAt(fn, 3), *batch = opAt(fn, 5),
            *generic = opAt(fn, 7), *matvec = opAt(fn, 9);

  EXPECT_EQ(CostModel::countFlops(matmul), 2.0 * 64 * 16 * 32);
  EXPECT_EQ(CostModel::countFlops(batch), 2.0 * 4 * 8 * 8 * 16);
  // mulf + exp + addf per element.
  EXPECT_EQ(CostModel::countFlops(generic), 3.0 * 128);
  EXPECT_EQ(CostModel::countFlops(matvec), 2.0 * 64 * 32);
  EXPECT_EQ(CostModel::countFlops(fill), 0.0);
  EXPECT_EQ(CostModel::countFlops(opAt(fn, 1)), 0.0); // tensor.empty

  // ins + the accumulated init (read) + the result.
  EXPECT_EQ(CostModel::countBytes(matmul), 8192 + 2048 + 4096 + 4096);
  EXPECT_EQ(CostModel::countBytes(batch), 1024 + 1024 + 512 + 512);
  // The init of an elementwise op is only written: ins + result.
  EXPECT_EQ(CostModel::countBytes(generic), 512 + 512 + 512);
  EXPECT_EQ(CostModel::countBytes(matvec), 8192 + 128 + 256 + 256);
  EXPECT_EQ(CostModel::countBytes(fill), 4096);

  EXPECT_EQ(
      getTypeBytes(RankedTensorType::get({3, 5}, Float32Type::get(&context))),
      60);
  EXPECT_EQ(
      getTypeBytes(RankedTensorType::get({7}, BFloat16Type::get(&context))),
      14);
  EXPECT_EQ(getTypeBytes(RankedTensorType::get({ShapedType::kDynamic},
                                               Float32Type::get(&context))),
            0);
}

TEST_F(AnalysisTest, ComputeTimeIsLaunchPlusRooflineAtTheRightRate) {
  auto module = parse(kComputeIR);
  func::FuncOp fn = getFunc(*module, "compute");
  TargetDescription target;
  target.matmulFlops16 = 1e11;
  target.matmulFlops32 = 1e10;
  target.vectorFlops = 1e9;
  target.memoryBandwidth = 1e12;
  target.opLaunchLatency = 1e-6;
  CostModel model(target);

  OpCost matmul = model.estimate(opAt(fn, 3));
  EXPECT_EQ(matmul.stream, StreamKind::Compute);
  EXPECT_EQ(matmul.flops, 65536.0);
  EXPECT_EQ(matmul.bytes, 18432);
  // f32 output: the f32 matrix rate; compute-bound.
  EXPECT_DOUBLE_EQ(matmul.seconds, 1e-6 + 65536 / 1e10);
  // bf16 output: the 16-bit matrix rate.
  EXPECT_DOUBLE_EQ(model.estimate(opAt(fn, 5)).seconds, 1e-6 + 8192 / 1e11);
  // A generic contraction is a matmul too.
  EXPECT_DOUBLE_EQ(model.estimate(opAt(fn, 9)).seconds, 1e-6 + 4096 / 1e10);
  // Elementwise: the vector rate.
  EXPECT_DOUBLE_EQ(model.estimate(opAt(fn, 7)).seconds, 1e-6 + 384 / 1e9);
  // No FLOPs: memory-bound.
  EXPECT_DOUBLE_EQ(model.estimate(opAt(fn, 2)).seconds, 1e-6 + 4096 / 1e12);

  // Constants, empties and the terminator cost nothing.
  EXPECT_EQ(model.estimate(opAt(fn, 0)).seconds, 0.0);
  EXPECT_EQ(model.estimate(opAt(fn, 0)).stream, StreamKind::Compute);
  EXPECT_EQ(model.estimate(opAt(fn, 1)).seconds, 0.0);
  OpCost ret = model.estimate(opAt(fn, 10));
  EXPECT_EQ(ret.stream, StreamKind::None);
  EXPECT_EQ(ret.seconds, 0.0);

  std::vector<OpCost> all = model.estimateFunction(fn);
  ASSERT_EQ(all.size(), 11u);
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].seconds, model.estimate(opAt(fn, i)).seconds) << i;
    EXPECT_EQ(all[i].stream, model.estimate(opAt(fn, i)).stream) << i;
  }
}

constexpr llvm::StringLiteral kFillsIR = R"mlir(
#rc = affine_map<(r, c) -> (r, c)>
#r = affine_map<(r, c) -> (r)>
func.func @fills(%a: tensor<64x32xbf16>, %b: tensor<32x16xbf16>,
                 %x: tensor<64x32xf32>)
    -> (tensor<64x16xbf16>, tensor<64xf32>, tensor<64xf32>, tensor<64x16xbf16>,
        tensor<64xf32>, tensor<64x32xf32>) {
  %zero = arith.constant 0.0 : bf16
  %zero32 = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %one = arith.constant 1.0 : bf16
  %e = tensor.empty() : tensor<64x16xbf16>
  %z = linalg.fill ins(%zero : bf16) outs(%e : tensor<64x16xbf16>) -> tensor<64x16xbf16>
  %mm = linalg.matmul ins(%a, %b : tensor<64x32xbf16>, tensor<32x16xbf16>)
                      outs(%z : tensor<64x16xbf16>) -> tensor<64x16xbf16>
  %er = tensor.empty() : tensor<64xf32>
  %m0 = linalg.fill ins(%ninf : f32) outs(%er : tensor<64xf32>) -> tensor<64xf32>
  %max = linalg.generic {indexing_maps = [#rc, #r], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<64x32xf32>) outs(%m0 : tensor<64xf32>) {
  ^bb0(%p: f32, %acc: f32):
    %m = arith.maximumf %acc, %p : f32
    linalg.yield %m : f32
  } -> tensor<64xf32>
  %s0 = linalg.fill ins(%ninf : f32) outs(%er : tensor<64xf32>) -> tensor<64xf32>
  %sum = linalg.generic {indexing_maps = [#rc, #r], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<64x32xf32>) outs(%s0 : tensor<64xf32>) {
  ^bb0(%p: f32, %acc: f32):
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  %o = linalg.fill ins(%one : bf16) outs(%e : tensor<64x16xbf16>) -> tensor<64x16xbf16>
  %acc = linalg.matmul ins(%a, %b : tensor<64x32xbf16>, tensor<32x16xbf16>)
                       outs(%o : tensor<64x16xbf16>) -> tensor<64x16xbf16>
  %twice = linalg.fill ins(%zero32 : f32) outs(%er : tensor<64xf32>) -> tensor<64xf32>
  %ex = tensor.empty() : tensor<64x32xf32>
  %bcast = linalg.generic {indexing_maps = [#r, #rc], iterator_types = ["parallel", "parallel"]}
      ins(%twice : tensor<64xf32>) outs(%ex : tensor<64x32xf32>) {
  ^bb0(%p: f32, %out: f32):
    linalg.yield %p : f32
  } -> tensor<64x32xf32>
  return %mm, %max, %sum, %acc, %twice, %bcast : tensor<64x16xbf16>, tensor<64xf32>, tensor<64xf32>, tensor<64x16xbf16>, tensor<64xf32>, tensor<64x32xf32>
}
)mlir";

TEST_F(AnalysisTest, GPUTargetsFoldFillsIntoTheOpThatOverwritesThem) {
  auto module = parse(kFillsIR);
  func::FuncOp fn = getFunc(*module, "fills");
  TargetDescription h200 = cantFail(TargetDescription::getPreset("h200"));
  TargetDescription cpu = cantFail(TargetDescription::getPreset("cpu"));
  CostModel gpu(h200), host(cpu);
  auto fillAt = [&](size_t i) {
    Operation *op = opAt(fn, i);
    EXPECT_TRUE(isa<linalg::FillOp>(op)) << i;
    return op;
  };
  // A product's zero fill and a max's -inf fill: no kernel on the GPU; the
  // CPU backend runs them.
  for (size_t i : {5, 8}) {
    EXPECT_EQ(gpu.estimate(fillAt(i)).seconds, 0.0) << i;
    EXPECT_EQ(gpu.estimate(fillAt(i)).stream, StreamKind::Compute) << i;
    EXPECT_GT(host.estimate(fillAt(i)).seconds, 0.0) << i;
  }
  // Not the identity of what reads it (a sum's -inf, a product's 1), or
  // read as an input (the broadcast): a kernel of its own.
  for (size_t i : {10, 12, 14})
    EXPECT_DOUBLE_EQ(gpu.estimate(fillAt(i)).seconds,
                     h200.opLaunchLatency + CostModel::countBytes(fillAt(i)) /
                                                h200.memoryBandwidth)
        << i;
}

/// A bshd attention backward whose dq and dk are copied into slices of the
/// fused gradient, dq through a collapse; dv is copied too but also
/// returned; an f32 op's dq is copied.
constexpr llvm::StringLiteral kAttentionCopiesIR = R"mlir(
func.func @copies(%q: tensor<2x8x2x8xbf16>, %lse: tensor<2x2x8xf32>,
                  %q32: tensor<2x8x2x8xf32>, %lse32: tensor<2x2x8xf32>)
    -> (tensor<16x48xbf16>, tensor<2x8x2x8xbf16>, tensor<2x8x2x8xf32>) {
  %dq, %dk, %dv = dc.attention_grad %q, %q, %q, %q, %lse, %q causal bshd scale = 0.5 : tensor<2x8x2x8xbf16>, tensor<2x8x2x8xbf16>, tensor<2x8x2x8xbf16>, tensor<2x8x2x8xbf16>, tensor<2x2x8xf32>, tensor<2x8x2x8xbf16> -> tensor<2x8x2x8xbf16>, tensor<2x8x2x8xbf16>, tensor<2x8x2x8xbf16>
  %e = tensor.empty() : tensor<16x48xbf16>
  %dq2 = tensor.collapse_shape %dq [[0, 1], [2, 3]] : tensor<2x8x2x8xbf16> into tensor<16x16xbf16>
  %g0 = tensor.insert_slice %dq2 into %e[0, 0] [16, 16] [1, 1] : tensor<16x16xbf16> into tensor<16x48xbf16>
  %dk2 = tensor.collapse_shape %dk [[0, 1], [2, 3]] : tensor<2x8x2x8xbf16> into tensor<16x16xbf16>
  %g1 = tensor.insert_slice %dk2 into %g0[0, 16] [16, 16] [1, 1] : tensor<16x16xbf16> into tensor<16x48xbf16>
  %dv2 = tensor.collapse_shape %dv [[0, 1], [2, 3]] : tensor<2x8x2x8xbf16> into tensor<16x16xbf16>
  %g2 = tensor.insert_slice %dv2 into %g1[0, 32] [16, 16] [1, 1] : tensor<16x16xbf16> into tensor<16x48xbf16>
  %fq, %fk, %fv = dc.attention_grad %q32, %q32, %q32, %q32, %lse32, %q32 causal bshd scale = 0.5 : tensor<2x8x2x8xf32>, tensor<2x8x2x8xf32>, tensor<2x8x2x8xf32>, tensor<2x8x2x8xf32>, tensor<2x2x8xf32>, tensor<2x8x2x8xf32> -> tensor<2x8x2x8xf32>, tensor<2x8x2x8xf32>, tensor<2x8x2x8xf32>
  %e32 = tensor.empty() : tensor<2x16x2x8xf32>
  %f0 = tensor.insert_slice %fq into %e32[0, 0, 0, 0] [2, 8, 2, 8] [1, 1, 1, 1] : tensor<2x8x2x8xf32> into tensor<2x16x2x8xf32>
  return %g2, %dv, %fk : tensor<16x48xbf16>, tensor<2x8x2x8xbf16>, tensor<2x8x2x8xf32>
}
)mlir";

TEST_F(AnalysisTest, GPUTargetsWriteAttentionOutputsWhereTheyAreCopied) {
  auto module = parse(kAttentionCopiesIR);
  func::FuncOp fn = getFunc(*module, "copies");
  TargetDescription h200 = cantFail(TargetDescription::getPreset("h200"));
  TargetDescription cpu = cantFail(TargetDescription::getPreset("cpu"));
  CostModel gpu(h200), host(cpu);
  auto insertAt = [&](size_t i) {
    Operation *op = opAt(fn, i);
    EXPECT_TRUE(isa<tensor::InsertSliceOp>(op)) << i;
    return op;
  };
  // dq (through its collapse) and dk: the runtime writes the slice, no
  // copy on the GPU; the CPU backend copies.
  for (size_t i : {3, 5}) {
    EXPECT_EQ(gpu.estimate(insertAt(i)).seconds, 0.0) << i;
    EXPECT_GT(host.estimate(insertAt(i)).seconds, 0.0) << i;
  }
  // dv is returned as well (its own buffer), and the f32 op is expanded
  // to linalg: real copies.
  for (size_t i : {7, 10})
    EXPECT_GT(gpu.estimate(insertAt(i)).seconds, 0.0) << i;
}

//===----------------------------------------------------------------------===//
// Collectives and copies
//===----------------------------------------------------------------------===//

TEST_F(AnalysisTest, CollectiveSecondsFollowTheMeasuredCurve) {
  CostModel model(cantFail(TargetDescription::getPreset("h200")));
  auto allGather = [&](int64_t bytes, int64_t n) {
    return model.collectiveSeconds(CollectiveKind::AllGather, bytes, n);
  };
  // At the curve points: (n-1)/n * bytes / busbw.
  EXPECT_DOUBLE_EQ(allGather(kMiB, 2), 0.5 * kMiB / 12e9);
  EXPECT_DOUBLE_EQ(allGather(16 * kMiB, 2), 0.5 * 16 * kMiB / 146e9);
  EXPECT_DOUBLE_EQ(allGather(128 * kMiB, 2), 0.5 * 128 * kMiB / 227e9);
  EXPECT_DOUBLE_EQ(allGather(kGiB, 2), 0.5 * kGiB / 268e9);
  // Between points: linear in log2(bytes). 4 MiB is halfway 1 -> 16 MiB,
  // 512 MiB two thirds of the way 128 MiB -> 1 GiB.
  EXPECT_DOUBLE_EQ(allGather(4 * kMiB, 2), 0.5 * 4 * kMiB / 79e9);
  EXPECT_DOUBLE_EQ(allGather(512 * kMiB, 2),
                   0.5 * 512 * kMiB / (227e9 + 2.0 / 3.0 * 41e9));
  // Clamped at both ends; the latency is the floor.
  EXPECT_DOUBLE_EQ(allGather(4 * kGiB, 2), 0.5 * 4 * kGiB / 268e9);
  EXPECT_DOUBLE_EQ(allGather(256 * 1024, 2), 20e-6);
  EXPECT_DOUBLE_EQ(allGather(0, 2), 20e-6);
  // Group sizes.
  EXPECT_EQ(allGather(kGiB, 1), 0.0);
  EXPECT_DOUBLE_EQ(allGather(kGiB, 3), 2.0 / 3.0 * kGiB / 268e9);
  EXPECT_DOUBLE_EQ(
      model.collectiveSeconds(CollectiveKind::ReduceScatter, 16 * kMiB, 3),
      2.0 / 3.0 * 16 * kMiB / 146e9);
  // No curve for these: alpha + beta with the bus bandwidth.
  EXPECT_DOUBLE_EQ(model.collectiveSeconds(CollectiveKind::AllToAll, kMiB, 4),
                   20e-6 + 0.75 * kMiB / 268e9);
  EXPECT_DOUBLE_EQ(model.collectiveSeconds(CollectiveKind::AllReduce, kMiB, 2),
                   20e-6 + 1.0 * kMiB / 268e9);
  EXPECT_DOUBLE_EQ(model.collectiveSeconds(CollectiveKind::AllReduce, kMiB, 4),
                   20e-6 + 1.5 * kMiB / 268e9);
  EXPECT_EQ(model.collectiveSeconds(CollectiveKind::AllReduce, kMiB, 1), 0.0);

  EXPECT_DOUBLE_EQ(model.copySeconds(kGiB), 10e-6 + kGiB / 55e9);

  // Without a curve, all-gathers are alpha-beta as well.
  CostModel cpu(cantFail(TargetDescription::getPreset("cpu")));
  EXPECT_DOUBLE_EQ(cpu.collectiveSeconds(CollectiveKind::AllGather, kMiB, 2),
                   20e-6 + 0.5 * kMiB / 5e9);
}

// Topology: h200-cluster (8 GPUs a node, NVLink inside: the h200 curve and
// alpha-beta; 46 GB/s and 10 us per network step per GPU between nodes).
TEST_F(AnalysisTest, CollectivesAcrossNodesCostTheSlowerLevel) {
  CostModel model(cantFail(TargetDescription::getPreset("h200-cluster")));
  auto seconds = [&](CollectiveKind kind, int64_t bytes, int64_t n,
                     int64_t stride) {
    return model.collectiveSeconds(kind, bytes, n, stride);
  };
  // Inside a node (axis 1 of a 4 x 8 grid): the NVLink curve alone.
  EXPECT_DOUBLE_EQ(seconds(CollectiveKind::AllGather, kGiB, 8, 1),
                   7.0 / 8.0 * kGiB / 268e9);
  // Axis 0 of 4 x 8: one member per node, one NIC: 3 network steps and
  // 3/4 of 1 GiB at 46 GB/s (NVLink alone would take 3.0 ms).
  EXPECT_DOUBLE_EQ(seconds(CollectiveKind::AllGather, kGiB, 4, 8),
                   3 * 10e-6 + 0.75 * kGiB / 46e9);
  EXPECT_DOUBLE_EQ(seconds(CollectiveKind::ReduceScatter, kGiB, 4, 8),
                   3 * 10e-6 + 0.75 * kGiB / 46e9);
  // 32 ranks in one group over 4 nodes: 8 NICs per node carry the ring
  // (368 GB/s), so NVLink's 268 GB/s is the slower level.
  EXPECT_DOUBLE_EQ(seconds(CollectiveKind::AllGather, kGiB, 32, 1),
                   31.0 / 32.0 * kGiB / 268e9);
  // ... except for small sizes, where the network's 3 steps dominate.
  EXPECT_DOUBLE_EQ(seconds(CollectiveKind::AllGather, 1024, 32, 1),
                   3 * 10e-6 + 31.0 / 32.0 * 1024 / (8 * 46e9));
  // All-reduce over 4 nodes: the tree's 2 log2(4) = 4 steps beat the
  // ring's 2 * 3; over 2 nodes both take 2.
  EXPECT_DOUBLE_EQ(seconds(CollectiveKind::AllReduce, 64 * kMiB, 4, 8),
                   4 * 10e-6 + 1.5 * 64 * kMiB / 46e9);
  EXPECT_DOUBLE_EQ(seconds(CollectiveKind::AllReduce, 64 * kMiB, 2, 8),
                   2 * 10e-6 + 1.0 * 64 * kMiB / 46e9);
  // All-to-all over 32: each NIC sends the 24/32 bound for other nodes.
  EXPECT_DOUBLE_EQ(seconds(CollectiveKind::AllToAll, kMiB, 32, 1),
                   10e-6 + 24.0 / 32.0 * kMiB / 46e9);

  // The h200 preset is one node without a network: a larger group is
  // costed as one NVLink domain.
  CostModel node(cantFail(TargetDescription::getPreset("h200")));
  EXPECT_DOUBLE_EQ(
      node.collectiveSeconds(CollectiveKind::AllGather, kGiB, 4, 8),
      0.75 * kGiB / 268e9);
}

constexpr llvm::StringLiteral kNodesIR = R"mlir(
shard.grid @nodes(shape = 4x8)
!in = !dc.shard<tensor<1024x1024xbf16>, @nodes[1], local = 131072>
!across = !dc.shard<tensor<1024x1024xbf16>, @nodes[0], local = 262144>
func.func @hsdp(%a: !in, %b: !across, %g: tensor<1024x1024xbf16>)
    -> (tensor<1024x1024xbf16>) {
  %f = dc.gather_start %a : !in -> !dc.future<tensor<1024x1024xbf16>>
  %h = dc.gather_start %b : !across -> !dc.future<tensor<1024x1024xbf16>>
  %r = dc.all_reduce_start average %g on @nodes[0] : tensor<1024x1024xbf16>
  %x = dc.wait %f : !dc.future<tensor<1024x1024xbf16>>
  %y = dc.wait %h : !dc.future<tensor<1024x1024xbf16>>
  %z = dc.wait %r : !dc.future<tensor<1024x1024xbf16>>
  return %z : tensor<1024x1024xbf16>
}
)mlir";

// The grid's shape places each axis: axis 1 of 4 x 8 stays in a node,
// axis 0 crosses the network; all-reduces are costed too.
TEST_F(AnalysisTest, GridAxesMapToNodes) {
  auto module = parse(kNodesIR);
  func::FuncOp fn = getFunc(*module, "hsdp");
  CostModel model(cantFail(TargetDescription::getPreset("h200-cluster")));
  OpCost inNode = model.estimate(opAt(fn, 0));
  EXPECT_DOUBLE_EQ(
      inNode.seconds,
      model.collectiveSeconds(CollectiveKind::AllGather, 2 * kMiB, 8, 1));
  OpCost across = model.estimate(opAt(fn, 1));
  EXPECT_DOUBLE_EQ(across.seconds, 3 * 10e-6 + 0.75 * 2 * kMiB / 46e9);
  OpCost allReduce = model.estimate(opAt(fn, 2));
  EXPECT_EQ(allReduce.stream, StreamKind::Collective);
  EXPECT_EQ(allReduce.bytes, 2 * kMiB);
  EXPECT_DOUBLE_EQ(allReduce.seconds, 4 * 10e-6 + 1.5 * 2 * kMiB / 46e9);
}

constexpr llvm::StringLiteral kTransferIR = R"mlir(
shard.grid @world(shape = 2)
shard.grid @grid2d(shape = 2x4)
shard.grid @solo(shape = 1)
!w0 = !dc.shard<tensor<1024x1024xbf16>, @world[0], local = 524288>
!w1 = !dc.shard<tensor<1024xbf16>, @world[0], local = 512>
!w2 = !dc.shard<tensor<6x5xf32>, @world[0], local = 15>
!ws = !dc.shard<tensor<6x5xf32>, @solo[0], local = 30>
func.func @transfers(%w0: !w0, %w1: !w1, %w2: !w2, %ws: !ws,
                     %g: tensor<1024x1024xbf16>, %x: tensor<1x512x32x64xbf16>)
    -> (!w0, tensor<1x2048x8x64xbf16>, tensor<1024x1024xbf16>) {
  %f:2 = dc.gather_start %w0, %w1 : !w0, !w1
      -> !dc.future<tensor<1024x1024xbf16>>, !dc.future<tensor<1024xbf16>>
  %a = dc.wait %f#0 : !dc.future<tensor<1024x1024xbf16>>
  %b = dc.wait %f#1 : !dc.future<tensor<1024xbf16>>
  dc.release %a : tensor<1024x1024xbf16>
  dc.release %b : tensor<1024xbf16>
  %c = dc.gather_start %w2 : !w2 -> !dc.future<tensor<6x5xbf16>>
  %cw = dc.wait %c : !dc.future<tensor<6x5xbf16>>
  dc.release %cw : tensor<6x5xbf16>
  %r = dc.reduce_scatter_start sum %g : tensor<1024x1024xbf16> -> !dc.future<!w0>
  %s = dc.wait %r : !dc.future<!w0>
  %h = dc.all_to_all %x on @grid2d[1] split 2 concat 1
      : tensor<1x512x32x64xbf16> -> tensor<1x2048x8x64xbf16>
  %o = dc.offload_start %g : tensor<1024x1024xbf16>
  %oh = dc.wait %o : !dc.future<!dc.host<tensor<1024x1024xbf16>>>
  %l = dc.reload_start %oh : !dc.host<tensor<1024x1024xbf16>>
  %lw = dc.wait %l : !dc.future<tensor<1024x1024xbf16>>
  %so = dc.gather_start %ws : !ws -> !dc.future<tensor<6x5xf32>>
  %sw = dc.wait %so : !dc.future<tensor<6x5xf32>>
  dc.release %sw : tensor<6x5xf32>
  return %s, %h, %lw : !w0, tensor<1x2048x8x64xbf16>, tensor<1024x1024xbf16>
}
)mlir";

TEST_F(AnalysisTest, TransfersCostTheirCollectiveOrCopy) {
  auto module = parse(kTransferIR);
  func::FuncOp fn = getFunc(*module, "transfers");
  CostModel model(cantFail(TargetDescription::getPreset("h200")));

  // A fused gather is ONE all-gather of the sum of its full results.
  OpCost fused = model.estimate(opAt(fn, 0));
  EXPECT_EQ(fused.stream, StreamKind::Collective);
  EXPECT_EQ(fused.bytes, 2 * kMiB + 2048);
  EXPECT_DOUBLE_EQ(
      fused.seconds,
      model.collectiveSeconds(CollectiveKind::AllGather, 2 * kMiB + 2048, 2));
  EXPECT_LT(fused.seconds,
            model.collectiveSeconds(CollectiveKind::AllGather, 2 * kMiB, 2) +
                model.collectiveSeconds(CollectiveKind::AllGather, 2048, 2));
  // A gather cast to bf16 moves bf16 bytes.
  EXPECT_EQ(model.estimate(opAt(fn, 5)).bytes, 60);

  OpCost reduce = model.estimate(opAt(fn, 8));
  EXPECT_EQ(reduce.stream, StreamKind::Collective);
  EXPECT_EQ(reduce.bytes, 2 * kMiB);
  EXPECT_DOUBLE_EQ(reduce.seconds,
                   0.5 * 2 * kMiB / (12e9 + 0.25 * (146e9 - 12e9)));

  // Axis 1 of @grid2d has 4 ranks.
  OpCost allToAll = model.estimate(opAt(fn, 10));
  EXPECT_EQ(allToAll.stream, StreamKind::Collective);
  EXPECT_EQ(allToAll.bytes, 2 * kMiB);
  EXPECT_DOUBLE_EQ(allToAll.seconds, 20e-6 + 0.75 * 2 * kMiB / 268e9);

  OpCost offload = model.estimate(opAt(fn, 11));
  EXPECT_EQ(offload.stream, StreamKind::DeviceToHost);
  EXPECT_EQ(offload.bytes, 2 * kMiB);
  EXPECT_DOUBLE_EQ(offload.seconds, 10e-6 + 2 * kMiB / 55e9);
  OpCost reload = model.estimate(opAt(fn, 13));
  EXPECT_EQ(reload.stream, StreamKind::HostToDevice);
  EXPECT_DOUBLE_EQ(reload.seconds, offload.seconds);

  // A group of one rank communicates nothing.
  OpCost solo = model.estimate(opAt(fn, 15));
  EXPECT_EQ(solo.stream, StreamKind::Collective);
  EXPECT_EQ(solo.seconds, 0.0);

  // Waits and releases are bookkeeping.
  for (size_t i : {1, 3, 9, 12}) {
    OpCost bookkeeping = model.estimate(opAt(fn, i));
    EXPECT_EQ(bookkeeping.stream, StreamKind::None) << i;
    EXPECT_EQ(bookkeeping.seconds, 0.0) << i;
  }
}

//===----------------------------------------------------------------------===//
// Fused attention
//===----------------------------------------------------------------------===//

TEST_F(AnalysisTest, AttentionCostsItsKernelAndNoScoreMatrix) {
  auto module = parse(R"mlir(
!t = tensor<4x8x16xbf16>
func.func @causal(%q: !t, %k: !t, %v: !t, %do: !t) -> (!t, !t, !t) {
  %o, %lse = dc.attention %q, %k, %v causal scale = 0.25 : !t, !t, !t -> !t, tensor<4x8xf32>
  %dq, %dk, %dv = dc.attention_grad %q, %k, %v, %o, %lse, %do causal scale = 0.25 : !t, !t, !t, !t, tensor<4x8xf32>, !t -> !t, !t, !t
  return %dq, %dk, %dv : !t, !t, !t
}
func.func @cross(%q: tensor<2x3x5x8xf32>, %kv: tensor<2x3x7x8xf32>) -> tensor<2x3x5x8xf32> {
  %o, %lse = dc.attention %q, %kv, %kv scale = 0.25 : tensor<2x3x5x8xf32>, tensor<2x3x7x8xf32>, tensor<2x3x7x8xf32> -> tensor<2x3x5x8xf32>, tensor<2x3x5xf32>
  return %o : tensor<2x3x5x8xf32>
}
)mlir");
  func::FuncOp causal = getFunc(*module, "causal");
  func::FuncOp cross = getFunc(*module, "cross");
  Operation *forward = opAt(causal, 0), *backward = opAt(causal, 1);

  // 4 B Sq Sk D, halved by the mask; the backward 2.5 times that.
  EXPECT_EQ(CostModel::countFlops(forward), 4.0 * 4 * 8 * 8 * 16 / 2);
  EXPECT_EQ(CostModel::countFlops(backward), 2.5 * 4.0 * 4 * 8 * 8 * 16 / 2);
  EXPECT_EQ(CostModel::countFlops(opAt(cross, 0)), 4.0 * 2 * 3 * 5 * 7 * 8);
  // Operands and results only: q, k, v, o (1 KiB each) and the f32 lse; the
  // backward adds do and the three gradients.
  EXPECT_EQ(CostModel::countBytes(forward), 4 * 1024 + 128);
  EXPECT_EQ(CostModel::countBytes(backward), 8 * 1024 + 128);
  EXPECT_EQ(CostModel::countBytes(opAt(cross, 0)), 960 + 2 * 1344 + 960 + 120);

  TargetDescription target;
  target.matmulFlops16 = 1e11;
  target.matmulFlops32 = 1e10;
  target.vectorFlops = 1e9;
  target.memoryBandwidth = 1e12;
  target.opLaunchLatency = 1e-6;
  CostModel model(target);
  // Compute stream at the matmul rate of the operands' element type.
  OpCost cost = model.estimate(forward);
  EXPECT_EQ(cost.stream, StreamKind::Compute);
  EXPECT_DOUBLE_EQ(cost.seconds, 1e-6 + 8192 / 1e11);
  EXPECT_DOUBLE_EQ(model.estimate(backward).seconds, 1e-6 + 20480 / 1e11);
  EXPECT_DOUBLE_EQ(model.estimate(opAt(cross, 0)).seconds, 1e-6 + 6720 / 1e10);
  // They are compute ops of the step, so a profile can time them.
  EXPECT_EQ(getProfileKey(forward), "causal:0");
  EXPECT_EQ(getProfileKey(backward), "causal:1");

  // Only o and lse live between the two ops: the arguments (4 KiB, all
  // the step holds throughout) and then the returned gradients (3 KiB,
  // from the backward on) plus 1 KiB + 128 bytes, no 4x8x8 score matrix.
  FailureOr<MemoryTimeline> timeline = MemoryTimeline::compute(causal);
  ASSERT_TRUE(succeeded(timeline));
  EXPECT_EQ(timeline->getBaseDeviceBytes(), 4 * 1024);
  EXPECT_EQ(timeline->deviceBytesAt(0), 5 * 1024 + 128);
  EXPECT_EQ(timeline->getPeakDeviceBytes(), 8 * 1024 + 128);
  EXPECT_EQ(timeline->deviceBytesAt(2), 7 * 1024);
}

//===----------------------------------------------------------------------===//
// Mixture-of-experts routing
//===----------------------------------------------------------------------===//

// The routing ops are compute ops of the step: priced at their kernels'
// work whatever the routing, the grouped products on the matrix units,
// timed by a profile under their own keys, and sized by the timeline.
TEST_F(AnalysisTest, RoutingOpsCostTheirKernels) {
  auto module = parse(R"mlir(
func.func @moe(%probs: tensor<16x4xf32>, %x: tensor<16x8xbf16>,
               %w: tensor<4x12x8xbf16>) -> (tensor<16x8xbf16>, tensor<4x12x8xbf16>) {
  %v, %i = dc.topk %probs k = 2 : tensor<16x4xf32> -> tensor<16x2xf32>, tensor<16x2xi64>
  %order, %ends = dc.group_by_expert %i experts = 4 : tensor<16x2xi64> -> tensor<32xi64>, tensor<4xi64>
  %rows = dc.gather_rows %x[%order] : tensor<16x8xbf16>, tensor<32xi64> -> tensor<32x8xbf16>
  %h = dc.grouped_matmul %rows, %w, %ends transpose_rhs : tensor<32x8xbf16>, tensor<4x12x8xbf16>, tensor<4xi64> -> tensor<32x12xbf16>
  %dw = dc.grouped_weight_grad %h, %rows, %ends : tensor<32x12xbf16>, tensor<32x8xbf16>, tensor<4xi64> -> tensor<4x12x8xbf16>
  %y = dc.grouped_matmul %h, %w, %ends : tensor<32x12xbf16>, tensor<4x12x8xbf16>, tensor<4xi64> -> tensor<32x8xbf16>
  %out = dc.scatter_add_rows %y[%order] : tensor<32x8xbf16>, tensor<32xi64> -> tensor<16x8xbf16>
  return %out, %dw : tensor<16x8xbf16>, tensor<4x12x8xbf16>
}
)mlir");
  func::FuncOp fn = getFunc(*module, "moe");
  Operation *topk = opAt(fn, 0), *group = opAt(fn, 1), *gather = opAt(fn, 2),
            *up = opAt(fn, 3), *weightGrad = opAt(fn, 4), *down = opAt(fn, 5),
            *scatter = opAt(fn, 6);

  EXPECT_EQ(CostModel::countFlops(topk), 16.0 * 4 * 2);
  EXPECT_EQ(CostModel::countFlops(group), 3.0 * 32 + 4);
  EXPECT_EQ(CostModel::countFlops(gather), 0.0);
  EXPECT_EQ(CostModel::countFlops(up), 2.0 * 32 * 8 * 12);
  EXPECT_EQ(CostModel::countFlops(down), 2.0 * 32 * 12 * 8);
  EXPECT_EQ(CostModel::countFlops(weightGrad), 2.0 * 32 * 12 * 8);
  EXPECT_EQ(CostModel::countFlops(scatter), 32.0 * 8);
  // Operands and results: x (256 B), the order (256 B), the rows (512 B).
  EXPECT_EQ(CostModel::countBytes(gather), 256 + 256 + 512);

  TargetDescription target;
  target.matmulFlops16 = 1e11;
  target.matmulFlops32 = 1e10;
  target.vectorFlops = 1e9;
  target.memoryBandwidth = 1e15;
  target.opLaunchLatency = 1e-6;
  CostModel model(target);
  // The grouped products at the bf16 matrix rate, top-k at the vector rate.
  OpCost cost = model.estimate(up);
  EXPECT_EQ(cost.stream, StreamKind::Compute);
  EXPECT_DOUBLE_EQ(cost.seconds, 1e-6 + 6144 / 1e11);
  EXPECT_DOUBLE_EQ(model.estimate(weightGrad).seconds, 1e-6 + 6144 / 1e11);
  EXPECT_DOUBLE_EQ(model.estimate(topk).seconds, 1e-6 + 128 / 1e9);
  EXPECT_EQ(getProfileKey(up), "moe:3");
  EXPECT_EQ(getProfileKey(scatter), "moe:6");

  // The timeline sizes the routing's tensors like any other: the peak
  // holds at least the arguments, the rows and the hidden rows.
  FailureOr<MemoryTimeline> timeline = MemoryTimeline::compute(fn);
  ASSERT_TRUE(succeeded(timeline));
  EXPECT_GE(timeline->getPeakDeviceBytes(), 256 + 256 + 768 + 512 + 768);
}

TEST_F(AnalysisTest, GroupedQueryAttentionCountsQueryHeadsAndKVBytes) {
  // 8 query heads over 2 key/value heads: the products run once per query
  // head (as many FLOPs as with 8 key/value heads), but k, v, dk and dv
  // move a quarter of the bytes.
  auto module = parse(R"mlir(
!q = tensor<8x16x32xbf16>
!kv = tensor<2x16x32xbf16>
func.func @gqa(%q: !q, %k: !kv, %v: !kv, %do: !q) -> (!q, !kv, !kv) {
  %o, %lse = dc.attention %q, %k, %v causal scale = 0.25 : !q, !kv, !kv -> !q, tensor<8x16xf32>
  %dq, %dk, %dv = dc.attention_grad %q, %k, %v, %o, %lse, %do causal scale = 0.25 : !q, !kv, !kv, !q, tensor<8x16xf32>, !q -> !q, !kv, !kv
  return %dq, %dk, %dv : !q, !kv, !kv
}
)mlir");
  func::FuncOp gqa = getFunc(*module, "gqa");
  Operation *forward = opAt(gqa, 0), *backward = opAt(gqa, 1);
  EXPECT_EQ(CostModel::countFlops(forward), 4.0 * 8 * 16 * 16 * 32 / 2);
  EXPECT_EQ(CostModel::countFlops(backward), 2.5 * 4.0 * 8 * 16 * 16 * 32 / 2);
  // q and o 8 KiB each, k and v 2 KiB each, lse 512 bytes; the backward
  // adds do and dq (8 KiB each) and dk, dv (2 KiB each).
  EXPECT_EQ(CostModel::countBytes(forward), 2 * 8192 + 2 * 2048 + 512);
  EXPECT_EQ(CostModel::countBytes(backward), 4 * 8192 + 4 * 2048 + 512);
}

//===----------------------------------------------------------------------===//
// Slices and loops
//===----------------------------------------------------------------------===//

/// A scatter-add loop (the form of dc-gen-llama's embedding gradient): 4 rows
/// of 16 (bf16) into an f32 table of 8 rows, one row per iteration.
constexpr llvm::StringLiteral kScatterIR = R"mlir(
#id = affine_map<(i, j) -> (i, j)>
func.func @scatter(%tokens: tensor<4xi32>, %dx: tensor<4x16xbf16>,
                   %count: index) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %e = tensor.empty() : tensor<8x16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %t = scf.for %n = %c0 to %c4 step %c1 iter_args(%acc = %z) -> (tensor<8x16xf32>) {
    %tok = tensor.extract %tokens[%n] : tensor<4xi32>
    %row = arith.index_cast %tok : i32 to index
    %dx_row = tensor.extract_slice %dx[%n, 0] [1, 16] [1, 1] : tensor<4x16xbf16> to tensor<1x16xbf16>
    %acc_row = tensor.extract_slice %acc[%row, 0] [1, 16] [1, 1] : tensor<8x16xf32> to tensor<1x16xf32>
    %sum = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
        ins(%dx_row : tensor<1x16xbf16>) outs(%acc_row : tensor<1x16xf32>) {
    ^bb0(%a: bf16, %o: f32):
      %w = arith.extf %a : bf16 to f32
      %s = arith.addf %o, %w : f32
      linalg.yield %s : f32
    } -> tensor<1x16xf32>
    %next = tensor.insert_slice %sum into %acc[%row, 0] [1, 16] [1, 1] : tensor<1x16xf32> into tensor<8x16xf32>
    scf.yield %next : tensor<8x16xf32>
  }
  %e2 = tensor.empty() : tensor<8x16xf32>
  %z2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %u = scf.for %n = %c0 to %count step %c1 iter_args(%acc = %z2) -> (tensor<8x16xf32>) {
    %dx_row = tensor.extract_slice %dx[%n, 0] [1, 16] [1, 1] : tensor<4x16xbf16> to tensor<1x16xbf16>
    %acc_row = tensor.extract_slice %acc[%n, 0] [1, 16] [1, 1] : tensor<8x16xf32> to tensor<1x16xf32>
    %sum = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
        ins(%dx_row : tensor<1x16xbf16>) outs(%acc_row : tensor<1x16xf32>) {
    ^bb0(%a: bf16, %o: f32):
      %w = arith.extf %a : bf16 to f32
      %s = arith.addf %o, %w : f32
      linalg.yield %s : f32
    } -> tensor<1x16xf32>
    %next = tensor.insert_slice %sum into %acc[%n, 0] [1, 16] [1, 1] : tensor<1x16xf32> into tensor<8x16xf32>
    scf.yield %next : tensor<8x16xf32>
  }
  return %t, %u : tensor<8x16xf32>, tensor<8x16xf32>
}
)mlir";

TEST_F(AnalysisTest, SlicesAndElementsCostWhatTheyTouch) {
  auto module = parse(kScatterIR);
  func::FuncOp fn = getFunc(*module, "scatter");
  auto loop = cast<scf::ForOp>(opAt(fn, 6));
  Block *body = loop.getBody();
  Operation *extract = &*body->begin();
  Operation *indexCast = extract->getNextNode();
  Operation *dxRow = indexCast->getNextNode();
  Operation *generic = dxRow->getNextNode()->getNextNode();
  Operation *insert = generic->getNextNode();

  // One i32 element, not the token tensor.
  EXPECT_EQ(CostModel::countBytes(extract), 4);
  // Scalar index arithmetic touches no tensor.
  EXPECT_EQ(CostModel::countBytes(indexCast), 0);
  // The row read (bf16) and the accumulator row read and written (f32).
  EXPECT_EQ(CostModel::countBytes(generic), 32 + 64 + 64);
  EXPECT_EQ(CostModel::countFlops(generic), 2.0 * 16);
  // The f32 row read and written into the table, not the 8x16 table.
  EXPECT_EQ(CostModel::countBytes(insert), 2 * 64);

  TargetDescription target;
  target.vectorFlops = 1e9;
  target.memoryBandwidth = 1e12;
  target.opLaunchLatency = 1e-6;
  CostModel model(target);
  // An extract_slice is a view of its source: no kernel, no bytes.
  OpCost slice = model.estimate(dxRow);
  EXPECT_EQ(slice.stream, StreamKind::Compute);
  EXPECT_EQ(slice.bytes, 0);
  EXPECT_EQ(slice.seconds, 0.0);
  EXPECT_DOUBLE_EQ(model.estimate(insert).seconds, 1e-6 + 128 / 1e12);
}

TEST_F(AnalysisTest, LoopCostsItsTripCountTimesItsBody) {
  auto module = parse(kScatterIR);
  func::FuncOp fn = getFunc(*module, "scatter");
  Operation *loop = opAt(fn, 6), *dynamicLoop = opAt(fn, 9);

  // Per iteration: the token id (4), the generic (160) and the insert_slice
  // (128) bytes; the generic's extf and addf on 16 elements.
  EXPECT_EQ(CostModel::countBytes(loop), 4 * (4 + 160 + 128));
  EXPECT_EQ(CostModel::countFlops(loop), 4 * 32.0);
  // A trip count that is not a constant counts one iteration.
  EXPECT_EQ(CostModel::countBytes(dynamicLoop), 160 + 128);
  EXPECT_EQ(CostModel::countFlops(dynamicLoop), 32.0);

  // One kernel: one launch, then the roofline of all its iterations.
  TargetDescription target;
  target.matmulFlops16 = 1e11;
  target.matmulFlops32 = 1e10;
  target.vectorFlops = 1e9;
  target.memoryBandwidth = 1e12;
  target.opLaunchLatency = 1e-6;
  CostModel model(target);
  OpCost cost = model.estimate(loop);
  EXPECT_EQ(cost.stream, StreamKind::Compute);
  EXPECT_EQ(cost.flops, 128.0);
  EXPECT_EQ(cost.bytes, 1168);
  EXPECT_DOUBLE_EQ(cost.seconds, 1e-6 + 128 / 1e9);
  EXPECT_DOUBLE_EQ(model.flopSeconds(loop), 128 / 1e9);
  target.memoryBandwidth = 1e9;
  EXPECT_DOUBLE_EQ(CostModel(target).estimate(loop).seconds, 1e-6 + 1168 / 1e9);

  // The loop updates the zero-filled table in place: the table is one
  // buffer (returned, so live from its fill to the end) with the tokens and
  // dx.
  FailureOr<MemoryTimeline> timeline = MemoryTimeline::compute(fn);
  ASSERT_TRUE(succeeded(timeline));
  // Buffers: the tokens, dx and the two tables (the index allocates none);
  // the arguments alone live throughout.
  EXPECT_EQ(timeline->getBuffers().size(), 4u);
  EXPECT_EQ(timeline->getBaseDeviceBytes(), 16 + 128);
  EXPECT_EQ(timeline->getPeakDeviceBytes(), 16 + 128 + 2 * 512);
}

// A target may give fused attention its own 16-bit rate (a flash kernel runs
// below the plain products'); f32 attention and products keep theirs.
TEST_F(AnalysisTest, AttentionRunsAtItsOwnRateWhenGiven) {
  auto module = parse(R"mlir(
!t = tensor<4x8x16xbf16>
func.func @step(%q: !t, %k: !t, %v: !t, %a: tensor<8x16xbf16>, %b: tensor<16x8xbf16>, %c: tensor<8x8xbf16>, %q32: tensor<4x8x16xf32>) -> (!t, tensor<8x8xbf16>, tensor<4x8x16xf32>) {
  %o, %lse = dc.attention %q, %k, %v causal scale = 0.25 : !t, !t, !t -> !t, tensor<4x8xf32>
  %p = linalg.matmul ins(%a, %b : tensor<8x16xbf16>, tensor<16x8xbf16>) outs(%c : tensor<8x8xbf16>) -> tensor<8x8xbf16>
  %o32, %lse32 = dc.attention %q32, %q32, %q32 scale = 0.25 : tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<4x8x16xf32> -> tensor<4x8x16xf32>, tensor<4x8xf32>
  return %o, %p, %o32 : !t, tensor<8x8xbf16>, tensor<4x8x16xf32>
}
)mlir");
  func::FuncOp step = getFunc(*module, "step");
  TargetDescription target;
  target.matmulFlops16 = 1e11;
  target.matmulFlops32 = 1e10;
  target.vectorFlops = 1e9;
  target.memoryBandwidth = 1e12;
  target.attentionFlops16 = 2.5e10;
  CostModel model(target);
  EXPECT_DOUBLE_EQ(model.estimate(opAt(step, 0)).seconds, 8192 / 2.5e10);
  EXPECT_DOUBLE_EQ(model.estimate(opAt(step, 1)).seconds, 2048 / 1e11);
  EXPECT_DOUBLE_EQ(model.estimate(opAt(step, 2)).seconds, 16384 / 1e10);
  // Not given: attention at the products' rate.
  target.attentionFlops16 = 0;
  EXPECT_DOUBLE_EQ(CostModel(target).estimate(opAt(step, 0)).seconds,
                   8192 / 1e11);
}

} // namespace
