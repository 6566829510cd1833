//===- Manifest.h - the artifact's manifest, read and checked -------------===//
#ifndef DC_RUN_MANIFEST_H
#define DC_RUN_MANIFEST_H

#include "dcrt/dcrt.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dcrun {

/// GradAccum: an fp32 accumulator of a parameter's full gradient, which a
/// step compiled for micro-batches keeps summing (an argument, and in the
/// accumulating form also a result written into the same buffer).
/// A step that runs the optimizer itself (dc-compile --optimizer-in-step)
/// takes its state, OptState (an argument, and a result written into the
/// same buffer), the LearningRate (f64) and the StepCount (i64, from 1),
/// and returns ParamUpdate results (each written into its parameter's
/// buffer) and GradSquares (f64: the squared global gradient norm).
enum class TensorKind {
  Param,
  Data,
  Loss,
  Grad,
  GradAccum,
  OptState,
  LearningRate,
  StepCount,
  ParamUpdate,
  GradSquares,
  Other
};

/// One argument or result of a step function.
struct TensorSpec {
  TensorKind kind = TensorKind::Other;
  std::string kindName;
  std::string name;
  int32_t id = -1;    // a parameter's id
  int32_t param = -1; // the parameter a gradient (accumulator, state,
                      // update) belongs to
  /// An OptState's name: "exp_avg", "exp_avg_sq" or "master".
  std::string state;
  std::vector<int64_t> shape;
  dcrt_dtype dtype = DCRT_F32;
  /// Elements per rank of a sharded tensor; absent when replicated.
  std::optional<int64_t> local;
  /// The grid axes a sharded tensor is split over ("shard_axes", distinct;
  /// absent in the manifest: every axis, the world). The slots are numbered
  /// over them in that order, the first varying slowest (a block of
  /// experts lists its expert axis first). Ranks that differ only on the
  /// other axes hold the same slot.
  std::vector<int64_t> shardAxes;
  /// Integer data values lie in [0, vocab).
  std::optional<int64_t> vocab;
  /// A sequence-sharded data argument (dc-ulysses): the rank holds its
  /// part of dim seqDim, by its coordinate on grid axis seqAxis.
  std::optional<int64_t> seqDim, seqAxis;
  /// A parameter the step keeps in host memory ("memory": "host").
  bool onHost = false;
  /// A result the step keeps in its arena from where it is made on
  /// ("arena_offset", bytes into dcrt_step_arena(); absent or -1: none): a
  /// caller passing that address spends no memory on the result before the
  /// step makes it. It holds the result until the next entry call.
  std::optional<int64_t> arenaOffset;

  int64_t numel() const;
  /// Elements of the buffer the entry receives.
  int64_t bufferNumel() const { return local ? *local : numel(); }
};

/// The optimizer a step runs itself ("optimizer" in the manifest): its
/// hyperparameters, fixed when it was compiled.
struct CompiledOptimizer {
  double beta1 = 0, beta2 = 0, eps = 0, weightDecay = 0, maxGradNorm = 0;
  dcrt_dtype masterDtype = DCRT_F32, momentDtype = DCRT_F32;
  /// The step sums its gradients over this many micro-batches and updates
  /// with their mean ("micro_batches"; 1 without accumulation).
  int64_t microBatches = 1;
};

struct StepSpec {
  std::string name, entry;
  std::optional<CompiledOptimizer> optimizer;
  std::vector<TensorSpec> args, results;
  /// Floating-point operations of one step on one rank, as dc's cost model
  /// counts them in the step's ops (0: not given).
  double flops = 0;
  /// The device memory dc's plan says the step peaks at
  /// ("planned_peak_bytes"; absent: not given).
  std::optional<int64_t> plannedPeakBytes;
  /// Gradient accumulation (dc-accumulate-gradients): the final form names
  /// its accumulating form ("accumulating_step"), run for every
  /// micro-batch but the last; the accumulating form names its final one
  /// ("accumulates_for"). "micro_batches": what the plan assumed (0: not
  /// given).
  std::string accumulatingStep, accumulatesFor;
  int64_t microBatches = 0;

  const TensorSpec *findParam(int32_t id) const;
  /// The accumulator argument of parameter `param`, if the step has one.
  const TensorSpec *findAccumulator(int32_t param) const;
  const TensorSpec *findGrad(int32_t param) const;
  /// The first argument or result of `kind` (and, where given, of
  /// parameter `param` and state `state`).
  const TensorSpec *findArg(TensorKind kind, int32_t param = -1,
                            std::string_view state = {}) const;
  const TensorSpec *findResult(TensorKind kind, int32_t param = -1,
                               std::string_view state = {}) const;
};

struct Manifest {
  int32_t abi = 0;
  int32_t worldSize = 1;
  /// The compute's lowering: "host" (host backend) or "cuda_sm90" (cuda
  /// backend); empty: host.
  std::string target;
  std::string grid;
  /// The grid's axis sizes (product = world size); empty: one axis.
  std::vector<int64_t> gridShape;
  int64_t gatherArenaBytes = 0;
  int64_t hostPoolBytes = 0;
  int64_t stepArenaBytes = 0;
  int64_t stepBufferBytes = 0;
  int64_t stagingBytes = 0;
  std::optional<int64_t> vocab;
  /// Compiled with dc-compile --check-finite ("check_finite"): the steps
  /// call dcrt_check_finite after each compute op.
  bool checkFinite = false;
  std::vector<StepSpec> steps;

  const StepSpec *findStep(std::string_view name) const;
};

/// Parses and checks a manifest (dcrt.h documents the format). On failure
/// returns nullopt and sets `error`, naming the step and tensor.
std::optional<Manifest> parseManifest(std::string_view text,
                                      std::string &error);

/// Empty if `text` ends with the "checksum" member dc-compile seals every
/// manifest with (dcrt.h) and that checksum is the text's; else why not. A
/// manifest edited after it was compiled (a world size, a shape) fails.
std::string checkManifestSeal(std::string_view text);

} // namespace dcrun

#endif // DC_RUN_MANIFEST_H
