//===- OptionsTest.cpp - dc-run's command line ----------------------------===//
#include "Options.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace dcrun;

namespace {
/// Parses `args` (after the program name); the error, or "" on success.
std::string parse(std::vector<std::string> args, Options &options,
                  std::string *help = nullptr) {
  args.insert(args.begin(), "dc-run");
  std::vector<char *> argv;
  for (std::string &arg : args)
    argv.push_back(arg.data());
  std::string helpText, error;
  bool parsed = parseOptions(static_cast<int>(argv.size()), argv.data(),
                             options, helpText, error);
  if (help)
    *help = helpText;
  EXPECT_EQ(parsed, error.empty());
  return error;
}
} // namespace

TEST(Options, ParsesValuesInBothSpellings) {
  Options options;
  EXPECT_EQ(parse({"--nproc", "3", "a.so", "--steps=5", "--lr", "0.05",
                   "--weight-decay=0.1", "--gather-arena-bytes", "1", "--save",
                   "x.safetensors", "--save-step", "2"},
                  options),
            "");
  EXPECT_EQ(options.artifact, "a.so");
  EXPECT_EQ(options.nproc, 3);
  EXPECT_EQ(options.steps, 5);
  EXPECT_DOUBLE_EQ(options.adamw.lr, 0.05);
  EXPECT_DOUBLE_EQ(options.adamw.weightDecay, 0.1);
  EXPECT_EQ(options.gatherArenaBytes, 1);
  EXPECT_FALSE(options.hostPoolBytes);
  EXPECT_EQ(options.save, "x.safetensors");
  EXPECT_EQ(options.saveStep, 2);
  EXPECT_EQ(options.seed, 0u); // defaults stay
  EXPECT_DOUBLE_EQ(options.adamw.beta2, 0.999);
}

TEST(Options, PicksTheLauncher) {
  Options options;
  EXPECT_EQ(options.launcher, "mpirun");
  EXPECT_EQ(parse({"a.so", "--launcher", "tcp"}, options), "");
  EXPECT_EQ(options.launcher, "tcp");
  EXPECT_EQ(parse({"a.so", "--launcher=mpirun"}, options), "");
  EXPECT_EQ(options.launcher, "mpirun");
  EXPECT_EQ(parse({"a.so", "--launcher", "ssh"}, options),
            "bad value 'ssh' for option '--launcher' (expected mpirun or tcp)");
}

TEST(Options, TakesMicroBatches) {
  Options options;
  EXPECT_EQ(options.microBatches, 1);
  EXPECT_EQ(parse({"a.so", "--micro-batches", "4"}, options), "");
  EXPECT_EQ(options.microBatches, 4);
  EXPECT_EQ(parse({"a.so", "--micro-batches=0"}, options),
            "bad value '0' for option '--micro-batches' (expected an integer "
            ">= 1)");
}

TEST(Options, TakesCheckFinite) {
  Options options;
  EXPECT_FALSE(options.checkFinite);
  EXPECT_EQ(parse({"a.so", "--check-finite"}, options), "");
  EXPECT_TRUE(options.checkFinite);
  EXPECT_FALSE(options.allowNonFinite); // its own flag
  Options valued;
  EXPECT_NE(parse({"a.so", "--check-finite=maybe"}, valued), "");
}

TEST(Options, TheLastOfARepeatedOptionWins) {
  Options options;
  EXPECT_EQ(parse({"a.so", "--lr", "0.1", "--lr=0.5"}, options), "");
  EXPECT_DOUBLE_EQ(options.adamw.lr, 0.5);
}

TEST(Options, ReportsErrorsInItsOwnWords) {
  Options options;
  EXPECT_EQ(parse({"a.so", "--bogus", "1"}, options),
            "unknown option '--bogus'");
  EXPECT_EQ(parse({"a.so", "--bogus=1"}, options), "unknown option '--bogus'");
  EXPECT_EQ(parse({"--steps", "x", "a.so"}, options),
            "bad value 'x' for option '--steps' (expected an integer >= 0)");
  EXPECT_EQ(parse({"a.so", "--nproc", "0"}, options),
            "bad value '0' for option '--nproc' (expected an integer >= 1)");
  EXPECT_EQ(parse({"a.so", "--host-pool-bytes=-1"}, options),
            "bad value '-1' for option '--host-pool-bytes' (expected a byte "
            "count >= 1)");
  Options twoArtifacts;
  EXPECT_EQ(parse({"a.so", "b.so"}, twoArtifacts),
            "more than one artifact: 'a.so' and 'b.so'");
  Options none;
  EXPECT_EQ(parse({"--steps", "2"}, none), "no artifact given");
  Options saveStep;
  EXPECT_EQ(parse({"a.so", "--save-step", "2"}, saveStep),
            "--save-step needs --save");
  Options both;
  EXPECT_EQ(parse({"a.so", "--init", "w.safetensors", "--load", "c"}, both),
            "--init and --load both give the initial weights: use one");
}

