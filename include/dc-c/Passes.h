/*===- dc-c/Passes.h - C API of dc's passes and pipelines ---------*- C -*-===*\
|*                                                                            *|
|* dc's pipelines added to an MLIR pass manager, with their options in the   *|
|* textual form `dc-opt` takes ("world-size=2 memory-budget=64KiB").          *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/
#ifndef DC_C_PASSES_H
#define DC_C_PASSES_H

#include "mlir-c/Pass.h"
#include "mlir-c/Support.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Registers dc's passes and pipelines (dc-zero3-pipeline, dc-lower-to-llvm,
 * every dc-* pass) and the upstream passes they are built from, so that
 * mlirParsePassPipeline and mlirOpPassManagerAddPipeline accept them by name.
 * Not needed for the dcAdd*Pipeline functions below. */
MLIR_CAPI_EXPORTED void dcRegisterPasses(void);

/* Adds dc-zero3-pipeline (dc::buildZero3Pipeline) to `passManager`, the
 * pass manager of the module (mlirPassManagerGetAsOpPassManager). `options` are
 * the pipeline's options as
 * `--dc-zero3-pipeline="..."` takes them (empty: the defaults). On bad
 * options, nothing is added, the error is passed to `errorCallback` (NULL:
 * printed to stderr) and a failure is returned. */
MLIR_CAPI_EXPORTED MlirLogicalResult
dcAddZero3Pipeline(MlirOpPassManager passManager, MlirStringRef options,
                   MlirStringCallback errorCallback, void *userData);

/* Adds dc-lower-to-llvm (dc::buildLowerToLLVMPipeline) to `passManager`,
 * with options as `--dc-lower-to-llvm="..."` takes them ("world-size=2");
 * the compute is lowered for the module's #dc.target (dc-zero3-pipeline
 * attaches it). Errors as for dcAddZero3Pipeline. */
MLIR_CAPI_EXPORTED MlirLogicalResult
dcAddLowerToLLVMPipeline(MlirOpPassManager passManager, MlirStringRef options,
                         MlirStringCallback errorCallback, void *userData);

/* Adds dc-compile-pipeline (dc::buildCompilePipeline: dc-zero3-pipeline,
 * then dc-lower-to-llvm) to `passManager`, with the options of both in one
 * string as dc-compile takes them ("world-size=2 target=h100
 * finishing-passes"; "no-schedule" to only lower a scheduled step). Errors
 * as for dcAddZero3Pipeline. */
MLIR_CAPI_EXPORTED MlirLogicalResult
dcAddCompilePipeline(MlirOpPassManager passManager, MlirStringRef options,
                     MlirStringCallback errorCallback, void *userData);

#ifdef __cplusplus
}
#endif

#endif /* DC_C_PASSES_H */
