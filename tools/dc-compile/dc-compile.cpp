//===- dc-compile.cpp - a training step to a dcrt artifact ----------------===//
//
//   dc-compile step.mlir -o step.so [--world-size=N] [--target=h200|cpu|...]
//              [--lowering=host|cuda_sm90] [other options of
//              dc-zero3-pipeline] [--no-schedule] [--emit=mlir|llvm|obj|so]
//              [--compare-layouts] [--choose-row-chunks]
//
// The target (default h200) is what the step is planned for and what its
// compute becomes: the GPU presets, and JSON targets based on them, compile
// it for sm_90 (CUDA kernels, cuBLASLt and cuDNN, run by libdcrt's cuda
// backend), cpu for the host. --lowering=host keeps a GPU target's schedule
// and compiles its compute for the host (to run a GPU plan on the host
// backend). dc-compile attaches the target to the module (dc-attach-target)
// and everything after it reads it there; with --no-schedule, a module that
// has one keeps it unless --target or --memory-budget is given.
//
// --compare-layouts (a target of several nodes): schedules the step both
// sharded over every rank and sharded inside each node (hierarchical=GPUs
// per node), prints the predicted step of each and compiles the faster.
// With --sequence-parallel and data parallelism it compares sharding over
// the data axis with sharding over both axes (--shard-over-sequence).
//
// --choose-row-chunks: schedules the step with its wide products (the
// logits) whole and in 4 and 8 chunks of rows (dc-chunk-rows), prints the
// predicted step of each and compiles the fastest.
//
// Schedules the step (dc::buildZero3Pipeline, unless --no-schedule), lowers
// it (dc::buildLowerToLLVMPipeline) and emits, all in process; only linking
// the shared library runs the system's `cc`.
//
//===----------------------------------------------------------------------===//
#include "dc/Analysis/MemoryTimeline.h"
#include "dc/Analysis/StreamSimulator.h"
#include "dc/Dialect/DC/IR/DCDialect.h"
#include "dc/Pipelines/Pipelines.h"
#include "dc/Registration/Registration.h"
#include "dc/Schedule/Passes.h"
#include "dc/Schedule/Planning.h"
#include "dc/Target/Artifact.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
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
cl::opt<bool> profileOps(
    "profile-ops",
    cl::desc("Time each compute op for dc-run --profile-out (a profiling "
             "run; the profile feeds --profile=)"),
    cl::cat(category));
cl::opt<bool> checkFinite(
    "check-finite",
    cl::desc("After each compute op, check its outputs for NaN and infinity; "
             "dc-run --check-finite then stops at the first op of a step "
             "that made one and names it (its model source line, for steps "
             "dc_torch exported)"),
    cl::cat(category));
cl::opt<bool> preciseMath(
    "precise-math",
    cl::desc("cuda_sm90: accurate exp, log and f32 division in the "
             "kernels (libdevice) instead of the hardware's approximate ones"),
    cl::cat(category));
cl::opt<bool> finishingPasses(
    "finishing-passes",
    cl::desc("cuda_sm90: a split weight gradient's second pass runs at "
             "the end of its row group's kernel, not as a launch of its own "
             "(one launch fewer per norm backward; needs "
             "--finishing-blocks blocks resident at once, which the runtime "
             "checks)"),
    cl::cat(category));
cl::opt<int64_t> finishingBlocks(
    "finishing-blocks",
    cl::desc("--finishing-passes: the most blocks of a kernel that wait for "
             "the rest, all resident at once (default 64; lower it for a "
             "GPU that holds fewer, such as a small MIG slice)"),
    cl::init(64), cl::cat(category));
cl::opt<int64_t> foldedChunkRows(
    "folded-chunk-rows",
    cl::desc("cuda_sm90: rows of a norm weight gradient's chunk folded "
             "into its backward's kernel, one block a chunk (default 32, "
             "at most 64)"),
    cl::init(32), cl::cat(category));
cl::opt<int64_t> foldedBlocksPerSM(
    "folded-blocks-per-sm",
    cl::desc("cuda_sm90: blocks of a folded norm backward's kernel that "
             "should fit on an SM, capping its registers (default 0: as "
             "ptxas allocates)"),
    cl::init(0), cl::cat(category));
