//===- ManifestTest.cpp - the manifest's schema and checks ----------------===//
#include "Manifest.h"

#include <gtest/gtest.h>

#include <string>

using namespace dcrun;

namespace {
/// A one-step manifest with `extra` top-level members.
std::string manifestWith(const std::string &extra) {
  return R"({"abi": 4, "world_size": 4, )" + extra +
         R"("steps": [{"name": "train_step", "entry": "dc_entry_train_step",
  "args": [{"kind": "param", "id": 0, "name": "w", "shape": [3, 5],
            "dtype": "f32", "local": 4}],
  "results": [{"kind": "loss", "shape": [], "dtype": "f32"},
              {"kind": "grad", "param": 0, "shape": [3, 5], "dtype": "f32",
               "local": 4}]}]})";
}
} // namespace

TEST(Manifest, ReadsTargetGridShapeAndPlan) {
  std::string error;
  std::optional<Manifest> manifest = parseManifest(
      manifestWith(R"("target": "h200", "grid": "dp_sp", "grid_shape": [2, 2],
        "plan": {"gather_arena_bytes": 9007199254740993,
                 "host_pool_bytes": 2, "step_arena_bytes": 3,
                 "step_buffer_bytes": 4, "staging_bytes": 5}, )"),
      error);
  ASSERT_TRUE(manifest) << error;
  EXPECT_EQ(manifest->target, "h200");
  EXPECT_EQ(manifest->grid, "dp_sp");
  EXPECT_EQ(manifest->gridShape, (std::vector<int64_t>{2, 2}));
  // Byte counts keep all 64 bits (a double would round this one).
  EXPECT_EQ(manifest->gatherArenaBytes, 9007199254740993LL);
  EXPECT_EQ(manifest->hostPoolBytes, 2);
  EXPECT_EQ(manifest->stepArenaBytes, 3);
  EXPECT_EQ(manifest->stepBufferBytes, 4);
  EXPECT_EQ(manifest->stagingBytes, 5);
  ASSERT_EQ(manifest->steps.size(), 1u);
  EXPECT_EQ(manifest->steps[0].args[0].local, 4);
}

TEST(Manifest, TargetAndGridShapeAreOptional) {
  std::string error;
  std::optional<Manifest> manifest = parseManifest(manifestWith(""), error);
  ASSERT_TRUE(manifest) << error;
  EXPECT_EQ(manifest->target, "");
  EXPECT_TRUE(manifest->gridShape.empty());
  EXPECT_EQ(manifest->gatherArenaBytes, 0);
}

TEST(Manifest, RejectsBadTargetsAndGridShapes) {
  std::string error;
  EXPECT_FALSE(parseManifest(manifestWith(R"("target": 7, )"), error));
  EXPECT_EQ(error, "manifest: \"target\" is not a string");
  EXPECT_FALSE(parseManifest(manifestWith(R"("grid_shape": [2, 3], )"), error));
  EXPECT_EQ(error, "manifest: \"grid_shape\" [2, 3] has 6 ranks, but "
                   "\"world_size\" is 4");
  EXPECT_FALSE(
      parseManifest(manifestWith(R"("grid_shape": [4, -1], )"), error));
  EXPECT_EQ(error, "manifest: a dimension is not a non-negative integer");
  EXPECT_FALSE(parseManifest(manifestWith(R"("grid_shape": 4, )"), error));
  EXPECT_EQ(error, "manifest: missing \"grid_shape\" array");
}

TEST(Manifest, ReadsCheckFinite) {
  std::string error;
  std::optional<Manifest> manifest =
      parseManifest(manifestWith(R"("check_finite": true, )"), error);
  ASSERT_TRUE(manifest) << error;
  EXPECT_TRUE(manifest->checkFinite);
  manifest = parseManifest(manifestWith(R"("check_finite": false, )"), error);
  ASSERT_TRUE(manifest) << error;
  EXPECT_FALSE(manifest->checkFinite);
  manifest = parseManifest(manifestWith(""), error);
  ASSERT_TRUE(manifest) << error;
  EXPECT_FALSE(manifest->checkFinite); // optional: compiled without checks
  for (const char *bad : {"1", "\"true\"", "null"}) {
    EXPECT_FALSE(parseManifest(
        manifestWith(std::string("\"check_finite\": ") + bad + ", "), error))
        << bad;
    EXPECT_EQ(error, "manifest: \"check_finite\" is not a boolean");
  }
}

