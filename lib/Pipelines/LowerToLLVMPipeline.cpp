//===- LowerToLLVMPipeline.cpp - a dc module to the LLVM dialect ----------===//
#include "dc/Pipelines/Pipelines.h"

#include "dc/Conversion/Passes.h"
#include "dc/Transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void dc::buildLowerToLLVMPipeline(OpPassManager &pm,
                                  const LowerToLLVMPipelineOptions &options) {
  // The manifest reads parameters, shards and gradients, which only the
  // tensor-level signature shows.
  DCArtifactManifestOptions manifest;
  manifest.worldSize = options.worldSize;
  pm.addPass(createDCArtifactManifest(manifest));
  if (options.profileOps)
    pm.addPass(createDCProfileOps());
  // No attention kernel on the CPU: the fused ops become linalg (after the
  // profile keys, which name the ops the cost model saw).
  pm.addNestedPass<func::FuncOp>(createDCExpandAttention());

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
  pm.addPass(bufferization::createBufferResultsToOutParamsPass(outParams));
  // Frees are placed at the end of the block, after every wait, so no buffer
  // an async transfer still reads is freed early.
  bufferization::buildBufferDeallocationPipeline(pm);
  // Runtime calls while the step is still one block, in schedule order.
  pm.addPass(createDCToDCRT());

  // Host compute: MLIR's own CPU path.
  pm.addPass(createDCExpandStridedCopies());
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
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

void dc::registerLowerToLLVMPipeline() {
  PassPipelineRegistration<LowerToLLVMPipelineOptions>(
      "dc-lower-to-llvm",
      "Lower a dc module to the LLVM dialect: manifest, bufferization, host "
      "compute, dcrt runtime calls and the artifact's entries",
      buildLowerToLLVMPipeline);
}