cl::opt<bool> singleBarrierReductions(
    "single-barrier-reductions",
    cl::desc("cuda_sm90: a block-per-row kernel's reductions (norms, "
             "softmax, cross-entropy) take one barrier each instead of two"),
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

/// dc-zero3-pipeline's own option table, asked which options take a value.
class PipelineOptionTable : public dc::Zero3PipelineOptions {
public:
  /// True for `--name value` options; flags (bool options) take none.
  bool takesValue(StringRef name) const {
    auto found = OptionsMap.find(name);
    return found != OptionsMap.end() &&
           found->second->getValueExpectedFlag() == cl::ValueRequired;
  }
};

/// Whether --target or --memory-budget was given: a scheduled module
/// (--no-schedule) keeps its own #dc.target otherwise.
bool targetGiven = false;
/// Whether --optimizer-state-bytes was given; else dc-run's AdamW's.
bool optimizerStateGiven = false;
constexpr int64_t kDcRunOptimizerStateBytes = 12;

/// Splits the command line: the options dc-compile does not know (as
/// `--name=value` or `--name value`) are options of dc-zero3-pipeline
/// (world-size, memory-budget, target, ...), parsed by the pipeline's own
/// options so the two tools never drift apart; the rest stay for llvm::cl.
std::unique_ptr<dc::Zero3PipelineOptions>
splitScheduleOptions(int argc, char **argv,
                     SmallVectorImpl<const char *> &rest) {
  const auto &known = cl::getRegisteredOptions();
  PipelineOptionTable pipelineOptions;
  std::string schedule;
  rest.push_back(argv[0]);
  for (int i = 1; i < argc; ++i) {
    StringRef arg(argv[i]);
    StringRef name = arg.ltrim('-').split('=').first;
    if (!arg.starts_with("-") || name.empty() || known.count(name)) {
      rest.push_back(argv[i]);
      continue;
    }
    targetGiven |= name == "target" || name == "memory-budget";
    optimizerStateGiven |= name == "optimizer-state-bytes";
    schedule += arg.ltrim('-').str();
    if (!arg.contains('=') && pipelineOptions.takesValue(name) && i + 1 < argc)
      schedule += "=" + std::string(argv[++i]);
    schedule += " ";
  }
  std::unique_ptr<dc::Zero3PipelineOptions> options =
      dc::Zero3PipelineOptions::createFromString(schedule);
  // The artifact is for dc-run, whose AdamW keeps an fp32 master and two
  // fp32 moments per parameter element on the device: the budget holds
  // them too unless the command line says otherwise.
  if (options && !optimizerStateGiven)
    options->optimizerStateBytes = kDcRunOptimizerStateBytes;
  return options;
}

/// Attaches the target the step is planned and lowered for (before anything
/// reads it: the layout choices, the pipelines). A module that is only
/// lowered keeps the #dc.target it has unless --target or --memory-budget
/// says otherwise; --lowering applies either way.
LogicalResult attachTarget(ModuleOp module,
                           const dc::Zero3PipelineOptions &options,
                           bool schedule) {
  dc::TargetAttr existing = dc::findTargetAttr(module);
  if (schedule || targetGiven || !existing) {
    PassManager pm(module.getContext());
    dc::DCAttachTargetOptions attach;
    attach.target = options.target;
    attach.memoryBudget = options.memoryBudget;
    attach.lowering = options.lowering;
    pm.addPass(dc::createDCAttachTarget(attach));
    return pm.run(module);
  }
  if (options.lowering.empty())
    return success();
  std::optional<dc::Lowering> lowering =
      dc::symbolizeLowering(options.lowering);
  if (!lowering)
    return emitError(module.getLoc())
           << "unknown lowering '" << options.lowering << "' (host, cuda_sm90)";
  module->setAttr(dc::kTargetAttrName,
                  dc::TargetAttr::get(module.getContext(), existing.getName(),
                                      *lowering, existing.getMemoryBudget(),
                                      existing.getNumbers()));
  return success();
}

LogicalResult compile(ModuleOp module, const dc::Zero3PipelineOptions &options,
                      bool schedule) {
  PassManager pm(module.getContext());
  if (failed(applyPassManagerCLOptions(pm)))
    return failure();
  if (schedule)
    dc::buildZero3Pipeline(pm, options);
  dc::LowerToLLVMPipelineOptions lowering;
  lowering.worldSize = options.worldSize;
  lowering.profileOps = profileOps;
  lowering.preciseMath = preciseMath;
  lowering.checkFinite = checkFinite;
  lowering.finishingPasses = finishingPasses;
  lowering.finishingBlocks = finishingBlocks;
  lowering.foldedChunkRows = foldedChunkRows;
  lowering.foldedBlocksPerSM = foldedBlocksPerSM;
  lowering.singleBarrierReductions = singleBarrierReductions;
  // The compute as the module's #dc.target says.
  dc::buildLowerToLLVMPipeline(pm, lowering);
  return pm.run(module);
}

/// One layout's schedule and what the simulator predicts for it.
struct Layout {
  std::string name;
  OwningOpRef<ModuleOp> module;
  std::string error; // the first diagnostic when it does not schedule
  double stepSeconds = 0, exposedSeconds = 0;
  int64_t peakBytes = 0;
};

/// Schedules a copy of `module` with `options`; predicts its step (the sum
/// over its step functions). Diagnostics are kept, not printed: a layout
/// that does not fit is a result here.
Layout scheduleLayout(ModuleOp module, const dc::Zero3PipelineOptions &options,
                      const dc::TargetDescription &target, std::string name) {
  Layout layout;
  layout.name = std::move(name);
  layout.module = module.clone();
  MLIRContext *context = module.getContext();
  ScopedDiagnosticHandler capture(context, [&](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error && layout.error.empty())
      layout.error = diag.str();
    return success();
  });
  PassManager pm(context);
  dc::buildZero3Pipeline(pm, options);
  if (failed(pm.run(*layout.module))) {
    if (layout.error.empty())
      layout.error = "the pipeline failed";
    return layout;
  }
  dc::CostModel model(target);
  for (auto fn : layout.module->getOps<func::FuncOp>()) {
    if (fn.isExternal())
      continue;
    FailureOr<dc::MemoryTimeline> timeline = dc::MemoryTimeline::compute(fn);
    if (failed(timeline))
      continue;
    dc::SimulationResult sim = dc::StreamSimulator(model).run(fn, *timeline);
    layout.stepSeconds += sim.stepSeconds;
    layout.exposedSeconds += sim.exposedCollectiveSeconds;
    layout.peakBytes =
        std::max(layout.peakBytes, timeline->getPeakDeviceBytes());
  }
  return layout;
}