TEST(Manifest, NamesWhereItFailed) {
  std::string error;
  EXPECT_FALSE(parseManifest(R"({"abi": 4,})", error));
  EXPECT_EQ(error.rfind("not valid JSON (offset 11: ", 0), 0u) << error;
  EXPECT_FALSE(parseManifest(
      manifestWith(R"("plan": {"host_pool_bytes": -1}, )"), error));
  EXPECT_EQ(error, "plan: negative byte counts");
  std::string badLocal = manifestWith("");
  badLocal.replace(badLocal.find("\"local\": 4"), 10, "\"local\": 5");
  EXPECT_FALSE(parseManifest(badLocal, error));
  EXPECT_EQ(error, "step 'train_step': parameter 'w' has \"local\": 5, but 4 "
                   "ranks need 4");
}

TEST(Manifest, ReadsAStepsFlops) {
  std::string error;
  std::string text = manifestWith("");
  const std::string entry = R"("entry": "dc_entry_train_step",)";
  auto withFlops = [&](const std::string &value) {
    std::string changed = text;
    changed.insert(changed.find(entry) + entry.size(),
                   " \"flops\": " + value + ",");
    return changed;
  };
  std::optional<Manifest> manifest = parseManifest(withFlops("1.5e12"), error);
  ASSERT_TRUE(manifest) << error;
  EXPECT_EQ(manifest->steps[0].flops, 1.5e12);
  manifest = parseManifest(text, error);
  ASSERT_TRUE(manifest) << error;
  EXPECT_EQ(manifest->steps[0].flops, 0); // optional
  for (const char *bad : {"-1", "\"many\"", "null"}) {
    EXPECT_FALSE(parseManifest(withFlops(bad), error)) << bad;
    EXPECT_EQ(error, "step 'train_step': \"flops\" is not a non-negative "
                     "number");
  }
}

// A number too large for a double is an error, not an uncaught exception
// that ended dc-run without a word (found by dc-fuzz-manifest).
TEST(Manifest, RejectsNumbersThatOverflow) {
  std::string error;
  EXPECT_FALSE(parseManifest(manifestWith(R"("vocab": 1e352, )"), error));
  EXPECT_NE(error.find("number overflow parsing '1e352'"), std::string::npos)
      << error;
}

namespace {
/// A one-step manifest on 2 ranks whose data argument has `fields`.
std::string manifestWithData(const std::string &fields) {
  return R"({"abi": 4, "world_size": 2, "steps": [{"name": "s", "entry": "e",
  "args": [{"kind": "param", "id": 0, "name": "w", "shape": [4],
            "dtype": "f32", "local": 2},
           {"kind": "data", "name": "tokens", "shape": [2, 4],
            "dtype": "i32", "vocab": 8)" +
         fields + R"(}],
  "results": [{"kind": "loss", "shape": [], "dtype": "f32"}]}]})";
}
} // namespace

TEST(Manifest, ReadsSequenceSharding) {
  std::string error;
  std::optional<Manifest> manifest = parseManifest(
      manifestWithData(R"(, "seq_dim": 1, "seq_axis": 0)"), error);
  ASSERT_TRUE(manifest) << error;
  const TensorSpec &tokens = manifest->steps[0].args[1];
  EXPECT_EQ(tokens.seqDim, 1);
  EXPECT_EQ(tokens.seqAxis, 0);
  EXPECT_FALSE(manifest->steps[0].args[0].seqDim);
}

TEST(Manifest, RejectsBadSequenceSharding) {
  std::string error;
  // One without the other, a dim the tensor lacks, an axis the grid lacks.
  EXPECT_FALSE(parseManifest(manifestWithData(R"(, "seq_dim": 1)"), error));
  EXPECT_NE(error.find("\"seq_dim\" and \"seq_axis\" go together"),
            std::string::npos)
      << error;
  EXPECT_FALSE(parseManifest(
      manifestWithData(R"(, "seq_dim": 2, "seq_axis": 0)"), error));
  EXPECT_NE(error.find("\"seq_dim\" and \"seq_axis\" go together"),
            std::string::npos)
      << error;
  EXPECT_FALSE(parseManifest(
      manifestWithData(R"(, "seq_dim": 1, "seq_axis": 1)"), error));
  EXPECT_EQ(error, "manifest: 'tokens' has \"seq_axis\" 1, but the grid has 1 "
                   "axes");
}

