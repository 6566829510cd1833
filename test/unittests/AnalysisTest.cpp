//===- AnalysisTest.cpp - cost model, memory timeline, simulator ---------===//
#include "dc/Analysis/CostModel.h"
#include "dc/Analysis/MemoryTimeline.h"
#include "dc/Analysis/StreamSimulator.h"
#include "dc/Analysis/TargetDescription.h"
#include "dc/Dialect/DC/IR/TypeSizes.h"
#include "dc/Registration/Registration.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

using namespace mlir;
using namespace dc;

namespace {

constexpr int64_t kMiB = int64_t(1) << 20;
constexpr int64_t kGiB = int64_t(1) << 30;

std::string errorText(llvm::Error error) {
  return llvm::toString(std::move(error));
}

/// Power-of-two rates: every simulated time below is an exact binary
/// fraction, so sums compare exactly.
TargetDescription makeExactTarget() {
  TargetDescription target;
  target.name = "exact";
  target.matmulFlops16 = std::ldexp(1.0, 41);
  target.matmulFlops32 = std::ldexp(1.0, 40);
  target.vectorFlops = std::ldexp(1.0, 36);
  target.memoryBandwidth = std::ldexp(1.0, 50);
  target.opLaunchLatency = 0;
  target.collectiveLatency = 0;
  target.collectiveBusBandwidth = std::ldexp(1.0, 33);
  target.hostLinkBandwidth = std::ldexp(1.0, 33);
  target.hostLinkLatency = 0;
  target.deviceMemoryBytes = kGiB;
  return target;
}

class AnalysisTest : public ::testing::Test {
protected:
  AnalysisTest() {
    DialectRegistry registry;
    dc::registerDCDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }

  OwningOpRef<ModuleOp> parse(llvm::StringRef source) {
    OwningOpRef<ModuleOp> module =
        parseSourceString<ModuleOp>(source, &context);
    EXPECT_TRUE(module) << "test IR does not parse";
    return module;
  }

  static func::FuncOp getFunc(ModuleOp module, llvm::StringRef name) {
    auto fn = module.lookupSymbol<func::FuncOp>(name);
    EXPECT_TRUE(fn) << "no function " << name.str();
    return fn;
  }

  /// The `index`th top-level op of `fn`'s body.
  static Operation *opAt(func::FuncOp fn, size_t index) {
    return &*std::next(fn.getBody().front().begin(), index);
  }

  MLIRContext context;
};

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
// Target descriptions
//===----------------------------------------------------------------------===//

void expectSameTarget(const TargetDescription &a, const TargetDescription &b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.matmulFlops16, b.matmulFlops16);
  EXPECT_EQ(a.matmulFlops32, b.matmulFlops32);
  EXPECT_EQ(a.vectorFlops, b.vectorFlops);
  EXPECT_EQ(a.memoryBandwidth, b.memoryBandwidth);
  EXPECT_EQ(a.opLaunchLatency, b.opLaunchLatency);
  EXPECT_EQ(a.collectiveLatency, b.collectiveLatency);
  EXPECT_EQ(a.collectiveBusBandwidth, b.collectiveBusBandwidth);
  EXPECT_EQ(a.hostLinkBandwidth, b.hostLinkBandwidth);
  EXPECT_EQ(a.hostLinkDuplexBandwidth, b.hostLinkDuplexBandwidth);
  EXPECT_EQ(a.hostLinkLatency, b.hostLinkLatency);
  EXPECT_EQ(a.deviceMemoryBytes, b.deviceMemoryBytes);
  auto sameCurve = [](const std::vector<BandwidthPoint> &x,
                      const std::vector<BandwidthPoint> &y) {
    return x.size() == y.size() &&
           std::equal(x.begin(), x.end(), y.begin(), [](auto &p, auto &q) {
             return p.bytes == q.bytes && p.busBandwidth == q.busBandwidth;
           });
  };
  EXPECT_TRUE(sameCurve(a.allGatherCurve, b.allGatherCurve));
  EXPECT_TRUE(sameCurve(a.reduceScatterCurve, b.reduceScatterCurve));
}

