//===- Report.h - the trainer's numbers and words ---------------*- C++ -*-===//
//
// What the trainer prints, computed apart from the runtime so that it can be
// tested alone: number formats, the step-time summary, the words of its
// non-finite-value errors and the checks of the options that depend on the
// steps run.
//
//===----------------------------------------------------------------------===//
#ifndef DC_RUN_REPORT_H
#define DC_RUN_REPORT_H

#include "Options.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dcrun {

/// `value` with 9 significant digits (%.9g): the loss and gradient norm
/// lines.
std::string formatDouble(double value);

/// "123 B" below 10 KiB, "12.3 KiB" below 10 MiB, else "12.3 MiB".
std::string formatBytes(int64_t bytes);

/// The step times of a run, in milliseconds: the mean of all steps and,
/// with more than one step, the mean and median of the steps after the
/// first (which warms caches and pools, or captures the CUDA graph).
struct StepTimeSummary {
  size_t steps = 0;
  double meanMs = 0;
  /// Set only when steps > 1.
  double steadyMeanMs = 0, steadyMedianMs = 0;
};
StepTimeSummary summarizeStepTimes(const std::vector<double> &stepSeconds);

/// The ranks whose part of an all-reduced value is not finite
/// (`notFinite[r]` nonzero): "rank 1", "ranks 0, 2", or, where every part
/// is finite and only their sum is not, "the sum over the ranks".
std::string describeNonFiniteRanks(const std::vector<double> &notFinite);

/// --check-finite: the first non-finite output of a step the runtime found
/// (`what`: "NaN" or "infinity" in `count` elements of the output of
/// `site`), naming the rank where there are several and the micro-batch
/// (`micro` from 0) where there are several: "NaN in 3 elements of the
/// output of <site> (rank 1, micro-batch 2 of 4)".
std::string describeNonFiniteOp(const std::string &what, int64_t count,
                                const std::string &site, int rank,
                                int worldSize, int64_t micro,
                                int64_t microBatches);

/// The options that depend on the steps this run trains, `first` to `last`
/// (first - 1 is the step loaded or initialized): "" when they are usable,
/// else the error. --save-step must lie in [first - 1, last]; --save-grads
/// writes one entry call's gradients, so it does not take micro-batches.
std::string checkStepOptions(const Options &options, int64_t first,
                             int64_t last);

/// The step --save saves at: --save-step, else the last step.
int64_t saveStepOf(const Options &options, int64_t last);

} // namespace dcrun

#endif // DC_RUN_REPORT_H
