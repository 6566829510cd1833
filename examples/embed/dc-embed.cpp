//===- dc-embed.cpp - dc's pipelines in a compiler of its own -------------===//
//
// Usage: dc-embed INPUT.mlir [ZERO3-OPTIONS [LOWERING-OPTIONS]]
//
// Parses INPUT, schedules it with dc's ZeRO-3 pipeline and lowers it to the
// LLVM dialect (dc::buildZero3Pipeline, dc::buildLowerToLLVMPipeline) in
// this program's own pass manager, and prints the result: what
// `dc-opt --dc-zero3-pipeline="ZERO3-OPTIONS" --dc-lower-to-llvm="LOWERING-
// OPTIONS"` prints. Options are in the textual form dc-opt takes.
//
//===----------------------------------------------------------------------===//
#include "dc/Pipelines/Pipelines.h"
#include "dc/Registration/Registration.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  if (argc < 2 || argc > 4) {
    llvm::errs() << "usage: " << argv[0]
                 << " INPUT.mlir [ZERO3-OPTIONS [LOWERING-OPTIONS]]\n";
    return 2;
  }
  // The dc dialect and everything dc's pipelines read and produce.
  mlir::DialectRegistry registry;
  dc::registerDCDialects(registry);
  mlir::MLIRContext context(registry);

  llvm::SourceMgr sourceMgr;
  mlir::SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(argv[1], sourceMgr, &context);
  if (!module)
    return 1;

  dc::Zero3PipelineOptions zero3;
  dc::LowerToLLVMPipelineOptions lowering;
  if (argc > 2 && mlir::failed(zero3.parseFromString(argv[2])))
    return 1;
  if (argc > 3 && mlir::failed(lowering.parseFromString(argv[3])))
    return 1;

  mlir::PassManager pm(&context);
  dc::buildZero3Pipeline(pm, zero3);
  dc::buildLowerToLLVMPipeline(pm, lowering);
  if (mlir::failed(pm.run(*module)))
    return 1;
  module->print(llvm::outs());
  llvm::outs() << "\n";
  return 0;
}