TEST(TargetDescriptionTest, PresetsHoldTheMeasuredNumbers) {
  TargetDescription h200 = cantFail(TargetDescription::getPreset("h200"));
  EXPECT_EQ(h200.matmulFlops16, 600e12);
  EXPECT_EQ(h200.memoryBandwidth, 4.0e12);
  EXPECT_EQ(h200.deviceMemoryBytes, 139 * kGiB);
  ASSERT_EQ(h200.allGatherCurve.size(), 4u);
  EXPECT_EQ(h200.allGatherCurve[1].bytes, 16 * kMiB);
  EXPECT_EQ(h200.allGatherCurve[1].busBandwidth, 146e9);
  EXPECT_EQ(h200.reduceScatterCurve.size(), 4u);
  EXPECT_EQ(h200.hostLinkBandwidth, 55e9);
  EXPECT_EQ(h200.hostLinkDuplexBandwidth, 49.4e9);
  TargetDescription cpu = cantFail(TargetDescription::getPreset("cpu"));
  EXPECT_EQ(cpu.name, "cpu");
  EXPECT_TRUE(cpu.allGatherCurve.empty());

  EXPECT_EQ(errorText(TargetDescription::getPreset("tpu").takeError()),
            "unknown target preset 'tpu' (presets: h200, cpu)");
}

TEST(TargetDescriptionTest, JSONRoundTripsAndStartsFromABase) {
  for (llvm::StringRef preset : {"h200", "cpu"}) {
    TargetDescription original = cantFail(TargetDescription::getPreset(preset));
    llvm::Expected<TargetDescription> parsed =
        TargetDescription::fromJSON(original.toJSON());
    ASSERT_TRUE(bool(parsed)) << errorText(parsed.takeError());
    expectSameTarget(*parsed, original);
  }

  llvm::Expected<TargetDescription> slower = TargetDescription::fromJSON(R"({
    "base": "h200", "name": "h200-slow", "matmulFlops16": 5e14,
    "allGatherCurve": [{"bytes": 1024, "busBandwidth": 1e9}]
  })");
  ASSERT_TRUE(bool(slower)) << errorText(slower.takeError());
  EXPECT_EQ(slower->name, "h200-slow");
  EXPECT_EQ(slower->matmulFlops16, 5e14);
  EXPECT_EQ(slower->matmulFlops32, 60e12); // from the base
  ASSERT_EQ(slower->allGatherCurve.size(), 1u);
  EXPECT_EQ(slower->reduceScatterCurve.size(), 4u); // from the base
}

TEST(TargetDescriptionTest, JSONErrorsSayWhatIsWrong) {
  auto errorOf = [](llvm::StringRef text) {
    llvm::Expected<TargetDescription> target =
        TargetDescription::fromJSON(text);
    return target ? std::string("(no error)") : errorText(target.takeError());
  };
  EXPECT_EQ(errorOf(R"({"base": "h200", "matmulFlop16": 1, "zzz": 2})"),
            "unknown fields \"matmulFlop16\", \"zzz\" in target description");
  EXPECT_EQ(errorOf(R"({"base": "gpu"})"),
            "unknown target preset 'gpu' (presets: h200, cpu)");
  std::string missing = errorOf(R"({"name": "x", "matmulFlops16": 1e12})");
  EXPECT_NE(missing.find("missing fields \"matmulFlops32\", \"vectorFlops\""),
            std::string::npos)
      << missing;
  EXPECT_NE(missing.find("\"deviceMemoryBytes\""), std::string::npos)
      << missing;
  EXPECT_EQ(errorOf(R"({"base": "cpu", "memoryBandwidth": "fast"})"),
            "field \"memoryBandwidth\" must be a number");
  EXPECT_EQ(errorOf(R"({"base": "cpu", "memoryBandwidth": -1})"),
            "field \"memoryBandwidth\" must be positive");
  EXPECT_EQ(errorOf(R"({"base": "cpu", "hostLinkLatency": -1e-6})"),
            "field \"hostLinkLatency\" must be non-negative");
  EXPECT_EQ(errorOf(R"({"base": "cpu", "allGatherCurve": [
              {"bytes": 2048, "busBandwidth": 1e9},
              {"bytes": 1024, "busBandwidth": 2e9}]})"),
            "allGatherCurve[1].bytes must be larger than the previous "
            "point's (points in increasing size)");
  EXPECT_EQ(errorOf(R"({"base": "cpu", "reduceScatterCurve": [
              {"bytes": 2048, "bw": 1e9}]})"),
            "unknown field \"bw\" in reduceScatterCurve[0]");
  EXPECT_EQ(errorOf("[1, 2]"), "a target description must be a JSON object");
  EXPECT_EQ(errorOf("{").rfind("invalid JSON: ", 0), 0u);
}

