//===- RuntimeFunctions.h - the dcrt functions the lowering calls -*- C++
//-*-===//
//
// Every dcrt_* function an artifact calls, with its C signature from
// runtime/include/dcrt/dcrt.h, lives in one table (RuntimeFunctions.cpp):
// adding a runtime call is one line there.
//
//===----------------------------------------------------------------------===//
#ifndef DC_LIB_LOWERING_RUNTIMEFUNCTIONS_H
#define DC_LIB_LOWERING_RUNTIMEFUNCTIONS_H

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

namespace dc {

/// The declaration of dcrt function `name` in `module`, added on first use.
/// Fails (with an error) if the module declares it with another type.
/// `name` must be in the table.
mlir::FailureOr<mlir::LLVM::LLVMFuncOp>
lookupOrCreateRuntimeFunction(mlir::OpBuilder &builder, mlir::Operation *module,
                              llvm::StringRef name);

} // namespace dc

#endif // DC_LIB_LOWERING_RUNTIMEFUNCTIONS_H
