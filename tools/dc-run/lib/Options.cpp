//===- Options.cpp - dc-run's command line --------------------------------===//
//
// One CLI11 table holds every option, its help and its check, so the help
// cannot drift from what is parsed. Values are converted here rather than
// by CLI11 so that a bad one reads "bad value 'x' for option '--steps'".
//
//===----------------------------------------------------------------------===//
#include "Options.h"

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cmath>
#include <cstdlib>

using namespace dcrun;

const char *dcrun::usageLine =
    "usage: dc-run [--nproc N] ARTIFACT.so [options]";

namespace {
bool parseInteger(const std::string &text, int64_t &out) {
  char *end = nullptr;
  errno = 0;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end || errno)
    return false;
  out = value;
  return true;
}

bool parseNumber(const std::string &text, double &out) {
  char *end = nullptr;
  errno = 0;
  double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end || errno)
    return false;
  out = value;
  return true;
}

/// The usage line and a summary first, where CLI11 would put its own
/// "Usage:" line after the description.
class Formatter : public CLI::Formatter {
public:
  std::string make_usage(const CLI::App *, std::string) const override {
    return std::string(usageLine) + R"(

Runs a training step compiled by dc on N ranks of this machine (through
mpirun, or --launcher tcp), or joins the job when already started by mpirun,
srun or torchrun.
)";
  }
};

/// dc-run's options, each stored into `options` by its own conversion.
class CommandLine {
public:
  explicit CommandLine(Options &options) {
    auto formatter = std::make_shared<Formatter>();
    formatter->column_width(24);
    app.formatter(formatter);
    app.footer("Environment: DCRT_TIMEOUT_S (default 300) bounds every wait.");
    // Unknown options and extra artifacts are reported in dc-run's words.
    app.allow_extras();
    app.add_option("artifact", options.artifact,
                   "the artifact (a shared library dc-compile wrote)")
        ->type_name("ARTIFACT.so");
    integer("--nproc", "N",
            "ranks to start (default: the artifact's world size)",
            options.nproc, 1);
    text("--step", "NAME",
         "step function to run (default: the manifest's first)", options.step);
    integer("--steps", "K", "training steps (default 1)", options.steps, 0);
    integer("--micro-batches", "N",
            "gradient accumulation: run the step N times per optimizer "
            "step, on N slices of a global batch N times larger (default 1)",
            options.microBatches, 1);
    number("--lr", "AdamW learning rate, >= 0 (default 0.001)",
           options.adamw.lr, Range::NonNegative);
    number("--weight-decay", "AdamW decoupled weight decay, >= 0 (default 0)",
           options.adamw.weightDecay, Range::NonNegative);
    number("--beta1", "AdamW first moment decay, in [0, 1) (default 0.9)",
           options.adamw.beta1, Range::UnitInterval);
    number("--beta2", "AdamW second moment decay, in [0, 1) (default 0.999)",
           options.adamw.beta2, Range::UnitInterval);
    number("--eps", "AdamW epsilon, > 0 (default 1e-8)", options.adamw.eps,
           Range::Positive);
    number("--clip-grad-norm",
           "clip gradients to this global L2 norm (default 0: off)",
           options.adamw.maxGradNorm, Range::NonNegative);
    stateDtype("--master-dtype",
               "master weights: f32 (default), or bf16 (the bf16 parameters "
               "are their own master)",
               options.adamw.masterDtype);
    stateDtype("--moment-dtype", "AdamW moments: f32 (default) or bf16",
               options.adamw.momentDtype);
    integer("--seed", "S", "seed of the initial parameters and synthetic data",
            options.seed, 0);
    number("--init-std", "std of the initial weights (default 0.02)",
           options.initStd, Range::NonNegative);
    text("--data", "FILE",
         "int32 token file for integer data (default: "
         "synthetic)",
         options.dataFile);
    integer("--vocab", "V",
            "integer data lies in [0, V) (default: the manifest's)",
            options.vocab, 1);
    text("--save", "PATH", "write a safetensors checkpoint after the last step",
         options.save);
    integer("--save-step", "K", "... after step K instead", options.saveStep,
            1);
    text("--load", "PATH", "start from a checkpoint (and its step count)",
         options.load);
    text("--checkpoint-dir", "DIR",
         "where --save-every writes and --resume looks: DIR/step-<N>."
         "safetensors",
         options.checkpointDir);
    integer("--save-every", "K",
            "a checkpoint in --checkpoint-dir after every K-th step",
            options.saveEvery, 1);
    text("--init", "PATH",
         "initial weights: a safetensors file of full tensors named as the "
         "parameters (e.g. from dc_torch export), sharded on load",
         options.init);
    text("--save-grads", "PATH",
         "write the last step's gradients (full tensors, safetensors)",
         options.saveGrads);
    text("--trace", "FILE", "Chrome trace of every rank's streams (Perfetto)",
         options.trace);
    text("--profile-out", "FILE", "per-op times for the compiler's cost model",
         options.profileOut);
    bytes("--gather-arena-bytes",
          "override the manifest's planned gather arena (>= 1)",
          options.gatherArenaBytes);
    bytes("--host-pool-bytes",
          "override the manifest's planned host pool (>= 1)",
          options.hostPoolBytes);
    text("--mpirun", "PATH", "launcher to use (default: $DCRT_MPIRUN, mpirun)",
         options.mpirun);
    add("--launcher", "KIND",
        "how --nproc starts ranks: mpirun (default), or tcp (forked ranks "
        "joining over TCP, no MPI)",
        "mpirun or tcp", [&options](const std::string &value) {
          options.launcher = value;
          return value == "mpirun" || value == "tcp";
        });
    app.add_flag("--allow-nonfinite", options.allowNonFinite,
                 "keep training after a non-finite loss or gradient norm "
                 "(default: stop at the first, naming the step and rank)");
    app.add_flag("--check-finite", options.checkFinite,
                 "stop at the first op of a step (in program order) whose "
                 "output holds a NaN or an infinity, naming it (an artifact "
                 "compiled with dc-compile --check-finite)");
    app.add_flag("--check-memory-plan", options.checkMemoryPlan,
                 "exit with an error when a step's measured device peak "
                 "(the runtime's pools and dc-run's buffers) exceeds the "
                 "step's planned peak plus what dc-run keeps beside it "
                 "(the trainer's optimizer state, its gradient sums)");
    app.add_flag("--resume", options.resume,
                 "start from the latest checkpoint in --checkpoint-dir (none "
                 "there: from the start); --steps is then the last step, so "
                 "a restarted job ends where it would have");
    app.add_flag("--cuda-graphs", options.cudaGraphs,
                 "capture the step after the first and replay it as one CUDA "
                 "graph (cuda backend)");
    app.add_flag("--deterministic", options.deterministic,
                 "bit-identical results run to run: device libraries use "
                 "their deterministic algorithms (cuDNN's attention "
                 "backward without atomics; slower, more workspace)");
  }

