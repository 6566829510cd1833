//===- StreamSimulatorTest.cpp - streams, stalls, Chrome trace ------------===//
#include "AnalysisTestUtils.h"

#include "dc/Analysis/CostModel.h"
#include "dc/Analysis/MemoryTimeline.h"
#include "dc/Analysis/StreamSimulator.h"
#include "dc/Target/TargetDescription.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace dc;
using namespace dc::unittest;

namespace {

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

TEST_F(AnalysisTest, HostCopiesSlowTheComputeTheyOverlap) {
  // Copies take C = M here; each direction copying stretches compute by
  // copyComputeSlowdown (0.5: 1.5x with one, 2x with both).
  constexpr llvm::StringLiteral ir = R"mlir(
!t = tensor<256x256xf32>
func.func @one(%x: !t, %y: !t) -> (!t, !dc.host<!t>) {
  %o = dc.offload_start %x : !t
  %e = tensor.empty() : !t
  %z = linalg.matmul ins(%y, %y : !t, !t) outs(%e : !t) -> !t
  %h = dc.wait %o : !dc.future<!dc.host<!t>>
  return %z, %h : !t, !dc.host<!t>
}
func.func @both(%x: !t, %y: !t, %h: !dc.host<!t>) -> (!t, !dc.host<!t>, !t) {
  %o = dc.offload_start %x : !t
  %l = dc.reload_start %h : !dc.host<!t>
  %e = tensor.empty() : !t
  %z = linalg.matmul ins(%y, %y : !t, !t) outs(%e : !t) -> !t
  %g = dc.wait %o : !dc.future<!dc.host<!t>>
  %back = dc.wait %l : !dc.future<!t>
  return %z, %g, %back : !t, !dc.host<!t>, !t
}
func.func @after(%x: !t, %y: !t) -> (!t, !dc.host<!t>) {
  %e = tensor.empty() : !t
  %z = linalg.matmul ins(%y, %y : !t, !t) outs(%e : !t) -> !t
  %o = dc.offload_start %x : !t
  %h = dc.wait %o : !dc.future<!dc.host<!t>>
  return %z, %h : !t, !dc.host<!t>
}
)mlir";
  auto module = parse(ir);
  TargetDescription target = makeExactTarget();
  static_assert(kCopy == kMatmul, "the spans below assume it");
  // Without a slowdown, copies are free for compute.
  SimulationResult unslowed =
      simulate(getFunc(*module, "both"), CostModel(target));
  EXPECT_EQ(unslowed.ops[3].end, kMatmul);
  EXPECT_EQ(unslowed.copySlowdownSeconds, 0.0);
  target.copyComputeSlowdown = 0.5;
  CostModel model(target);
  // One direction over all of [0, C): 2/3 of the product done by C at
  // 1.5x, the last third alone.
  SimulationResult one = simulate(getFunc(*module, "one"), model);
  EXPECT_DOUBLE_EQ(one.ops[2].end, kMatmul * 4 / 3);
  EXPECT_DOUBLE_EQ(one.copySlowdownSeconds, kMatmul / 3);
  EXPECT_DOUBLE_EQ(one.computeSeconds, kMatmul * 4 / 3);
  EXPECT_DOUBLE_EQ(one.stepSeconds, kMatmul * 4 / 3);
  // Both directions over [0, C): half done by C at 2x, the rest alone.
  SimulationResult both = simulate(getFunc(*module, "both"), model);
  EXPECT_DOUBLE_EQ(both.ops[3].end, kMatmul * 3 / 2);
  EXPECT_DOUBLE_EQ(both.copySlowdownSeconds, kMatmul / 2);
  // A copy issued after the product starts once it is done: no overlap.
  SimulationResult after = simulate(getFunc(*module, "after"), model);
  EXPECT_EQ(after.ops[1].end, kMatmul);
  EXPECT_EQ(after.copySlowdownSeconds, 0.0);
  EXPECT_EQ(after.stepSeconds, kMatmul + kCopy);
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

TEST_F(AnalysisTest, AsyncAllToAllsOverlapComputeAndQueue) {
  // Ulysses' exchanges of q and k: started before a matmul and waited after
  // it, they run on the collective stream (one after the other) while the
  // matmul computes; the synchronous form blocks compute for each.
  constexpr llvm::StringLiteral ir = R"mlir(
shard.grid @world(shape = 2)
!t = tensor<256x256xf32>
!h = tensor<128x512xf32>
func.func @async(%x: !t, %q: !t, %k: !t) -> (!t, !h, !h) {
  %fq = dc.all_to_all_start %q on @world[0] split 0 concat 1 : !t -> !dc.future<!h>
  %fk = dc.all_to_all_start %k on @world[0] split 0 concat 1 : !t -> !dc.future<!h>
  %e = tensor.empty() : !t
  %y = linalg.matmul ins(%x, %x : !t, !t) outs(%e : !t) -> !t
  %a = dc.wait %fq : !dc.future<!h>
  %b = dc.wait %fk : !dc.future<!h>
  return %y, %a, %b : !t, !h, !h
}
func.func @sync(%x: !t, %q: !t, %k: !t) -> (!t, !h, !h) {
  %a = dc.all_to_all %q on @world[0] split 0 concat 1 : !t -> !h
  %b = dc.all_to_all %k on @world[0] split 0 concat 1 : !t -> !h
  %e = tensor.empty() : !t
  %y = linalg.matmul ins(%x, %x : !t, !t) outs(%e : !t) -> !t
  return %y, %a, %b : !t, !h, !h
}
// Waited at once, the start is as exposed as the synchronous form.
func.func @waited_at_once(%q: !t) -> !h {
  %f = dc.all_to_all_start %q on @world[0] split 0 concat 1 : !t -> !dc.future<!h>
  %a = dc.wait %f : !dc.future<!h>
  return %a : !h
}
)mlir";
  auto module = parse(ir);
  CostModel model(makeExactTarget());
  func::FuncOp async = getFunc(*module, "async");
  SimulationResult result = simulate(async, model);
  ASSERT_EQ(result.ops.size(), 7u);
  const SimulatedOp &q = result.ops[0], &k = result.ops[1];
  EXPECT_EQ(q.stream, StreamKind::Collective);
  EXPECT_EQ(q.bytes, 262144);
  EXPECT_EQ(q.start, 0.0);
  EXPECT_EQ(q.end, kGather);
  EXPECT_EQ(k.start, kGather); // FIFO behind q
  EXPECT_EQ(k.end, 2 * kGather);
  EXPECT_EQ(result.futureReady.lookup(opAt(async, 1)->getResult(0)),
            2 * kGather);
  // The matmul (2 kGather) hides both; neither wait stalls.
  EXPECT_EQ(result.ops[4].stall, 0.0);
  EXPECT_EQ(result.ops[5].stall, 0.0);
  EXPECT_EQ(result.collectiveSeconds, 2 * kGather);
  EXPECT_EQ(result.exposedCollectiveSeconds, 0.0);
  EXPECT_EQ(result.stepSeconds, kMatmul);

