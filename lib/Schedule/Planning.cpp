//===- Planning.cpp - target, profile and budget for planning passes ------===//
#include "dc/Schedule/Planning.h"

#include "dc/Analysis/BufferAliasing.h"
#include "dc/Dialect/DC/IR/DCDialect.h"
#include "dc/Support/ByteSize.h"
#include "dc/Target/TargetDescription.h"

#include "mlir/IR/BuiltinTypes.h"

#include <cmath>

using namespace mlir;
using namespace dc;

FailureOr<std::optional<int64_t>>
dc::resolveMemoryBudget(Operation *errorAt, StringRef text,
                        int64_t deviceMemoryBytes) {
  text = text.trim();
  if (text.empty())
    return std::optional<int64_t>();
  StringRef original = text;
  auto unparsable = [&] {
    return errorAt->emitError()
           << "cannot parse memory budget '" << original
           << "': give bytes (e.g. 16GiB, 2.5e9; under 8 EiB) or a fraction "
              "(0.9, 90%)";
  };
  // A fraction of the target's memory: "0.9" or "90%". A plain number is a
  // fraction in (0, 1] or a whole number of bytes (2.5e9).
  std::optional<double> fraction;
  double value = 0;
  if (text.consume_back("%")) {
    if (text.getAsDouble(value))
      return unparsable();
    fraction = value / 100.0;
  } else if (!text.getAsDouble(value)) {
    if (value > 0 && value <= 1.0)
      fraction = value;
    else if (!(value >= 1) || value != std::floor(value))
      return errorAt->emitError()
             << "memory budget '" << original
             << "' is neither a fraction in (0, 1] nor a whole number of "
                "bytes";
  }
  if (fraction) {
    // Written so that NaN fails too.
    if (!(*fraction > 0 && *fraction <= 1))
      return errorAt->emitError()
             << "memory budget fraction must be in (0, 1], got " << *fraction;
    return std::optional<int64_t>(static_cast<int64_t>(
        std::floor(*fraction * static_cast<double>(deviceMemoryBytes))));
  }
  std::optional<int64_t> bytes = parseByteSize(text);
  if (!bytes)
    return unparsable();
  return std::optional<int64_t>(*bytes);
}

//===----------------------------------------------------------------------===//
// The schedule's invariants
//===----------------------------------------------------------------------===//

/// "<who> cannot plan this step: ", or nothing for dc-verify-schedule itself.
static std::string prefix(StringRef who) {
  return who.empty() ? std::string() : (who + " cannot plan this step: ").str();
}

/// Each future is consumed exactly once, by a wait or end_backward.
LogicalResult dc::verifyFutures(Block &body, StringRef who) {
  for (auto start : body.getOps<AsyncStartOpInterface>()) {
    Operation &op = *start.getOperation();
    for (OpResult future : start.getFutures()) {
      SmallVector<Operation *> waits;
      for (Operation *user : future.getUsers()) {
        if (!isa<WaitOp, EndBackwardOp>(user))
          return user->emitError()
                 << prefix(who) << "uses future #" << future.getResultNumber()
                 << " of '" << op.getName()
                 << "'; a future may only be taken by dc.wait or "
                    "dc.end_backward";
        waits.push_back(user);
      }
      if (waits.empty())
        return op.emitError() << prefix(who) << "future #"
                              << future.getResultNumber() << " is never waited";
      if (waits.size() > 1) {
        InFlightDiagnostic diag = op.emitError()
                                  << prefix(who) << "future #"
                                  << future.getResultNumber() << " is waited "
                                  << waits.size()
                                  << " times; it must be waited exactly once";
        for (Operation *wait : waits)
          diag.attachNote(wait->getLoc()) << "waited here";
        return diag;
      }
    }
  }
  return success();
}