TEST(TargetDescriptionTest, LoadTakesAPresetOrAFile) {
  EXPECT_EQ(cantFail(TargetDescription::load("cpu")).name, "cpu");
  std::string missing =
      errorText(TargetDescription::load("/no/such/target.json").takeError());
  EXPECT_EQ(missing, "unknown target '/no/such/target.json': neither a "
                     "preset (h200, cpu) nor an existing file");

  llvm::SmallString<128> path;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("dc-target", "json", path));
  llvm::FileRemover remover(path);
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    ASSERT_FALSE(ec);
    os << R"({"base": "h200", "name": "mine", "deviceMemoryBytes": 1073741824})";
  }
  llvm::Expected<TargetDescription> mine = TargetDescription::load(path);
  ASSERT_TRUE(bool(mine)) << errorText(mine.takeError());
  EXPECT_EQ(mine->name, "mine");
  EXPECT_EQ(mine->deviceMemoryBytes, kGiB);
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    os << R"({"base": "h200", "typo": 1})";
  }
  EXPECT_EQ(errorText(TargetDescription::load(path).takeError()),
            (path + ": unknown field \"typo\" in target description").str());
}

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

std::vector<int64_t> deviceBytes(const MemoryTimeline &timeline) {
  std::vector<int64_t> bytes;
  for (size_t i = 0; i < timeline.getOps().size(); ++i)
    bytes.push_back(timeline.deviceBytesAt(i));
  return bytes;
}

