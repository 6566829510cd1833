//===- Options.h - dc-run's command line ----------------------------------===//
#ifndef DC_RUN_OPTIONS_H
#define DC_RUN_OPTIONS_H

#include "Params.h"

#include <cstdint>
#include <optional>
#include <string>

namespace dcrun {

struct Options {
  std::string artifact;
  int nproc = 0;    // 0: the artifact's world size
  std::string step; // empty: the manifest's first step
  int64_t steps = 1;
  /// Micro-batches per optimizer step: the entry runs this many times over
  /// slices of the step's global batch, the gradients summed in fp32 and
  /// averaged before the one update.
  int64_t microBatches = 1;
  AdamWConfig adamw;
  uint64_t seed = 0;
  double initStd = 0.02;
  std::string dataFile;
  int64_t vocab = 0; // 0: from the manifest
  std::string save;
  int64_t saveStep = 0; // 0: after the last step
  std::string load;
  /// Periodic checkpoints: every `saveEvery` steps into
  /// `checkpointDir`/step-<N>.safetensors; with `resume`, the run starts
  /// from the latest of them there (if any) and `steps` is its last step,
  /// so a job restarted with the same command line ends where it would
  /// have.
  std::string checkpointDir;
  int64_t saveEvery = 0;
  bool resume = false;
  std::string init;      // initial weights (safetensors), not a checkpoint
  std::string saveGrads; // the last step's gradients (safetensors)
  std::string trace;
  std::string profileOut;
  std::string mpirun;
  /// How --nproc starts its ranks: "mpirun", or "tcp" (forked children
  /// joining through libdcrt's TCP rendezvous, no MPI).
  std::string launcher = "mpirun";
  /// Capture the step once (after the first) and replay it (CUDA graphs).
  bool cudaGraphs = false;
  /// Ask the runtime for run-to-run bit-identical results
  /// (DCRT_INIT_DETERMINISTIC).
  bool deterministic = false;
  /// Keep training after a non-finite loss or gradient norm.
  bool allowNonFinite = false;
  /// Run the artifact's finite-value checks (DCRT_INIT_CHECK_FINITE; it
  /// must be compiled with dc-compile --check-finite) and stop at the first
  /// op of a step that wrote a NaN or an infinity, naming it.
  bool checkFinite = false;
  /// Fail when a step's measured device peak exceeds what dc planned for
  /// it (with what dc-run keeps beside the step).
  bool checkMemoryPlan = false;
  std::optional<int64_t> gatherArenaBytes, hostPoolBytes;
};

/// The first line of the help, repeated after a command-line error.
extern const char *usageLine;

/// Parses argv; on failure returns false and sets `error`. When -h/--help
/// is given, returns true with `help` set to the help text.
bool parseOptions(int argc, char **argv, Options &options, std::string &help,
                  std::string &error);

} // namespace dcrun

#endif // DC_RUN_OPTIONS_H