TEST(Manifest, ShardAxesNameEachShardGroup) {
  // On a 2x2 grid, "w" split over axis 0 is 2 slots of ceil(15 / 2) = 8;
  // without "shard_axes" a shard spans every axis (4 ranks, 4 each).
  std::string text = manifestWith(R"("grid_shape": [2, 2], )");
  std::string error;
  std::optional<Manifest> world = parseManifest(text, error);
  ASSERT_TRUE(world) << error;
  EXPECT_EQ(world->steps[0].args[0].shardAxes, (std::vector<int64_t>{0, 1}));
  for (const char *local : {"\"local\": 4}]", "\"local\": 4}]}"})
    text.replace(text.find(local), 10, "\"local\": 8, \"shard_axes\": [0]");
  std::optional<Manifest> axis0 = parseManifest(text, error);
  ASSERT_TRUE(axis0) << error;
  EXPECT_EQ(axis0->steps[0].args[0].shardAxes, (std::vector<int64_t>{0}));
  EXPECT_EQ(axis0->steps[0].results[1].shardAxes, (std::vector<int64_t>{0}));

  std::string wrongLocal = text;
  wrongLocal.replace(wrongLocal.find("\"local\": 8"), 10, "\"local\": 4");
  EXPECT_FALSE(parseManifest(wrongLocal, error));
  EXPECT_EQ(error, "step 'train_step': parameter 'w' has \"local\": 4, but 2 "
                   "ranks need 8");
  std::string otherAxis = text;
  otherAxis.replace(otherAxis.rfind("\"shard_axes\": [0]"), 17,
                    "\"shard_axes\": [1]");
  EXPECT_FALSE(parseManifest(otherAxis, error));
  EXPECT_EQ(error, "step 'train_step': the gradient of 'w' has shape [3, 5] "
                   "(sharded over axes [1]), the parameter [3, 5] (sharded "
                   "over axes [0])");
  for (const char *axes : {"[2]", "[0, 0]", "[1, 0]", "[]"}) {
    std::string bad = text;
    bad.replace(bad.find("[0]"), 3, axes);
    EXPECT_FALSE(parseManifest(bad, error)) << axes;
  }
  std::string badAxis = text;
  badAxis.replace(badAxis.find("[0]"), 3, "[2]");
  parseManifest(badAxis, error);
  EXPECT_EQ(error, "step 'train_step': 'w' has \"shard_axes\" [2], which are "
                   "not distinct axes of the 2-axis grid");
}

namespace {
/// A final step and its accumulating form; `accumulating` replaces the
/// accumulating form's results.
std::string accumulatingPair(const std::string &accumulatingResults) {
  const char *args = R"("args": [
    {"kind": "param", "id": 0, "name": "w", "shape": [3, 5], "dtype": "f32",
     "local": 4},
    {"kind": "param", "id": 1, "name": "norm", "shape": [5], "dtype": "f32"},
    {"kind": "grad_accum", "param": 1, "name": "norm.grad_accum",
     "shape": [5], "dtype": "f32"}])";
  return std::string(R"({"abi": 4, "world_size": 4, "steps": [
  {"name": "s", "entry": "dc_entry_s", "accumulating_step": "s_accumulate",
   "micro_batches": 4, )") +
         args + R"(,
   "results": [{"kind": "loss", "shape": [], "dtype": "f32"},
     {"kind": "grad", "param": 0, "shape": [3, 5], "dtype": "f32",
      "local": 4},
     {"kind": "grad", "param": 1, "shape": [5], "dtype": "f32"}]},
  {"name": "s_accumulate", "entry": "dc_entry_s_accumulate",
   "accumulates_for": "s", )" +
         args + R"(, "results": )" + accumulatingResults + "}]}";
}
} // namespace

