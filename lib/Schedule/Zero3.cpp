//===- Zero3.cpp - shard parameters, gather per interval, reduce gradients ===//
//
// Turns a replicated training step into a ZeRO-3 one. Gathers are placed
// just in time (right before each interval of uses); dc-prefetch moves them.
//
//===----------------------------------------------------------------------===//
#include "dc/Analysis/BufferAliasing.h"
#include "dc/Analysis/StepSignature.h"
#include "dc/Dialect/DC/IR/TypeSizes.h"
#include "dc/Schedule/Passes.h"
#include "dc/Schedule/Planning.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

namespace dc {
#define GEN_PASS_DEF_DCZERO3
#include "dc/Schedule/Passes.h.inc"
} // namespace dc

using namespace mlir;
using namespace dc;

namespace {

/// The ops the loss depends on (top-level ops of the body, including values
/// captured by nested regions): a parameter use among them is a forward use.
llvm::DenseSet<Operation *> collectLossDependencies(func::FuncOp fn) {
  llvm::DenseSet<Operation *> deps;
  auto returnOp = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
  SmallVector<Operation *> worklist;
  for (unsigned i = 0, e = fn.getNumResults(); i < e; ++i)
    if (fn.getResultAttr(i, kLossAttrName))
      if (Operation *def = returnOp.getOperand(i).getDefiningOp())
        worklist.push_back(def);
  Block &body = fn.getBody().front();
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    if (!deps.insert(op).second)
      continue;
    op->walk([&](Operation *nested) {
      for (Value operand : nested->getOperands()) {
        Operation *def = operand.getDefiningOp();
        if (!def || op->isAncestor(def))
          continue;
        if (Operation *top = body.findAncestorOpInBlock(*def))
          worklist.push_back(top);
      }
    });
  }
  return deps;
}

/// One interval of uses of a parameter: the uses (operands) and the first and
/// last top-level ops holding them.
struct UseInterval {
  SmallVector<OpOperand *> uses;
  Operation *first = nullptr, *last = nullptr;
};

/// One all-reduce of a replicated gradient: over `axis`, by `kind`.
struct AxisReduction {
  int64_t axis;
  shard::ReductionKind kind;
};

class Zero3Sharder {
public:
  /// `axes`: the grid axes the parameters are split over (one, or all);
  /// `replicaAxis`: the axis the shards repeat along (hierarchical
  /// sharding), or -1.
  Zero3Sharder(func::FuncOp fn, shard::GridOp grid, ArrayRef<int64_t> axes,
               int64_t replicaAxis, const DCZero3Options &options)
      : fn(fn), grid(grid), axes(axes), replicaAxis(replicaAxis),
        options(options) {
    for (int64_t axis : axes)
      worldSize *= grid.getShape()[axis];
  }

  LogicalResult run();

private:
  LogicalResult checkSupported();
  LogicalResult collectIntervals(BlockArgument param, ArrayRef<Value> values,
                                 SmallVectorImpl<UseInterval> &intervals);
  LogicalResult shardParam(BlockArgument param);
  void planReductions();
  Value scaleGradient(OpBuilder &builder, Location loc, Value grad,
                      double factor);
  /// The grid axis a block of experts was chosen by (dc.expert_axis).
  std::optional<int64_t> getExpertAxis(BlockArgument param) {
    auto attr = fn.getArgAttrOfType<IntegerAttr>(param.getArgNumber(),
                                                 kExpertAxisAttrName);
    return attr ? std::optional<int64_t>(attr.getInt()) : std::nullopt;
  }
  /// What an expert block's gradient is scaled by before its reduction: it
  /// sums the rows of every rank of its axis, whose mean `avg` takes.
  double expertScale(int64_t expertAxis) {
    return options.reduceKind == shard::ReductionKind::Average
               ? 1.0 / static_cast<double>(grid.getShape()[expertAxis])
               : 1.0;
  }
  LogicalResult reduceGradients();
  size_t indexOf(Operation *op) const { return opIndex.lookup(op); }

