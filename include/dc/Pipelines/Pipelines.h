//===- Pipelines.h - dc's pipelines as public functions ---------*- C++ -*-===//
//
// What `dc-opt --dc-zero3-pipeline`, `--dc-lower-to-llvm` and
// `--dc-compile-pipeline` (both, as dc-compile runs them) run, callable by
// any compiler that links dc: build the pass pipeline into your own
// OpPassManager. Each option is declared once, in the table of the
// pipeline it belongs to; its default is the pass's where a pass has it.
//
//===----------------------------------------------------------------------===//
#ifndef DC_PIPELINES_PIPELINES_H
#define DC_PIPELINES_PIPELINES_H

#include "dc/GPU/Passes.h"
#include "dc/Pipelines/Zero3Pipeline.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace dc {

struct LowerToLLVMPipelineOptions
    : public mlir::PassPipelineOptions<LowerToLLVMPipelineOptions> {
  Option<int64_t> worldSize{
      *this, "world-size",
      llvm::cl::desc("World size the artifact must run on (0: the module's "
                     "grid, 1 without one)"),
      llvm::cl::init(0)};
  Option<bool> profileOps{
      *this, "profile-ops",
      llvm::cl::desc("Time each compute op through dcrt_op_begin/end (for "
                     "dc-run --profile-out)"),
      llvm::cl::init(false)};
  Option<bool> checkFinite{
      *this, "check-finite",
      llvm::cl::desc("Check each compute op's outputs for NaN and infinity "
                     "(dc-check-finite), for dc-run --check-finite"),
      llvm::cl::init(false)};
  Option<bool> referenceExperts{
      *this, "reference-experts",
      llvm::cl::desc("Run the mixture-of-experts ops as their linalg "
                     "reference (dc-expand-experts) instead of libdcrt's "
                     "routing calls: for checking the calls against it"),
      llvm::cl::init(false)};
  Option<bool> preciseMath{
      *this, "precise-math",
      llvm::cl::desc("cuda_sm90: kernels use libdevice's accurate exp, log and "
                     "f32 division instead of the hardware's approximate "
                     "ones (dc-map-to-gpu approximate-math=false)"),
      llvm::cl::init(!DCMapToGPUOptions().approximateMath)};
  Option<bool> finishingPasses{
      *this, "finishing-passes",
      llvm::cl::desc("cuda_sm90: a split weight gradient's second pass runs at "
                     "the end of its row group's kernel (dc-map-to-gpu "
                     "finishing-passes; needs finishing-blocks blocks "
                     "resident at once)"),
      llvm::cl::init(DCMapToGPUOptions().finishingPasses)};
  Option<int64_t> finishingBlocks{
      *this, "finishing-blocks",
      llvm::cl::desc("cuda_sm90, with finishing-passes: the most blocks of a "
                     "kernel that wait for the rest, all resident at once "
                     "(dc-map-to-gpu finishing-blocks; lower it for a GPU "
                     "that holds fewer, such as a small MIG slice)"),
      llvm::cl::init(DCMapToGPUOptions().finishingBlocks)};
  Option<bool> singleBarrierReductions{
      *this, "single-barrier-reductions",
      llvm::cl::desc(
          "cuda_sm90: a block-per-row group's f32 reductions take one "
          "barrier instead of gpu.all_reduce's two (dc-map-to-gpu "
          "single-barrier-reductions)"),
      llvm::cl::init(DCMapToGPUOptions().singleBarrierReductions)};
};

/// Lowers a dc module (scheduled or not) to the LLVM dialect for `lowering`,
/// ready for translation: dc-artifact-manifest (and dc-profile-ops when
/// asked for); One-Shot Bufferize (function boundaries, identity layouts)
/// with results as out-parameters; dc-assign-step-arena (every temporary at
/// a planned offset) and buffer deallocation of what is left; then the
/// compute: for `host`, linalg to loops and the host's CPU lowering; for
/// `cuda_sm90`, dc-map-to-gpu (kernels and library calls), kernel outlining
/// and NVVM lowering to one sm_90 fatbin; dc-to-dcrt (runtime calls, kernel
/// launches, matrix products); everything to LLVM with the bare-pointer
/// calling convention; then dc-artifact-entries.
void buildLowerToLLVMPipeline(mlir::OpPassManager &pm,
                              const LowerToLLVMPipelineOptions &options,
                              Lowering lowering);

/// Adds `dc-lower-to-llvm`: one pass that runs the pipeline above for the
/// lowering of the module's #dc.target (a dynamic pipeline: which passes
/// run depends on the module it meets).
void buildLowerToLLVMPipeline(mlir::OpPassManager &pm,
                              const LowerToLLVMPipelineOptions &options);

/// Registers `dc-lower-to-llvm` with the pass pipeline registry.
void registerLowerToLLVMPipeline();

/// What one compile takes, from a training step to the LLVM dialect: the
/// schedule's options and the lowering's, each declared once in its
/// pipeline's table above, parsed from one string of `name=value` and
/// `flag` words. A name goes to the table that declares it, `world-size`
/// to both (the step is planned for the ranks it runs on). dc-compile's
/// command line, `--dc-compile-pipeline="..."` and dcAddCompilePipeline
/// all parse it here.
struct CompileOptions {
  Zero3PipelineOptions schedule;
  LowerToLLVMPipelineOptions lowering;
  /// The step is scheduled already (`no-schedule`): it is only lowered,
  /// and keeps its own #dc.target unless `target` or `memory-budget` is
  /// given (parsed or assigned).
  bool noSchedule = false;

  /// Device bytes per parameter element of dc-run's AdamW (an fp32 master
  /// and two fp32 moments), what the budget holds for the trainer unless
  /// `optimizer-state-bytes` says otherwise: the artifact is dc-run's.
  static constexpr int64_t kDcRunOptimizerStateBytes = 12;

  CompileOptions();
  /// Parses `text`; on an error, says which word and why on `errors`.
  mlir::LogicalResult parseFromString(llvm::StringRef text,
                                      llvm::raw_ostream &errors = llvm::errs());
  /// Whether option `name` (of either table) takes a value (`name value`
  /// on a command line), not a flag.
  bool takesValue(llvm::StringRef name) const;
};

/// dc-zero3-pipeline (unless `no-schedule`; then dc-attach-target, keeping
/// a module's own target unless one was given), then dc-lower-to-llvm.
void buildCompilePipeline(mlir::OpPassManager &pm,
                          const CompileOptions &options);

/// Registers `dc-compile-pipeline` with the pass pipeline registry.
void registerCompilePipeline();

} // namespace dc

#endif // DC_PIPELINES_PIPELINES_H
