//===- dc-compile.cpp - a training step to a dcrt artifact ----------------===//
//
//   dc-compile step.mlir -o step.so [--world-size=N] [--target=h200|cpu|...]
//              [--lowering=host|cuda_sm90] [other options of
//              dc-zero3-pipeline and dc-lower-to-llvm] [--no-schedule]
//              [--emit=mlir|llvm|obj|so] [--compare-layouts]
//              [--choose-row-chunks] [--verify-each]
//
// A thin tool over the library: the options it does not know are a
// compile's (dc::CompileOptions, parsed by the pipelines' own option
// tables), dc::buildCompilePipeline schedules and lowers, and the artifact
// is emitted in process; only linking the shared library runs the system's
// `cc`. The target (default h200) is what the step is planned for and what
// its compute becomes (docs/lowering.md). --compare-layouts and
// --choose-row-chunks are dc-zero3-pipeline's choose=layouts and
// choose=row-chunks.
//
//===----------------------------------------------------------------------===//
#include "dc/Pipelines/Pipelines.h"
#include "dc/Registration/Registration.h"
#include "dc/Target/Artifact.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Target/TargetMachine.h"

using namespace mlir;
namespace cl = llvm::cl;

namespace {

enum class Emit { MLIR, LLVM, Obj, SO };

cl::OptionCategory category("dc-compile options");
cl::opt<std::string> inputFile(cl::Positional, cl::desc("<input.mlir>"),
                               cl::init("-"), cl::cat(category));
cl::opt<std::string> outputFile("o", cl::desc("Output file"),
                                cl::value_desc("path"), cl::init("-"),
                                cl::cat(category));
cl::opt<Emit> emit(
    "emit", cl::desc("What to write"), cl::init(Emit::SO),
    cl::values(clEnumValN(Emit::MLIR, "mlir",
                          "the lowered LLVM dialect module"),
               clEnumValN(Emit::LLVM, "llvm", "LLVM IR (optimized, -O2)"),
               clEnumValN(Emit::Obj, "obj", "a native object file"),
               clEnumValN(Emit::SO, "so", "the artifact (shared library)")),
    cl::cat(category));
cl::opt<bool> noSchedule("no-schedule",
                         cl::desc("The input is scheduled already (or is run "
                                  "unsharded): only lower it"),
                         cl::cat(category));

cl::opt<bool> compareLayouts(
    "compare-layouts",
    cl::desc("Schedule the step sharded over all ranks and sharded inside "
             "each node (hierarchical), print both predictions and compile "
             "the faster (a target with several nodes); with "
             "--sequence-parallel and data parallelism: sharded over the "
             "data axis or over both axes (shard-over-sequence)"),
    cl::cat(category));

cl::opt<bool> chooseRowChunksFlag(
    "choose-row-chunks",
    cl::desc("Schedule the step with its wide matrix products (the logits) "
             "whole and in 4 and 8 chunks of rows (row-chunks), print each "
             "prediction and compile the fastest"),
    cl::cat(category));

cl::opt<bool> verifyEach(
    "verify-each",
    cl::desc("Verify the IR after every pass (as dc-opt does; slower), not "
             "only when parsed and at the end"),
    cl::cat(category));

/// Splits the command line: the options dc-compile does not know (as
/// `--name=value`, `--name value` or `--flag`) are a compile's
/// (dc::CompileOptions: dc-zero3-pipeline's, dc-lower-to-llvm's,
/// no-schedule), parsed by the library's own option tables, so that
/// dc-compile, dc-opt's dc-compile-pipeline and the C API never drift
/// apart; the rest stay for llvm::cl.
std::unique_ptr<dc::CompileOptions>
splitCompileOptions(int argc, char **argv,
                    SmallVectorImpl<const char *> &rest) {
  const auto &known = cl::getRegisteredOptions();
  auto options = std::make_unique<dc::CompileOptions>();
  std::string text;
  rest.push_back(argv[0]);
  for (int i = 1; i < argc; ++i) {
    StringRef arg(argv[i]);
    StringRef name = arg.ltrim('-').split('=').first;
    if (!arg.starts_with("-") || name.empty() || known.count(name)) {
      rest.push_back(argv[i]);
      continue;
    }
    text += arg.ltrim('-').str();
    if (!arg.contains('=') && options->takesValue(name) && i + 1 < argc)
      text += "=" + std::string(argv[++i]);
    text += " ";
  }
  std::string error;
  llvm::raw_string_ostream errors(error);
  if (failed(options->parseFromString(text, errors))) {
    // A bad value LLVM's option parser has reported itself.
    if (!error.empty())
      llvm::errs() << "dc-compile: " << error;
    return nullptr;
  }
  return options;
}

/// Schedules (unless the options say it is scheduled) and lowers `module`.
/// The pass manager verifies nothing unless --verify-each: the IR is
/// verified when parsed and, by main, at the end.
LogicalResult compile(ModuleOp module, const dc::CompileOptions &options) {
  PassManager pm(module.getContext());
  if (failed(applyPassManagerCLOptions(pm)))
    return failure();
  pm.enableVerifier(verifyEach);
  dc::buildCompilePipeline(pm, options);
  return pm.run(module);
}

LogicalResult emitArtifact(ModuleOp module) {
  std::string error;
  if (emit == Emit::MLIR) {
    auto output = openOutputFile(outputFile, &error);
    if (!output)
      return emitError(module.getLoc()) << error;
    // As dc-opt prints it (a line end after the module).
    module.print(output->os());
    output->os() << "\n";
    output->keep();
    return success();
  }
  FailureOr<std::unique_ptr<llvm::TargetMachine>> machine =
      dc::createHostTargetMachine(module);
  if (failed(machine))
    return failure();
  llvm::LLVMContext llvmContext;
  FailureOr<std::unique_ptr<llvm::Module>> llvmModule =
      dc::translateToLLVMIR(module, llvmContext, **machine);
  if (failed(llvmModule))
    return failure();
  if (emit == Emit::LLVM || emit == Emit::Obj) {
    auto output = openOutputFile(outputFile, &error);
    if (!output)
      return emitError(module.getLoc()) << error;
    if (emit == Emit::LLVM)
      (*llvmModule)->print(output->os(), nullptr);
    else if (failed(dc::emitObjectFile(module, **llvmModule, **machine,
                                       output->os())))
      return failure();
    output->keep();
    return success();
  }
  if (outputFile == "-")
    return emitError(module.getLoc())
           << "a shared library needs an output file: pass -o <path>.so";
  llvm::SmallString<128> object;
  int fd;
  if (std::error_code ec =
          llvm::sys::fs::createTemporaryFile("dc-artifact", "o", fd, object))
    return emitError(module.getLoc())
           << "cannot create a temporary object file: " << ec.message();
  llvm::FileRemover removeObject(object);
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    if (failed(dc::emitObjectFile(module, **llvmModule, **machine, os)))
      return failure();
  }
  return dc::linkSharedLibrary(module, object, outputFile);
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  // Passes first: --mlir-print-ir-before/after list the passes registered
  // when the pass manager's options are.
  dc::registerDCPassesAndPipelines();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  registerAsmPrinterCLOptions();
  SmallVector<const char *> args;
  std::unique_ptr<dc::CompileOptions> options =
      splitCompileOptions(argc, argv, args);
  if (!options)
    return 1;
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      args.size(), args.data(),
      "dc-compile: a training step to an artifact for the dcrt runtime\n\n"
      "The options of dc-compile-pipeline (dc-zero3-pipeline's and "
      "dc-lower-to-llvm's; see `dc-opt --help`) are given as --name=value, "
      "--name value or --flag, e.g. --world-size=2 --memory-budget 16GiB "
      "--finishing-passes.\n");
  if (compareLayouts && chooseRowChunksFlag) {
    llvm::errs() << "dc-compile: error: --compare-layouts and "
                    "--choose-row-chunks: choose one\n";
    return 1;
  }
  options->noSchedule |= noSchedule;
  if (compareLayouts)
    options->schedule.choose = dc::ScheduleChoice::Layouts;
  if (chooseRowChunksFlag)
    options->schedule.choose = dc::ScheduleChoice::RowChunks;

  DialectRegistry registry;
  dc::registerDCDialects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  // Diagnostics name the source location; a dump of the op is noise here.
  context.printOpOnDiagnostic(false);

  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input = openInputFile(inputFile, &error);
  if (!input) {
    llvm::errs() << "dc-compile: " << error << "\n";
    return 1;
  }
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);

  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;
  if (failed(compile(*module, *options)) || failed(verify(*module)) ||
      failed(emitArtifact(*module)))
    return 1;
  return 0;
}