  func::FuncOp fn;
  shard::GridOp grid;
  SmallVector<int64_t> axes;
  int64_t replicaAxis;
  DCZero3Options options;
  /// Ranks a shard is split over.
  int64_t worldSize = 1;
  /// How sharded gradients are reduce-scattered: `kind`, after a scale by
  /// `gradScale` (1: none).
  shard::ReductionKind shardedKind;
  double gradScale = 1;
  /// The all-reduces of a replicated gradient, in order; `firstAtReturn`:
  /// the first waits for the return too (hierarchical's across-nodes one).
  SmallVector<AxisReduction> replicatedReductions;
  bool firstAtReturn = false;
  llvm::DenseMap<Operation *, size_t> opIndex;
  llvm::DenseSet<Operation *> lossDeps;
  /// Parameter id -> argument, and which of them were sharded.
  llvm::MapVector<int64_t, BlockArgument> paramsById;
  llvm::DenseMap<int64_t, ShardType> shardedParams;
};

LogicalResult Zero3Sharder::checkSupported() {
  if (!llvm::hasSingleElement(fn.getBody()))
    return fn.emitError("dc-zero3 needs a step function with a single block; ")
           << "@" << fn.getSymName() << " has "
           << fn.getBody().getBlocks().size();
  auto isStatic = [](Type type) {
    auto shaped = dyn_cast<ShapedType>(type);
    return !shaped || shaped.hasStaticShape();
  };
  for (auto [i, type] : llvm::enumerate(fn.getArgumentTypes()))
    if (!isStatic(type))
      return emitError(fn.getArgument(i).getLoc())
             << "argument #" << i << " has dynamic shape " << type
             << "; dc needs static shapes";
  for (auto [i, type] : llvm::enumerate(fn.getResultTypes()))
    if (!isStatic(type))
      return fn.emitError() << "result #" << i << " has dynamic shape " << type
                            << "; dc needs static shapes";
  WalkResult walk = fn.walk([&](Operation *op) {
    for (Type type : op->getResultTypes())
      if (!isStatic(type)) {
        op->emitError() << "result of dynamic shape " << type
                        << "; dc needs static shapes";
        return WalkResult::interrupt();
      }
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

LogicalResult
Zero3Sharder::collectIntervals(BlockArgument param, ArrayRef<Value> values,
                               SmallVectorImpl<UseInterval> &intervals) {
  Block &body = fn.getBody().front();
  UseInterval forward, backward;
  for (Value value : values) {
    for (OpOperand &use : value.getUses()) {
      Operation *owner = use.getOwner();
      if (isa<func::ReturnOp>(owner))
        return owner->emitError()
               << "returns parameter #" << param.getArgNumber()
               << " itself; dc-zero3 cannot return a sharded parameter";
      Operation *top = body.findAncestorOpInBlock(*owner);
      for (Operation *op = owner->getParentOp(); op && op != fn;
           op = op->getParentOp())
        if (op->hasTrait<OpTrait::IsIsolatedFromAbove>())
          return owner->emitError()
                 << "uses parameter #" << param.getArgNumber()
                 << " inside an isolated region (" << op->getName()
                 << "); dc-zero3 cannot gather it there";
      UseInterval &interval = lossDeps.contains(top) ? forward : backward;
      interval.uses.push_back(&use);
      if (!interval.first || indexOf(top) < indexOf(interval.first))
        interval.first = top;
      if (!interval.last || indexOf(top) > indexOf(interval.last))
        interval.last = top;
    }
  }
  // Interleaved forward and backward uses cannot be split: one interval.
  if (forward.first && backward.first &&
      indexOf(forward.last) >= indexOf(backward.first)) {
    forward.uses.append(backward.uses);
    if (indexOf(backward.first) < indexOf(forward.first))
      forward.first = backward.first;
    if (indexOf(backward.last) > indexOf(forward.last))
      forward.last = backward.last;
    backward = UseInterval();
  }
  for (UseInterval *interval : {&forward, &backward})
    if (interval->first)
      intervals.push_back(std::move(*interval));
  return success();
}

LogicalResult Zero3Sharder::shardParam(BlockArgument param) {
  auto logical = dyn_cast<RankedTensorType>(param.getType());
  if (!logical)
    return emitError(param.getLoc())
           << "parameter #" << param.getArgNumber()
           << " must be a ranked tensor, got " << param.getType();
  int64_t bytes = getTypeBytes(logical);
  // Small parameters stay replicated (their gradients are all-reduced), and
  // so does an empty one: there is nothing to shard.
  if (bytes < options.replicateBelow || logical.getNumElements() == 0)
    return success();

  // A parameter only ever cast to one narrower float type is gathered in it.
  SmallVector<Value> values{param};
  SmallVector<Operation *> casts;
  Type gatherType = logical;
  if (options.castGather && !param.use_empty() &&
      llvm::all_of(param.getUsers(), [&](Operation *user) {
        auto truncate = dyn_cast<arith::TruncFOp>(user);
        return truncate && truncate.getType() ==
                               param.getUsers().begin()->getResult(0).getType();
      })) {
    values.clear();
    for (Operation *user : param.getUsers()) {
      casts.push_back(user);
      values.push_back(user->getResult(0));
    }
    gatherType = casts.front()->getResult(0).getType();
  }

  // A block of experts (dc-expert-parallel) is sharded over the other axes
  // only: the rank's coordinate on its own axis chose the block. dc-run
  // finds a shard at the block's offset plus its index times the local
  // size, so a block that does not divide evenly stays replicated.
  SmallVector<int64_t> paramAxes(axes);
  int64_t ranks = worldSize;
  if (std::optional<int64_t> expertAxis = getExpertAxis(param)) {
    llvm::erase(paramAxes, *expertAxis);
    ranks = 1;
    for (int64_t axis : paramAxes)
      ranks *= grid.getShape()[axis];
    if (ranks == 1 || logical.getNumElements() % ranks != 0)
      return success();
  }

  SmallVector<UseInterval> intervals;
  if (failed(collectIntervals(param, values, intervals)))
    return failure();

  auto shardType = ShardType::get(
      fn.getContext(), logical, FlatSymbolRefAttr::get(grid.getSymNameAttr()),
      paramAxes, shardLocalSize(logical.getNumElements(), ranks));
  param.setType(shardType);
  auto futureType = FutureType::get(gatherType);
  for (UseInterval &interval : intervals) {
    OpBuilder builder(interval.first);
    Location loc = interval.first->getLoc();
    auto start = GatherStartOp::create(builder, loc, TypeRange{futureType},
                                       ValueRange{param}, /*persistent=*/false);
    auto wait = WaitOp::create(builder, loc, start.getFutures()[0]);
    for (OpOperand *use : interval.uses)
      use->set(wait.getResult());
    // Released after the last use of the gathered buffer, views of it
    // included (a reshape in forward read again in backward keeps it); a
    // returned view keeps it for the caller: no release.
    Operation *last =
        getLastBufferUse(fn.getBody().front(), wait.getResult(), opIndex);
    if (!last)
      continue;
    builder.setInsertionPointAfter(last);
    ReleaseOp::create(builder, last->getLoc(), wait.getResult());
  }
  for (Operation *castOp : casts)
    castOp->erase();
  shardedParams[cast<ParamAttr>(
                    fn.getArgAttr(param.getArgNumber(), kParamAttrName))
                    .getId()] = shardType;
  return success();
}

void Zero3Sharder::planReductions() {
  shard::ReductionKind kind = options.reduceKind;
  shardedKind = kind;
  ArrayRef<int64_t> shape = grid.getShape();
  if (axes.size() == 1) {
    if (worldSize > 1)
      replicatedReductions.push_back({axes.front(), kind});
    if (replicaAxis >= 0) {
      firstAtReturn = replicatedReductions.empty();
      replicatedReductions.push_back({replicaAxis, kind});
    }
    return;
  }
  // Every axis: gradients are partial sums over the sequence axes (the
  // global normalisation is in the step) and per-rank means over the
  // others, which `kind` reduces.
  llvm::SmallDenseSet<int64_t> sequenceAxes;
  for (unsigned i = 0, e = fn.getNumArguments(); i < e; ++i)
    if (auto attr = fn.getArgAttrOfType<IntegerAttr>(i, kSeqAxisAttrName))
      sequenceAxes.insert(attr.getInt());
  int64_t sequenceRanks = 1, dataRanks = 1;
  for (int64_t axis : axes) {
    bool sequence = sequenceAxes.contains(axis);
    (sequence ? sequenceRanks : dataRanks) *= shape[axis];
    if (shape[axis] > 1)
      replicatedReductions.push_back(
          {axis, sequence ? shard::ReductionKind::Sum : kind});
  }
  // One reduce-scatter over all ranks: a mean over the data ranks of sums
  // over the sequence ranks is a sum of gradients scaled by 1/data ranks.
  if (kind == shard::ReductionKind::Average && sequenceRanks > 1) {
    shardedKind = shard::ReductionKind::Sum;
    gradScale = 1.0 / static_cast<double>(dataRanks);
  }
}

/// `grad * factor`, elementwise in its own type, written in place (its
/// only remaining reader is the reduce-scatter).
Value Zero3Sharder::scaleGradient(OpBuilder &builder, Location loc, Value grad,
                                  double factor) {
  auto type = cast<RankedTensorType>(grad.getType());
  int64_t rank = type.getRank();
  SmallVector<AffineMap> maps(1, builder.getMultiDimIdentityMap(rank));
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      builder, loc, TypeRange{type}, ValueRange{}, ValueRange{grad}, maps,
      iterators, [&](OpBuilder &body, Location at, ValueRange args) {
        Type element = type.getElementType();
        Value scale = arith::ConstantOp::create(
            body, at, body.getFloatAttr(element, factor));
        Value scaled = arith::MulFOp::create(body, at, args[0], scale);
        linalg::YieldOp::create(body, at, scaled);
      });
  return generic.getResult(0);
}

LogicalResult Zero3Sharder::reduceGradients() {
  Block &body = fn.getBody().front();
  auto returnOp = cast<func::ReturnOp>(body.getTerminator());
  shard::ReductionKind kind = options.reduceKind;

  // Gradients in the order they become ready (their defining op's position).
  struct Grad {
    unsigned result;
    Value value;
    size_t readyAt;
    /// A block of experts' gradient: the axis that chose the block.
    std::optional<int64_t> expertAxis;
  };
  SmallVector<Grad> sharded, replicated;
  for (unsigned i = 0, e = fn.getNumResults(); i < e; ++i) {
    auto attr = fn.getResultAttrOfType<GradAttr>(i, kGradAttrName);
    if (!attr)
      continue;
    auto param = paramsById.find(attr.getParam());
    if (param == paramsById.end())
      return returnOp.emitError() << "result #" << i << " is the gradient of "
                                  << "parameter id " << attr.getParam()
                                  << ", which no argument declares";
    Value value = returnOp.getOperand(i);
    Operation *def = value.getDefiningOp();
    if (!def)
      return returnOp.emitError()
             << "gradient result #" << i
             << " is a function argument; dc-zero3 needs it computed";
    auto shard = shardedParams.lookup(attr.getParam());
    Type paramType = shard ? Type(shard.getLogical()) : param->second.getType();
    if (value.getType() != paramType)
      return returnOp.emitError()
             << "gradient result #" << i << " has type " << value.getType()
             << " but parameter id " << attr.getParam() << " is " << paramType;
    (shard ? sharded : replicated)
        .push_back({i, value, indexOf(body.findAncestorOpInBlock(*def)),
                    getExpertAxis(param->second)});
  }
  auto byReadiness = [](const Grad &a, const Grad &b) {
    return std::tie(a.readyAt, a.result) < std::tie(b.readyAt, b.result);
  };
  llvm::stable_sort(sharded, byReadiness);
  llvm::stable_sort(replicated, byReadiness);

  // Reduce-scatter in buckets, each started right after its last gradient.
  llvm::DenseMap<unsigned, Value> futureOfResult;
  SmallVector<Grad> bucket, previousBucket;
  int64_t bucketBytes = 0;
  // Hierarchical: result -> future of its shard all-reduced across nodes.
  llvm::DenseMap<unsigned, Value> acrossNodes;
  auto allReduceAcrossNodes = [&](OpBuilder &builder, ArrayRef<Grad> reduced) {
    for (const Grad &grad : reduced) {
      Location loc = grad.value.getLoc();
      Value shard =
          WaitOp::create(builder, loc, futureOfResult.lookup(grad.result))
              .getResult();
      futureOfResult.erase(grad.result);
      acrossNodes[grad.result] =
          AllReduceStartOp::create(builder, loc, kind, shard, grid.getSymName(),
                                   replicaAxis)
              .getFuture();
    }
  };
  auto flush = [&]() {
    if (bucket.empty())
      return;
    Operation *readyOp =
        body.findAncestorOpInBlock(*bucket.back().value.getDefiningOp());
    OpBuilder builder = OpBuilder::atBlockEnd(&body);
    builder.setInsertionPointAfter(readyOp);
    SmallVector<Type> futureTypes;
    SmallVector<Value> grads;
    for (const Grad &grad : bucket) {
      auto attr = fn.getResultAttrOfType<GradAttr>(grad.result, kGradAttrName);
      futureTypes.push_back(
          FutureType::get(shardedParams.lookup(attr.getParam())));
      double scale =
          grad.expertAxis ? expertScale(*grad.expertAxis) : gradScale;
      grads.push_back(scale == 1 ? grad.value
                                 : scaleGradient(builder, grad.value.getLoc(),
                                                 grad.value, scale));
    }
    shard::ReductionKind bucketKind =
        bucket.front().expertAxis ? kind : shardedKind;
    auto start = ReduceScatterStartOp::create(builder, readyOp->getLoc(),
                                              futureTypes, bucketKind, grads);
    for (auto [grad, future] : llvm::zip(bucket, start.getFutures()))
      futureOfResult[grad.result] = future;
    // Hierarchical: the previous bucket has had this bucket's backward to
    // reduce inside the node; wait for it and start its all-reduce across
    // nodes behind this bucket's reduce-scatter.
    if (replicaAxis >= 0) {
      builder.setInsertionPointAfter(start);
      allReduceAcrossNodes(builder, previousBucket);
      previousBucket.assign(bucket.begin(), bucket.end());
    }
    bucket.clear();
    bucketBytes = 0;
  };
  // A bucket is one reduce-scatter over one group: expert blocks' shards
  // (over the axes other than their own) are bucketed apart, by axis.
  auto groupOf = [](const Grad &grad) { return grad.expertAxis; };
  SmallVector<std::optional<int64_t>> groups;
  for (const Grad &grad : sharded)
    if (!llvm::is_contained(groups, groupOf(grad)))
      groups.push_back(groupOf(grad));
  for (std::optional<int64_t> group : groups) {
    for (const Grad &grad : sharded) {
      if (groupOf(grad) != group)
        continue;
      int64_t bytes = getTypeBytes(grad.value.getType());
      if (!bucket.empty() && bucketBytes + bytes > options.bucketBytes)
        flush();
      bucket.push_back(grad);
      bucketBytes += bytes;
    }
    flush();
  }
  OpBuilder builder(returnOp);
  if (replicaAxis >= 0)
    allReduceAcrossNodes(builder, previousBucket);

  // Replicated gradients are all-reduced, each as soon as it is ready;
  // further axes (across nodes, or the other axes of the grid) at the end
  // (small tensors).
  llvm::DenseMap<unsigned, Value> allReduced;
  for (const Grad &grad : replicated) {
    Value future;
    SmallVector<AxisReduction> reductions(replicatedReductions);
    Value value = grad.value;
    if (grad.expertAxis) {
      llvm::erase_if(reductions, [&](const AxisReduction &reduction) {
        return reduction.axis == *grad.expertAxis;
      });
      if (double scale = expertScale(*grad.expertAxis); scale != 1) {
        Operation *readyOp = body.findAncestorOpInBlock(*value.getDefiningOp());
        OpBuilder after(readyOp->getContext());
        after.setInsertionPointAfter(readyOp);
        value = scaleGradient(after, value.getLoc(), value, scale);
        if (reductions.empty())
          returnOp.setOperand(grad.result, value);
      }
    }
    for (auto [i, reduction] : llvm::enumerate(reductions)) {
      if (i == 0 && !firstAtReturn) {
        Operation *readyOp = body.findAncestorOpInBlock(*value.getDefiningOp());
        OpBuilder after(readyOp->getContext());
        after.setInsertionPointAfter(readyOp);
        future =
            AllReduceStartOp::create(after, readyOp->getLoc(), reduction.kind,
                                     value, grid.getSymName(), reduction.axis)
                .getFuture();
        continue;
      }
      Value partial =
          future
              ? WaitOp::create(builder, returnOp.getLoc(), future).getResult()
              : value;
      future =
          AllReduceStartOp::create(builder, returnOp.getLoc(), reduction.kind,
                                   partial, grid.getSymName(), reduction.axis)
              .getFuture();
    }
    if (future)
      allReduced[grad.result] = future;
  }
  for (auto [result, future] : acrossNodes)
    allReduced[result] = future;

  // One flush before the return waits for every reduction.
  SmallVector<unsigned> resultOrder;
  SmallVector<Value> futures;
  for (unsigned i = 0, e = fn.getNumResults(); i < e; ++i)
    if (Value future = futureOfResult.lookup(i)) {
      resultOrder.push_back(i);
      futures.push_back(future);
    }
  if (!futures.empty()) {
    auto end = EndBackwardOp::create(builder, returnOp.getLoc(), futures);
    for (auto [i, shard] : llvm::zip(resultOrder, end.getShards()))
      returnOp.setOperand(i, shard);
  }
  for (unsigned i = 0, e = fn.getNumResults(); i < e; ++i)
    if (Value future = allReduced.lookup(i))
      returnOp.setOperand(
          i, WaitOp::create(builder, returnOp.getLoc(), future).getResult());
  return success();
}

LogicalResult Zero3Sharder::run() {
  if (failed(checkSupported()))
    return failure();
  // One rank: its parameters are whole already and its gradients reduced.
  // Gathering and reduce-scattering would be device copies of every
  // parameter and gradient; the step uses them in place instead.
  if (!options.shardOneRank &&
      llvm::all_of(grid.getShape(), [](int64_t size) { return size == 1; }))
    return success();
  Block &body = fn.getBody().front();
  for (auto [i, op] : llvm::enumerate(body.getOperations()))
    opIndex[&op] = i;
  lossDeps = collectLossDependencies(fn);

  for (BlockArgument arg : fn.getArguments()) {
    auto param =
        fn.getArgAttrOfType<ParamAttr>(arg.getArgNumber(), kParamAttrName);
    if (!param)
      continue;
    auto [it, inserted] = paramsById.insert({param.getId(), arg});
    if (!inserted)
      return emitError(arg.getLoc())
             << "parameter id " << param.getId() << " is used by arguments #"
             << it->second.getArgNumber() << " and #" << arg.getArgNumber();
  }
  planReductions();
  for (auto &entry : paramsById)
    if (failed(shardParam(entry.second)))
      return failure();
  if (failed(reduceGradients()))
    return failure();
  fn.setType(FunctionType::get(fn.getContext(), body.getArgumentTypes(),
                               body.getTerminator()->getOperandTypes()));
  return success();
}

struct Zero3Pass : public dc::impl::DCZero3Base<Zero3Pass> {
  using DCZero3Base::DCZero3Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(checkOptionRange(module, getArgument(), "world-size", worldSize,
                                0, kMaxWorldSize)) ||
        failed(checkOptionRange(module, getArgument(), "grid-axis", gridAxis,
                                0)) ||
        failed(checkOptionRange(module, getArgument(), "bucket-bytes",
                                bucketBytes, 1)) ||
        failed(checkOptionRange(module, getArgument(), "replicate-below",
                                replicateBelow, 0)) ||
        failed(checkOptionRange(module, getArgument(), "hierarchical",
                                hierarchical, 0, kMaxWorldSize)))
      return signalPassFailure();
    SmallVector<func::FuncOp> steps;
    for (auto fn : module.getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      if (llvm::any_of(llvm::seq(fn.getNumArguments()), [&](unsigned i) {
            return fn.getArgAttr(i, kParamAttrName) != nullptr;
          })) {
        steps.push_back(fn);
        continue;
      }
      // Not sharded, but its signature must still hold what the runtime
      // relies on (a gradient of no parameter is refused here, not passed
      // on to dc-verify-schedule). Steps are checked as they are sharded.
      if (failed(verifyStepSignature(fn)))
        return signalPassFailure();
    }
    if (steps.empty())
      return;
    // Expert parallelism (dc-expert-parallel) gives every rank its own
    // tokens: the dense gradients are reduced over the whole grid, and the
    // expert blocks over the axes other than theirs.
    for (func::FuncOp fn : steps)
      for (unsigned i = 0, e = fn.getNumArguments(); i < e; ++i) {
        if (!fn.getArgAttr(i, kExpertAxisAttrName))
          continue;
        auto grid = module.lookupSymbol<shard::GridOp>(gridName);
        if (hierarchical > 0 ||
            (grid && grid.getShape().size() > 1 && !shardAllAxes)) {
          emitError(fn.getArgument(i).getLoc())
              << "dc-zero3: an expert-parallel step (dc-expert-parallel) is "
                 "sharded over every axis of its grid (shard-all-axes), not "
              << (hierarchical > 0 ? "hierarchically" : "over one axis");
          return signalPassFailure();
        }
        break;
      }
    if (hierarchical > 0 && shardAllAxes) {
      getOperation().emitError()
          << "dc-zero3: hierarchical and shard-all-axes are two layouts; "
             "choose one";
      return signalPassFailure();
    }
    // The node grid's axes would be the sequence-parallel grid's: the two
    // layouts do not compose yet.
    if (hierarchical > 0)
      for (func::FuncOp fn : steps) {
        WalkResult walk = fn.walk([](Operation *op) {
          if (!isa<AllToAllOp, AllToAllStartOp>(op))
            return WalkResult::advance();
          op->emitError() << "dc-zero3: hierarchical sharding of a "
                             "sequence-parallel step (dc-ulysses) is not "
                             "supported";
          return WalkResult::interrupt();
        });
        if (walk.wasInterrupted())
          return signalPassFailure();
      }

    FailureOr<shard::GridOp> grid = getOrCreateGrid(module);
    if (failed(grid))
      return signalPassFailure();
    DCZero3Options options;
    options.worldSize = worldSize;
    options.gridName = gridName;
    options.gridAxis = gridAxis;
    options.bucketBytes = bucketBytes;
    options.replicateBelow = replicateBelow;
    options.reduceKind = reduceKind;
    options.castGather = castGather;
    options.hierarchical = hierarchical;
    options.shardOneRank = shardOneRank;
    options.shardAllAxes = shardAllAxes;
    SmallVector<int64_t> shardAxes{hierarchical > 0 ? 1 : int64_t(gridAxis)};
    if (shardAllAxes)
      shardAxes =
          llvm::to_vector(llvm::seq<int64_t>(0, grid->getShape().size()));
    int64_t replicaAxis = hierarchical > 0 ? 0 : -1;
    for (func::FuncOp fn : steps)
      if (failed(
              Zero3Sharder(fn, *grid, shardAxes, replicaAxis, options).run()))
        return signalPassFailure();
  }

  /// A missing grid `grid` of `shape` (made from `world-size`), or an
  /// error when no world size was given.
  FailureOr<shard::GridOp> createGrid(ModuleOp module,
                                      ArrayRef<int64_t> shape) {
    if (worldSize < 1)
      return module.emitError()
             << "dc-zero3: the module has no shard.grid @" << gridName
             << "; pass world-size=N to create one";
    OpBuilder builder = OpBuilder::atBlockBegin(module.getBody());
    return shard::GridOp::create(builder, module.getLoc(), gridName, shape);
  }

  /// The grid named by `grid`, created with `world-size` ranks if missing.
  FailureOr<shard::GridOp> getOrCreateGrid(ModuleOp module) {
    if (hierarchical > 0)
      return getOrCreateNodeGrid(module);
    if (shardAllAxes)
      return getOrCreateWholeGrid(module);
    auto grid = module.lookupSymbol<shard::GridOp>(gridName);
    if (!grid)
      return createGrid(module, {worldSize});
    ArrayRef<int64_t> shape = grid.getShape();
    if (gridAxis < 0 || gridAxis >= static_cast<int64_t>(shape.size()))
      return grid.emitError() << "dc-zero3: grid-axis " << int64_t(gridAxis)
                              << " does not exist on this grid";
    if (ShapedType::isDynamic(shape[gridAxis]))
      return grid.emitError() << "dc-zero3: grid axis " << int64_t(gridAxis)
                              << " is dynamic; dc needs the world size";
    if (worldSize > 0 && shape[gridAxis] != worldSize)
      return grid.emitError() << "dc-zero3: world-size=" << int64_t(worldSize)
                              << " but this grid's axis " << int64_t(gridAxis)
                              << " has " << shape[gridAxis] << " ranks";
    return grid;
  }

  /// shard-all-axes: the grid named by `grid` (every axis static), created
  /// with `world-size` ranks on one axis if missing.
  FailureOr<shard::GridOp> getOrCreateWholeGrid(ModuleOp module) {
    auto grid = module.lookupSymbol<shard::GridOp>(gridName);
    if (!grid)
      return createGrid(module, {worldSize});
    int64_t ranks = 1;
    for (int64_t size : grid.getShape()) {
      if (ShapedType::isDynamic(size))
        return grid.emitError() << "dc-zero3: shard-all-axes needs a static "
                                   "grid; dc needs the world size";
      ranks *= size;
    }
    if (worldSize > 0 && ranks != worldSize)
      return grid.emitError() << "dc-zero3: world-size=" << int64_t(worldSize)
                              << " but this grid has " << ranks << " ranks";
    return grid;
  }

  /// hierarchical=G: the nodes x G grid named by `grid`, created from
  /// `world-size` if missing.
  FailureOr<shard::GridOp> getOrCreateNodeGrid(ModuleOp module) {
    int64_t perNode = hierarchical;
    auto grid = module.lookupSymbol<shard::GridOp>(gridName);
    if (!grid) {
      if (worldSize % perNode != 0)
        return module.emitError()
               << "dc-zero3: hierarchical=" << perNode
               << " needs world-size to be a multiple of it, got "
               << int64_t(worldSize);
      return createGrid(module, {worldSize / perNode, perNode});
    }
    ArrayRef<int64_t> shape = grid.getShape();
    if (shape.size() != 2 || shape[1] != perNode ||
        ShapedType::isDynamic(shape[0]))
      return grid.emitError()
             << "dc-zero3: hierarchical=" << perNode
             << " needs a static nodes x " << perNode << " grid";
    if (worldSize > 0 && shape[0] * shape[1] != worldSize)
      return grid.emitError()
             << "dc-zero3: world-size=" << int64_t(worldSize)
             << " but this grid has " << shape[0] * shape[1] << " ranks";
    return grid;
  }
};

} // namespace