/// Prints the layouts' predictions, picks the fastest that schedules (the
/// first of equals) and leaves its scheduled module in `module`; returns
/// its index.
FailureOr<size_t> pickFastest(OwningOpRef<ModuleOp> &module,
                              MutableArrayRef<Layout> layouts,
                              const Twine &heading) {
  llvm::errs() << "dc-compile: layouts on " << heading << "\n";
  std::optional<size_t> fastest;
  for (auto [index, layout] : llvm::enumerate(layouts)) {
    llvm::errs() << llvm::format("  %-40s ", layout.name.c_str());
    if (!layout.error.empty()) {
      llvm::errs() << "does not schedule: " << layout.error << "\n";
      continue;
    }
    llvm::errs() << llvm::format(
        "step %9.3f ms, exposed collectives %9.3f ms, peak %.2f GiB\n",
        layout.stepSeconds * 1e3, layout.exposedSeconds * 1e3,
        static_cast<double>(layout.peakBytes) / (1 << 30));
    if (!fastest || layout.stepSeconds < layouts[*fastest].stepSeconds)
      fastest = index;
  }
  if (!fastest)
    return emitError(module->getLoc())
           << (layouts.size() == 2 ? "neither layout schedules: "
                                   : "no layout schedules: ")
           << layouts.front().error;
  llvm::errs() << "  predicted faster: " << layouts[*fastest].name << "\n";
  module = std::move(layouts[*fastest].module);
  return *fastest;
}

/// Prints both layouts' predictions, picks the faster that schedules and
/// leaves its scheduled module in `module`; true if `second` was chosen.
FailureOr<bool> pickFaster(OwningOpRef<ModuleOp> &module, Layout &first,
                           Layout &second, const Twine &heading) {
  SmallVector<Layout, 2> layouts;
  layouts.push_back(std::move(first));
  layouts.push_back(std::move(second));
  FailureOr<size_t> chosen = pickFastest(module, layouts, heading);
  if (failed(chosen))
    return failure();
  return *chosen == 1;
}

/// --choose-row-chunks: schedules the step with its wide products whole and
/// in 4 and 8 chunks of rows (dc-chunk-rows), prints each prediction and
/// leaves the fastest one's scheduled module in `module`.
LogicalResult chooseRowChunks(OwningOpRef<ModuleOp> &module,
                              dc::Zero3PipelineOptions &options) {
  FailureOr<dc::PlanningSetup> setup =
      dc::loadPlanningSetup(*module, options.profile);
  if (failed(setup))
    return failure();
  const int64_t candidates[] = {0, 4, 8};
  SmallVector<Layout, 3> layouts;
  for (int64_t chunks : candidates) {
    options.rowChunks = chunks;
    layouts.push_back(scheduleLayout(
        *module, options, setup->target,
        chunks
            ? "wide products in " + std::to_string(chunks) + " chunks of rows"
            : std::string("wide products whole")));
  }
  FailureOr<size_t> chosen =
      pickFastest(module, layouts, setup->target.name + " (row chunks)");
  if (failed(chosen))
    return failure();
  options.rowChunks = candidates[*chosen];
  return success();
}

