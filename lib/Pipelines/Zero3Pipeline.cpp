//===- Zero3Pipeline.cpp - shard, schedule and verify a training step -----===//
#include "dc/Pipelines/Zero3Pipeline.h"

#include "ChooseSchedule.h"

#include "dc/Rewrite/Passes.h"
#include "dc/Schedule/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using namespace dc;

/// Bytes the trainer keeps per parameter element: the optimizer's state,
/// and with micro-batches dc-run's fp32 sum of the gradient shards.
static int64_t trainerBytesPerElement(const dc::Zero3PipelineOptions &options) {
  // State the step keeps in host memory takes none of the device while
  // forward and backward run (dc-offload-optimizer-state plans its visits).
  int64_t state = options.optimizerInStep &&
                          options.offloadOptimizerState != StateInHost::None
                      ? 0
                      : int64_t(options.optimizerStateBytes);
  return state + (options.microBatches > 1 ? 4 : 0);
}

/// Every planning pass plans against the same profile (and the module's one
/// target and budget).
template <typename PassOptions>
static void planWithSharedInputs(PassOptions &pass,
                                 const dc::Zero3PipelineOptions &options) {
  pass.profile = options.profile;
  pass.optimizerStateBytes = trainerBytesPerElement(options);
}

void dc::buildZero3Pipeline(OpPassManager &pm,
                            const Zero3PipelineOptions &options) {
  // The target and its budget, once, for every pass after.
  DCAttachTargetOptions attach;
  attach.target = options.target;
  attach.memoryBudget = options.memoryBudget;
  attach.lowering = options.lowering;
  pm.addPass(createDCAttachTarget(attach));
  // The candidates each run this pipeline (without the choice) on a copy.
  if (options.choose != ScheduleChoice::None) {
    pm.addPass(createChooseSchedulePass(options));
    return;
  }
  DCZero3Options zero3;
  zero3.worldSize = options.worldSize;
  zero3.gridName = options.grid;
  zero3.bucketBytes = options.bucketBytes;
  zero3.replicateBelow = options.replicateBelow;
  zero3.hierarchical = options.hierarchical;
  // Shards in host memory need shards, even of one rank.
  zero3.shardOneRank = options.offloadParams != ParamsInHost::None;
  if (options.sequenceParallel > 1) {
    // Ulysses on the last grid axis. Its gradients are partial sums over
    // that axis: with data parallelism as well, either dc-zero3 shards over
    // both axes (shard-over-sequence: its one reduce-scatter sums over the
    // sequence and averages over the data axis), or dc-ulysses all-reduces
    // them over the sequence axis and dc-zero3 averages over the
    // data-parallel axis 0; alone, dc-zero3 shards over the sequence axis
    // and its reduce-scatter sums.
    DCUlyssesOptions ulysses;
    ulysses.gridName = options.grid;
    ulysses.sequenceParallel = options.sequenceParallel;
    ulysses.worldSize = options.worldSize;
    bool dataParallel = options.worldSize > options.sequenceParallel;
    bool overBothAxes = dataParallel && options.shardOverSequence;
    ulysses.gridAxis = dataParallel ? 1 : 0;
    ulysses.reduceGrads = dataParallel && !overBothAxes;
    pm.addPass(createDCUlysses(ulysses));
    zero3.gridAxis = 0;
    zero3.shardAllAxes = overBothAxes;
    zero3.worldSize = overBothAxes ? int64_t(options.worldSize)
                      : dataParallel
                          ? options.worldSize / options.sequenceParallel
                          : int64_t(options.sequenceParallel);
    if (!dataParallel)
      zero3.reduceKind = shard::ReductionKind::Sum;
  }
  if (options.expertParallel > 1) {
    // Experts on the last grid axis; every rank keeps its own tokens, so
    // dc-zero3 shards over every axis (the expert blocks over the others).
    DCExpertParallelOptions experts;
    experts.gridName = options.grid;
    experts.expertParallel = options.expertParallel;
    experts.worldSize = options.worldSize;
    pm.addPass(createDCExpertParallel(experts));
    zero3.shardAllAxes = options.worldSize > options.expertParallel;
  }
  // The step as the target runs it, before anything is planned against
  // it: on the GPU targets fused attention reads and writes the
  // projections' [B, S, H, D] tensors in place, so the head transposes
  // around it are neither priced nor kept live (after dc-ulysses, which
  // splits heads-major attention).
  DCFoldHeadTransposesOptions fold;
  fold.ifTargetFolds = true;
  pm.addNestedPass<func::FuncOp>(createDCFoldHeadTransposes(fold));
  // The logits and their gradient a chunk of rows at a time, before
  // anything is sharded or planned: the planners then see the smaller
  // transients.
  if (options.rowChunks != 0) {
    DCChunkRowsOptions rows;
    rows.chunks = options.rowChunks;
    rows.minBytes = options.rowChunksMinBytes;
    pm.addNestedPass<func::FuncOp>(createDCChunkRows(rows));
  }
  pm.addPass(createDCZero3(zero3));
  // The op at the memory peak over an input it reads last (the
  // cross-entropy gradient over the logits), before anything is planned
  // against the peak.
  pm.addPass(createDCInPlaceAtPeak());
  // Gradients retired as their reductions finish. Where the step is over
  // budget, before anything is planned against it: else every full
  // gradient counts as live until the end of the backward and the planners
  // see a floor that is not there (the waits are placed on the
  // just-in-time timing, so a faster final schedule may stall on some).
  auto addWaitReductionsEarly = [&](bool overBudgetOnly) {
    if (!options.waitReductionsEarly)
      return;
    DCWaitReductionsEarlyOptions early;
    planWithSharedInputs(early, options);
    early.overBudgetOnly = overBudgetOnly;
    pm.addPass(createDCWaitReductionsEarly(early));
  };
  addWaitReductionsEarly(/*overBudgetOnly=*/true);

  // Parameter shards to host first (when asked): a smaller base leaves
  // activation offload less to do.
  if (options.offloadParams != ParamsInHost::None) {
    DCOffloadParamsOptions offload;
    planWithSharedInputs(offload, options);
    offload.params = options.offloadParams;
    offload.failOverBudget = !options.offloadActivations;
    pm.addPass(createDCOffloadParams(offload));
  }
  // Recompute before offloading: an activation cheaper to compute again
  // than to copy should not take the host link's time; with offload on,
  // the rest of the excess is offload's (the same min-bytes for both).
  if (options.recompute) {
    DCRematerializeOptions remat;
    planWithSharedInputs(remat, options);
    remat.minBytes = options.offloadMinBytes;
    remat.maxRecomputeOps = options.recomputeMaxOps;
    remat.leaveToOffload = options.offloadActivations;
    pm.addPass(createDCRematerialize(remat));
  }
  auto addOffloadActivations = [&] {
    DCOffloadActivationsOptions offload;
    planWithSharedInputs(offload, options);
    offload.minBytes = options.offloadMinBytes;
    offload.keepLast = options.offloadKeepLast;
    pm.addPass(createDCOffloadActivations(offload));
  };
  // Offload activations next: the only way to fit a step whose activations
  // exceed the budget; what it frees is headroom for prefetch.
  if (options.offloadActivations)
    addOffloadActivations();
  // Prefetch next: hiding a gather is worth more than saving one, and
  // selective gather then spends only the headroom prefetch left.
  if (options.prefetch) {
    DCPrefetchOptions prefetch;
    planWithSharedInputs(prefetch, options);
    prefetch.maxFusedBytes = options.maxFusedBytes;
    prefetch.maxInFlightBytes = options.maxInFlightBytes;
    pm.addPass(createDCPrefetch(prefetch));
  }
  if (options.selectiveGather) {
    DCSelectiveGatherOptions selective;
    planWithSharedInputs(selective, options);
    pm.addPass(createDCSelectiveGather(selective));
  }
  // Prefetch and selective gather changed when ops run (fewer collective
  // stalls) and what memory is free: the offloads' waits and reloads are
  // re-timed for the final schedule (the pass offloads nothing new here).
  if (options.offloadActivations &&
      (options.prefetch || options.selectiveGather))
    addOffloadActivations();
  // Everywhere else after planning, on the final timing: it moves no
  // transfer, so nothing the planners decided changes.
  addWaitReductionsEarly(/*overBudgetOnly=*/false);
  // Last, on the final schedule: which gradients the step sums itself over
  // the micro-batches (its accumulating and final forms).
  if (options.microBatches > 1) {
    DCAccumulateGradientsOptions accumulate;
    planWithSharedInputs(accumulate, options);
    accumulate.microBatches = options.microBatches;
    accumulate.local.assign(options.localAccumulation.begin(),
                            options.localAccumulation.end());
    pm.addPass(createDCAccumulateGradients(accumulate));
  }
  // Last, on the final schedule: the update of each parameter, after every
  // gradient (the norm's clipping needs them all). The state becomes
  // arguments of the step, which the verifier's timeline then holds.
  DCVerifyScheduleOptions verify;
  verify.optimizerStateBytes = trainerBytesPerElement(options);
  if (options.optimizerInStep) {
    DCOptimizerInStepOptions adamw;
    adamw.beta1 = options.beta1;
    adamw.beta2 = options.beta2;
    adamw.eps = options.eps;
    adamw.weightDecay = options.weightDecay;
    adamw.maxGradNorm = options.clipGradNorm;
    adamw.masterDtype = options.masterDtype;
    adamw.momentDtype = options.momentDtype;
    adamw.microBatches = options.microBatches;
    pm.addPass(createDCOptimizerInStep(adamw));
    verify.optimizerStateBytes = 0;
  }
  // (Without the optimizer in the step the pass says there is no state.)
  if (options.offloadOptimizerState != StateInHost::None) {
    DCOffloadOptimizerStateOptions offload;
    offload.profile = options.profile;
    offload.state = options.offloadOptimizerState;
    pm.addPass(createDCOffloadOptimizerState(offload));
  }
  pm.addPass(createDCVerifySchedule(verify));
}

void dc::registerZero3Pipeline() {
  PassPipelineRegistration<Zero3PipelineOptions>(
      "dc-zero3-pipeline",
      "Shard parameters ZeRO-3 style, prefetch and fuse gathers, keep some "
      "gathered, all under one memory budget, and verify the schedule",
      buildZero3Pipeline);
}
