//===- Artifact.h - LLVM dialect module to shared library -------*- C++ -*-===//
//
// The last steps of dc-compile, callable by any compiler that links dc: the
// lowered module becomes LLVM IR, then a native object file (in process,
// through llvm::TargetMachine), then the artifact, a shared library linked
// by the system compiler driver (`cc -shared`). Errors are emitted as
// diagnostics at the module's location.
//
//===----------------------------------------------------------------------===//
#ifndef DC_TARGET_ARTIFACT_H
#define DC_TARGET_ARTIFACT_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringRef.h"

#include <memory>

namespace llvm {
class LLVMContext;
class Module;
class TargetMachine;
class raw_pwrite_stream;
} // namespace llvm

namespace dc {

/// A TargetMachine for the host's triple with the generic CPU of its
/// architecture (artifacts are byte-identical on every host of one triple),
/// position-independent code, -O2 code generation.
mlir::FailureOr<std::unique_ptr<llvm::TargetMachine>>
createHostTargetMachine(mlir::ModuleOp module);

/// Translates an LLVM dialect module to LLVM IR for `machine` and optimizes
/// it at -O2.
mlir::FailureOr<std::unique_ptr<llvm::Module>>
translateToLLVMIR(mlir::ModuleOp module, llvm::LLVMContext &context,
                  llvm::TargetMachine &machine);

/// Compiles `llvmModule` to a native object file.
mlir::LogicalResult emitObjectFile(mlir::ModuleOp module,
                                   llvm::Module &llvmModule,
                                   llvm::TargetMachine &machine,
                                   llvm::raw_pwrite_stream &os);

/// Links `object` into the shared library `output` with `cc -shared`. The
/// dcrt_* symbols stay undefined: the process that loads the artifact
/// (dc-run, linked with libdcrt) provides them.
mlir::LogicalResult linkSharedLibrary(mlir::ModuleOp module,
                                      llvm::StringRef object,
                                      llvm::StringRef output);

} // namespace dc

#endif // DC_TARGET_ARTIFACT_H
