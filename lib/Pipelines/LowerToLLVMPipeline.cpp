//===- LowerToLLVMPipeline.cpp - a dc module to the LLVM dialect ----------===//
#include "dc/Pipelines/Pipelines.h"

#include "dc/GPU/Passes.h"
#include "dc/Lowering/Passes.h"
#include "dc/Rewrite/Passes.h"
#include "dc/Schedule/Passes.h"

#include "dc/Dialect/DC/IR/DCDialect.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace dc;

namespace {

#ifdef DC_CUDA_TOOLKIT_DIR
constexpr const char kCudaToolkit[] = DC_CUDA_TOOLKIT_DIR;
#else
constexpr const char kCudaToolkit[] = "";
#endif

/// The GPU target's compute: kernels and library calls, the kernels
/// compiled to one sm_90 fatbin (SASS and PTX) that the artifact embeds.
void buildGPUCompute(OpPassManager &pm,
                     const dc::LowerToLLVMPipelineOptions &options) {
  // No host memcpy on device memory: every copy is a kernel.
  DCExpandStridedCopiesOptions copies;
  copies.all = true;
  pm.addPass(createDCExpandStridedCopies(copies));
  DCMapToGPUOptions map;
  map.cudaToolkit = kCudaToolkit;
  map.approximateMath = !options.preciseMath;
  map.finishingPasses = options.finishingPasses;
  map.finishingBlocks = options.finishingBlocks;
  map.singleBarrierReductions = options.singleBarrierReductions;
  pm.addPass(createDCMapToGPU(map));
  // After the kernels are formed: the checked step runs the same kernels.
  if (options.checkFinite)
    pm.addPass(createDCCheckFinite());
  // Constants and index math into the kernels, not kernel parameters.
  pm.addPass(createGpuLaunchSinkIndexComputationsPass());
  pm.addPass(createGpuKernelOutliningPass());
  // A kernel whose blocks wait for each other: its launches say how many
  // must be resident at once, for the runtime to check.
  pm.addPass(createDCMarkCoresidentLaunches());
  // A kernel's blocks-per-SM request (dc-map-to-gpu's folded-blocks-per-sm,
  // an experiment) onto it.
  pm.addPass(createDCSetKernelOccupancy());
  // Outlining copies the device globals a kernel reads (a finishing pass's
  // ticket counter) into its module; the host's own copies go.
  pm.addPass(createSymbolDCEPass());
  // One fatbin, one ptxas run.
  pm.addPass(createDCMergeKernelModules());
  GpuNVVMAttachTargetOptions nvvm;
  nvvm.chip = "sm_90";
  nvvm.features = "+ptx80";
  nvvm.optLevel = 3;
  pm.addPass(createGpuNVVMAttachTarget(nvvm));
  OpPassManager &kernels = pm.nest<gpu::GPUModuleOp>();
  kernels.addPass(memref::createExpandStridedMetadataPass());
  kernels.addPass(createLowerAffinePass());
  kernels.addPass(createSCFToControlFlowPass());
  // No libdevice function takes bf16 or f16: math in f32.
  kernels.addPass(math::createMathExtendToSupportedTypes());
  // The rounding divisions only. arith-expand would also make each
  // maximumf/minimumf two compares and two selects, where the NVVM lowering
  // emits one max.NaN / min.NaN (a softmax row takes one per element); and
  // with include-bf16 it would convert bf16 by bit arithmetic, about 6
  // integer instructions per element where sm_90 converts two f32 to bf16
  // in one cvt.rn.bf16x2.f32 (the same bits: round to nearest even; a NaN
  // stays a NaN).
  kernels.addPass(createDCExpandRoundingDivisions());
  // The vectorized kernels' 16-byte loads and stores (convert-gpu-to-nvvm
  // leaves vector ops alone).
  kernels.addPass(createConvertVectorToLLVMPass());
  // A folded row group's copies ahead (cp.async).
  kernels.addPass(createConvertNVGPUToNVVMPass());
  kernels.addPass(createConvertGpuOpsToNVVMOps());
  // Workgroup buffers aligned for their 16-byte accesses.
  kernels.addPass(createDCAlignWorkgroupMemory());
  // What convert-gpu-to-nvvm leaves of math: integer ops (a ballot's
  // population count), as LLVM intrinsics.
  kernels.addPass(createConvertMathToLLVMPass());
  kernels.addPass(createCanonicalizerPass());
  kernels.addPass(createCSEPass());
  kernels.addPass(createReconcileUnrealizedCastsPass());
  GpuModuleToBinaryPassOptions binary;
  binary.toolkitPath = kCudaToolkit;
  binary.compilationTarget = "fatbin";
  pm.addPass(createGpuModuleToBinaryPass(binary));
  // Launches and matrix products (and the dc ops) as runtime calls.
  DCToDCRTOptions calls;
  calls.matmulCalls = true;
  pm.addPass(createDCToDCRT(calls));
}

/// The CPU target's compute: MLIR's own loops on the host.
void buildCPUCompute(OpPassManager &pm,
                     const dc::LowerToLLVMPipelineOptions &options) {
  if (options.checkFinite)
    pm.addPass(createDCCheckFinite());
  // Runtime calls while the step is still one block, in schedule order.
  pm.addPass(createDCToDCRT());
  pm.addPass(createDCExpandStridedCopies());
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
}

} // namespace

