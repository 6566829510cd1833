//===- Report.cpp - print what the simulator predicts for a schedule ------===//
#include "dc/Dialect/DC/IR/TypeSizes.h"
#include "dc/Schedule/OffloadFloor.h"
#include "dc/Schedule/Passes.h"
#include "dc/Schedule/Planning.h"
#include "dc/Support/ByteSize.h"

#include "dc/Analysis/Accumulators.h"
#include "dc/Analysis/BufferAliasing.h"
#include "dc/Analysis/CostModel.h"
#include "dc/Analysis/MemoryTimeline.h"
#include "dc/Analysis/OptimizerState.h"
#include "dc/Analysis/StreamSimulator.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/ToolOutputFile.h"

#include <algorithm>

namespace dc {
#define GEN_PASS_DEF_DCREPORT
#include "dc/Schedule/Passes.h.inc"
} // namespace dc

using namespace mlir;
using namespace dc;
namespace json = llvm::json;

namespace {

/// What dc decided for one parameter, as the schedule shows it.
struct ParamReport {
  int64_t id = 0;
  std::string name, logicalType, gatherType;
  bool sharded = false;
  int64_t localElements = 0;
  int gathers = 0, fusedGathers = 0;
  double minLeadSeconds = -1, maxStallSeconds = 0;
};

std::string locationText(Location loc) {
  std::string text;
  llvm::raw_string_ostream os(text);
  loc.print(os);
  return text;
}

std::string typeText(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  type.print(os);
  return text;
}

/// Busy time of op `i` on its stream.
double busySeconds(const SimulationResult &sim, size_t i) {
  return sim.ops[i].end - sim.ops[i].start;
}

/// The share of the bytes the merged op `op` moves (the cost model's
/// count; dc-rematerialize's merge-siblings) that its results from `first`
/// on write: the part of its time its recomputed results take, the op
/// being bound by its bytes.
double recomputedShare(Operation *op, int64_t first) {
  int64_t all = CostModel::countBytes(op);
  if (all <= 0)
    return 1;
  int64_t mine = 0;
  for (OpResult value : op->getResults())
    if (value.getResultNumber() >= first)
      mine += getTypeBytes(value.getType());
  return std::min(1.0, static_cast<double>(mine) / all);
}

/// What became of each activation kept from forward to backward: kept on
/// the device, offloaded (added time: the stalls of its two waits) or
/// recomputed (added time: the cloned ops' compute, plus any gather the
/// clones needed on the collective stream).
json::Array reportActivations(func::FuncOp fn, const MemoryTimeline &timeline,
                              const SimulationResult &sim) {
  Block &body = fn.getBody().front();
  json::Array activations;
  auto entry = [&](StringRef kind, Value value, Operation *at, double added,
                   double addedCollective) {
    return json::Object{
        {"kind", kind},
        {"type", typeText(value.getType())},
        {"bytes", getTypeBytes(value.getType())},
        {"addedSeconds", added},
        {"addedCollectiveSeconds", addedCollective},
        {"op", at->getName().getStringRef().str()},
        {"loc", locationText(at->getLoc())},
    };
  };
  // The forward ends where the loss is made.
  std::optional<size_t> lossAt;
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  for (unsigned i = 0; i < fn.getNumResults(); ++i)
    if (fn.getResultAttr(i, kLossAttrName))
      if (Operation *def = ret.getOperand(i).getDefiningOp())
        lossAt = timeline.indexOf(body.findAncestorOpInBlock(*def));
  // Recomputed: the ops of each dc.recompute id; the last compute op of
  // one, views aside (the clone's views for its later uses), makes the
  // tensor.
  llvm::MapVector<int64_t, SmallVector<size_t>> recomputations;
  for (auto [i, op] : llvm::enumerate(timeline.getOps())) {
    if (auto id = op->getAttrOfType<IntegerAttr>(kRecomputeAttrName))
      recomputations[id.getInt()].push_back(i);
    // (An offload into the caller's buffer writes optimizer state back.)
    if (auto offload = dyn_cast<OffloadStartOp>(op);
        offload && !offload.getDestination()) {
      double stall = 0;
      auto hostWait = cast<WaitOp>(*offload.getFuture().getUsers().begin());
      stall += sim.ops[timeline.indexOf(hostWait)].stall;
      for (Operation *reload : hostWait.getResult().getUsers())
        if (auto start = dyn_cast<ReloadStartOp>(reload))
          for (Operation *wait : start.getFuture().getUsers())
            stall += sim.ops[timeline.indexOf(wait)].stall;
      activations.push_back(entry("offloaded", offload.getValue(),
                                  offload.getValue().getDefiningOp()
                                      ? offload.getValue().getDefiningOp()
                                      : op,
                                  stall, 0));
    }
  }
  for (auto &[id, indices] : recomputations) {
    double compute = 0, collective = 0;
    Operation *root = nullptr;
    unsigned result = 0;
    for (size_t i : indices) {
      Operation *op = timeline.getOps()[i];
      if (isa<GatherStartOp>(op)) {
        collective += busySeconds(sim, i);
      } else if (auto first = op->getAttrOfType<IntegerAttr>(
                     kRecomputedResultsAttrName)) {
        // Merged into a backward op: its share of that op's bytes.
        compute += busySeconds(sim, i) * recomputedShare(op, first.getInt());
        root = op;
        result = first.getInt();
      } else if (sim.ops[i].stream == StreamKind::Compute) {
        compute += busySeconds(sim, i);
        if (!getViewedOperand(op))
          root = op;
      } else if (!isa<WaitOp, ReleaseOp>(op)) {
        root = op;
      }
    }
    if (root && root->getNumResults() > result)
      activations.push_back(entry("recomputed", root->getResult(result), root,
                                  compute, collective));
  }
  // Kept: made before the loss, read after it, on the device throughout.
  if (lossAt) {
    for (size_t i = 0; i < *lossAt; ++i) {
      Operation *op = timeline.getOps()[i];
      if (isa<DCDialect>(op->getDialect()))
        continue;
      for (Value value : op->getResults()) {
        if (!isa<RankedTensorType>(value.getType()) || !ownsItsBuffer(value))
          continue;
        bool readAfter = llvm::any_of(value.getUsers(), [&](Operation *user) {
          Operation *top = body.findAncestorOpInBlock(*user);
          return top && !isa<func::ReturnOp>(top) &&
                 timeline.indexOf(top) > *lossAt;
        });
        if (readAfter && getTypeBytes(value.getType()) > 0)
          activations.push_back(entry("kept", value, op, 0, 0));
      }
    }
  }
  return activations;
}

/// Where each axis of each grid the module declares lies on the target's
/// nodes (row-major ranks, as the runtime numbers them).
json::Array reportGrids(ModuleOp module, const TargetDescription &target) {
  json::Array grids;
  for (auto grid : module.getOps<shard::GridOp>()) {
    ArrayRef<int64_t> shape = grid.getShape();
    if (llvm::any_of(shape, ShapedType::isDynamic))
      continue;
    json::Array axes;
    for (size_t axis = 0; axis < shape.size(); ++axis) {
      int64_t stride = 1;
      for (int64_t later : shape.drop_front(axis + 1))
        stride *= later;
      int64_t perNode = target.membersPerNode(shape[axis], stride);
      axes.push_back(
          json::Object{{"size", shape[axis]},
                       {"perNode", perNode},
                       {"nodes", (shape[axis] + perNode - 1) / perNode}});
    }
    grids.push_back(json::Object{{"name", grid.getSymName().str()},
                                 {"axes", std::move(axes)}});
  }
  return grids;
}

json::Object reportFunction(func::FuncOp fn, const MemoryTimeline &timeline,
                            const SimulationResult &sim, int64_t budget,
                            int64_t trainerState, double optimizerSeconds) {
  // Parameters in argument order, and which gathers and waits serve each.
  llvm::MapVector<Value, ParamReport> params;
  for (BlockArgument arg : fn.getArguments()) {
    auto attr =
        fn.getArgAttrOfType<ParamAttr>(arg.getArgNumber(), kParamAttrName);
    if (!attr)
      continue;
    ParamReport &report = params[arg];
    report.id = attr.getId();
    report.name = attr.getName() ? attr.getName().str() : "";
    if (auto shard = dyn_cast<ShardType>(arg.getType())) {
      report.sharded = true;
      report.logicalType = typeText(shard.getLogical());
      report.localElements = shard.getLocal();
    } else {
      report.logicalType = typeText(arg.getType());
    }
  }
  int groups = 0, gathers = 0, buckets = 0, allReduces = 0, allToAlls = 0,
      syncAllToAlls = 0;
  int64_t gatheredBytes = 0, reducedBytes = 0, allReducedBytes = 0,
          exchangedBytes = 0;
  // Compute stalled on all-to-alls: at the waits of the asynchronous form,
  // for the whole exchange of the synchronous one.
  double allToAllStallSeconds = 0;
  for (auto [i, op] : llvm::enumerate(timeline.getOps())) {
    if (auto exchange = dyn_cast<AllToAllStartOp>(op)) {
      ++allToAlls;
      exchangedBytes += sim.ops[i].bytes;
      for (Operation *wait : exchange.getFuture().getUsers())
        allToAllStallSeconds += sim.ops[timeline.indexOf(wait)].stall;
      continue;
    }
    if (isa<AllToAllOp>(op)) {
      ++allToAlls;
      ++syncAllToAlls;
      exchangedBytes += sim.ops[i].bytes;
      allToAllStallSeconds += sim.ops[i].stall;
      continue;
    }
    if (isa<AllReduceStartOp>(op)) {
      ++allReduces;
      allReducedBytes += sim.ops[i].bytes;
      continue;
    }
    if (auto reduce = dyn_cast<ReduceScatterStartOp>(op)) {
      ++buckets;
      reducedBytes += sim.ops[i].bytes;
      continue;
    }
    auto gather = dyn_cast<GatherStartOp>(op);
    if (!gather)
      continue;
    ++groups;
    gatheredBytes += sim.ops[i].bytes;
    for (auto [shard, future] :
         llvm::zip(gather.getShards(), gather.getFutures())) {
      ++gathers;
      auto it = params.find(shard);
      if (it == params.end())
        continue;
      ParamReport &report = it->second;
      ++report.gathers;
      if (gather.getNumResults() > 1)
        ++report.fusedGathers;
      report.gatherType =
          typeText(cast<FutureType>(future.getType()).getValue());
      for (Operation *wait : future.getUsers()) {
        const SimulatedOp &waitSim = sim.ops[timeline.indexOf(wait)];
        double lead = waitSim.issue - sim.ops[i].issue;
        if (report.minLeadSeconds < 0 || lead < report.minLeadSeconds)
          report.minLeadSeconds = lead;
        report.maxStallSeconds =
            std::max(report.maxStallSeconds, waitSim.stall);
      }
    }
  }

  Operation *peakOp = timeline.getOps().empty()
                          ? fn.getOperation()
                          : timeline.getOps()[timeline.getPeakIndex()];
  json::Array paramArray;
  for (auto &[value, p] : params)
    paramArray.push_back(json::Object{
        {"id", p.id},
        {"name", p.name},
        {"type", p.logicalType},
        {"sharded", p.sharded},
        {"localElements", p.localElements},
        {"gathers", p.gathers},
        {"fusedGathers", p.fusedGathers},
        {"gatherType", p.gatherType},
        {"minLeadSeconds", std::max(0.0, p.minLeadSeconds)},
        {"maxStallSeconds", p.maxStallSeconds},
    });
  auto floorObject = [&](StringRef name) {
    json::Object object;
    if (auto floor = fn->getAttrOfType<OffloadFloorAttr>(name)) {
      object["excessBytes"] = floor.getExcessBytes();
      object["stallSeconds"] = floor.getStallSeconds().convertToDouble();
    }
    return object;
  };
  // Gradient accumulation (dc-accumulate-gradients): the decision per
  // parameter, and which form of the step this is.
  json::Object accumulation;
  if (auto micro = fn->getAttrOfType<IntegerAttr>(kMicroBatchesAttrName)) {
    accumulation["microBatches"] = micro.getInt();
    if (auto other =
            fn->getAttrOfType<FlatSymbolRefAttr>(kAccumulatingStepAttrName))
      accumulation["accumulatingStep"] = other.getValue().str();
    if (auto other =
            fn->getAttrOfType<FlatSymbolRefAttr>(kAccumulatesForAttrName))
      accumulation["accumulatesFor"] = other.getValue().str();
    json::Array decisions;
    if (auto plan = fn->getAttrOfType<ArrayAttr>(kAccumulationPlanAttrName))
      for (auto entry : plan.getAsRange<DictionaryAttr>())
        decisions.push_back(json::Object{
            {"name", entry.getAs<StringAttr>("name").getValue().str()},
            {"id", entry.getAs<IntegerAttr>("id").getInt()},
            {"bytes", entry.getAs<IntegerAttr>("bytes").getInt()},
            {"savedSeconds",
             entry.getAs<FloatAttr>("saved_s").getValueAsDouble()},
            {"choice", entry.getAs<StringAttr>("choice").getValue().str()}});
    accumulation["params"] = std::move(decisions);
  }
  return json::Object{
      {"function", fn.getSymName().str()},
      {"accumulation", std::move(accumulation)},
      {"offloadFloor", floorObject(kOffloadFloorAttrName)},
      {"offloadAloneFloor", floorObject(kOffloadAloneFloorAttrName)},
      {"jointFloor", floorObject(kJointFloorAttrName)},
      {"activations", reportActivations(fn, timeline, sim)},
      {"stepSeconds", sim.stepSeconds},
      {"optimizerSeconds", optimizerSeconds},
      {"trainerStepSeconds", sim.stepSeconds + optimizerSeconds},
      {"computeSeconds", sim.computeSeconds},
      {"collectiveSeconds", sim.collectiveSeconds},
      {"exposedCollectiveSeconds", sim.exposedCollectiveSeconds},
      {"copySeconds", sim.copySeconds},
      {"exposedCopySeconds", sim.exposedCopySeconds},
      {"copySlowdownSeconds", sim.copySlowdownSeconds},
      {"peakDeviceBytes", timeline.getPeakDeviceBytes()},
      {"peakOp",
       json::Object{{"index", static_cast<int64_t>(timeline.getPeakIndex())},
                    {"name", peakOp->getName().getStringRef().str()},
                    {"loc", locationText(peakOp->getLoc())}}},
      {"peakHostBytes", timeline.getPeakHostBytes()},
      {"trainerStateBytes", trainerState},
      {"budgetBytes", budget},
      {"gatherGroups", groups},
      {"gathers", gathers},
      {"gatheredBytes", gatheredBytes},
      {"reduceBuckets", buckets},
      {"reducedBytes", reducedBytes},
      {"allReduces", allReduces},
      {"allReducedBytes", allReducedBytes},
      {"allToAlls", allToAlls},
      {"synchronousAllToAlls", syncAllToAlls},
      {"allToAllBytes", exchangedBytes},
      {"allToAllStallSeconds", allToAllStallSeconds},
      {"params", std::move(paramArray)},
  };
}

void printText(const json::Object &r, llvm::raw_ostream &os) {
  auto num = [&](StringRef key) { return *r.getNumber(key); };
  auto ms = [](double s) { return llvm::format("%10.3f ms", s * 1e3); };
  auto pct = [&](double part) {
    double step = num("stepSeconds");
    return llvm::format("%5.1f%%", step > 0 ? 100.0 * part / step : 0.0);
  };
  os << "dc-report @" << *r.getString("function") << "\n";
  os << "  predicted step        " << ms(num("stepSeconds")) << "\n";
  os << "  compute (busy)        " << ms(num("computeSeconds")) << "\n";
  if (const json::Object *inStep = r.getObject("optimizerInStep")) {
    int64_t hostState = *inStep->getInteger("hostStateBytes");
    os << "  optimizer (in step)   " << ms(*inStep->getNumber("seconds"))
       << "   AdamW of " << *inStep->getInteger("updates")
       << " parameters and the norm, state "
       << formatBytes(*inStep->getInteger("stateBytes"))
       << " (in the step's memory";
    if (hostState)
      os << "; " << formatBytes(hostState) << " of it in host memory, copies "
         << ms(*inStep->getNumber("stateCopySeconds")) << " (waited "
         << ms(*inStep->getNumber("stateCopyStallSeconds")) << ")";
    os << ")\n";
  }
  if (double optimizer = num("optimizerSeconds"))
    os << "  optimizer step        " << ms(optimizer) << "   trainer step "
       << ms(num("trainerStepSeconds"))
       << " (the step, then AdamW on the device)\n";
  os << "  collectives (busy)    " << ms(num("collectiveSeconds"))
     << "   exposed " << ms(num("exposedCollectiveSeconds")) << " ("
     << pct(num("exposedCollectiveSeconds")) << " of the step)\n";
  os << "  host copies (busy)    " << ms(num("copySeconds")) << "   exposed "
     << ms(num("exposedCopySeconds")) << " (" << pct(num("exposedCopySeconds"))
     << " of the step)\n";
  if (double slowdown = num("copySlowdownSeconds"))
    os << "  copies slow compute   " << ms(slowdown)
       << "   (compute overlapping host copies, part of compute busy)\n";
  // The floors (OffloadFloorAttr objects), each line only where recorded.
  auto printFloor = [&](StringRef key, StringRef label, StringRef what) {
    const json::Object *floor = r.getObject(key);
    if (floor && floor->getNumber("stallSeconds"))
      os << "  " << label << ms(*floor->getNumber("stallSeconds")) << "   "
         << what << " (" << formatBytes(*floor->getInteger("excessBytes"))
         << " over budget at the peak)\n";
  };
  printFloor("offloadFloor", "offload floor         ",
             "of copy stall for any placement");
  printFloor("offloadAloneFloor", "offload-alone floor   ",
             "of copy stall had nothing been recomputed");
  printFloor("jointFloor", "joint floor           ",
             "added by any mix of recomputation and offload, at least");
  const json::Object *peak = r.getObject("peakOp");
  int64_t stepPeak = *r.getInteger("peakDeviceBytes");
  int64_t state = *r.getInteger("trainerStateBytes");
  os << "  peak device memory    " << formatBytes(stepPeak + state);
  if (state)
    os << " (step " << formatBytes(stepPeak) << " + optimizer state "
       << formatBytes(state) << ")";
  // A budget of the target's whole memory is that memory: say so.
  int64_t targetMemory = *r.getInteger("targetMemoryBytes");
  int64_t budget = *r.getInteger("budgetBytes");
  if (budget != targetMemory)
    os << " of budget " << formatBytes(budget);
  else
    os << " of " << *r.getString("target") << "'s memory "
       << formatBytes(targetMemory);
  os << ", at op #" << *peak->getInteger("index") << " '"
     << *peak->getString("name") << "' " << *peak->getString("loc") << "\n";
  os << "  peak host memory      "
     << formatBytes(*r.getInteger("peakHostBytes")) << "\n";
  os << "  gathers               " << *r.getInteger("gathers") << " in "
     << *r.getInteger("gatherGroups") << " groups, "
     << formatBytes(*r.getInteger("gatheredBytes")) << "\n";
  os << "  gradient buckets      " << *r.getInteger("reduceBuckets") << ", "
     << formatBytes(*r.getInteger("reducedBytes")) << "\n";
  if (int64_t allReduces = *r.getInteger("allReduces"))
    os << "  all-reduces           " << allReduces << ", "
       << formatBytes(*r.getInteger("allReducedBytes")) << "\n";
  if (int64_t allToAlls = *r.getInteger("allToAlls")) {
    os << "  all-to-alls           " << allToAlls << ", "
       << formatBytes(*r.getInteger("allToAllBytes")) << ", compute waits "
       << ms(*r.getNumber("allToAllStallSeconds"));
    if (int64_t sync = *r.getInteger("synchronousAllToAlls"))
      os << " (" << sync << " synchronous)";
    os << "\n";
  }
  // Which grid axes cross the network (the cost of their collectives).
  for (const json::Value &value : *r.getArray("grids")) {
    const json::Object &grid = *value.getAsObject();
    os << "  grid @" << *grid.getString("name") << " on "
       << *r.getString("target") << ":";
    for (auto [axis, axisValue] : llvm::enumerate(*grid.getArray("axes"))) {
      const json::Object &a = *axisValue.getAsObject();
      int64_t nodes = *a.getInteger("nodes");
      os << (axis ? "," : "") << " axis " << axis << " "
         << *a.getInteger("size") << " ranks ";
      if (nodes == 1)
        os << "in one node";
      else
        os << "over " << nodes << " nodes (" << *a.getInteger("perNode")
           << " per node)";
    }
    os << "\n";
  }
  // Per activation kept from forward to backward: a summary line per kind,
  // then one line per tensor.
  const json::Array *activations = r.getArray("activations");
  for (StringRef kind : {"kept", "offloaded", "recomputed"}) {
    int count = 0;
    int64_t bytes = 0;
    double added = 0;
    for (const json::Value &value : *activations) {
      const json::Object &a = *value.getAsObject();
      if (*a.getString("kind") != kind)
        continue;
      ++count;
      bytes += *a.getInteger("bytes");
      added += *a.getNumber("addedSeconds");
    }
    os << llvm::format("  %-23s", (kind + " activations").str().c_str())
       << count << ", " << formatBytes(bytes) << ", added " << ms(added)
       << "\n";
  }
  if (!activations->empty()) {
    os << "  activations:\n";
    os << llvm::format("  %-10s %-28s %12s %11s %11s  %s\n", "kind", "type",
                       "bytes", "added (us)", "gather (us)", "made by");
    for (const json::Value &value : *activations) {
      const json::Object &a = *value.getAsObject();
      os << llvm::format("  %-10s %-28s %12lld %11.1f %11.1f  ",
                         a.getString("kind")->str().c_str(),
                         a.getString("type")->str().c_str(),
                         static_cast<long long>(*a.getInteger("bytes")),
                         *a.getNumber("addedSeconds") * 1e6,
                         *a.getNumber("addedCollectiveSeconds") * 1e6)
         << *a.getString("op") << " " << *a.getString("loc") << "\n";
    }
  }
  const json::Object *accumulation = r.getObject("accumulation");
  if (accumulation && accumulation->getInteger("microBatches")) {
    os << "  micro-batches         "
       << *accumulation->getInteger("microBatches");
    if (auto other = accumulation->getString("accumulatesFor"))
      os << " (the accumulating form of @" << *other << ")";
    if (auto other = accumulation->getString("accumulatingStep"))
      os << " (final form; accumulating form @" << *other << ")";
    os << "\n";
    const json::Array *decisions = accumulation->getArray("params");
    if (decisions && !decisions->empty()) {
      os << "  gradient accumulation (saved per optimizer step by summing "
            "locally and reducing once):\n";
      os << llvm::format("  %4s  %-28s %12s %11s  %s\n", "id", "name",
                         "fp32 bytes", "saved us", "choice");
      for (const json::Value &value : *decisions) {
        const json::Object &d = *value.getAsObject();
        StringRef choice = *d.getString("choice");
        std::string what = (choice == "local" || choice == "forced"
                                ? "summed locally (" + choice + ")"
                                : "reduced every micro-batch (" + choice + ")")
                               .str();
        std::string name = d.getString("name")->str();
        os << llvm::format("  %4lld  %-28s %12lld %11.1f  %s\n",
                           static_cast<long long>(*d.getInteger("id")),
                           name.c_str(),
                           static_cast<long long>(*d.getInteger("bytes")),
                           *d.getNumber("savedSeconds") * 1e6, what.c_str());
      }
    }
  }
  os << "  parameters:\n";
  os << llvm::format("  %4s  %-28s %-24s %-10s %7s %5s %-18s %11s %11s\n", "id",
                     "name", "type", "state", "gathers", "fused", "gathered as",
                     "lead (us)", "stall (us)");
  for (const json::Value &value : *r.getArray("params")) {
    const json::Object &p = *value.getAsObject();
    std::string state =
        *p.getBoolean("sharded") ? "sharded" : std::string("replicated");
    os << llvm::format("  %4lld  %-28s %-24s %-10s %7lld %5lld %-18s %11.1f "
                       "%11.1f\n",
                       static_cast<long long>(*p.getInteger("id")),
                       p.getString("name")->str().c_str(),
                       p.getString("type")->str().c_str(), state.c_str(),
                       static_cast<long long>(*p.getInteger("gathers")),
                       static_cast<long long>(*p.getInteger("fusedGathers")),
                       p.getString("gatherType")->str().c_str(),
                       *p.getNumber("minLeadSeconds") * 1e6,
                       *p.getNumber("maxStallSeconds") * 1e6);
  }
}

struct ReportPass : public dc::impl::DCReportBase<ReportPass> {
  using DCReportBase::DCReportBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<PlanningSetup> setup = loadPlanningSetup(module, profile);
    if (failed(setup))
      return signalPassFailure();
    CostModel costModel = setup->makeCostModel();
    for (auto fn : module.getOps<func::FuncOp>())
      if (!fn.isExternal() &&
          (failed(checkPlanningPreconditions(fn, getArgument())) ||
           failed(checkOptimizerStateBytes(fn, optimizerStateBytes,
                                           getArgument()))))
        return signalPassFailure();