TEST_F(AnalysisTest, TimelineOfGatherOffloadAndReduceScatter) {
  auto module = parse(kTimelineIR);
  FailureOr<MemoryTimeline> timeline =
      MemoryTimeline::compute(getFunc(*module, "step"));
  ASSERT_TRUE(succeeded(timeline));
  // Whole function: %w (512), %x (256) and the returned values' buffers,
  // the reduced shard (512) and the reloaded tensor (256).
  EXPECT_EQ(timeline->getBaseDeviceBytes(), 1536);
  // 0-4: the gathered 1 KiB until its release; the matmul's tensor.empty
  // init allocates nothing (the matmul writes its result in place);
  // 3-6: %y until its offload is waited; 7-11: the gradient until
  // end_backward waits its reduce-scatter.
  std::vector<int64_t> expected = {2560, 2560, 2560, 2816, 2816, 1792, 1792,
                                   2560, 2560, 2560, 2560, 2560, 1536};
  EXPECT_EQ(deviceBytes(*timeline), expected);
  EXPECT_EQ(timeline->getPeakDeviceBytes(), 2816);
  EXPECT_EQ(timeline->getPeakIndex(), 3u);
  // The host copy lives from its offload to the wait of its reload.
  for (size_t i = 0; i < 13; ++i)
    EXPECT_EQ(timeline->hostBytesAt(i), i >= 5 && i <= 10 ? 256 : 0) << i;
  EXPECT_EQ(timeline->getPeakHostBytes(), 256);
  // The matmul touches the gathered weight and its result.
  EXPECT_EQ(timeline->getFloorBytes(), 1536 + 1024 + 256);

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

TEST_F(AnalysisTest, TimelineKeepsPersistentGathersAndAliasesViews) {
  auto module = parse(kTimelineIR);
  FailureOr<MemoryTimeline> persistent =
      MemoryTimeline::compute(getFunc(*module, "persistent"));
  ASSERT_TRUE(succeeded(persistent));
  // Base: the shard (512) and the returned sum (1024); the persistent
  // gather (1024) never ends; the add's empty init allocates nothing.
  EXPECT_EQ(deviceBytes(*persistent),
            (std::vector<int64_t>{2560, 2560, 2560, 2560, 2560}));
  EXPECT_EQ(persistent->getPeakIndex(), 0u);
  EXPECT_EQ(persistent->getFloorBytes(), 1536 + 1024);

  FailureOr<MemoryTimeline> views =
      MemoryTimeline::compute(getFunc(*module, "views"));
  ASSERT_TRUE(succeeded(views));
  // The collapsed tensor is %y's buffer, which lives until %z reads it;
  // the empties allocate nothing: buffers are %x, %y and %z.
  EXPECT_EQ(views->getBuffers().size(), 3u);
  EXPECT_EQ(deviceBytes(*views),
            (std::vector<int64_t>{512, 768, 768, 768, 768, 512}));
  EXPECT_EQ(views->getPeakDeviceBytes(), 768);
  EXPECT_EQ(views->getPeakIndex(), 1u);
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

//===----------------------------------------------------------------------===//
// Stream simulation
//===----------------------------------------------------------------------===//

// With makeExactTarget: a 256^3 f32 matmul takes M = 2^25 / 2^40 = 2^-15 s;
// gathering or reduce-scattering 256x256 f32 over 2 ranks, or an all-to-all
// of it, takes G = 0.5 * 2^18 / 2^33 = 2^-16 s; copying it, C = 2^-15 s.
constexpr double kMatmul = 1.0 / 32768;
constexpr double kGather = 1.0 / 65536;
constexpr double kCopy = 1.0 / 32768;

constexpr llvm::StringLiteral kScheduleIR = R"mlir(
shard.grid @world(shape = 2)
!w = !dc.shard<tensor<256x256xf32>, @world[0], local = 32768>
!t = tensor<256x256xf32>
func.func @early(%w: !w, %x: !t) -> !t {
  %f = dc.gather_start %w : !w -> !dc.future<!t>
  %e = tensor.empty() : !t
  %y = linalg.matmul ins(%x, %x : !t, !t) outs(%e : !t) -> !t
  %full = dc.wait %f : !dc.future<!t>
  %z = linalg.matmul ins(%y, %full : !t, !t) outs(%e : !t) -> !t
  dc.release %full : !t
  return %z : !t
}

func.func @late(%w: !w, %x: !t) -> !t {
  %e = tensor.empty() : !t
  %y = linalg.matmul ins(%x, %x : !t, !t) outs(%e : !t) -> !t
  %f = dc.gather_start %w : !w -> !dc.future<!t>
  %full = dc.wait %f : !dc.future<!t>
  %z = linalg.matmul ins(%y, %full : !t, !t) outs(%e : !t) -> !t
  dc.release %full : !t
  return %z : !t
}

func.func @streams(%w: !w, %x: !t) -> (!t, tensor<128x512xf32>, !w) {
  %o = dc.offload_start %x : !t
  %e = tensor.empty() : !t
  %y = linalg.matmul ins(%x, %x : !t, !t) outs(%e : !t) -> !t
  %h = dc.wait %o : !dc.future<!dc.host<!t>>
  %l = dc.reload_start %h : !dc.host<!t>
  %back = dc.wait %l : !dc.future<!t>
  %a = dc.all_to_all %back on @world[0] split 0 concat 1 : !t -> tensor<128x512xf32>
  %f1 = dc.gather_start %w : !w -> !dc.future<!t>
  %f2 = dc.gather_start %w : !w -> !dc.future<!t>
  %v1 = dc.wait %f1 : !dc.future<!t>
  %v2 = dc.wait %f2 : !dc.future<!t>
  dc.release %v1 : !t
  dc.release %v2 : !t
  %r = dc.reduce_scatter_start sum %y : !t -> !dc.future<!w>
  %s = dc.end_backward %r : !dc.future<!w>
  return %back, %a, %s : !t, tensor<128x512xf32>, !w
}
)mlir";

SimulationResult simulate(func::FuncOp fn, const CostModel &model) {
  FailureOr<MemoryTimeline> timeline = MemoryTimeline::compute(fn);
  EXPECT_TRUE(succeeded(timeline));
  return StreamSimulator(model).run(fn, *timeline);
}

TEST_F(AnalysisTest, GatherIssuedEarlyEnoughIsHidden) {
  auto module = parse(kScheduleIR);
  CostModel model(makeExactTarget());
  func::FuncOp fn = getFunc(*module, "early");
  SimulationResult result = simulate(fn, model);
  EXPECT_EQ(result.stepSeconds, 2 * kMatmul);
  EXPECT_EQ(result.computeSeconds, 2 * kMatmul);
  EXPECT_EQ(result.collectiveSeconds, kGather);
  EXPECT_EQ(result.exposedCollectiveSeconds, 0.0);
  EXPECT_EQ(result.exposedCopySeconds, 0.0);
  EXPECT_EQ(result.copySeconds, 0.0);
  ASSERT_EQ(result.ops.size(), 7u);
  EXPECT_EQ(result.futureReady.lookup(opAt(fn, 0)->getResult(0)), kGather);
  const SimulatedOp &gather = result.ops[0];
  EXPECT_EQ(gather.stream, StreamKind::Collective);
  EXPECT_EQ(gather.start, 0.0);
  EXPECT_EQ(gather.end, kGather);
  EXPECT_EQ(gather.bytes, 262144);
  const SimulatedOp &wait = result.ops[3];
  EXPECT_EQ(wait.issue, kMatmul);
  EXPECT_EQ(wait.stall, 0.0);
  const SimulatedOp &second = result.ops[4];
  EXPECT_EQ(second.stream, StreamKind::Compute);
  EXPECT_EQ(second.start, kMatmul);
  EXPECT_EQ(second.end, 2 * kMatmul);
}

TEST_F(AnalysisTest, IncrementalSimulationFollowsEditsOfScheduleOps) {
  auto module = parse(kScheduleIR);
  CostModel model(makeExactTarget());
  func::FuncOp fn = getFunc(*module, "early");
  IncrementalSimulation incremental(model, fn);
  FailureOr<MemoryTimeline> timeline = MemoryTimeline::compute(fn);
  ASSERT_TRUE(succeeded(timeline));
  EXPECT_EQ(incremental.run(*timeline).stepSeconds, 2 * kMatmul);
  // Start the gather only right before its wait: now it is exposed, as a
  // fresh simulation of the edited function says too.
  opAt(fn, 0)->moveBefore(opAt(fn, 3));
  timeline = MemoryTimeline::compute(fn);
  ASSERT_TRUE(succeeded(timeline));
  SimulationResult edited = incremental.run(*timeline);
  EXPECT_EQ(edited.stepSeconds, 2 * kMatmul + kGather);
  EXPECT_EQ(edited.exposedCollectiveSeconds, kGather);
  EXPECT_EQ(edited.stepSeconds, simulate(fn, model).stepSeconds);
}

TEST_F(AnalysisTest, CopiesBothWaysAtOnceRunAtTheDuplexBandwidth) {
  // The first offload runs alone; the second offload and the reload start
  // together: the reload starts while the device-to-host stream is busy.
  constexpr llvm::StringLiteral ir = R"mlir(
!t = tensor<256x256xf32>
func.func @duplex(%x: !t, %y: !t) -> (!t, !dc.host<!t>) {
  %o = dc.offload_start %x : !t
  %h = dc.wait %o : !dc.future<!dc.host<!t>>
  %o2 = dc.offload_start %y : !t
  %l = dc.reload_start %h : !dc.host<!t>
  %back = dc.wait %l : !dc.future<!t>
  %h2 = dc.wait %o2 : !dc.future<!dc.host<!t>>
  return %back, %h2 : !t, !dc.host<!t>
}
)mlir";
  auto module = parse(ir);
  func::FuncOp fn = getFunc(*module, "duplex");
  TargetDescription target = makeExactTarget();
  // Without a duplex bandwidth both directions run at full speed.
  SimulationResult alone = simulate(fn, CostModel(target));
  EXPECT_EQ(alone.ops[3].end - alone.ops[3].start, kCopy);
  EXPECT_EQ(alone.stepSeconds, 2 * kCopy);
  target.hostLinkDuplexBandwidth = target.hostLinkBandwidth / 2;
  CostModel model(target);
  SimulationResult shared = simulate(fn, model);
  EXPECT_EQ(shared.ops[2].end - shared.ops[2].start, kCopy); // started first
  EXPECT_EQ(shared.ops[3].start, kCopy);
  EXPECT_EQ(shared.ops[3].end - shared.ops[3].start, 2 * kCopy);
  EXPECT_EQ(shared.copySeconds, 4 * kCopy);
  EXPECT_EQ(shared.stepSeconds, 3 * kCopy);
}