/// --compare-layouts with sequence parallelism and data parallelism:
/// parameters sharded over the data axis (gradients all-reduced over the
/// sequence axis first) or over both axes (shard-over-sequence).
LogicalResult chooseSequenceLayout(OwningOpRef<ModuleOp> &module,
                                   dc::Zero3PipelineOptions &options,
                                   const dc::TargetDescription &target) {
  int64_t world = options.worldSize, sp = options.sequenceParallel;
  if (world <= sp)
    return emitError(module->getLoc())
           << "--compare-layouts with sequence-parallel=" << sp
           << " needs data-parallel ranks as well (world-size=" << world << ")";
  std::string grid = std::to_string(world / sp) + " data x " +
                     std::to_string(sp) + " sequence";
  options.shardOverSequence = false;
  Layout data = scheduleLayout(*module, options, target,
                               "ZeRO-3 over the " + std::to_string(world / sp) +
                                   " data ranks");
  options.shardOverSequence = true;
  Layout both = scheduleLayout(*module, options, target,
                               "ZeRO-3 over all " + std::to_string(world) +
                                   " ranks (data x sequence)");
  FailureOr<bool> pickBoth =
      pickFaster(module, data, both, target.name + " (" + grid + ")");
  if (failed(pickBoth))
    return failure();
  options.shardOverSequence = *pickBoth;
  return success();
}

/// --compare-layouts: schedules both layouts, prints them, and leaves the
/// faster one's scheduled module in `module` (its options in `options`).
LogicalResult chooseLayout(OwningOpRef<ModuleOp> &module,
                           dc::Zero3PipelineOptions &options) {
  FailureOr<dc::PlanningSetup> setup =
      dc::loadPlanningSetup(*module, options.profile);
  if (failed(setup))
    return failure();
  if (options.sequenceParallel > 1)
    return chooseSequenceLayout(module, options, setup->target);
  int64_t perNode = setup->target.gpusPerNode;
  int64_t world = options.worldSize;
  if (perNode <= 0 || setup->target.networkBandwidth <= 0 || world <= perNode ||
      world % perNode != 0)
    return emitError(module->getLoc())
           << "--compare-layouts needs a target with a network between "
              "nodes and a world of several whole nodes: target '"
           << setup->target.name << "' has "
           << (perNode > 0 ? std::to_string(perNode) : std::string("all"))
           << " GPUs per node"
           << (setup->target.networkBandwidth > 0 ? "" : " and no network")
           << ", world-size=" << world;
  options.hierarchical = 0;
  Layout flat =
      scheduleLayout(*module, options, setup->target,
                     "ZeRO-3 over all " + std::to_string(world) + " ranks");
  options.hierarchical = perNode;
  Layout nodes = scheduleLayout(*module, options, setup->target,
                                "hierarchical: " + std::to_string(perNode) +
                                    " per node x " +
                                    std::to_string(world / perNode) + " nodes");
  FailureOr<bool> hierarchical =
      pickFaster(module, flat, nodes,
                 setup->target.name + " (" + std::to_string(world / perNode) +
                     " nodes x " + std::to_string(perNode) + " GPUs)");
  if (failed(hierarchical))
    return failure();
  options.hierarchical = *hierarchical ? perNode : 0;
  return success();
}

LogicalResult emitArtifact(ModuleOp module) {
  std::string error;
  if (emit == Emit::MLIR) {
    auto output = openOutputFile(outputFile, &error);
    if (!output)
      return emitError(module.getLoc()) << error;
    module.print(output->os());
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
  std::unique_ptr<dc::Zero3PipelineOptions> options =
      splitScheduleOptions(argc, argv, args);
  if (!options)
    return 1;
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      args.size(), args.data(),
      "dc-compile: a training step to an artifact for the dcrt runtime\n\n"
      "Options of dc-zero3-pipeline (see `dc-opt --help`) are given as\n"
      "--name=value or --name value, e.g. --world-size=2 --memory-budget "
      "16GiB.\n");

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
  bool schedule = !noSchedule;
  if (compareLayouts && chooseRowChunksFlag) {
    emitError(module->getLoc())
        << "--compare-layouts and --choose-row-chunks: choose one";
    return 1;
  }
  if (failed(attachTarget(*module, *options, schedule)))
    return 1;
  if (compareLayouts && !noSchedule) {
    if (failed(chooseLayout(module, *options)))
      return 1;
    schedule = false; // the chosen module is scheduled already
  }
  if (chooseRowChunksFlag && !noSchedule) {
    if (failed(chooseRowChunks(module, *options)))
      return 1;
    schedule = false;
  }
  if (failed(compile(*module, *options, schedule)) ||
      failed(emitArtifact(*module)))
    return 1;
  return 0;
}
