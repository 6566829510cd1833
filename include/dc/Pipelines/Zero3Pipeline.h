//===- Zero3Pipeline.h - dc-zero3-pipeline as a public function -*- C++ -*-===//
//
// What `dc-opt --dc-zero3-pipeline` runs: shard, schedule and verify a
// training step. Needs only dc's scheduling half (DCZero3Pipeline), not the
// lowering to LLVM or the GPU backend.
//
//===----------------------------------------------------------------------===//
#ifndef DC_PIPELINES_ZERO3PIPELINE_H
#define DC_PIPELINES_ZERO3PIPELINE_H

#include "dc/Schedule/PassDefaults.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace dc {

/// What dc-zero3-pipeline chooses between (its `choose` option).
enum class ScheduleChoice { None, Layouts, RowChunks };

struct Zero3PipelineOptions
    : public mlir::PassPipelineOptions<Zero3PipelineOptions> {
  Option<int64_t> worldSize{*this, "world-size",
                            llvm::cl::desc("Ranks the parameters are sharded "
                                           "over (0: from the module's grid)"),
                            llvm::cl::init(kDefaultWorldSize)};
  Option<int64_t> sequenceParallel{
      *this, "sequence-parallel",
      llvm::cl::desc("Ranks the sequence is sharded over (Ulysses, "
                     "dc-ulysses; 1: none). The world is then "
                     "(world-size / N) data-parallel x N sequence-parallel "
                     "ranks; ZeRO-3 shards parameters over the "
                     "data-parallel axis, or over the sequence axis when it "
                     "is the only one"),
      llvm::cl::init(1)};
  Option<int64_t> expertParallel{
      *this, "expert-parallel",
      llvm::cl::desc("Ranks each mixture-of-experts routing's experts are "
                     "divided over (dc-expert-parallel; 1: none). The world "
                     "is then (world-size / N) x N ranks, every rank with its "
                     "own tokens; ZeRO-3 shards the dense parameters over "
                     "all ranks and each rank's block of experts over the "
                     "first axis"),
      llvm::cl::init(1)};
  Option<bool> shardOverSequence{
      *this, "shard-over-sequence",
      llvm::cl::desc("With sequence-parallel and data-parallel ranks: shard "
                     "parameters over both axes (data x sequence), one "
                     "reduce-scatter over all ranks instead of an all-reduce "
                     "over the sequence axis and a reduce-scatter over the "
                     "data axis; shards are N times smaller"),
      llvm::cl::init(false)};
  Option<int64_t> hierarchical{
      *this, "hierarchical",
      llvm::cl::desc("GPUs per node: shard parameters inside each node and "
                     "replicate them across nodes (HSDP / MiCS) on a "
                     "(world-size / G) x G grid; 0: shard over all ranks"),
      llvm::cl::init(0)};
  Option<std::string> grid{*this, "grid",
                           llvm::cl::desc("shard.grid to shard over"),
                           llvm::cl::init(kDefaultGrid)};
  Option<std::string> memoryBudget{
      *this, "memory-budget",
      llvm::cl::desc("Device memory budget: bytes (16GiB) or a fraction of "
                     "the target's memory (0.9, 90%); empty: all of it"),
      llvm::cl::init(kDefaultMemoryBudget)};
  Option<std::string> target{
      *this, "target",
      llvm::cl::desc("Target preset (h100, h200, h100-cluster, h200-cluster, "
                     "cpu) or target JSON file (dc-attach-target)"),
      llvm::cl::init(kDefaultTarget)};
  Option<std::string> lowering{
      *this, "lowering",
      llvm::cl::desc("What the compute becomes, host or cuda_sm90; empty: the "
                     "target's own (dc-attach-target)"),
      llvm::cl::init("")};
  Option<std::string> profile{
      *this, "profile",
      llvm::cl::desc("Measured per-op times (JSON from dc-run)"),
      llvm::cl::init(kDefaultProfile)};
  Option<int64_t> optimizerStateBytes{
      *this, "optimizer-state-bytes",
      llvm::cl::desc("Device bytes the trainer keeps per element of each "
                     "parameter shard (dc-run's AdamW: 12), counted against "
                     "the budget"),
      llvm::cl::init(0)};
  Option<int64_t> bucketBytes{*this, "bucket-bytes",
                              llvm::cl::desc("Gradient bucket size (bytes)"),
                              llvm::cl::init(kDefaultBucketBytes)};
  Option<int64_t> replicateBelow{
      *this, "replicate-below",
      llvm::cl::desc("Parameters smaller than this (bytes) stay replicated"),
      llvm::cl::init(kDefaultReplicateBelow)};
  Option<bool> prefetch{*this, "prefetch",
                        llvm::cl::desc("Hoist and fuse gathers (dc-prefetch)"),
                        llvm::cl::init(true)};
  Option<bool> selectiveGather{
      *this, "selective-gather",
      llvm::cl::desc("Keep parameters gathered where the budget allows"),
      llvm::cl::init(true)};
  Option<bool> waitReductionsEarly{
      *this, "wait-reductions-early",
      llvm::cl::desc("Wait for each gradient reduction where it has finished "
                     "(dc-wait-reductions-early), freeing its full gradient"),
      llvm::cl::init(true)};
  Option<bool> offloadActivations{
      *this, "offload-activations",
      llvm::cl::desc("Offload long-idle activations to host memory when the "
                     "step does not fit the budget"),
      llvm::cl::init(false)};
  Option<bool> recompute{
      *this, "recompute",
      llvm::cl::desc("Recompute cheap activations before their backward use "
                     "when the step does not fit the budget "
                     "(dc-rematerialize); with offload-activations, only "
                     "those faster to recompute than to copy"),
      llvm::cl::init(false)};
  Option<int64_t> rowChunks{
      *this, "row-chunks",
      llvm::cl::desc("Compute each matrix product of row-chunks-min-bytes "
                     "or more (a language model's logits), and what reads "
                     "it row by row, in this many chunks of rows "
                     "(dc-chunk-rows; 0: whole)"),
      llvm::cl::init(0)};
  Option<int64_t> rowChunksMinBytes{
      *this, "row-chunks-min-bytes",
      llvm::cl::desc("With row-chunks: the smallest matrix product chunked "
                     "(bytes)"),
      llvm::cl::init(256 << 20)};
  Option<int64_t> recomputeMaxOps{
      *this, "recompute-max-ops",
      llvm::cl::desc("Most ops cloned to recompute one activation"),
      llvm::cl::init(kDefaultMaxRecomputeOps)};
  Option<int64_t> offloadMinBytes{
      *this, "offload-min-bytes",
      llvm::cl::desc("Smallest activation worth offloading (bytes)"),
      llvm::cl::init(kDefaultOffloadMinBytes)};
  Option<int64_t> offloadKeepLast{
      *this, "offload-keep-last",
      llvm::cl::desc("Offload candidates kept on the device, from the last"),
      llvm::cl::init(kDefaultOffloadKeepLast)};
  Option<ParamsInHost> offloadParams{
      *this, "offload-params",
      llvm::cl::desc("Parameter shards in host memory: none, all or budget"),
      llvm::cl::values(
          clEnumValN(ParamsInHost::None, "none", "none"),
          clEnumValN(ParamsInHost::All, "all", "every sharded one"),
          clEnumValN(ParamsInHost::Budget, "budget",
                     "the largest, until the step fits the budget")),
      llvm::cl::init(ParamsInHost::None)};
  Option<int64_t> maxFusedBytes{
      *this, "max-fused-bytes",
      llvm::cl::desc("Most bytes one fused gather group moves (0: no "
                     "fusion)"),
      llvm::cl::init(kDefaultMaxFusedBytes)};
  Option<int64_t> maxInFlightBytes{
      *this, "max-in-flight-bytes",
      llvm::cl::desc("Most gather bytes in flight (0: no limit)"),
      llvm::cl::init(kDefaultMaxInFlightBytes)};
  Option<int64_t> microBatches{
      *this, "micro-batches",
      llvm::cl::desc("Micro-batches per optimizer step (dc-run "
                     "--micro-batches): the trainer's fp32 gradient sums are "
                     "budgeted, and dc-accumulate-gradients picks the "
                     "parameters whose gradients the step sums itself"),
      llvm::cl::init(1)};
  ListOption<std::string> localAccumulation{
      *this, "local-accumulation",
      llvm::cl::desc("Parameters (by name) whose gradients the step always "
                     "sums itself over the micro-batches")};
  Option<StateInHost> offloadOptimizerState{
      *this, "offload-optimizer-state",
      llvm::cl::desc("With optimizer-in-step: optimizer state in host "
                     "memory (dc-offload-optimizer-state): none, all or "
                     "budget"),
      llvm::cl::values(
          clEnumValN(StateInHost::None, "none", "none"),
          clEnumValN(StateInHost::All, "all", "every parameter's"),
          clEnumValN(StateInHost::Budget, "budget",
                     "the largest, until the step fits the budget")),
      llvm::cl::init(StateInHost::None)};
  Option<bool> optimizerInStep{
      *this, "optimizer-in-step",
      llvm::cl::desc("Run AdamW inside the step (dc-optimizer-in-step): the "
                     "step takes the optimizer's state and returns the "
                     "updated parameters instead of gradients"),
      llvm::cl::init(false)};
  Option<double> beta1{*this, "beta1",
                       llvm::cl::desc("With optimizer-in-step: AdamW's beta1"),
                       llvm::cl::init(0.9)};
  Option<double> beta2{*this, "beta2",
                       llvm::cl::desc("With optimizer-in-step: AdamW's beta2"),
                       llvm::cl::init(0.999)};
  Option<double> eps{*this, "eps",
                     llvm::cl::desc("With optimizer-in-step: AdamW's eps"),
                     llvm::cl::init(1e-8)};
  Option<double> weightDecay{
      *this, "weight-decay",
      llvm::cl::desc("With optimizer-in-step: decoupled weight decay"),
      llvm::cl::init(0.0)};
  Option<double> clipGradNorm{
      *this, "clip-grad-norm",
      llvm::cl::desc("With optimizer-in-step: clip gradients to this global "
                     "L2 norm (0: no clipping)"),
      llvm::cl::init(0.0)};
  Option<std::string> masterDtype{
      *this, "master-dtype",
      llvm::cl::desc("With optimizer-in-step: f32 (an fp32 master copy of "
                     "each parameter that is not f32) or bf16 (the bf16 "
                     "parameter is its own master)"),
      llvm::cl::init("f32")};
  Option<std::string> momentDtype{
      *this, "moment-dtype",
      llvm::cl::desc("With optimizer-in-step: the moments' element type, f32 "
                     "or bf16"),
      llvm::cl::init("f32")};
  Option<ScheduleChoice> choose{
      *this, "choose",
      llvm::cl::desc("Schedule the step several ways, print what the cost "
                     "model predicts for each (stderr) and keep the fastest"),
      llvm::cl::values(
          clEnumValN(ScheduleChoice::None, "none", "schedule it once"),
          clEnumValN(ScheduleChoice::Layouts, "layouts",
                     "sharded over all ranks or inside each node "
                     "(hierarchical: a target of several nodes); with "
                     "sequence-parallel and data-parallel ranks, over the "
                     "data axis or over both (shard-over-sequence)"),
          clEnumValN(ScheduleChoice::RowChunks, "row-chunks",
                     "the wide matrix products (the logits) whole and in 4 "
                     "and 8 chunks of rows (row-chunks)")),
      llvm::cl::init(ScheduleChoice::None)};
};

/// dc-attach-target, dc-zero3, then dc-rematerialize,
/// dc-offload-activations, dc-prefetch and dc-selective-gather (as enabled),
/// then dc-verify-schedule against the same budget. With `choose`, that
/// pipeline runs on a copy of the module for each candidate, and the module
/// becomes the copy the cost model predicts fastest.
void buildZero3Pipeline(mlir::OpPassManager &pm,
                        const Zero3PipelineOptions &options);

/// Registers `dc-zero3-pipeline` with the pass pipeline registry.
void registerZero3Pipeline();

} // namespace dc

#endif // DC_PIPELINES_ZERO3PIPELINE_H