TEST_F(AnalysisTest, GatherIssuedLateIsExposed) {
  auto module = parse(kScheduleIR);
  CostModel model(makeExactTarget());
  SimulationResult result = simulate(getFunc(*module, "late"), model);
  EXPECT_EQ(result.exposedCollectiveSeconds, kGather);
  EXPECT_EQ(result.stepSeconds, 2 * kMatmul + kGather);
  EXPECT_EQ(result.computeSeconds, 2 * kMatmul);
  const SimulatedOp &wait = result.ops[3];
  EXPECT_EQ(wait.issue, kMatmul);
  EXPECT_EQ(wait.stall, kGather);
  EXPECT_EQ(wait.end, kMatmul + kGather);
}

TEST_F(AnalysisTest, StreamsQueueAndStallsAreChargedToTheirStream) {
  auto module = parse(kScheduleIR);
  CostModel model(makeExactTarget());
  SimulationResult result = simulate(getFunc(*module, "streams"), model);
  // The offload hides behind the matmul; the reload is waited at once.
  EXPECT_EQ(result.ops[3].stall, 0.0);
  EXPECT_EQ(result.ops[4].start, kMatmul);
  EXPECT_EQ(result.ops[5].stall, kCopy);
  EXPECT_EQ(result.exposedCopySeconds, kCopy);
  // The all-to-all blocks compute; the two gathers queue on one stream.
  EXPECT_EQ(result.ops[6].stall, kGather);
  EXPECT_EQ(result.ops[8].start, result.ops[7].end);
  EXPECT_EQ(result.ops[9].stall, kGather);
  EXPECT_EQ(result.ops[10].stall, kGather);
  // end_backward waits for the last reduce-scatter.
  EXPECT_EQ(result.ops[14].stall, kGather);
  EXPECT_EQ(result.exposedCollectiveSeconds, 4 * kGather);
  // All-to-all, two gathers, reduce-scatter: all of it exposed.
  EXPECT_EQ(result.collectiveSeconds, 4 * kGather);
  EXPECT_EQ(result.copySeconds, 2 * kCopy);
  EXPECT_EQ(result.computeSeconds, kMatmul);
  EXPECT_EQ(result.stepSeconds, kMatmul + kCopy + 4 * kGather);
}

