//===- ChooseSchedule.cpp - dc-zero3-pipeline's `choose` ------------------===//
//
// A schedule choice is a comparison of whole schedules: each candidate is
// dc-zero3-pipeline run on its own copy of the module, predicted by the
// stream simulator, and the module becomes the fastest copy. It is a pass
// (of dc-zero3-pipeline when `choose` is set) so that dc-opt, dc-compile and
// the C API reach it the same way.
//
//===----------------------------------------------------------------------===//
#include "ChooseSchedule.h"

#include "dc/Analysis/MemoryTimeline.h"
#include "dc/Analysis/StreamSimulator.h"
#include "dc/Dialect/DC/IR/DCDialect.h"
#include "dc/Schedule/Planning.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/Format.h"

using namespace mlir;
using namespace dc;

namespace {

/// One candidate's schedule and what the simulator predicts for it.
struct Candidate {
  std::string name;
  OwningOpRef<ModuleOp> module;
  std::string error; // the first diagnostic when it does not schedule
  double stepSeconds = 0, exposedSeconds = 0;
  int64_t peakBytes = 0;
};

class ChooseSchedulePass
    : public PassWrapper<ChooseSchedulePass, OperationPass<ModuleOp>> {
public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(ChooseSchedulePass)

  explicit ChooseSchedulePass(const Zero3PipelineOptions &options) {
    this->options.copyOptionValuesFrom(options);
  }
  ChooseSchedulePass(const ChooseSchedulePass &other) : PassWrapper(other) {
    options.copyOptionValuesFrom(other.options);
  }

  StringRef getArgument() const override { return "dc-choose-schedule"; }
  StringRef getDescription() const override {
    return "dc-zero3-pipeline's choose: schedule copies of the module, keep "
           "the fastest";
  }

  void getDependentDialects(DialectRegistry &registry) const override {
    OpPassManager pm(ModuleOp::getOperationName());
    Zero3PipelineOptions candidate;
    copyWithoutChoice(candidate);
    buildZero3Pipeline(pm, candidate);
    pm.getDependentDialects(registry);
  }

  void runOnOperation() override {
    FailureOr<PlanningSetup> setup =
        loadPlanningSetup(getOperation(), options.profile);
    if (failed(setup))
      return signalPassFailure();
    target = setup->target;
    LogicalResult chosen = failure();
    switch (options.choose) {
    case ScheduleChoice::None:
      return;
    case ScheduleChoice::RowChunks:
      chosen = chooseRowChunks();
      break;
    case ScheduleChoice::Layouts:
      chosen = options.sequenceParallel > 1 ? chooseSequenceLayout()
                                            : chooseHierarchy();
      break;
    }
    if (failed(chosen))
      signalPassFailure();
  }

private:
  Zero3PipelineOptions options;
  TargetDescription target;

  /// The pipeline's options without the choice, into `candidate`.
  void copyWithoutChoice(Zero3PipelineOptions &candidate) const {
    candidate.copyOptionValuesFrom(options);
    candidate.choose = ScheduleChoice::None;
  }

  /// Schedules a copy of the module with `candidate`; predicts its step
  /// (the sum over its step functions). Diagnostics are kept, not printed:
  /// a candidate that does not fit is a result here.
  Candidate schedule(const Zero3PipelineOptions &candidate, std::string name) {
    Candidate result;
    result.name = std::move(name);
    result.module = getOperation().clone();
    MLIRContext *context = &getContext();
    ScopedDiagnosticHandler capture(context, [&](Diagnostic &diag) {
      if (diag.getSeverity() == DiagnosticSeverity::Error &&
          result.error.empty())
        result.error = diag.str();
      return success();
    });
    PassManager pm(context);
    buildZero3Pipeline(pm, candidate);
    if (failed(pm.run(*result.module))) {
      if (result.error.empty())
        result.error = "the pipeline failed";
      return result;
    }
    CostModel model(target);
    for (auto fn : result.module->getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      FailureOr<MemoryTimeline> timeline = MemoryTimeline::compute(fn);
      if (failed(timeline))
        continue;
      SimulationResult sim = StreamSimulator(model).run(fn, *timeline);
      result.stepSeconds += sim.stepSeconds;
      result.exposedSeconds += sim.exposedCollectiveSeconds;
      result.peakBytes =
          std::max(result.peakBytes, timeline->getPeakDeviceBytes());
    }
    return result;
  }

  /// Prints the candidates' predictions, picks the fastest that schedules
  /// (the first of equals) and makes the module its schedule; returns its
  /// index.
  FailureOr<size_t> pickFastest(MutableArrayRef<Candidate> candidates,
                                const Twine &heading) {
    llvm::errs() << "dc-zero3-pipeline: layouts on " << heading << "\n";
    std::optional<size_t> fastest;
    for (auto [index, candidate] : llvm::enumerate(candidates)) {
      llvm::errs() << llvm::format("  %-40s ", candidate.name.c_str());
      if (!candidate.error.empty()) {
        llvm::errs() << "does not schedule: " << candidate.error << "\n";
        continue;
      }
      llvm::errs() << llvm::format(
          "step %9.3f ms, exposed collectives %9.3f ms, peak %.2f GiB\n",
          candidate.stepSeconds * 1e3, candidate.exposedSeconds * 1e3,
          static_cast<double>(candidate.peakBytes) / (1 << 30));
      if (!fastest || candidate.stepSeconds < candidates[*fastest].stepSeconds)
        fastest = index;
    }
    ModuleOp module = getOperation();
    if (!fastest)
      return module.emitError()
             << (candidates.size() == 2 ? "neither layout schedules: "
                                        : "no layout schedules: ")
             << candidates.front().error;
    llvm::errs() << "  predicted faster: " << candidates[*fastest].name << "\n";
    ModuleOp chosen = *candidates[*fastest].module;
    module.getBodyRegion().takeBody(chosen.getBodyRegion());
    module->setAttrs(chosen->getAttrDictionary());
    return *fastest;
  }

  /// The wide products whole and in 4 and 8 chunks of rows (dc-chunk-rows).
  LogicalResult chooseRowChunks() {
    SmallVector<Candidate, 3> candidates;
    for (int64_t chunks : {0, 4, 8}) {
      Zero3PipelineOptions candidate;
      copyWithoutChoice(candidate);
      candidate.rowChunks = chunks;
      candidates.push_back(schedule(
          candidate, chunks ? "wide products in " + std::to_string(chunks) +
                                  " chunks of rows"
                            : std::string("wide products whole")));
    }
    return pickFastest(candidates, target.name + " (row chunks)");
  }

  /// With sequence parallelism and data parallelism: parameters sharded
  /// over the data axis (gradients all-reduced over the sequence axis
  /// first) or over both axes (shard-over-sequence).
  LogicalResult chooseSequenceLayout() {
    int64_t world = options.worldSize, sp = options.sequenceParallel;
    if (world <= sp)
      return getOperation().emitError()
             << "choosing a layout (choose=layouts; dc-compile "
                "--compare-layouts) with sequence-parallel="
             << sp << " needs data-parallel ranks as well (world-size=" << world
             << ")";
    SmallVector<Candidate, 2> candidates;
    for (bool overBoth : {false, true}) {
      Zero3PipelineOptions candidate;
      copyWithoutChoice(candidate);
      candidate.shardOverSequence = overBoth;
      candidates.push_back(
          schedule(candidate,
                   overBoth ? "ZeRO-3 over all " + std::to_string(world) +
                                  " ranks (data x sequence)"
                            : "ZeRO-3 over the " + std::to_string(world / sp) +
                                  " data ranks"));
    }
    return pickFastest(candidates, target.name + " (" +
                                       std::to_string(world / sp) + " data x " +
                                       std::to_string(sp) + " sequence)");
  }

  /// Sharded over all ranks or inside each node (hierarchical: GPUs per
  /// node), on a target of several nodes.
  LogicalResult chooseHierarchy() {
    int64_t perNode = target.gpusPerNode, world = options.worldSize;
    if (perNode <= 0 || target.networkBandwidth <= 0 || world <= perNode ||
        world % perNode != 0)
      return getOperation().emitError()
             << "choosing a layout (choose=layouts; dc-compile "
                "--compare-layouts) needs a target with a network between "
                "nodes and a world of several whole nodes: target '"
             << target.name << "' has "
             << (perNode > 0 ? std::to_string(perNode) : std::string("all"))
             << " GPUs per node"
             << (target.networkBandwidth > 0 ? "" : " and no network")
             << ", world-size=" << world;
    SmallVector<Candidate, 2> candidates;
    for (int64_t hierarchical : {int64_t(0), perNode}) {
      Zero3PipelineOptions candidate;
      copyWithoutChoice(candidate);
      candidate.hierarchical = hierarchical;
      candidates.push_back(schedule(
          candidate,
          hierarchical
              ? "hierarchical: " + std::to_string(perNode) + " per node x " +
                    std::to_string(world / perNode) + " nodes"
              : "ZeRO-3 over all " + std::to_string(world) + " ranks"));
    }
    return pickFastest(candidates,
                       target.name + " (" + std::to_string(world / perNode) +
                           " nodes x " + std::to_string(perNode) + " GPUs)");
  }
};

} // namespace

std::unique_ptr<Pass>
dc::createChooseSchedulePass(const Zero3PipelineOptions &options) {
  return std::make_unique<ChooseSchedulePass>(options);
}
