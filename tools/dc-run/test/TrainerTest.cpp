//===- TrainerTest.cpp - the training loop on a hand-written artifact -----===//
//
// The trainer of one rank on runtime/test's tiny_linear.c built for one
// rank (a linear classifier, 6 rows of 4 features, 3 classes, mean
// cross-entropy), in a one-rank job whose runtime is up with the artifact's
// plan (main, below), as dc-run brings it up. Its losses and gradient norms
// are checked against the same model computed here in double, from the
// trainer's own data and initial values.
//
// As in UnitTestMain.cpp, a death test's fatal error exits its forked child
// alone.
//
//===----------------------------------------------------------------------===//
#include "Trainer.h"
#include "Artifact.h"
#include "Checkpoint.h"
#include "Data.h"
#include "HostAccess.h"
#include "Internal.h"
#include "Params.h"

#include "dcrt/dcrt.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>
#include <vector>

using namespace dcrun;

namespace {
const Artifact *tiny;
pid_t testProcess;

/// Entry calls made in this process so far: tiny_linear.c counts them for
/// DC_TEST_NAN_GRAD_STEP, across trainers.
int64_t entryCalls = 0;

Options tinyOptions(int64_t steps) {
  Options options;
  options.artifact = TINY_LINEAR_W1;
  options.steps = steps;
  options.seed = 5;
  options.initStd = 0.5;
  options.adamw.lr = 0.05;
  return options;
}

std::vector<StepResult> train(const Options &options) {
  Trainer trainer(options, *tiny);
  trainer.run();
  entryCalls += options.steps * options.microBatches;
  return trainer.results();
}

std::string tempPath(const std::string &name) {
  return testing::TempDir() + "dcrun-trainer-" + std::to_string(getpid()) +
         "-" + name;
}

/// The spec of the tiny model's parameter `id`, `name`, of `shape`.
ParamSpec tinySpec(int32_t id, const char *name, std::vector<int64_t> shape) {
  ParamSpec spec;
  spec.id = id;
  spec.name = name;
  spec.shape = std::move(shape);
  return spec;
}

/// The tiny model's mean cross-entropy over the rows of micro-batch `micro`
/// of `microBatches` of step `step`, and its gradient (W's 12 elements,
/// then b's 3), in double, at the initial values of `options`.
struct Reference {
  double loss = 0;
  std::vector<double> grad = std::vector<double>(15, 0.0);
};
Reference tinyReference(const Options &options, int64_t step, int64_t micro,
                        int64_t microBatches) {
  const StepSpec &spec = tiny->manifest.steps[0];
  DataSource data(spec, options.seed, tiny->manifest.vocab.value_or(0), "", 0,
                  1);
  data.fill(step, micro, microBatches);
  std::vector<float> x(24);
  std::vector<int32_t> labels(6);
  for (size_t i = 0; i < spec.args.size(); ++i) {
    if (spec.args[i].name == "x")
      x.assign(static_cast<float *>(data.buffer(i)),
               static_cast<float *>(data.buffer(i)) + 24);
    if (spec.args[i].name == "labels")
      labels.assign(static_cast<int32_t *>(data.buffer(i)),
                    static_cast<int32_t *>(data.buffer(i)) + 6);
  }
  InitOptions init;
  init.seed = options.seed;
  init.std = options.initStd;
  ParamSpec weight = tinySpec(0, "fc.weight", {4, 3});
  ParamSpec bias = tinySpec(1, "fc.bias", {3});
  Reference reference;
  for (int r = 0; r < 6; ++r) {
    double logits[3], sum = 0;
    for (int c = 0; c < 3; ++c) {
      logits[c] = initialValue(init, bias, c);
      for (int k = 0; k < 4; ++k)
        logits[c] +=
            x[r * 4 + k] * double(initialValue(init, weight, k * 3 + c));
      sum += std::exp(logits[c]);
    }
    reference.loss += (std::log(sum) - logits[labels[r]]) / 6;
    for (int c = 0; c < 3; ++c) {
      double d = (std::exp(logits[c]) / sum - (labels[r] == c)) / 6;
      for (int k = 0; k < 4; ++k)
        reference.grad[k * 3 + c] += x[r * 4 + k] * d;
      reference.grad[12 + c] += d;
    }
  }
  return reference;
}

/// A one-rank registry of the tiny model's parameters.
ParamRegistry tinyRegistry() {
  ParamRegistry registry(0, 1);
  ParamSpec weight = tinySpec(0, "fc.weight", {4, 3});
  ParamSpec bias = tinySpec(1, "fc.bias", {3});
  registry.add(weight);
  registry.add(bias);
  return registry;
}

double norm(const std::vector<double> &values) {
  double squares = 0;
  for (double value : values)
    squares += value * value;
  return std::sqrt(squares);
}
} // namespace