TEST_F(AnalysisTest, ChromeTraceIsValidJSON) {
  auto module = parse(kScheduleIR);
  CostModel model(makeExactTarget());
  SimulationResult result = simulate(getFunc(*module, "streams"), model);
  std::string text;
  llvm::raw_string_ostream os(text);
  writeChromeTrace(result, "streams", os);

  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(text);
  ASSERT_TRUE(bool(parsed)) << errorText(parsed.takeError());
  const llvm::json::Array *events =
      parsed->getAsObject()->getArray("traceEvents");
  ASSERT_TRUE(events);
  llvm::StringMap<int64_t> threads;
  int slices = 0, stalls = 0;
  const llvm::json::Object *reload = nullptr;
  for (const llvm::json::Value &event : *events) {
    const llvm::json::Object *object = event.getAsObject();
    ASSERT_TRUE(object);
    llvm::StringRef phase = *object->getString("ph");
    llvm::StringRef name = *object->getString("name");
    if (phase == "M" && name == "thread_name") {
      threads[*object->getObject("args")->getString("name")] =
          *object->getInteger("tid");
      continue;
    }
    if (phase != "X")
      continue;
    ++slices;
    ASSERT_TRUE(object->getNumber("ts"));
    ASSERT_TRUE(object->getNumber("dur"));
    EXPECT_GE(*object->getNumber("dur"), 0.0);
    ASSERT_TRUE(object->getObject("args")->getString("op"));
    if (name.starts_with("stall: "))
      ++stalls;
    if (name == "dc.reload_start")
      reload = object;
  }
  EXPECT_EQ(threads.size(), 4u);
  // Every op on a stream, plus one slice per stall (reload wait, all-to-all,
  // two gather waits, end_backward).
  int onStreams = 0;
  for (const SimulatedOp &sim : result.ops)
    onStreams += sim.stream != StreamKind::None;
  EXPECT_EQ(stalls, 5);
  EXPECT_EQ(slices, onStreams + stalls);
  ASSERT_TRUE(reload);
  EXPECT_EQ(*reload->getInteger("tid"), threads["host-to-device"]);
  EXPECT_DOUBLE_EQ(*reload->getNumber("ts"), kMatmul * 1e6);
  EXPECT_DOUBLE_EQ(*reload->getNumber("dur"), kCopy * 1e6);
  EXPECT_EQ(*reload->getObject("args")->getInteger("bytes"), 262144);
}

