//===- Trainer.h - the training loop of one rank ----------------*- C++ -*-===//
//
// Owns the parameters (shards, fp32 masters, AdamW state) of one rank of a
// job whose runtime is up (dcrt_init with runtimeInitOptions), binds them
// and the data to the artifact's entries, steps, logs, traces, profiles and
// checkpoints. Every rank runs the same trainer: the lines it prints come
// from rank 0.
//
//===----------------------------------------------------------------------===//
#ifndef DC_RUN_TRAINER_H
#define DC_RUN_TRAINER_H

#include "Artifact.h"
#include "CompiledAdamW.h"
#include "Data.h"
#include "Manifest.h"
#include "Options.h"
#include "Params.h"

#include "dcrt/core.hpp"

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace dcrun {

/// Thrown on every rank at once to end the training loop early (a
/// non-finite loss, gradient norm or --check-finite value); the tool
/// finalizes the runtime and exits with status 1.
struct StopTraining {};

/// Seconds since the first call (dc-run calls it first thing), for the
/// start-up line: what a run spends before its first step (runtime,
/// buffers, initial values, optimizer state) is worth seeing when it is
/// tens of seconds.
double secondsSinceStart();

/// What one optimizer step printed: its loss (the mean over micro-batches
/// and ranks), the global gradient norm before clipping, and its time.
struct StepResult {
  int64_t step = 0;
  double loss = 0, gradNorm = 0, seconds = 0;
};

/// The training loop of one rank.
class Trainer {
public:
  /// Picks the step, registers its parameters and binds the entries'
  /// buffers. Fatal on options the artifact cannot run with (a step it does
  /// not have, --master-dtype bf16 over parameters that are not bf16).
  /// The trainer keeps a copy of `options`; `artifact` must outlive it.
  Trainer(const Options &options, const Artifact &artifact);

  /// Loads or initializes the parameters, trains options.steps steps and
  /// saves, traces and profiles as the options ask. Collective. Throws
  /// StopTraining on every rank when training must stop.
  void run();

  /// The steps run() trained so far, in order (every rank has them).
  const std::vector<StepResult> &results() const { return stepResults; }

private:
  /// One compiled form of the step: its entry and the buffers it takes.
  struct Form {
    const StepSpec *spec = nullptr;
    EntryFunction entry = nullptr;
    std::vector<void *> pointers;
    /// Where this form writes each gradient it returns: its bytes of the
    /// step arena, or a buffer of dc-run's. Param::grad points there after
    /// each call of this form.
    std::vector<std::pair<Param *, void *>> grads;
    dcrt::StepGraph graph;
  };

  void runEntry(Form &form, int64_t s, int64_t first);
  void zeroAccumulators();
  void stopAtNonFinite(int64_t s, const char *what, double local);
  void noteNonFiniteOp(int64_t micro);
  void stopAtNonFiniteOp(int64_t s);
  void report(const char *format, ...) __attribute__((format(printf, 2, 3)));
  ParamSpec paramSpec(const TensorSpec &arg) const;
  void bindBuffers();
  void bindForm(Form &form);
  void *accumulatorOf(int32_t param);
  size_t dataIndex(const TensorSpec &arg) const;
  void save(const std::string &path, int64_t atStep);
  void printHeader();
  void printSummary(const std::vector<double> &stepSeconds, int64_t first);
  void writeProfile();
  double countTokens() const;

  double runtimeReady; // seconds since start when the Trainer began
  const Options options;
  const Artifact &artifact;
  const StepSpec &step;
  int rank, worldSize;
  ParamRegistry registry;
  DataSource data;
  Form finalForm, accumulatingForm;
  /// The step's fp32 gradient accumulators (whole, or shards where the
  /// step runs its optimizer), by parameter id.
  std::vector<std::pair<int32_t, dcrt::Buffer>> accumulators;
  /// The AdamW the run uses: the options', or a compiled step's.
  AdamWConfig adamw = options.adamw;
  std::unique_ptr<Optimizer> optimizer;
  /// The optimizer when the step runs it itself (else null): `optimizer`.
  CompiledAdamW *compiledOptimizer = nullptr;
  /// --micro-batches, or what a step that runs its optimizer was compiled
  /// for (compiledMicroBatches).
  int64_t microBatches = compiledMicroBatches(step, options.microBatches);
  /// The largest per-step device peak measured (MemoryStats::
  /// devicePeakBytes), and the libraries' workspaces in it.
  int64_t measuredPeak = 0, workspacePeak = 0;
  dcrt::MemoryStats peakMemory; // of the step that peaked
  /// Device bytes dc-run keeps beside the step's plan: the trainer's
  /// AdamW state and gradient sums on a device backend.
  int64_t bytesBesidePlan() const;
  /// Reports the measured peak against the plan; fatal when over with
  /// --check-memory-plan.
  void checkMemoryPlan();
  /// Tokens the whole job trains on per step: the first integer data
  /// argument with a vocabulary (the input token ids; the targets that
  /// follow are the same tokens shifted, not more of them) of every rank,
  /// in every micro-batch.
  double tokensPerStep = countTokens() * static_cast<double>(microBatches);
  std::deque<dcrt::Buffer> ownedResults; // stable addresses
  /// Gradient buffers of dc-run's that some form writes (not in the arena).
  std::deque<dcrt::Buffer> ownedGrads;
  /// Gradients every form keeps in the step arena.
  int64_t gradientsInArena = 0;
  const dcrt::Buffer *lossBuffer = nullptr;
  int32_t lossType = DCRT_F32;
  /// --check-finite: this rank's first non-finite output of the step ("NaN
  /// in 3 elements of the output of <op>"), or empty.
  std::string nonFiniteOp;
  std::vector<StepResult> stepResults;
};

} // namespace dcrun

#endif // DC_RUN_TRAINER_H
