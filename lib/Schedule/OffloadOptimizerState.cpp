//===- OffloadOptimizerState.cpp - optimizer state in host memory ---------===//
//
// ZeRO-Offload's state placement inside dc's step: the moments and masters
// of the chosen parameters stay in the caller's pinned host memory and
// visit the device for their update only, so forward and backward have the
// room. The copies are ordinary transfers of the step (upload of a host
// argument, write-back into it), which the memory timeline, the cost model
// and the simulator see like every other.
//
//===----------------------------------------------------------------------===//
#include "dc/Analysis/MemoryTimeline.h"
#include "dc/Analysis/OptimizerState.h"
#include "dc/Dialect/DC/IR/DCDialect.h"
#include "dc/Dialect/DC/IR/TypeSizes.h"
#include "dc/Schedule/Passes.h"
#include "dc/Schedule/Planning.h"
#include "dc/Support/ByteSize.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace dc {
#define GEN_PASS_DEF_DCOFFLOADOPTIMIZERSTATE
#include "dc/Schedule/Passes.h.inc"
} // namespace dc

using namespace mlir;
using namespace dc;

namespace {

/// One parameter's update and the state arguments it reads (its moments,
/// and its master where it has one).
struct Update {
  AdamWOp op;
  int64_t param = 0;
  SmallVector<BlockArgument> state;
  int64_t bytes = 0;
};

SmallVector<Update> findUpdates(func::FuncOp fn) {
  SmallVector<Update> updates;
  for (auto adamw : fn.getBody().front().getOps<AdamWOp>()) {
    Update update{adamw, 0, {}, 0};
    for (Value operand :
         {adamw.getExpAvg(), adamw.getExpAvgSq(), adamw.getMaster()}) {
      auto arg = dyn_cast_or_null<BlockArgument>(operand);
      if (!arg || isa<HostType>(arg.getType()))
        continue;
      std::optional<OptimizerStateRef> state =
          getOptimizerState(fn.getArgAttrDict(arg.getArgNumber()));
      if (!state || !arg.hasOneUse())
        continue;
      update.param = state->param;
      update.state.push_back(arg);
      update.bytes += getTypeBytes(arg.getType());
    }
    if (!update.state.empty())
      updates.push_back(std::move(update));
  }
  return updates;
}

/// Moves the state of `chosen` (in program order) to host memory: each
/// argument becomes !dc.host, uploaded one offloaded update ahead and
/// written back right after its update, and its result goes.
void offloadState(func::FuncOp fn, ArrayRef<Update *> chosen) {
  if (chosen.empty())
    return;
  MLIRContext *context = fn.getContext();
  Block &body = fn.getBody().front();
  auto terminator = cast<func::ReturnOp>(body.getTerminator());
  // The optimizer phase begins at the norm's first share: every gradient is
  // there, and the first upload overlaps the norm and its all-reduce.
  Operation *phaseStart = *body.getOps<GradSquaresOp>().begin();
  llvm::DenseSet<unsigned> droppedResults;
  for (auto [k, update] : llvm::enumerate(chosen)) {
    AdamWOp adamw = update->op;
    Location loc = adamw.getLoc();
    // Each state argument and the result that updates it.
    SmallVector<std::pair<BlockArgument, OpResult>> states;
    for (BlockArgument arg : update->state)
      states.push_back({arg, arg == adamw.getExpAvg()
                                 ? cast<OpResult>(adamw.getNewExpAvg())
                             : arg == adamw.getExpAvgSq()
                                 ? cast<OpResult>(adamw.getNewExpAvgSq())
                                 : cast<OpResult>(adamw.getNewMaster())});
    Operation *uploadAt =
        k == 0 ? phaseStart : chosen[k - 1]->op->getNextNode();
    OpBuilder builder(uploadAt);
    SmallVector<Value> uploads;
    for (auto [arg, result] : states) {
      arg.setType(HostType::get(arg.getType()));
      uploads.push_back(ReloadStartOp::create(builder, loc, arg).getFuture());
    }
    // Waited right before the update.
    builder.setInsertionPoint(adamw);
    for (auto [state, future] : llvm::zip(states, uploads))
      adamw->replaceUsesOfWith(state.first,
                               WaitOp::create(builder, loc, future));
    // Written back after the update, waited before the next offloaded
    // update (the last before the step returns): at most two parameters'
    // state is on the device at a time.
    builder.setInsertionPointAfter(adamw);
    SmallVector<Value> writeBacks;
    for (auto [arg, result] : states) {
      for (OpOperand &use : result.getUses())
        if (isa<func::ReturnOp>(use.getOwner()))
          droppedResults.insert(use.getOperandNumber());
      writeBacks.push_back(
          OffloadStartOp::create(builder, loc, result, arg).getFuture());
    }
    Operation *waitAt = k + 1 < chosen.size() ? chosen[k + 1]->op.getOperation()
                                              : terminator.getOperation();
    OpBuilder waits(waitAt);
    for (Value future : writeBacks)
      WaitOp::create(waits, loc, future);
  }
  // The state goes back into the caller's buffers: no results of its own.
  SmallVector<Value> operands;
  SmallVector<DictionaryAttr> attrs;
  for (unsigned i = 0, e = terminator.getNumOperands(); i < e; ++i)
    if (!droppedResults.contains(i)) {
      operands.push_back(terminator.getOperand(i));
      attrs.push_back(fn.getResultAttrDict(i));
    }
  OpBuilder builder(terminator);
  func::ReturnOp::create(builder, terminator.getLoc(), operands);
  terminator.erase();
  fn.setType(FunctionType::get(context, body.getArgumentTypes(),
                               ValueRange(operands).getTypes()));
  fn.setAllResultAttrs(attrs);
  SmallVector<int64_t> ids;
  for (Update *update : chosen)
    ids.push_back(update->param);
  fn->setAttr(kStateInHostAttrName, DenseI64ArrayAttr::get(context, ids));
}

struct OffloadOptimizerStatePass
    : public dc::impl::DCOffloadOptimizerStateBase<OffloadOptimizerStatePass> {
  using DCOffloadOptimizerStateBase::DCOffloadOptimizerStateBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (state == StateInHost::None)
      return;
    if (llvm::none_of(module.getOps<func::FuncOp>(), [](func::FuncOp fn) {
          return fn->hasAttr(kOptimizerAttrName);
        })) {
      module.emitError() << getArgument()
                         << ": no step runs its optimizer "
                            "(dc-optimizer-in-step, dc-compile "
                            "--optimizer-in-step): there is no optimizer "
                            "state to keep in host memory";
      return signalPassFailure();
    }
    auto plan = [&](func::FuncOp fn, const PlanningSetup &setup,
                    const CostModel &) { return planStep(fn, setup); };
    if (failed(planEachStep(module, getArgument(), profile, optimizerStateBytes,
                            plan)))
      signalPassFailure();
  }