/// The dc.releases of `value`, in block order; reports a second one.
static FailureOr<ReleaseOp>
findRelease(Value value, const llvm::DenseMap<Operation *, size_t> &index,
            StringRef what, StringRef who) {
  SmallVector<ReleaseOp> releases = getReleasesInOrder(value, index);
  if (releases.size() > 1) {
    InFlightDiagnostic diag = releases[1].emitError()
                              << prefix(who) << "releases a " << what
                              << " twice";
    diag.attachNote(releases[0].getLoc()) << "first released here";
    return diag;
  }
  return releases.empty() ? ReleaseOp() : releases.front();
}

/// Nothing uses the buffer `release` frees (`value` or a view of it) after
/// the release, and no start op reading it is waited after the release.
static LogicalResult verifyUsedBeforeRelease(
    Block &body, const llvm::DenseMap<Operation *, size_t> &index, Value value,
    ReleaseOp release, StringRef what, StringRef who) {
  size_t releasedAt = index.lookup(release);
  for (Value view : getBufferViews(value)) {
    for (OpOperand &use : view.getUses()) {
      Operation *owner = use.getOwner();
      Operation *top = body.findAncestorOpInBlock(*owner);
      if (owner == release || !top)
        continue;
      if (index.lookup(top) > releasedAt) {
        InFlightDiagnostic diag = owner->emitError()
                                  << prefix(who) << "uses a " << what
                                  << (view == value ? "" : " (through a view)")
                                  << " after its dc.release";
        diag.attachNote(release.getLoc()) << "released here";
        return diag;
      }
      // A start op reads its operands until its future is waited.
      if (auto start = dyn_cast<AsyncStartOpInterface>(top))
        for (Value future : start.getFutures())
          for (Operation *waiter : future.getUsers()) {
            Operation *wait = body.findAncestorOpInBlock(*waiter);
            if (wait && index.lookup(wait) > releasedAt) {
              InFlightDiagnostic diag =
                  top->emitError()
                  << prefix(who) << "reads a " << what
                  << " until its future is waited, which is after the "
                     "value's dc.release";
              diag.attachNote(release.getLoc()) << "released here";
              diag.attachNote(wait->getLoc()) << "waited here";
              return diag;
            }
          }
    }
  }
  return success();
}

/// No gathered or reloaded value is used after its release or released
/// twice; every gather is released unless persistent. A reloaded value may
/// go unreleased (it lives until the step ends); the offload passes always
/// release it.
LogicalResult dc::verifyReleases(Block &body, StringRef who, bool reloads) {
  llvm::DenseMap<Operation *, size_t> index;
  for (auto [i, op] : llvm::enumerate(body.getOperations()))
    index[&op] = i;
  for (Operation &op : body) {
    auto wait = dyn_cast<WaitOp>(op);
    if (!wait)
      continue;
    Operation *start = wait.getFuture().getDefiningOp();
    auto gather = dyn_cast_or_null<GatherStartOp>(start);
    if (!gather && !(reloads && isa_and_nonnull<ReloadStartOp>(start)))
      continue;
    StringRef what = gather ? "gathered parameter" : "reloaded value";
    FailureOr<ReleaseOp> release =
        findRelease(wait.getResult(), index, what, who);
    if (failed(release))
      return failure();
    if (!*release) {
      if (gather && !gather.getPersistent())
        return gather.emitError()
               << prefix(who)
               << "gathers a parameter that is never released and not "
                  "persistent";
      continue;
    }
    if (failed(verifyUsedBeforeRelease(body, index, wait.getResult(), *release,
                                       what, who)))
      return failure();
  }
  return success();
}

/// True if `type` is a buffer: a memref, or a future of one.
static bool isBufferType(Type type) {
  if (auto future = dyn_cast<FutureType>(type))
    type = future.getValue();
  return isa<BaseMemRefType>(type);
}

/// True if `type` is a tensor of dynamic shape.
static bool isDynamicTensor(Type type) {
  auto tensor = dyn_cast<TensorType>(type);
  return tensor && !tensor.hasStaticShape();
}