TEST(Manifest, ReadsAStepAndItsAccumulatingForm) {
  std::string error;
  std::optional<Manifest> manifest = parseManifest(
      accumulatingPair(R"([{"kind": "loss", "shape": [], "dtype": "f32"},
        {"kind": "grad", "param": 0, "shape": [3, 5], "dtype": "f32",
         "local": 4},
        {"kind": "grad_accum", "param": 1, "shape": [5], "dtype": "f32"}])"),
      error);
  ASSERT_TRUE(manifest) << error;
  const StepSpec &final = manifest->steps[0];
  EXPECT_EQ(final.accumulatingStep, "s_accumulate");
  EXPECT_EQ(final.microBatches, 4);
  ASSERT_NE(final.findAccumulator(1), nullptr);
  EXPECT_EQ(final.findAccumulator(1)->kind, TensorKind::GradAccum);
  EXPECT_EQ(final.findAccumulator(0), nullptr);
  EXPECT_EQ(manifest->steps[1].accumulatesFor, "s");
  EXPECT_EQ(manifest->findStep("s_accumulate"), &manifest->steps[1]);

  // The accumulating form must not return the accumulated gradient.
  EXPECT_FALSE(parseManifest(
      accumulatingPair(R"([{"kind": "loss", "shape": [], "dtype": "f32"},
        {"kind": "grad", "param": 0, "shape": [3, 5], "dtype": "f32",
         "local": 4},
        {"kind": "grad", "param": 1, "shape": [5], "dtype": "f32"},
        {"kind": "grad_accum", "param": 1, "shape": [5], "dtype": "f32"}])"),
      error));
  EXPECT_EQ(error, "step 's': parameter 1 is accumulated by the step: the "
                   "final form must return its gradient (or update) and the "
                   "accumulating form its accumulator, not its gradient");
  // Nor leave out another parameter's gradient.
  EXPECT_FALSE(parseManifest(
      accumulatingPair(R"([{"kind": "loss", "shape": [], "dtype": "f32"},
        {"kind": "grad_accum", "param": 1, "shape": [5], "dtype": "f32"}])"),
      error));
  EXPECT_EQ(error, "step 's': and its accumulating step 's_accumulate' differ "
                   "in the gradient of 'w'");
  // An accumulator of the wrong shape.
  EXPECT_FALSE(parseManifest(
      accumulatingPair(R"([{"kind": "loss", "shape": [], "dtype": "f32"},
        {"kind": "grad", "param": 0, "shape": [3, 5], "dtype": "f32",
         "local": 4},
        {"kind": "grad_accum", "param": 1, "shape": [6], "dtype": "f32"}])"),
      error));
  EXPECT_EQ(error, "step 's_accumulate': an accumulating result of 'norm' is "
                   "not an fp32 tensor of its shape [5]");
}

namespace {
/// A one-rank step whose gradient result has `offset` ("arena_offset") in a
/// step arena of `arenaBytes`.
std::string manifestWithResultOffset(const std::string &offset,
                                     int64_t arenaBytes,
                                     const std::string &argOffset = "") {
  return R"({"abi": 4, "world_size": 1,
  "plan": {"step_arena_bytes": )" +
         std::to_string(arenaBytes) + R"(},
  "steps": [{"name": "s", "entry": "e",
  "args": [{"kind": "param", "id": 0, "name": "w", "shape": [4],
            "dtype": "f32")" +
         argOffset + R"(}],
  "results": [{"kind": "loss", "shape": [], "dtype": "f32",
               "arena_offset": -1},
              {"kind": "grad", "param": 0, "shape": [4], "dtype": "f32",
               "arena_offset": )" +
         offset + "}]}]}";
}
} // namespace

TEST(Manifest, ReadsWhereTheStepKeepsAResult) {
  std::string error;
  std::optional<Manifest> manifest =
      parseManifest(manifestWithResultOffset("256", 272), error);
  ASSERT_TRUE(manifest) << error;
  const StepSpec &step = manifest->steps[0];
  // -1: the step keeps it nowhere (the caller's buffer).
  EXPECT_FALSE(step.results[0].arenaOffset);
  EXPECT_EQ(step.results[1].arenaOffset, 256);
  EXPECT_FALSE(step.args[0].arenaOffset);
}

TEST(Manifest, RejectsResultsOutsideTheStepArena) {
  std::string error;
  // 16 bytes at 257 end past 272.
  EXPECT_FALSE(parseManifest(manifestWithResultOffset("257", 272), error));
  EXPECT_EQ(error, "step 's': a grad result at \"arena_offset\" 257 ends past "
                   "the step arena (272 bytes)");
  EXPECT_FALSE(parseManifest(manifestWithResultOffset("-2", 272), error));
  EXPECT_EQ(error, "step 's', results[1]: \"arena_offset\" is negative");
  EXPECT_FALSE(parseManifest(
      manifestWithResultOffset("0", 272, R"(, "arena_offset": 0)"), error));
  EXPECT_EQ(error, "step 's': argument 'w' has an \"arena_offset\" (only "
                   "results do)");
}

namespace {
/// A one-rank step that runs AdamW itself (bf16 parameter, fp32 master,
/// bf16 moments), with `results` as its results.
std::string optimizerStep(const std::string &results,
                          const std::string &optimizer =
                              R"("optimizer": {"name": "adamw", "beta1": 0.9,
  "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.1, "max_grad_norm": 1.0,
  "master_dtype": "f32", "moment_dtype": "bf16"},)") {
  return R"({"abi": 4, "world_size": 2, "steps": [{"name": "s", "entry": "e",
  )" + optimizer +
         R"(
  "args": [{"kind": "param", "id": 0, "name": "w", "shape": [3], "dtype": "bf16",
            "local": 2},
           {"kind": "learning_rate", "shape": [], "dtype": "f64"},
           {"kind": "step_count", "shape": [], "dtype": "i64"},
           {"kind": "opt_state", "param": 0, "state": "exp_avg", "shape": [3],
            "dtype": "bf16", "local": 2},
           {"kind": "opt_state", "param": 0, "state": "exp_avg_sq", "shape": [3],
            "dtype": "bf16", "local": 2},
           {"kind": "opt_state", "param": 0, "state": "master", "shape": [3],
            "dtype": "f32", "local": 2}],
  "results": )" +
         results + "}]}";
}

const char *kOptimizerResults =
    R"([{"kind": "loss", "shape": [], "dtype": "f32"},
  {"kind": "param_update", "param": 0, "shape": [3], "dtype": "bf16", "local": 2},
  {"kind": "opt_state", "param": 0, "state": "exp_avg", "shape": [3],
   "dtype": "bf16", "local": 2},
  {"kind": "opt_state", "param": 0, "state": "exp_avg_sq", "shape": [3],
   "dtype": "bf16", "local": 2},
  {"kind": "opt_state", "param": 0, "state": "master", "shape": [3],
   "dtype": "f32", "local": 2},
  {"kind": "grad_squares", "shape": [], "dtype": "f64"}])";
} // namespace