  LogicalResult planStep(func::FuncOp fn, const PlanningSetup &setup) {
    if (!fn->hasAttr(kOptimizerAttrName))
      return success();
    if (fn->hasAttr(kStateInHostAttrName))
      return fn.emitError() << getArgument() << ": @" << fn.getName()
                            << " keeps optimizer state in host memory already";
    SmallVector<Update> updates = findUpdates(fn);
    auto inProgramOrder = [&](SmallVector<Update *> chosen) {
      llvm::sort(chosen, [](Update *a, Update *b) {
        return a->op->isBeforeInBlock(b->op);
      });
      return chosen;
    };
    if (state == StateInHost::All) {
      SmallVector<Update *> all;
      for (Update &update : updates)
        all.push_back(&update);
      offloadState(fn, inProgramOrder(all));
      return success();
    }
    // The largest first (then program order), on a copy of the step, until
    // it fits; then the same choice on the step itself.
    SmallVector<size_t> order(updates.size());
    for (size_t i = 0; i < order.size(); ++i)
      order[i] = i;
    llvm::stable_sort(order, [&](size_t a, size_t b) {
      return updates[a].bytes > updates[b].bytes;
    });
    for (size_t count = 0;; ++count) {
      // A copy with the `count` largest offloaded, beside the step (for
      // the grid's symbol) while its timeline is computed.
      func::FuncOp trial = fn;
      if (count > 0) {
        trial = cast<func::FuncOp>(fn->clone());
        trial.setName((fn.getName() + "_state_trial").str());
        trial.setPrivate();
        fn->getBlock()->getOperations().insertAfter(fn->getIterator(), trial);
        SmallVector<Update> trialUpdates = findUpdates(trial);
        SmallVector<Update *> chosen;
        for (size_t i = 0; i < count; ++i)
          chosen.push_back(&trialUpdates[order[i]]);
        offloadState(trial, inProgramOrder(chosen));
      }
      FailureOr<MemoryTimeline> timeline = MemoryTimeline::compute(trial);
      if (failed(timeline)) {
        if (count > 0)
          trial->erase();
        return failure();
      }
      int64_t peak = timeline->getPeakDeviceBytes();
      Location peakAt = timeline->getOps()[timeline->getPeakIndex()]->getLoc();
      if (count > 0)
        trial->erase();
      if (peak <= setup.budgetBytes) {
        SmallVector<Update *> picked;
        for (size_t i = 0; i < count; ++i)
          picked.push_back(&updates[order[i]]);
        offloadState(fn, inProgramOrder(picked));
        return success();
      }
      if (count == updates.size())
        return emitError(peakAt)
               << getArgument()
               << ": with every parameter's optimizer state in host memory, "
                  "device memory still peaks here at "
               << formatBytes(peak) << "; the budget of "
               << formatBytes(setup.budgetBytes) << " is short by "
               << formatBytes(peak - setup.budgetBytes);
    }
  }
};

} // namespace
