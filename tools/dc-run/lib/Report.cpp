//===- Report.cpp - the trainer's numbers and words -----------------------===//
#include "Report.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

using namespace dcrun;

std::string dcrun::formatDouble(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.9g", value);
  return text;
}

std::string dcrun::formatBytes(int64_t bytes) {
  char text[32];
  if (bytes < 10 * 1024)
    std::snprintf(text, sizeof(text), "%lld B", static_cast<long long>(bytes));
  else if (bytes < 10 * 1024 * 1024)
    std::snprintf(text, sizeof(text), "%.1f KiB", bytes / 1024.0);
  else
    std::snprintf(text, sizeof(text), "%.1f MiB", bytes / 1048576.0);
  return text;
}

StepTimeSummary
dcrun::summarizeStepTimes(const std::vector<double> &stepSeconds) {
  StepTimeSummary summary;
  summary.steps = stepSeconds.size();
  if (stepSeconds.empty())
    return summary;
  auto mean = [](const double *begin, const double *end) {
    return std::accumulate(begin, end, 0.0) * 1e3 /
           static_cast<double>(end - begin);
  };
  const double *all = stepSeconds.data();
  size_t count = stepSeconds.size();
  summary.meanMs = mean(all, all + count);
  if (count > 1) {
    std::vector<double> rest(all + 1, all + count);
    std::sort(rest.begin(), rest.end());
    size_t n = rest.size();
    double median = n % 2 ? rest[n / 2] : (rest[n / 2 - 1] + rest[n / 2]) / 2;
    summary.steadyMeanMs = mean(all + 1, all + count);
    summary.steadyMedianMs = median * 1e3;
  }
  return summary;
}

std::string
dcrun::describeNonFiniteRanks(const std::vector<double> &notFinite) {
  std::string ranks;
  for (size_t r = 0; r < notFinite.size(); ++r)
    if (notFinite[r] != 0)
      ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  return ranks.empty()                          ? "the sum over the ranks"
         : ranks.find(',') == std::string::npos ? "rank " + ranks
                                                : "ranks " + ranks;
}

std::string dcrun::describeNonFiniteOp(const std::string &what, int64_t count,
                                       const std::string &site, int rank,
                                       int worldSize, int64_t micro,
                                       int64_t microBatches) {
  std::vector<std::string> context;
  if (worldSize > 1)
    context.push_back("rank " + std::to_string(rank));
  if (microBatches > 1)
    context.push_back("micro-batch " + std::to_string(micro + 1) + " of " +
                      std::to_string(microBatches));
  std::string text = what + " in " + std::to_string(count) +
                     (count == 1 ? " element" : " elements") +
                     " of the output of " + site;
  for (size_t i = 0; i < context.size(); ++i)
    text += (i ? ", " : " (") + context[i];
  if (!context.empty())
    text += ")";
  return text;
}

int64_t dcrun::saveStepOf(const Options &options, int64_t last) {
  return options.saveStep ? options.saveStep : last;
}

std::string dcrun::checkStepOptions(const Options &options, int64_t first,
                                    int64_t last) {
  char text[256];
  int64_t saveAt = saveStepOf(options, last);
  if (!options.save.empty() && (saveAt < first - 1 || saveAt > last)) {
    std::snprintf(text, sizeof(text),
                  "--save-step %lld is outside the steps run (%lld to %lld)",
                  static_cast<long long>(saveAt), static_cast<long long>(first),
                  static_cast<long long>(last));
    return text;
  }
  // The gradients it writes are one micro-batch's; their mean lives in
  // the optimizer's sums.
  if (!options.saveGrads.empty() && options.microBatches > 1) {
    std::snprintf(text, sizeof(text),
                  "--save-grads writes the gradients of one entry call; it "
                  "does not take --micro-batches %lld",
                  static_cast<long long>(options.microBatches));
    return text;
  }
  return "";
}