void dc::buildLowerToLLVMPipeline(OpPassManager &pm,
                                  const LowerToLLVMPipelineOptions &options,
                                  Lowering lowering) {
  bool cuda = lowering == Lowering::CudaSm90;
  // The manifest reads parameters, shards and gradients, which only the
  // tensor-level signature shows.
  DCArtifactManifestOptions manifest;
  manifest.worldSize = options.worldSize;
  manifest.checkFinite = options.checkFinite;
  pm.addPass(createDCArtifactManifest(manifest));
  if (options.profileOps)
    pm.addPass(createDCProfileOps());
  // The fused ops become linalg (after the profile keys, which name the ops
  // the cost model saw), except bf16 and f16 ones on the GPU target, which
  // bufferize to dc.attention_into / dc.attention_grad_into and call the
  // runtime's flash attention.
  DCExpandAttentionOptions expandAttention;
  expandAttention.keepFused = cuda;
  pm.addNestedPass<func::FuncOp>(createDCExpandAttention(expandAttention));
  // The mixture-of-experts ops bufferize to their buffer forms and call
  // libdcrt's routing kernels on both targets (the host's are loops too,
  // but linear in the assignments where the reference's grouping is
  // quadratic); those of element types the calls lack (f64) and, on
  // request, all of them run as their linalg reference.
  DCExpandExpertsOptions expandExperts;
  expandExperts.keepLibraryTypes = !options.referenceExperts;
  pm.addNestedPass<func::FuncOp>(createDCExpandExperts(expandExperts));
  // Powers by constants as multiplications: exact for negative bases on
  // every target, where the GPU's fast power is not.
  pm.addPass(createDCSimplifyMath());
  // Constant tensors made on the device: the kernels cannot read globals.
  if (cuda)
    pm.addPass(createDCComputeConstants());
  // The fused ones read the q/k/v projections and write the context in
  // place, strided, instead of through head transposes.
  if (cuda)
    pm.addNestedPass<func::FuncOp>(createDCFoldHeadTransposes());
  // Long reductions over rows in chunks that fill the GPU (still inside
  // the profile's hooks of the op they split).
  if (cuda)
    pm.addNestedPass<func::FuncOp>(createDCSplitColumnReductions());

  // Tensors to buffers. The runtime exchanges dense row-major buffers, so
  // every function boundary has the identity layout, and results become
  // caller-provided out-parameters (static allocations hoisted into them).
  pm.addPass(createConvertElementwiseToLinalgPass());
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  bufferize.unknownTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  bufferization::BufferResultsToOutParamsPassOptions outParams;
  outParams.hoistStaticAllocs = true;
  outParams.modifyPublicFunctions = true;
  // dc-assign-step-arena gives each result of a step its arena bytes.
  outParams.addResultAttribute = true;
  pm.addPass(bufferization::createBufferResultsToOutParamsPass(outParams));
  // Attention (and rotary) gradients straight into the fused projection's
  // gradient, before their buffers are planned.
  if (cuda)
    pm.addNestedPass<func::FuncOp>(createDCWriteOutputsInPlace());
  // Every temporary at a planned offset in the step arena.
  pm.addPass(createDCAssignStepArena());
  // What is left allocated: frees are placed at the end of the block, after
  // every wait, so no buffer an async transfer still reads is freed early.
  bufferization::buildBufferDeallocationPipeline(pm);

  switch (lowering) {
  case Lowering::CudaSm90:
    buildGPUCompute(pm, options);
    break;
  case Lowering::Host:
    buildCPUCompute(pm, options);
    break;
  }

  // Host code (all of it on the CPU target; views and index math around
  // the runtime calls on the GPU target).
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  // x86-64 has no bf16 or f16 arithmetic: compute in f32 and convert with
  // integer ops (LLVM would call __truncsfbf2, which libgcc 12 lacks).
  pm.addPass(math::createMathExtendToSupportedTypes());
  arith::ArithEmulateUnsupportedFloatsOptions emulate;
  emulate.sourceTypeStrs = {"bf16", "f16"};
  pm.addPass(arith::createArithEmulateUnsupportedFloats(emulate));
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expand));
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());

  // Everything to LLVM: one pointer per buffer at function boundaries, as
  // the entries pass them.
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  ConvertFuncToLLVMPassOptions funcToLLVM;
  funcToLLVM.useBarePtrCallConv = true;
  pm.addPass(createConvertFuncToLLVMPass(funcToLLVM));
  pm.addPass(createUBToLLVMConversionPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createDCArtifactEntries());
}