  CLI::App app{"", "dc-run"};

private:
  /// Adds `name`; `store` converts a value into its field, false if it
  /// does not parse or is not one of the values `expected` describes.
  void add(const char *name, const char *valueName, const char *help,
           std::string expected,
           std::function<bool(const std::string &)> store) {
    app.add_option(
           name,
           [name, store, expected](const CLI::results_t &values) {
             if (!store(values.front()))
               throw CLI::ValidationError("bad value '" + values.front() +
                                          "' for option '" + name +
                                          "' (expected " + expected + ")");
             return true;
           },
           help)
        ->type_name(valueName)
        ->expected(1)
        // As before CLI11: a repeated option's last value wins.
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  }

  template <typename Field>
  void integer(const char *name, const char *valueName, const char *help,
               Field &field, int64_t min) {
    add(name, valueName, help, "an integer >= " + std::to_string(min),
        [&field, min](const std::string &text) {
          int64_t value;
          if (!parseInteger(text, value) || value < min)
            return false;
          field = static_cast<Field>(value);
          return true;
        });
  }

  /// Which values a number option takes; NaN and infinities never.
  enum class Range { NonNegative, Positive, UnitInterval };

  void number(const char *name, const char *help, double &field, Range range) {
    const char *expected = range == Range::NonNegative ? "a finite number >= 0"
                           : range == Range::Positive  ? "a finite number > 0"
                                                       : "a number in [0, 1)";
    add(name, "F", help, expected, [&field, range](const std::string &text) {
      double value;
      if (!parseNumber(text, value) || !std::isfinite(value))
        return false;
      bool inRange = range == Range::NonNegative ? value >= 0
                     : range == Range::Positive  ? value > 0
                                                 : value >= 0 && value < 1;
      if (!inRange)
        return false;
      field = value;
      return true;
    });
  }

  void stateDtype(const char *name, const char *help, dcrt_dtype &field) {
    add(name, "DTYPE", help, "f32 or bf16", [&field](const std::string &value) {
      if (value != "f32" && value != "bf16")
        return false;
      field = value == "f32" ? DCRT_F32 : DCRT_BF16;
      return true;
    });
  }

  void text(const char *name, const char *valueName, const char *help,
            std::string &field) {
    add(name, valueName, help, "a non-empty value",
        [&field](const std::string &value) {
          field = value;
          return !value.empty();
        });
  }

  void bytes(const char *name, const char *help,
             std::optional<int64_t> &field) {
    // 0 would turn the plan off (the runtime's "grow as needed", for tests).
    add(name, "N", help, "a byte count >= 1",
        [&field](const std::string &text) {
          int64_t value;
          if (!parseInteger(text, value) || value < 1)
            return false;
          field = value;
          return true;
        });
  }
};
} // namespace

bool dcrun::parseOptions(int argc, char **argv, Options &options,
                         std::string &help, std::string &error) {
  CommandLine commandLine(options);
  CLI::App &app = commandLine.app;
  help.clear();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &) {
    help = app.help();
    return true;
  } catch (const CLI::ParseError &failure) {
    error = failure.what();
    return false;
  }
  for (const std::string &extra : app.remaining()) {
    if (extra.rfind("-", 0) == 0) {
      error = "unknown option '" + extra.substr(0, extra.find('=')) + "'";
      return false;
    }
  }
  if (!app.remaining().empty()) {
    error = "more than one artifact: '" + options.artifact + "' and '" +
            app.remaining().front() + "'";
    return false;
  }
  if (options.artifact.empty()) {
    error = "no artifact given";
    return false;
  }
  if (options.saveStep > 0 && options.save.empty()) {
    error = "--save-step needs --save";
    return false;
  }
  if ((options.saveEvery > 0 || options.resume) &&
      options.checkpointDir.empty()) {
    error = options.resume ? "--resume needs --checkpoint-dir"
                           : "--save-every needs --checkpoint-dir";
    return false;
  }
  if (options.resume && !options.load.empty()) {
    error = "--resume and --load both give the checkpoint to start from: "
            "use one";
    return false;
  }
  if (!options.init.empty() && !options.load.empty()) {
    error = "--init and --load both give the initial weights: use one";
    return false;
  }
  return true;
}