TEST(Trainer, FirstStepIsTheModelsLossAndGradientNorm) {
  Options options = tinyOptions(1);
  std::vector<StepResult> results = train(options);
  ASSERT_EQ(results.size(), 1u);
  Reference reference = tinyReference(options, 1, 0, 1);
  EXPECT_EQ(results[0].step, 1);
  EXPECT_NEAR(results[0].loss, reference.loss, 1e-6 * reference.loss);
  double referenceNorm = norm(reference.grad);
  EXPECT_NEAR(results[0].gradNorm, referenceNorm, 1e-5 * referenceNorm);
}

TEST(Trainer, MicroBatchesAverageLossesAndGradients) {
  // Step 1 runs at the initial values: its loss is the mean of the
  // micro-batches' losses and its norm that of their mean gradient.
  Options options = tinyOptions(1);
  options.microBatches = 3;
  std::vector<StepResult> results = train(options);
  ASSERT_EQ(results.size(), 1u);
  double loss = 0;
  std::vector<double> grad(15, 0.0);
  for (int64_t micro = 0; micro < 3; ++micro) {
    Reference part = tinyReference(options, 1, micro, 3);
    loss += part.loss / 3;
    for (size_t i = 0; i < grad.size(); ++i)
      grad[i] += part.grad[i] / 3;
  }
  EXPECT_NEAR(results[0].loss, loss, 1e-6 * loss);
  EXPECT_NEAR(results[0].gradNorm, norm(grad), 1e-5 * norm(grad));
  // Not what the first micro-batch alone gives (the same rows as one
  // micro-batch of one step), nor its sum over the micro-batches.
  Reference first = tinyReference(options, 1, 0, 1);
  EXPECT_GT(std::abs(first.loss - loss), 1e-3 * loss);
  EXPECT_GT(std::abs(norm(first.grad) - norm(grad)), 1e-3 * norm(grad));
}

TEST(Trainer, RunsAreRepeatable) {
  std::vector<StepResult> once = train(tinyOptions(3));
  std::vector<StepResult> again = train(tinyOptions(3));
  ASSERT_EQ(once.size(), 3u);
  ASSERT_EQ(again.size(), 3u);
  for (size_t i = 0; i < once.size(); ++i) {
    EXPECT_EQ(once[i].step, int64_t(i + 1));
    EXPECT_EQ(once[i].loss, again[i].loss) << i;
    EXPECT_EQ(once[i].gradNorm, again[i].gradNorm) << i;
  }
  // It trains: the loss of the same rows goes down.
  EXPECT_LT(once[2].loss, once[0].loss);
}