// A generated step of the size of a 128-layer Llama (~10k top-level ops)
// must be planned in well under 100 ms; quadratic work would take seconds.
TEST_F(AnalysisTest, TimelineAndSimulationScaleLinearly) {
  constexpr int kLayers = 2000;
  std::string source = "shard.grid @world(shape = 2)\n"
                       "!w = !dc.shard<tensor<64x64xbf16>, @world[0], "
                       "local = 2048>\n"
                       "!t = tensor<16x64xbf16>\n"
                       "func.func @big(%x: !t";
  for (int i = 0; i < kLayers; ++i)
    source += llvm::formatv(", %w{0}: !w", i).str();
  source += ") -> !t {\n";
  std::string act = "%x";
  for (int i = 0; i < kLayers; ++i) {
    source += llvm::formatv(
        "  %f{0} = dc.gather_start %w{0} : !w -> "
        "!dc.future<tensor<64x64xbf16>>\n"
        "  %g{0} = dc.wait %f{0} : !dc.future<tensor<64x64xbf16>>\n"
        "  %e{0} = tensor.empty() : !t\n"
        "  %a{0} = linalg.matmul ins({1}, %g{0} : !t, tensor<64x64xbf16>) "
        "outs(%e{0} : !t) -> !t\n"
        "  dc.release %g{0} : tensor<64x64xbf16>\n",
        i, act);
    act = llvm::formatv("%a{0}", i).str();
  }
  source += "  return " + act + " : !t\n}\n";
  auto module = parse(source);
  func::FuncOp fn = getFunc(*module, "big");
  CostModel model(cantFail(TargetDescription::getPreset("h200")));

  auto begin = std::chrono::steady_clock::now();
  FailureOr<MemoryTimeline> timeline = MemoryTimeline::compute(fn);
  ASSERT_TRUE(succeeded(timeline));
  SimulationResult result = StreamSimulator(model).run(fn, *timeline);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin)
          .count();
  EXPECT_EQ(result.ops.size(), 5u * kLayers + 1);
  EXPECT_GT(result.stepSeconds, 0.0);
  // Generous for a loaded CI machine; typically a few milliseconds.
  EXPECT_LT(seconds, 0.5) << "timeline + simulation took " << seconds << " s";
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

  // Only o and lse live between the two ops: the arguments and returned
  // gradients (7 KiB) plus 1 KiB + 128 bytes, no 4x8x8 score matrix.
  FailureOr<MemoryTimeline> timeline = MemoryTimeline::compute(causal);
  ASSERT_TRUE(succeeded(timeline));
  EXPECT_EQ(timeline->getBaseDeviceBytes(), 7 * 1024);
  EXPECT_EQ(timeline->getPeakDeviceBytes(), 8 * 1024 + 128);
  EXPECT_EQ(timeline->deviceBytesAt(2), 7 * 1024);
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
  EXPECT_DOUBLE_EQ(CostModel(target).estimate(loop).seconds,
                   1e-6 + 1168 / 1e9);

  // The loop updates the zero-filled table in place: the table is one
  // buffer (returned, so live throughout) with the tokens and dx.
  FailureOr<MemoryTimeline> timeline = MemoryTimeline::compute(fn);
  ASSERT_TRUE(succeeded(timeline));
  // Buffers: the tokens, dx and the two tables (the index allocates none).
  EXPECT_EQ(timeline->getBuffers().size(), 4u);
  EXPECT_EQ(timeline->getBaseDeviceBytes(), 16 + 128 + 2 * 512);
  EXPECT_EQ(timeline->getPeakDeviceBytes(), 16 + 128 + 2 * 512);
}

} // namespace