namespace {

/// dc-lower-to-llvm: the module's own lowering pipeline. Which passes run
/// depends on the #dc.target of the module the pass meets, so the pipeline
/// is built there and run as a dynamic pipeline.
class LowerToLLVMPass
    : public PassWrapper<LowerToLLVMPass, OperationPass<ModuleOp>> {
public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(LowerToLLVMPass)

  explicit LowerToLLVMPass(const LowerToLLVMPipelineOptions &options) {
    this->options.copyOptionValuesFrom(options);
  }
  LowerToLLVMPass(const LowerToLLVMPass &other) : PassWrapper(other) {
    options.copyOptionValuesFrom(other.options);
  }

  StringRef getArgument() const override { return "dc-lower-to-llvm"; }
  StringRef getDescription() const override {
    return "Lower a dc module to the LLVM dialect for its target";
  }

  /// Every dialect either lowering may create: the pipeline is built after
  /// the context has stopped loading dialects.
  void getDependentDialects(DialectRegistry &registry) const override {
    for (Lowering lowering : {Lowering::Host, Lowering::CudaSm90}) {
      OpPassManager pm(ModuleOp::getOperationName());
      buildLowerToLLVMPipeline(pm, options, lowering);
      pm.getDependentDialects(registry);
    }
  }

  void runOnOperation() override {
    OpPassManager pm(ModuleOp::getOperationName());
    buildLowerToLLVMPipeline(
        pm, options, getModuleTarget(getOperation()).description.lowering);
    if (failed(runPipeline(pm, getOperation())))
      return signalPassFailure();
    // The target is spent: what is left is the LLVM dialect alone.
    getOperation()->removeAttr(kTargetAttrName);
  }

private:
  LowerToLLVMPipelineOptions options;
};

} // namespace

void dc::buildLowerToLLVMPipeline(OpPassManager &pm,
                                  const LowerToLLVMPipelineOptions &options) {
  pm.addPass(std::make_unique<LowerToLLVMPass>(options));
}

void dc::registerLowerToLLVMPipeline() {
  PassPipelineRegistration<LowerToLLVMPipelineOptions>(
      "dc-lower-to-llvm",
      "Lower a dc module to the LLVM dialect for its #dc.target: manifest, "
      "bufferization, step arena, compute (host: loops; cuda_sm90: CUDA "
      "kernels, cuBLASLt and cuDNN), dcrt runtime calls and the artifact's "
      "entries",
      [](OpPassManager &pm, const LowerToLLVMPipelineOptions &options) {
        buildLowerToLLVMPipeline(pm, options);
      });
}
