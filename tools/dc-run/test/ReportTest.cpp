//===- ReportTest.cpp - the trainer's numbers and words -------------------===//
#include "Report.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace dcrun;

TEST(Report, FormatsBytesInTheirUnit) {
  EXPECT_EQ(formatBytes(0), "0 B");
  EXPECT_EQ(formatBytes(10 * 1024 - 1), "10239 B");
  EXPECT_EQ(formatBytes(10 * 1024), "10.0 KiB");
  EXPECT_EQ(formatBytes(10 * 1024 * 1024 - 1), "10240.0 KiB");
  EXPECT_EQ(formatBytes(10 * 1024 * 1024), "10.0 MiB");
  EXPECT_EQ(formatBytes(int64_t(3) << 30), "3072.0 MiB");
}

TEST(Report, FormatsDoublesWithNineDigits) {
  EXPECT_EQ(formatDouble(1.0 / 3), "0.333333333");
  EXPECT_EQ(formatDouble(2.0), "2");
  EXPECT_EQ(formatDouble(1234567891234.0), "1.23456789e+12");
}

TEST(Report, SummarizesTheStepsAfterTheFirst) {
  EXPECT_EQ(summarizeStepTimes({}).steps, 0u);

  StepTimeSummary one = summarizeStepTimes({0.5});
  EXPECT_EQ(one.steps, 1u);
  EXPECT_DOUBLE_EQ(one.meanMs, 500);
  EXPECT_EQ(one.steadyMeanMs, 0);
  EXPECT_EQ(one.steadyMedianMs, 0);

  // The slow first step counts in the mean only; the median of an odd
  // count of later steps is the middle one, unsorted as given.
  StepTimeSummary odd = summarizeStepTimes({2.0, 0.4, 0.1, 0.1});
  EXPECT_EQ(odd.steps, 4u);
  EXPECT_DOUBLE_EQ(odd.meanMs, 650);
  EXPECT_DOUBLE_EQ(odd.steadyMeanMs, 200);
  EXPECT_DOUBLE_EQ(odd.steadyMedianMs, 100);

  // An even count: the mean of the middle two.
  StepTimeSummary even = summarizeStepTimes({1.0, 0.4, 0.1, 0.3, 0.2});
  EXPECT_DOUBLE_EQ(even.steadyMeanMs, 250);
  EXPECT_DOUBLE_EQ(even.steadyMedianMs, 250);
  EXPECT_DOUBLE_EQ(summarizeStepTimes({1.0, 0.1, 0.5, 0.6, 0.2}).steadyMedianMs,
                   350);
}

TEST(Report, NamesTheRanksWhosePartIsNotFinite) {
  EXPECT_EQ(describeNonFiniteRanks({0, 0}), "the sum over the ranks");
  EXPECT_EQ(describeNonFiniteRanks({0, 1, 0}), "rank 1");
  EXPECT_EQ(describeNonFiniteRanks({1, 0, 1}), "ranks 0, 2");
  std::vector<double> twelve(12, 0.0);
  twelve[11] = 1;
  EXPECT_EQ(describeNonFiniteRanks(twelve), "rank 11");
}

TEST(Report, NamesTheFirstNonFiniteOpWithItsRankAndMicroBatch) {
  EXPECT_EQ(
      describeNonFiniteOp("NaN", 1, "train_step: f at m.py:3", 0, 1, 0, 1),
      "NaN in 1 element of the output of train_step: f at m.py:3");
  EXPECT_EQ(describeNonFiniteOp("infinity", 3, "s", 1, 2, 1, 4),
            "infinity in 3 elements of the output of s (rank 1, micro-batch "
            "2 of 4)");
  EXPECT_EQ(describeNonFiniteOp("NaN", 2, "s", 0, 1, 0, 2),
            "NaN in 2 elements of the output of s (micro-batch 1 of 2)");
  EXPECT_EQ(describeNonFiniteOp("NaN", 1, "s", 3, 4, 0, 1),
            "NaN in 1 element of the output of s (rank 3)");
}

TEST(Report, ChecksTheSaveStepAgainstTheStepsRun) {
  Options options;
  EXPECT_EQ(checkStepOptions(options, 1, 5), "");
  // Without --save, --save-step is not looked at.
  options.saveStep = 9;
  EXPECT_EQ(checkStepOptions(options, 1, 5), "");
  options.save = "ckpt.safetensors";
  EXPECT_EQ(checkStepOptions(options, 1, 5),
            "--save-step 9 is outside the steps run (1 to 5)");
  EXPECT_EQ(saveStepOf(options, 5), 9);
  // Resumed at step 5 (a checkpoint of step 4): step 4 itself may be
  // saved again, step 3 may not.
  options.saveStep = 4;
  EXPECT_EQ(checkStepOptions(options, 5, 6), "");
  options.saveStep = 3;
  EXPECT_EQ(checkStepOptions(options, 5, 6),
            "--save-step 3 is outside the steps run (5 to 6)");
  // No --save-step: the last step.
  options.saveStep = 0;
  EXPECT_EQ(saveStepOf(options, 6), 6);
  EXPECT_EQ(checkStepOptions(options, 5, 6), "");
}

TEST(Report, RefusesToSaveTheGradientsOfMicroBatches) {
  Options options;
  options.saveGrads = "grads.safetensors";
  EXPECT_EQ(checkStepOptions(options, 1, 1), "");
  options.microBatches = 3;
  EXPECT_EQ(checkStepOptions(options, 1, 1),
            "--save-grads writes the gradients of one entry call; it does not "
            "take --micro-batches 3");
}