TEST(Manifest, ReadsAStepThatRunsItsOptimizer) {
  std::string error;
  std::optional<Manifest> manifest =
      parseManifest(optimizerStep(kOptimizerResults), error);
  ASSERT_TRUE(manifest) << error;
  const StepSpec &step = manifest->steps[0];
  ASSERT_TRUE(step.optimizer);
  EXPECT_EQ(step.optimizer->weightDecay, 0.1);
  EXPECT_EQ(step.optimizer->maxGradNorm, 1.0);
  EXPECT_EQ(step.optimizer->momentDtype, DCRT_BF16);
  const TensorSpec *master = step.findArg(TensorKind::OptState, 0, "master");
  ASSERT_NE(master, nullptr);
  EXPECT_EQ(master->dtype, DCRT_F32);
  EXPECT_NE(step.findResult(TensorKind::ParamUpdate, 0), nullptr);
  EXPECT_NE(step.findResult(TensorKind::GradSquares), nullptr);
  EXPECT_NE(step.findArg(TensorKind::LearningRate), nullptr);
}

// State in host memory (dc-offload-optimizer-state): the step writes it
// back into its argument, so it has no result; one with a result too is
// refused.
// The step's planned device peak, which dc-run holds the measured peak to.
TEST(Manifest, ReadsThePlannedPeak) {
  std::string text = optimizerStep(kOptimizerResults);
  std::string entry = R"("entry": "e",)";
  ASSERT_NE(text.find(entry), std::string::npos);
  std::string error;
  std::string planned = text;
  planned.replace(planned.find(entry), entry.size(),
                  R"("entry": "e", "planned_peak_bytes": 4096,)");
  std::optional<Manifest> manifest = parseManifest(planned, error);
  ASSERT_TRUE(manifest) << error;
  EXPECT_EQ(manifest->steps[0].plannedPeakBytes, 4096);
  // Absent: not given.
  manifest = parseManifest(text, error);
  ASSERT_TRUE(manifest) << error;
  EXPECT_FALSE(manifest->steps[0].plannedPeakBytes);
  std::string negative = text;
  negative.replace(negative.find(entry), entry.size(),
                   R"("entry": "e", "planned_peak_bytes": -1,)");
  EXPECT_FALSE(parseManifest(negative, error));
  EXPECT_EQ(error, "step 's': \"planned_peak_bytes\" is negative");
}