    json::Array reports;
    std::string traceText;
    llvm::raw_string_ostream traceStream(traceText);
    for (auto fn : module.getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      FailureOr<MemoryTimeline> timeline = MemoryTimeline::compute(fn);
      if (failed(timeline))
        return signalPassFailure();
      SimulationResult sim = StreamSimulator(costModel).run(fn, *timeline);
      // A step that updates its parameters itself holds its state as
      // arguments (in the timeline) and its update as ops (in the
      // simulation): the trainer keeps nothing and runs nothing beside it.
      bool inStep = fn->hasAttr(kOptimizerAttrName);
      json::Object report = reportFunction(
          fn, *timeline, sim, setup->budgetBytes,
          inStep ? 0 : trainerStateBytes(fn, optimizerStateBytes),
          // Memory-bound: it streams the state once. No state on the
          // device: no optimizer step there.
          !inStep && optimizerStateBytes > 0
              ? optimizerStepBytes(fn, optimizerStateBytes) /
                    setup->target.memoryBandwidth
              : 0.0);
      if (inStep) {
        // State in host memory (dc-offload-optimizer-state): its bytes,
        // its copies' time and how long the step waited for them.
        int64_t stateBytes = 0, hostStateBytes = 0;
        for (BlockArgument arg : fn.getArguments())
          if (getOptimizerState(fn.getArgAttrDict(arg.getArgNumber()))) {
            stateBytes += getTypeBytes(arg.getType());
            if (isa<HostType>(arg.getType()))
              hostStateBytes += getTypeBytes(arg.getType());
          }
        double updateSeconds = 0, copySeconds = 0, copyStalls = 0;
        int64_t updates = 0;
        for (const SimulatedOp &op : sim.ops) {
          if (isa_and_nonnull<AdamWOp, GradSquaresOp>(op.op)) {
            updateSeconds += op.end - op.start;
            updates += isa<AdamWOp>(op.op);
          }
          auto stateCopy = [&](Operation *copy) {
            if (auto offload = dyn_cast_or_null<OffloadStartOp>(copy))
              return bool(offload.getDestination());
            auto reload = dyn_cast_or_null<ReloadStartOp>(copy);
            auto arg = reload ? dyn_cast<BlockArgument>(reload.getHost())
                              : BlockArgument();
            return arg &&
                   getOptimizerState(fn.getArgAttrDict(arg.getArgNumber()))
                       .has_value();
          };
          if (stateCopy(op.op))
            copySeconds += op.end - op.start;
          if (auto wait = dyn_cast_or_null<WaitOp>(op.op))
            if (stateCopy(wait.getFuture().getDefiningOp()))
              copyStalls += op.stall;
        }
        report["optimizerInStep"] = json::Object{
            {"stateBytes", stateBytes},
            {"hostStateBytes", hostStateBytes},
            {"stateCopySeconds", copySeconds},
            {"stateCopyStallSeconds", copyStalls},
            {"updates", updates},
            {"seconds", updateSeconds},
        };
      }
      report["target"] = setup->target.name;
      report["targetMemoryBytes"] = setup->target.deviceMemoryBytes;
      report["grids"] = reportGrids(module, setup->target);
      reports.push_back(std::move(report));
      if (!trace.empty() && traceText.empty())
        writeChromeTrace(sim, fn.getSymName(), traceStream, &*timeline);
    }

    std::string errorMessage;
    auto out = mlir::openOutputFile(output, &errorMessage);
    if (!out) {
      module.emitError() << "dc-report: " << errorMessage;
      return signalPassFailure();
    }
    if (json) {
      out->os() << llvm::formatv("{0:2}", json::Value(std::move(reports)))
                << "\n";
    } else {
      for (const json::Value &report : reports)
        printText(*report.getAsObject(), out->os());
    }
    out->keep();
    if (!trace.empty()) {
      auto traceFile = mlir::openOutputFile(trace, &errorMessage);
      if (!traceFile) {
        module.emitError() << "dc-report: " << errorMessage;
        return signalPassFailure();
      }
      traceFile->os() << traceText;
      traceFile->keep();
    }
    markAllAnalysesPreserved();
  }
};

} // namespace