TEST(Trainer, ResumesFromItsCheckpointExactly) {
  std::vector<StepResult> straight = train(tinyOptions(4));

  Options first = tinyOptions(2);
  first.save = tempPath("ckpt.safetensors");
  train(first);
  Options resumed = tinyOptions(2);
  resumed.load = first.save;
  std::vector<StepResult> rest = train(resumed);

  // --save-step saves mid-run, what a run of that many steps saves.
  Options midway = tinyOptions(4);
  midway.save = tempPath("ckpt-step2.safetensors");
  midway.saveStep = 2;
  train(midway);
  Options resumedMidway = tinyOptions(2);
  resumedMidway.load = midway.save;
  std::vector<StepResult> restMidway = train(resumedMidway);

  ASSERT_EQ(straight.size(), 4u);
  ASSERT_EQ(rest.size(), 2u);
  ASSERT_EQ(restMidway.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(rest[i].step, int64_t(i + 3));
    EXPECT_EQ(rest[i].loss, straight[i + 2].loss) << i;
    EXPECT_EQ(rest[i].gradNorm, straight[i + 2].gradNorm) << i;
    EXPECT_EQ(restMidway[i].loss, straight[i + 2].loss) << i;
    EXPECT_EQ(restMidway[i].gradNorm, straight[i + 2].gradNorm) << i;
  }
  std::remove(first.save.c_str());
  std::remove(midway.save.c_str());
}

TEST(Trainer, ClipsTheUpdateNotTheReportedNorm) {
  // With eps of the gradients' size AdamW's update depends on their scale
  // (with a tiny eps its first update would be lr * sign(g) whatever the
  // clipping).
  Options options = tinyOptions(3);
  options.adamw.eps = 1.0;
  std::vector<StepResult> unclipped = train(options);
  options.adamw.maxGradNorm = 1e9;
  std::vector<StepResult> loose = train(options);
  ASSERT_EQ(unclipped.size(), 3u);
  ASSERT_EQ(loose.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(loose[i].loss, unclipped[i].loss) << i;
    EXPECT_EQ(loose[i].gradNorm, unclipped[i].gradNorm) << i;
  }

  // One clipped step: it reports the norm before clipping, and updates
  // the weights with the gradient scaled to the limit.
  Reference reference = tinyReference(options, 1, 0, 1);
  double limit = norm(reference.grad) / 10;
  for (double maxNorm : {0.0, limit}) {
    Options one = tinyOptions(1);
    one.adamw.eps = 1.0;
    one.adamw.maxGradNorm = maxNorm;
    one.save = tempPath("clipped.safetensors");
    std::vector<StepResult> results = train(one);
    ASSERT_EQ(results.size(), 1u);
    EXPECT_EQ(results[0].loss, unclipped[0].loss);
    EXPECT_EQ(results[0].gradNorm, unclipped[0].gradNorm);
    double scale = maxNorm ? maxNorm / (results[0].gradNorm + 1e-6) : 1.0;
    if (maxNorm) {
      EXPECT_NEAR(scale, 0.1, 1e-5);
    }
    ParamRegistry saved = tinyRegistry();
    loadCheckpoint(one.save, saved);
    ParamRegistry expected = tinyRegistry();
    InitOptions init;
    init.seed = one.seed;
    init.std = one.initStd;
    expected.initialize(init);
    size_t at = 0;
    for (size_t p = 0; p < 2; ++p) {
      Param &param = expected.params()[p];
      std::vector<float> grad, expAvg(param.master.size()),
          expAvgSq(param.master.size());
      for (size_t i = 0; i < param.master.size(); ++i)
        grad.push_back(float(reference.grad[at++] * scale));
      adamwUpdate(param.master.data(), grad.data(), expAvg.data(),
                  expAvgSq.data(), int64_t(grad.size()), one.adamw, 1);
      for (size_t i = 0; i < param.master.size(); ++i)
        EXPECT_NEAR(saved.params()[p].master[i], param.master[i], 1e-6)
            << param.spec.name << " " << i << " max norm " << maxNorm;
    }
    std::remove(one.save.c_str());
  }
}

