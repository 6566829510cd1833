//===- Options.cpp - dc-run's command line --------------------------------===//
#include "Options.h"

#include <cerrno>
#include <cstdlib>
#include <functional>
#include <vector>

using namespace dcrun;

const char *dcrun::usage = R"(usage: dc-run [--nproc N] ARTIFACT.so [options]

Runs a training step compiled by dc on N ranks of this machine (through
mpirun), or joins the job when already started by mpirun or srun.

  --nproc N              ranks to start (default: the artifact's world size)
  --step NAME            step function to run (default: the manifest's first)
  --steps K              training steps (default 1)
  --lr F                 AdamW learning rate (default 0.001)
  --weight-decay F       AdamW decoupled weight decay (default 0)
  --beta1 F, --beta2 F   AdamW moment decays (default 0.9, 0.999)
  --eps F                AdamW epsilon (default 1e-8)
  --seed S               seed of the initial parameters and synthetic data
  --init-std F           std of the initial weights (default 0.02)
  --data FILE            int32 token file for integer data (default: synthetic)
  --vocab V              integer data lies in [0, V) (default: the manifest's)
  --save PATH            write a safetensors checkpoint after the last step
  --save-step K          ... after step K instead
  --load PATH            start from a checkpoint (and its step count)
  --trace FILE           Chrome trace of every rank's streams (Perfetto)
  --profile-out FILE     per-op times for the compiler's cost model
  --gather-arena-bytes N override the manifest's planned gather arena
  --host-pool-bytes N    override the manifest's planned host pool
  --mpirun PATH          launcher to use (default: $DCRT_MPIRUN, mpirun)

Environment: DCRT_TIMEOUT_S (default 300) bounds every wait.
)";

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

struct OptionSpec {
  const char *name;
  /// Stores the value; false if it does not parse.
  std::function<bool(const std::string &)> set;
};
} // namespace

bool dcrun::parseOptions(int argc, char **argv, Options &options, bool &help,
                         std::string &error) {
  auto integer = [](auto &field, int64_t min) {
    return [&field, min](const std::string &text) {
      int64_t value;
      if (!parseInteger(text, value) || value < min)
        return false;
      field = static_cast<std::remove_reference_t<decltype(field)>>(value);
      return true;
    };
  };
  auto number = [](double &field) {
    return
        [&field](const std::string &text) { return parseNumber(text, field); };
  };
  auto text = [](std::string &field) {
    return [&field](const std::string &value) {
      field = value;
      return !value.empty();
    };
  };
  auto bytes = [](std::optional<int64_t> &field) {
    return [&field](const std::string &value) {
      int64_t parsed;
      if (!parseInteger(value, parsed) || parsed < 0)
        return false;
      field = parsed;
      return true;
    };
  };
  const std::vector<OptionSpec> specs = {
      {"--nproc", integer(options.nproc, 1)},
      {"--step", text(options.step)},
      {"--steps", integer(options.steps, 0)},
      {"--lr", number(options.adamw.lr)},
      {"--weight-decay", number(options.adamw.weightDecay)},
      {"--beta1", number(options.adamw.beta1)},
      {"--beta2", number(options.adamw.beta2)},
      {"--eps", number(options.adamw.eps)},
      {"--seed", integer(options.seed, 0)},
      {"--init-std", number(options.initStd)},
      {"--data", text(options.dataFile)},
      {"--vocab", integer(options.vocab, 1)},
      {"--save", text(options.save)},
      {"--save-step", integer(options.saveStep, 1)},
      {"--load", text(options.load)},
      {"--trace", text(options.trace)},
      {"--profile-out", text(options.profileOut)},
      {"--gather-arena-bytes", bytes(options.gatherArenaBytes)},
      {"--host-pool-bytes", bytes(options.hostPoolBytes)},
      {"--mpirun", text(options.mpirun)},
  };

  help = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      help = true;
      return true;
    }
    if (arg.rfind("--", 0) != 0) {
      if (!options.artifact.empty()) {
        error = "more than one artifact: '" + options.artifact + "' and '" +
                arg + "'";
        return false;
      }
      options.artifact = arg;
      continue;
    }
    // --name=value or --name value
    std::string name = arg, value;
    size_t equals = arg.find('=');
    bool inlineValue = equals != std::string::npos;
    if (inlineValue) {
      name = arg.substr(0, equals);
      value = arg.substr(equals + 1);
    }
    const OptionSpec *spec = nullptr;
    for (const OptionSpec &candidate : specs)
      if (name == candidate.name)
        spec = &candidate;
    if (!spec) {
      error = "unknown option '" + name + "'";
      return false;
    }
    if (!inlineValue) {
      if (i + 1 >= argc) {
        error = "option '" + name + "' needs a value";
        return false;
      }
      value = argv[++i];
    }
    if (!spec->set(value)) {
      error = "bad value '" + value + "' for option '" + name + "'";
      return false;
    }
  }
  if (options.artifact.empty()) {
    error = "no artifact given";
    return false;
  }
  if (options.saveStep > 0 && options.save.empty()) {
    error = "--save-step needs --save";
    return false;
  }
  return true;
}