TEST(Options, TakesInitialWeightsAndAGradientFile) {
  Options options;
  EXPECT_EQ(
      parse({"a.so", "--init", "w.safetensors", "--save-grads=g"}, options),
      "");
  EXPECT_EQ(options.init, "w.safetensors");
  EXPECT_EQ(options.saveGrads, "g");
}

// Values that parse but cannot be meant are errors, not a silent run: a
// learning rate that is NaN, infinite or negative, a moment decay outside
// [0, 1), a zero epsilon, a pool of 0 bytes (which turned the plan off).
TEST(Options, RejectsValuesOutsideTheirRange) {
  Options options;
  for (const char *lr : {"nan", "inf", "-inf", "-1", "1e999"})
    EXPECT_EQ(parse({"a.so", "--lr", lr}, options),
              std::string("bad value '") + lr +
                  "' for option '--lr' (expected a finite number >= 0)");
  EXPECT_EQ(parse({"a.so", "--beta1", "5"}, options),
            "bad value '5' for option '--beta1' (expected a number in [0, 1))");
  EXPECT_EQ(parse({"a.so", "--beta2", "1"}, options),
            "bad value '1' for option '--beta2' (expected a number in [0, 1))");
  EXPECT_EQ(parse({"a.so", "--eps", "0"}, options),
            "bad value '0' for option '--eps' (expected a finite number > 0)");
  EXPECT_EQ(parse({"a.so", "--weight-decay", "-0.1"}, options),
            "bad value '-0.1' for option '--weight-decay' (expected a finite "
            "number >= 0)");
  EXPECT_EQ(parse({"a.so", "--clip-grad-norm", "nan"}, options),
            "bad value 'nan' for option '--clip-grad-norm' (expected a finite "
            "number >= 0)");
  EXPECT_EQ(parse({"a.so", "--init-std", "-1"}, options),
            "bad value '-1' for option '--init-std' (expected a finite number "
            ">= 0)");
  EXPECT_EQ(parse({"a.so", "--gather-arena-bytes", "0"}, options),
            "bad value '0' for option '--gather-arena-bytes' (expected a byte "
            "count >= 1)");
  // The edges that are meant are taken.
  Options edges;
  EXPECT_EQ(parse({"a.so", "--lr", "0", "--beta1", "0", "--beta2", "0.999999",
                   "--eps", "1e-30", "--allow-nonfinite"},
                  edges),
            "");
  EXPECT_DOUBLE_EQ(edges.adamw.lr, 0);
  EXPECT_DOUBLE_EQ(edges.adamw.beta2, 0.999999);
  EXPECT_TRUE(edges.allowNonFinite);
}

TEST(Options, TakesTheOptimizerStateDtypes) {
  Options options;
  EXPECT_EQ(options.adamw.masterDtype, DCRT_F32);
  EXPECT_EQ(options.adamw.momentDtype, DCRT_F32);
  EXPECT_EQ(
      parse({"a.so", "--master-dtype", "bf16", "--moment-dtype=bf16"}, options),
      "");
  EXPECT_EQ(options.adamw.masterDtype, DCRT_BF16);
  EXPECT_EQ(options.adamw.momentDtype, DCRT_BF16);
  EXPECT_EQ(parse({"a.so", "--moment-dtype", "f16"}, options),
            "bad value 'f16' for option '--moment-dtype' (expected f32 or "
            "bf16)");
}

TEST(Options, HelpListsEveryOption) {
  Options options;
  std::string help;
  EXPECT_EQ(parse({"--help"}, options, &help), "");
  EXPECT_EQ(help.rfind(usageLine, 0), 0u) << help;
  for (const char *name : {"--nproc N",
                           "--step NAME",
                           "--steps K",
                           "--lr F",
                           "--weight-decay F",
                           "--beta1 F",
                           "--beta2 F",
                           "--eps F",
                           "--seed S",
                           "--init-std F",
                           "--data FILE",
                           "--vocab V",
                           "--save PATH",
                           "--save-step K",
                           "--load PATH",
                           "--init PATH",
                           "--save-grads PATH",
                           "--trace FILE",
                           "--profile-out FILE",
                           "--gather-arena-bytes N",
                           "--host-pool-bytes N",
                           "--mpirun PATH",
                           "--master-dtype DTYPE",
                           "--moment-dtype DTYPE",
                           "--allow-nonfinite",
                           "--check-finite"})
    EXPECT_NE(help.find(name), std::string::npos) << name;
}
