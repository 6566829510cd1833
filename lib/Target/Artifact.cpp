//===- Artifact.cpp - LLVM dialect module to shared library ---------------===//
#include "dc/Target/Artifact.h"

#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/Transforms/IPO/LoopExtractor.h"

using namespace mlir;

FailureOr<std::unique_ptr<llvm::TargetMachine>>
dc::createHostTargetMachine(ModuleOp module) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::Triple triple(llvm::sys::getProcessTriple());
  std::string error;
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return emitError(module.getLoc()) << "no LLVM target for the host triple "
                                      << triple.str() << ": " << error;
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, "generic", "", llvm::TargetOptions(), llvm::Reloc::PIC_,
      std::nullopt, llvm::CodeGenOptLevel::Default));
  if (!machine)
    return emitError(module.getLoc())
           << "cannot create a target machine for " << triple.str();
  return machine;
}

/// Moves every top-level loop of the module's functions into a function of
/// its own, kept out of line. LLVM's loop passes (IndVarSimplify above all)
/// take time that grows faster than the function they run on, and a step
/// lowered for the host is one function of hundreds of loop nests: a small
/// Gemma 2 step's (40,000 lines of IR, 618 loop nests) spent 33 of its 43 s
/// of -O2 in IndVarSimplify, and -O2 took 3.3 s with its loops extracted.
/// Each extracted loop is optimized alone, and a call per loop nest costs
/// nothing beside the nest.
static void extractLoops(llvm::Module &module, llvm::TargetMachine &machine) {
  llvm::SmallPtrSet<llvm::Function *, 16> before;
  for (llvm::Function &function : module)
    before.insert(&function);
  llvm::LoopAnalysisManager loops;
  llvm::FunctionAnalysisManager functions;
  llvm::CGSCCAnalysisManager sccs;
  llvm::ModuleAnalysisManager modules;
  llvm::PassBuilder builder(&machine);
  builder.registerModuleAnalyses(modules);
  builder.registerCGSCCAnalyses(sccs);
  builder.registerFunctionAnalyses(functions);
  builder.registerLoopAnalyses(loops);
  builder.crossRegisterProxies(loops, functions, sccs, modules);
  llvm::ModulePassManager passes;
  passes.addPass(llvm::LoopExtractorPass());
  passes.run(module, modules);
  // The inliner would put each one back (one call site, internal).
  for (llvm::Function &function : module)
    if (!before.contains(&function))
      function.addFnAttr(llvm::Attribute::NoInline);
}

FailureOr<std::unique_ptr<llvm::Module>>
dc::translateToLLVMIR(ModuleOp module, llvm::LLVMContext &context,
                      llvm::TargetMachine &machine) {
  registerBuiltinDialectTranslation(*module.getContext());
  registerLLVMDialectTranslation(*module.getContext());
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, context);
  if (!llvmModule)
    return emitError(module.getLoc())
           << "cannot translate the lowered module to LLVM IR";
  llvmModule->setTargetTriple(machine.getTargetTriple());
  llvmModule->setDataLayout(machine.createDataLayout());
  extractLoops(*llvmModule, machine);
  if (llvm::Error error = makeOptimizingTransformer(
          /*optLevel=*/2, /*sizeLevel=*/0, &machine)(llvmModule.get()))
    return emitError(module.getLoc())
           << "LLVM optimization failed: " << llvm::toString(std::move(error));
  return llvmModule;
}

LogicalResult dc::emitObjectFile(ModuleOp module, llvm::Module &llvmModule,
                                 llvm::TargetMachine &machine,
                                 llvm::raw_pwrite_stream &os) {
  llvm::legacy::PassManager codegen;
  if (machine.addPassesToEmitFile(codegen, os, nullptr,
                                  llvm::CodeGenFileType::ObjectFile))
    return emitError(module.getLoc()) << "the target cannot emit object files";
  codegen.run(llvmModule);
  return success();
}

LogicalResult dc::linkSharedLibrary(ModuleOp module, llvm::StringRef object,
                                    llvm::StringRef output) {
  llvm::ErrorOr<std::string> cc = llvm::sys::findProgramByName("cc");
  if (!cc)
    return emitError(module.getLoc())
           << "no C compiler driver `cc` on PATH to link the shared library";
  // libm: the math the compute lowers to (expf, logf, ...).
  llvm::StringRef args[] = {*cc, "-shared", "-o", output, object, "-lm"};
  std::string message;
  int status =
      llvm::sys::ExecuteAndWait(*cc, args, std::nullopt, {}, 0, 0, &message);
  if (status != 0)
    return emitError(module.getLoc())
           << "`cc -shared -o " << output << "` failed (status " << status
           << (message.empty() ? "" : ": ") << message << ")";
  return success();
}
