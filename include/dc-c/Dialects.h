/*===- dc-c/Dialects.h - C API of the dc dialect ------------------*- C -*-===*\
|*                                                                            *|
|* The dc dialect for compilers that embed dc through MLIR's C API (other    *|
|* languages, MLIR's Python bindings). Link the DCCAPI library (dc::DCCAPI). *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/
#ifndef DC_C_DIALECTS_H
#define DC_C_DIALECTS_H

#include "mlir-c/IR.h"

#ifdef __cplusplus
extern "C" {
#endif

/* mlirGetDialectHandle__dc__(): the dc dialect alone. */
MLIR_DECLARE_CAPI_DIALECT_REGISTRATION(DC, dc);

/* Inserts into `registry` what dc's pipelines read and produce: the dc
 * dialect, the upstream dialects (func, linalg, tensor, shard, memref, llvm,
 * gpu, ...) and their bufferization, deallocation and to-LLVM interface
 * models. A context for dc's pipelines needs all of them. */
MLIR_CAPI_EXPORTED void dcRegisterDialects(MlirDialectRegistry registry);

#ifdef __cplusplus
}
#endif

#endif /* DC_C_DIALECTS_H */