TEST(Trainer, StopsBeforeTheUpdateAtANonFiniteGradient) {
  // tiny_linear.c writes a NaN into a weight gradient at that entry call.
  std::string nanCall = std::to_string(entryCalls + 2);
  setenv("DC_TEST_NAN_GRAD_STEP", nanCall.c_str(), 1);
  {
    Trainer trainer(tinyOptions(3), *tiny);
    EXPECT_THROW(trainer.run(), StopTraining);
    entryCalls += 2;
    ASSERT_EQ(trainer.results().size(), 1u);
    EXPECT_TRUE(std::isfinite(trainer.results()[0].gradNorm));
  }
  // --allow-nonfinite: training goes on, and the NaN reaches the weights.
  nanCall = std::to_string(entryCalls + 2);
  setenv("DC_TEST_NAN_GRAD_STEP", nanCall.c_str(), 1);
  Options options = tinyOptions(3);
  options.allowNonFinite = true;
  std::vector<StepResult> results = train(options);
  unsetenv("DC_TEST_NAN_GRAD_STEP");
  ASSERT_EQ(results.size(), 3u);
  EXPECT_TRUE(std::isfinite(results[1].loss));
  EXPECT_TRUE(std::isnan(results[1].gradNorm));
  EXPECT_TRUE(std::isnan(results[2].loss));
}

TEST(Trainer, RefusesOptionsTheArtifactCannotRunWith) {
  Options options = tinyOptions(2);
  options.step = "eval";
  EXPECT_EXIT(Trainer(options, *tiny), testing::ExitedWithCode(1),
              "the artifact has no step 'eval' \\(it has: train_step\\)");

  options = tinyOptions(2);
  options.adamw.masterDtype = DCRT_BF16;
  EXPECT_EXIT(Trainer(options, *tiny), testing::ExitedWithCode(1),
              "--master-dtype bf16 keeps the master weights in the parameters "
              "themselves, which must be bf16; 'fc.weight' is f32");

  options = tinyOptions(2);
  options.cudaGraphs = true;
  EXPECT_EXIT(train(options), testing::ExitedWithCode(1),
              "--cuda-graphs needs a backend that captures steps \\(cuda\\); "
              "this run uses the host backend");

  options = tinyOptions(2);
  options.save = tempPath("never.safetensors");
  options.saveStep = 3;
  EXPECT_EXIT(train(options), testing::ExitedWithCode(1),
              "--save-step 3 is outside the steps run \\(1 to 2\\)");

  options = tinyOptions(2);
  options.saveGrads = tempPath("never-grads.safetensors");
  options.microBatches = 2;
  EXPECT_EXIT(train(options), testing::ExitedWithCode(1),
              "--save-grads writes the gradients of one entry call; it does "
              "not take --micro-batches 2");
}

TEST(Trainer, RefusesTheCheckpointOfAnotherModel) {
  // The same parameter names, the weight transposed.
  ParamSpec weight = tinySpec(0, "fc.weight", {3, 4});
  ParamSpec bias = tinySpec(1, "fc.bias", {3});
  ParamRegistry other(0, 1);
  other.add(weight);
  other.add(bias);
  other.initialize(InitOptions());
  std::string path = tempPath("other.safetensors");
  saveCheckpoint(path, other, 7);
  Options options = tinyOptions(1);
  options.load = path;
  EXPECT_EXIT(train(options), testing::ExitedWithCode(1),
              "tensor 'fc.weight' has shape \\[3,4\\], but the model's "
              "parameter has shape \\[4,3\\]");
  std::remove(path.c_str());
}

int main(int argc, char **argv) {
  testing::InitGoogleTest(&argc, argv);
  secondsSinceStart();
  // The runtime as dc-run brings it up for this artifact.
  static const Artifact artifact = openArtifact(TINY_LINEAR_W1);
  tiny = &artifact;
  Options options;
  dcrt_init_options init = runtimeInitOptions(artifact.manifest, options);
  dcrt_init(&init);
  testProcess = getpid();
  dcrt::detail::setAbortHook([] {
    if (getpid() != testProcess)
      _exit(1);
  });
  int failed = RUN_ALL_TESTS();
  dcrt_finalize();
  return failed;
}