TEST(Manifest, ReadsOptimizerStateInHostMemory) {
  std::string text = optimizerStep(kOptimizerResults);
  std::string master =
      R"({"kind": "opt_state", "param": 0, "state": "master", "shape": [3],
            "dtype": "f32", "local": 2})";
  std::string hostMaster =
      R"({"kind": "opt_state", "param": 0, "state": "master", "shape": [3],
            "dtype": "f32", "local": 2, "memory": "host"})";
  ASSERT_NE(text.find(master), std::string::npos);
  text.replace(text.find(master), master.size(), hostMaster);
  std::string error;
  // Still returned as a result: refused.
  EXPECT_FALSE(parseManifest(text, error));
  EXPECT_EQ(error, "step 's': parameter 'w' has its master in host memory and "
                   "as a result: the step writes host state back into its "
                   "argument");
  std::string result =
      R"({"kind": "opt_state", "param": 0, "state": "master", "shape": [3],
   "dtype": "f32", "local": 2},
  )";
  ASSERT_NE(text.find(result), std::string::npos);
  text.erase(text.find(result), result.size());
  std::optional<Manifest> manifest = parseManifest(text, error);
  ASSERT_TRUE(manifest) << error;
  const TensorSpec *arg =
      manifest->steps[0].findArg(TensorKind::OptState, 0, "master");
  ASSERT_NE(arg, nullptr);
  EXPECT_TRUE(arg->onHost);
  // Host memory is for parameters and state only.
  std::string data = text;
  std::string rate = R"("kind": "learning_rate", )";
  data.replace(data.find(rate), rate.size(),
               R"("kind": "learning_rate", "memory": "host", )");
  EXPECT_FALSE(parseManifest(data, error));
  EXPECT_NE(error.find("only parameters and optimizer state are kept in host "
                       "memory"),
            std::string::npos)
      << error;
}

TEST(Manifest, RejectsAnOptimizerStepWithoutItsState) {
  std::string error;
  // No updated exp_avg_sq.
  std::string results = kOptimizerResults;
  std::string sq =
      R"({"kind": "opt_state", "param": 0, "state": "exp_avg_sq", "shape": [3],
   "dtype": "bf16", "local": 2},
  )";
  ASSERT_NE(results.find(sq), std::string::npos);
  results.erase(results.find(sq), sq.size());
  EXPECT_FALSE(parseManifest(optimizerStep(results), error));
  EXPECT_EQ(error, "step 's': parameter 'w' needs its exp_avg_sq as an "
                   "argument and a result of its shape and sharding, in bf16");
  // A gradient beside the update.
  results = kOptimizerResults;
  results.insert(results.size() - 1, R"(, {"kind": "grad", "param": 0,
    "shape": [3], "dtype": "bf16", "local": 2})");
  EXPECT_FALSE(parseManifest(optimizerStep(results), error));
  EXPECT_EQ(error, "step 's': runs the optimizer but returns a gradient");
  // State without "optimizer".
  EXPECT_FALSE(parseManifest(optimizerStep(kOptimizerResults, ""), error));
  EXPECT_EQ(error, "step 's': has optimizer state, updates or a learning "
                   "rate but no \"optimizer\"");
  // An unknown state, and moments of another dtype than the optimizer's.
  std::string text = optimizerStep(kOptimizerResults);
  std::string unknown = text;
  unknown.replace(unknown.find("\"exp_avg\""), 9, "\"momentum\"");
  EXPECT_FALSE(parseManifest(unknown, error));
  EXPECT_NE(error.find("\"state\" is \"momentum\" (expected exp_avg, "
                       "exp_avg_sq or master)"),
            std::string::npos)
      << error;
  std::string f64 = text;
  f64.replace(f64.find("\"bf16\",\n            \"local\": 2}"), 6, "\"f64\"");
  EXPECT_FALSE(parseManifest(f64, error));
  EXPECT_EQ(error, "step 's': 'w' (param) is f64, which only the optimizer's "
                   "learning_rate and grad_squares are");
  std::string f32 = text;
  f32.replace(f32.find("\"moment_dtype\": \"bf16\""), 22,
              "\"moment_dtype\": \"f32\"");
  EXPECT_FALSE(parseManifest(f32, error));
  EXPECT_EQ(error, "step 's': parameter 'w' needs its exp_avg as an argument "
                   "and a result of its shape and sharding, in f32");
}