LogicalResult dc::verifyTensorForm(func::FuncOp fn, StringRef who) {
  for (BlockArgument arg : fn.getArguments()) {
    if (isBufferType(arg.getType()))
      return emitError(arg.getLoc())
             << prefix(who) << "argument #" << arg.getArgNumber() << " of '"
             << fn.getSymName() << "' is a buffer (" << arg.getType()
             << "); dc plans steps in tensor form, before bufferization";
    if (isDynamicTensor(arg.getType()))
      return emitError(arg.getLoc())
             << prefix(who) << "argument #" << arg.getArgNumber() << " of '"
             << fn.getSymName() << "' has the dynamically shaped type "
             << arg.getType() << "; dc plans static shapes";
  }
  Block &body = fn.getBody().front();
  // The memory timeline sizes every value of the body.
  for (Operation &op : body)
    for (OpResult result : op.getResults())
      if (isDynamicTensor(result.getType()))
        return op.emitError()
               << prefix(who) << "result #" << result.getResultNumber()
               << " has the dynamically shaped type " << result.getType()
               << "; dc plans static shapes";
  WalkResult walk = fn.walk([&](Operation *op) {
    if (!isa<DCDialect>(op->getDialect()))
      return WalkResult::advance();
    for (Type type :
         llvm::concat<const Type>(llvm::to_vector(op->getOperandTypes()),
                                  llvm::to_vector(op->getResultTypes())))
      if (isBufferType(type)) {
        op->emitError() << prefix(who) << "'" << op->getName()
                        << "' works on a buffer (" << type
                        << "); dc plans steps in tensor form, before "
                           "bufferization";
        return WalkResult::interrupt();
      }
    // Every transfer and its wait and release is a step of the straight-line
    // schedule: the planners and the timeline index only the body's ops.
    if (isa<AsyncStartOpInterface, WaitOp, ReleaseOp, EndBackwardOp>(op) &&
        op->getBlock() != &body) {
      op->emitError() << prefix(who) << "'" << op->getName()
                      << "' is nested in '" << op->getParentOp()->getName()
                      << "'; dc schedules transfers only in the function "
                         "body itself";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

LogicalResult dc::checkPlanningPreconditions(func::FuncOp fn, StringRef who,
                                             bool reloads) {
  if (!fn.getBody().hasOneBlock())
    return fn.emitError() << prefix(who) << "'" << fn.getSymName() << "' has "
                          << fn.getBody().getBlocks().size()
                          << " blocks; dc plans straight-line steps (one "
                             "block)";
  Block &body = fn.getBody().front();
  return success(succeeded(verifyTensorForm(fn, who)) &&
                 succeeded(verifyFutures(body, who)) &&
                 succeeded(verifyReleases(body, who, reloads)));
}

LogicalResult dc::checkOptionRange(Operation *errorAt, StringRef pass,
                                   StringRef option, int64_t value, int64_t min,
                                   int64_t max) {
  if (value >= min && value <= max)
    return success();
  InFlightDiagnostic diag = errorAt->emitError()
                            << pass << ": option " << option << "=" << value
                            << " must be at least " << min;
  if (max != INT64_MAX)
    diag << " and at most " << max;
  return diag;
}

FailureOr<dc::PlanningSetup> dc::loadPlanningSetup(Operation *at,
                                                   StringRef profilePath) {
  PlanningSetup setup;
  ModuleTarget target = getModuleTarget(at);
  setup.target = std::move(target.description);
  setup.budgetBytes = target.memoryBudget;
  if (!profilePath.empty()) {
    llvm::Expected<Profile> profile = Profile::load(profilePath);
    if (!profile)
      return at->emitError() << "cannot load profile '" << profilePath
                             << "': " << llvm::toString(profile.takeError());
    setup.profile = std::move(*profile);
  }
  return setup;
}

/// Elements of a parameter argument as the step holds it: a shard's local
/// slice, a tensor, or either of them in host memory.
static int64_t paramElements(Type type) {
  if (auto host = dyn_cast<HostType>(type))
    return paramElements(host.getValue());
  if (auto shard = dyn_cast<ShardType>(type))
    return shard.getLocal();
  if (auto tensor = dyn_cast<RankedTensorType>(type);
      tensor && tensor.hasStaticShape())
    return tensor.getNumElements();
  return 0;
}

/// Bytes of one element of a parameter argument (of its tensor, sharded or
/// on the host).
static int64_t paramElementBytes(Type type) {
  if (auto host = dyn_cast<HostType>(type))
    return paramElementBytes(host.getValue());
  if (auto shard = dyn_cast<ShardType>(type))
    return paramElementBytes(shard.getLogical());
  if (auto tensor = dyn_cast<RankedTensorType>(type))
    return llvm::divideCeil(tensor.getElementTypeBitWidth(), 8);
  return 0;
}

int64_t dc::optimizerStepBytes(func::FuncOp fn, int64_t stateBytesPerElement) {
  int64_t bytes = 0;
  for (BlockArgument arg : fn.getArguments())
    if (fn.getArgAttrOfType<ParamAttr>(arg.getArgNumber(), kParamAttrName))
      bytes +=
          paramElements(arg.getType()) *
          (2 * stateBytesPerElement + 2 * paramElementBytes(arg.getType()));
  return bytes;
}

int64_t dc::trainerStateBytes(func::FuncOp fn, int64_t bytesPerElement) {
  int64_t elements = 0;
  for (BlockArgument arg : fn.getArguments())
    if (fn.getArgAttrOfType<ParamAttr>(arg.getArgNumber(), kParamAttrName))
      elements += paramElements(arg.getType());
  return elements * bytesPerElement;
}

LogicalResult dc::checkOptimizerStateBytes(Operation *errorAt,
                                           int64_t bytesPerElement,
                                           StringRef who) {
  if (bytesPerElement >= 0)
    return success();
  return errorAt->emitError()
         << who << ": optimizer-state-bytes must be >= 0, got "
         << bytesPerElement;
}

FailureOr<int64_t> dc::stepBudget(func::FuncOp fn, int64_t budget,
                                  int64_t bytesPerElement, StringRef who) {
  if (failed(checkOptimizerStateBytes(fn, bytesPerElement, who)))
    return failure();
  int64_t state = trainerStateBytes(fn, bytesPerElement);
  if (state >= budget)
    return fn.emitError() << who << ": the trainer's optimizer state ("
                          << formatBytes(state) << ", " << bytesPerElement
                          << " bytes per parameter element) leaves nothing "
                             "of the memory budget of "
                          << formatBytes(budget) << " to the step";
  return budget - state;
}

LogicalResult
dc::planEachStep(ModuleOp module, StringRef passName, StringRef profilePath,
                 int64_t optimizerStateBytes,
                 function_ref<LogicalResult(func::FuncOp, const PlanningSetup &,
                                            const CostModel &)>
                     plan,
                 bool replacesReloadReleases) {
  FailureOr<PlanningSetup> setup = loadPlanningSetup(module, profilePath);
  if (failed(setup))
    return failure();
  CostModel costModel = setup->makePlanningCostModel();
  // Every step is checked before any is planned: the planners and the
  // analyses under them assume what these checks establish.
  for (auto fn : module.getOps<func::FuncOp>())
    if (!fn.isExternal() && failed(checkPlanningPreconditions(
                                fn, passName, !replacesReloadReleases)))
      return failure();
  for (auto fn : module.getOps<func::FuncOp>()) {
    if (fn.isExternal())
      continue;
    PlanningSetup stepSetup = *setup;
    FailureOr<int64_t> budget =
        stepBudget(fn, setup->budgetBytes, optimizerStateBytes, passName);
    if (failed(budget))
      return failure();
    stepSetup.budgetBytes = *budget;
    if (failed(plan(fn, stepSetup, costModel))) {
      // The planner's error names the step's share: say where the rest went.
      if (*budget != setup->budgetBytes)
        fn.emitError() << passName << ": the step's share of the memory "
                       << "budget of " << formatBytes(setup->budgetBytes)
                       << " was " << formatBytes(*budget)
                       << " after the trainer's optimizer state ("
                       << formatBytes(setup->budgetBytes - *budget) << ", "
                       << optimizerStateBytes
                       << " bytes per parameter element)";
      return failure();
    }
  }
  return success();
}