  SimulationResult sync = simulate(getFunc(*module, "sync"), model);
  EXPECT_EQ(sync.ops[0].stall, kGather);
  EXPECT_EQ(sync.ops[1].stall, kGather);
  EXPECT_EQ(sync.collectiveSeconds, result.collectiveSeconds);
  EXPECT_EQ(sync.exposedCollectiveSeconds, 2 * kGather);
  EXPECT_EQ(sync.stepSeconds, kMatmul + 2 * kGather);

  SimulationResult once = simulate(getFunc(*module, "waited_at_once"), model);
  EXPECT_EQ(once.ops[1].stall, kGather);
  EXPECT_EQ(once.exposedCollectiveSeconds, kGather);
  EXPECT_EQ(once.stepSeconds, kGather);
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

// A generated step of the size of a 128-layer Llama (~10k top-level ops).
// Neither MemoryTimeline nor StreamSimulator exposes a count of the work it
// does, so what is bounded here is what they produce, deterministically:
// one timeline entry and one simulated op per top-level op, one buffer per
// value that allocates, one readiness time per future. (This used to assert
// a wall-clock bound of 0.5 s, which a loaded machine could break.)
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

  FailureOr<MemoryTimeline> timeline = MemoryTimeline::compute(fn);
  ASSERT_TRUE(succeeded(timeline));
  SimulationResult result = StreamSimulator(model).run(fn, *timeline);
  // Per layer: gather_start, wait, tensor.empty, matmul, release; + return.
  EXPECT_EQ(timeline->getOps().size(), 5u * kLayers + 1);
  EXPECT_EQ(result.ops.size(), 5u * kLayers + 1);
  EXPECT_EQ(result.futureReady.size(), size_t(kLayers));
  // The arguments (x and 2000 shards), and per layer the gathered weight
  // and the matmul's result (its tensor.empty init).
  EXPECT_EQ(timeline->getBuffers().size(), 3u * kLayers + 1);
  // Live all step: x (2 KiB) and the 4 KiB shards (the returned activation
  // only from the last matmul); first peak at the second matmul (op 8): its
  // gathered 8 KiB weight, its input and its result.
  EXPECT_EQ(timeline->getBaseDeviceBytes(), 2048 + 4096 * kLayers);
  EXPECT_EQ(timeline->getPeakDeviceBytes(),
            timeline->getBaseDeviceBytes() + 8192 + 2048 + 2048);
  EXPECT_EQ(timeline->getPeakIndex(), 8u);
  EXPECT_GT(result.stepSeconds, 0.0);
}

} // namespace
