//===- OptimizerInStep.cpp - AdamW as ops of the step ---------------------===//
//
// The trainer's update becomes part of the compiled step: the scheduler,
// the memory timeline and the cost model see it, a captured step replays
// it, and later passes may move the state (offload) like any other value.
// The arithmetic is the runtime's (dcrt_adamw, dcrt_grad_squares), which
// on the host backend is dc-run's trainer's, bit for bit.
//
//===----------------------------------------------------------------------===//
#include "dc/Analysis/Accumulators.h"
#include "dc/Analysis/OptimizerState.h"
#include "dc/Dialect/DC/IR/DCDialect.h"
#include "dc/Schedule/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

namespace dc {
#define GEN_PASS_DEF_DCOPTIMIZERINSTEP
#include "dc/Schedule/Passes.h.inc"
} // namespace dc

using namespace mlir;
using namespace dc;

namespace {

/// `type` (a shard or a tensor) with element type `element`.
Type withElement(Type type, Type element) {
  if (auto shard = dyn_cast<ShardType>(type))
    return ShardType::get(type.getContext(), shard.getLogical().clone(element),
                          shard.getGrid(), shard.getAxes(), shard.getLocal());
  return cast<RankedTensorType>(type).clone(element);
}

Type elementOf(Type type) {
  if (auto shard = dyn_cast<ShardType>(type))
    return shard.getElementType();
  return cast<ShapedType>(type).getElementType();
}

/// One parameter the step updates.
struct Updated {
  int64_t id = 0;
  std::string name;
  BlockArgument param;
  Value grad;
  /// The grid axis whose ranks hold different experts of a block of
  /// experts (dc.expert_axis), if it is one.
  std::optional<int64_t> expertAxis;
};

/// The gradient each parameter id has as a result of `fn`, and where.
llvm::MapVector<int64_t, unsigned> gradResults(func::FuncOp fn) {
  llvm::MapVector<int64_t, unsigned> results;
  for (unsigned i = 0, e = fn.getNumResults(); i < e; ++i)
    if (auto grad = fn.getResultAttrOfType<GradAttr>(i, kGradAttrName))
      results[grad.getParam()] = i;
  return results;
}

/// The name of parameter `id` of `fn` (its dc.param name, else paramN).
std::string paramName(func::FuncOp fn, int64_t id) {
  for (unsigned i = 0, e = fn.getNumArguments(); i < e; ++i)
    if (auto param = fn.getArgAttrOfType<ParamAttr>(i, kParamAttrName);
        param && param.getId() == id)
      return param.getName() ? param.getName().str()
                             : "param" + std::to_string(id);
  return "param" + std::to_string(id);
}

/// Whether `fn` has an accumulator argument for parameter `id`
/// (dc-accumulate-gradients sums that gradient before its reduction).
bool hasAccumulatorArgument(func::FuncOp fn, int64_t id) {
  return llvm::any_of(llvm::seq(fn.getNumArguments()), [&](unsigned i) {
    std::optional<int64_t> accumulated = getAccumulatedParam(fn, i);
    return accumulated && *accumulated == id;
  });
}

/// Appends an fp32 accumulator of `grad`'s shape and sharding for
/// parameter `id` (dc.accumulator), named after it.
BlockArgument addShardAccumulator(func::FuncOp fn, int64_t id, Type grad) {
  return addAccumulatorArgument(
      fn, id, paramName(fn, id),
      withElement(grad, Float32Type::get(fn.getContext())));
}

/// Replaces the gradient results of `fn` (parameter id -> result) by their
/// sums with new accumulator arguments (`dc.grad_accumulate`), returned
/// with `dc.accumulator` (into the accumulator's buffer). `keep`: also
/// keep each gradient result, now the sum (the final form's optimizer
/// reads it; the results go when the optimizer replaces them). Returns the
/// sums by parameter id.
llvm::DenseMap<int64_t, Value>
sumOverMicroBatches(func::FuncOp fn,
                    const llvm::MapVector<int64_t, unsigned> &grads,
                    bool keep) {
  MLIRContext *context = fn.getContext();
  auto terminator = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
  OpBuilder builder(terminator);
  llvm::DenseMap<int64_t, Value> sums;
  SmallVector<std::pair<int64_t, Value>> updated;
  for (auto [id, result] : grads) {
    Value grad = terminator.getOperand(result);
    BlockArgument accumulator = addShardAccumulator(fn, id, grad.getType());
    Value sum = GradAccumulateOp::create(builder, terminator.getLoc(), grad,
                                         accumulator);
    sums[id] = sum;
    updated.push_back({id, sum});
  }
  SmallVector<Value> operands;
  SmallVector<DictionaryAttr> attrs;
  llvm::DenseSet<unsigned> replaced;
  for (auto [id, result] : grads)
    replaced.insert(result);
  for (unsigned i = 0, e = fn.getNumResults(); i < e; ++i) {
    if (replaced.contains(i) && !keep)
      continue;
    operands.push_back(terminator.getOperand(i));
    attrs.push_back(fn.getResultAttrDict(i));
  }
  for (auto [id, sum] : updated) {
    operands.push_back(sum);
    NamedAttrList attr;
    attr.set(kAccumulatorAttrName,
             IntegerAttr::get(IntegerType::get(context, 64), id));
    attrs.push_back(attr.getDictionary(context));
  }
  func::ReturnOp::create(builder, terminator.getLoc(), operands);
  terminator.erase();
  fn.setType(FunctionType::get(context, fn.getArgumentTypes(),
                               ValueRange(operands).getTypes()));
  fn.setAllResultAttrs(attrs);
  return sums;
}

struct OptimizerInStepPass
    : public dc::impl::DCOptimizerInStepBase<OptimizerInStepPass> {
  using DCOptimizerInStepBase::DCOptimizerInStepBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto parseDtype = [&](StringRef option, StringRef value) -> Type {
      Builder b(&getContext());
      if (value == "f32")
        return b.getF32Type();
      if (value == "bf16")
        return b.getBF16Type();
      module.emitError() << "dc-optimizer-in-step: " << option
                         << " must be f32 or bf16, got '" << value << "'";
      return {};
    };
    masterType = parseDtype("master-dtype", masterDtype);
    momentType = parseDtype("moment-dtype", momentDtype);
    if (!masterType || !momentType)
      return signalPassFailure();
    SmallVector<func::FuncOp> steps;
    if (microBatches < 1) {
      module.emitError() << "dc-optimizer-in-step: micro-batches must be at "
                            "least 1, got "
                         << int64_t(microBatches);
      return signalPassFailure();
    }
    // The final forms: an accumulating form is rewritten with its own.
    for (auto fn : module.getOps<func::FuncOp>())
      if (!fn.isExternal() && !fn->hasAttr(kAccumulatesForAttrName) &&
          llvm::any_of(llvm::seq(fn.getNumResults()), [&](unsigned i) {
            return fn.getResultAttr(i, kGradAttrName);
          }))
        steps.push_back(fn);
    for (func::FuncOp fn : steps) {
      llvm::DenseMap<int64_t, Value> sums;
      if (microBatches > 1 && failed(accumulate(fn, sums)))
        return signalPassFailure();
      if (failed(rewrite(fn, sums)))
        return signalPassFailure();
    }
  }

  /// Gradient accumulation: the accumulating form (made where
  /// dc-accumulate-gradients made none) and the final form `fn` sum each
  /// gradient they still return over the micro-batches; `sums` gets the
  /// final form's sums, by parameter id.
  LogicalResult accumulate(func::FuncOp fn,
                           llvm::DenseMap<int64_t, Value> &sums);
  /// `sums`: the gradients to update with, where not the returned ones.
  LogicalResult rewrite(func::FuncOp fn,
                        const llvm::DenseMap<int64_t, Value> &sums);
  /// The global squared norm: the gradients' shares in parameter order,
  /// summed over every axis of the step's grid.
  Value globalSquares(OpBuilder &builder, Location loc, func::FuncOp fn,
                      ArrayRef<Updated> updated);

  Type masterType, momentType;
};

Value OptimizerInStepPass::globalSquares(OpBuilder &builder, Location loc,
                                         func::FuncOp fn,
                                         ArrayRef<Updated> updated) {
  auto scalar = RankedTensorType::get({}, builder.getF64Type());
  Value squares = arith::ConstantOp::create(
      builder, loc, DenseElementsAttr::get(scalar, builder.getF64FloatAttr(0)));
  for (const Updated &u : updated)
    squares = GradSquaresOp::create(
        builder, loc, u.grad, squares,
        u.expertAxis ? builder.getI64IntegerAttr(*u.expertAxis) : IntegerAttr(),
        builder.getI64IntegerAttr(microBatches));
  // The grid the step's shards live on (the one of its first sharded
  // parameter, else the module's only grid): every rank holds a share.
  FlatSymbolRefAttr grid;
  for (const Updated &u : updated)
    if (auto shard = dyn_cast<ShardType>(u.param.getType())) {
      grid = shard.getGrid();
      break;
    }
  auto module = fn->getParentOfType<ModuleOp>();
  shard::GridOp gridOp;
  if (grid)
    gridOp =
        SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(fn, grid.getAttr());
  else if (auto grids = module.getOps<shard::GridOp>();
           std::distance(grids.begin(), grids.end()) == 1)
    gridOp = *grids.begin();
  if (!gridOp)
    return squares; // one rank: nothing to sum
  for (auto [axis, size] : llvm::enumerate(gridOp.getShape())) {
    if (size == 1)
      continue;
    auto start = AllReduceStartOp::create(
        builder, loc,
        shard::ReductionKindAttr::get(builder.getContext(),
                                      shard::ReductionKind::Sum),
        squares, FlatSymbolRefAttr::get(gridOp.getSymNameAttr()),
        builder.getI64IntegerAttr(static_cast<int64_t>(axis)));
    squares = WaitOp::create(builder, loc, scalar, start.getFuture());
  }
  return squares;
}

LogicalResult
OptimizerInStepPass::accumulate(func::FuncOp fn,
                                llvm::DenseMap<int64_t, Value> &sums) {
  MLIRContext *context = fn.getContext();
  auto planned = fn->getAttrOfType<IntegerAttr>(kMicroBatchesAttrName);
  if (planned && planned.getInt() != microBatches)
    return fn.emitError() << "dc-optimizer-in-step: micro-batches="
                          << int64_t(microBatches) << ", but @" << fn.getName()
                          << " was planned for " << planned.getInt()
                          << " (dc-accumulate-gradients)";
  auto module = fn->getParentOfType<ModuleOp>();
  func::FuncOp accumulating;
  if (auto name =
          fn->getAttrOfType<FlatSymbolRefAttr>(kAccumulatingStepAttrName)) {
    accumulating = module.lookupSymbol<func::FuncOp>(name.getAttr());
    if (!accumulating)
      return fn.emitError()
             << "dc-optimizer-in-step: @" << fn.getName()
             << "'s accumulating form " << name << " is not in the module";
  } else {
    // Every gradient is still reduced in every micro-batch: the
    // accumulating form is the step that sums them.
    FailureOr<func::FuncOp> made = makeAccumulatingForm(fn, getArgument());
    if (failed(made))
      return failure();
    accumulating = *made;
  }
  auto i64 = IntegerType::get(context, 64);
  for (func::FuncOp form : {fn, accumulating})
    form->setAttr(kMicroBatchesAttrName, IntegerAttr::get(i64, microBatches));
  // Both forms return the gradients they reduce in every micro-batch, in
  // the same order: their accumulators become the same new arguments.
  llvm::MapVector<int64_t, unsigned> finalGrads = gradResults(fn);
  llvm::MapVector<int64_t, unsigned> accumulatingGrads;
  for (auto [id, result] : finalGrads)
    if (!hasAccumulatorArgument(fn, id))
      accumulatingGrads[id] = result;
  llvm::MapVector<int64_t, unsigned> inAccumulating = gradResults(accumulating);
  if (inAccumulating.size() != accumulatingGrads.size() ||
      !llvm::all_of(accumulatingGrads, [&](auto entry) {
        return inAccumulating.count(entry.first);
      }))
    return fn.emitError() << "dc-optimizer-in-step: @" << fn.getName()
                          << " and its accumulating form @"
                          << accumulating.getSymName()
                          << " do not return the same gradients";
  llvm::MapVector<int64_t, unsigned> ordered;
  for (auto [id, result] : accumulatingGrads)
    ordered[id] = inAccumulating.lookup(id);
  (void)sumOverMicroBatches(accumulating, ordered, /*keep=*/false);
  sums = sumOverMicroBatches(fn, accumulatingGrads, /*keep=*/true);
  return success();
}

LogicalResult
OptimizerInStepPass::rewrite(func::FuncOp fn,
                             const llvm::DenseMap<int64_t, Value> &sums) {
  MLIRContext *context = fn.getContext();
  if (fn->hasAttr(kOptimizerAttrName))
    return fn.emitError() << "dc-optimizer-in-step: @" << fn.getName()
                          << " updates its parameters already";
  if (microBatches == 1 && (fn->hasAttr(kAccumulatesForAttrName) ||
                            fn->hasAttr(kAccumulatingStepAttrName)))
    return fn.emitError()
           << "dc-optimizer-in-step: @" << fn.getName()
           << " is compiled for gradient accumulation (dc-accumulate-"
              "gradients); give dc-optimizer-in-step the same "
              "micro-batches";
  auto terminator = cast<func::ReturnOp>(fn.getBody().front().getTerminator());

  // The gradient of each parameter (its sum over the micro-batches where
  // the step makes one), then the parameters in argument order (the
  // trainer's order: the norm adds their shares in it).
  llvm::DenseMap<int64_t, Value> gradOf;
  for (unsigned i = 0, e = fn.getNumResults(); i < e; ++i)
    if (auto grad = fn.getResultAttrOfType<GradAttr>(i, kGradAttrName)) {
      Value sum = sums.lookup(grad.getParam());
      gradOf[grad.getParam()] = sum ? sum : terminator.getOperand(i);
    }
  SmallVector<Updated> updated;
  for (BlockArgument arg : fn.getArguments()) {
    auto param =
        fn.getArgAttrOfType<ParamAttr>(arg.getArgNumber(), kParamAttrName);
    if (!param || !gradOf.count(param.getId()))
      continue;
    std::string name = param.getName()
                           ? param.getName().str()
                           : "param" + std::to_string(param.getId());
    auto refuse = [&](StringRef why) {
      return emitError(arg.getLoc())
             << "dc-optimizer-in-step: parameter '" << name << "' " << why;
    };
    if (isa<HostType>(arg.getType()))
      return refuse("is kept in host memory (dc-offload-params); its update "
                    "inside the step is not supported yet");
    std::optional<int64_t> expertAxis;
    if (auto axis = fn.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(),
                                                     kExpertAxisAttrName))
      expertAxis = axis.getInt();
    auto tensor = dyn_cast<RankedTensorType>(arg.getType());
    if (!isa<ShardType>(arg.getType()) && !(tensor && tensor.hasStaticShape()))
      return refuse("is not a shard or a statically shaped tensor");
    // dc.adamw takes the gradient in the parameter's shape and sharding.
    Value grad = gradOf[param.getId()];
    auto gradShard = dyn_cast<ShardType>(grad.getType());
    auto paramShard = dyn_cast<ShardType>(arg.getType());
    bool sameSlots =
        paramShard ? gradShard &&
                         gradShard.getLogical().getShape() ==
                             paramShard.getLogical().getShape() &&
                         gradShard.getAxes() == paramShard.getAxes() &&
                         gradShard.getLocal() == paramShard.getLocal()
                   : !gradShard && isa<RankedTensorType>(grad.getType()) &&
                         cast<RankedTensorType>(grad.getType()).getShape() ==
                             tensor.getShape();
    if (!sameSlots)
      return refuse("has a gradient of another shape or sharding (")
             << grad.getType() << ")";
    Type element = elementOf(arg.getType());
    if (masterType.isBF16() && !element.isBF16())
      return refuse("is not bf16: master-dtype=bf16 makes each parameter "
                    "its own master, which needs bf16 parameters");
    if (!element.isF32() && !element.isBF16() && !element.isF16())
      return refuse("must be f32, bf16 or f16 to be updated by AdamW");
    updated.push_back(
        {param.getId(), name, arg, gradOf[param.getId()], expertAxis});
  }

  Location loc = terminator.getLoc();
  OpBuilder builder(terminator);
  auto i64 = builder.getI64Type();
  auto addArgument = [&](Type type, NamedAttrList attrs, StringRef name) {
    unsigned index = fn.getNumArguments();
    auto nameAttr = StringAttr::get(context, name);
    attrs.set(kNameAttrName, nameAttr);
    (void)fn.insertArgument(index, type, attrs.getDictionary(context),
                            NameLoc::get(nameAttr, fn.getLoc()));
    return fn.getArgument(index);
  };
  auto stateAttrs = [&](int64_t id, StringRef state) {
    NamedAttrList attrs;
    attrs.set(
        kOptimizerStateAttrName,
        builder.getDictionaryAttr(
            {builder.getNamedAttr("param", builder.getI64IntegerAttr(id)),
             builder.getNamedAttr("state", builder.getStringAttr(state))}));
    return attrs;
  };

  Value squares = globalSquares(builder, loc, fn, updated);
  NamedAttrList lrAttrs, stepAttrs;
  lrAttrs.set(kLearningRateAttrName, UnitAttr::get(context));
  stepAttrs.set(kStepCountAttrName, UnitAttr::get(context));
  Value lr = addArgument(RankedTensorType::get({}, builder.getF64Type()),
                         lrAttrs, "learning_rate");
  Value step =
      addArgument(RankedTensorType::get({}, i64), stepAttrs, "step_count");

  // The results: everything but the gradients, then per parameter its
  // update and state, then the squared norm.
  SmallVector<Value> results;
  SmallVector<DictionaryAttr> resultAttrs;
  for (unsigned i = 0, e = fn.getNumResults(); i < e; ++i)
    if (!fn.getResultAttr(i, kGradAttrName)) {
      results.push_back(terminator.getOperand(i));
      resultAttrs.push_back(fn.getResultAttrDict(i));
    }
  for (const Updated &u : updated) {
    Type type = u.param.getType();
    Value expAvg =
        addArgument(withElement(type, momentType), stateAttrs(u.id, "exp_avg"),
                    u.name + ".exp_avg");
    Value expAvgSq =
        addArgument(withElement(type, momentType),
                    stateAttrs(u.id, "exp_avg_sq"), u.name + ".exp_avg_sq");
    Value master;
    if (masterType.isF32() && !elementOf(type).isF32())
      master = addArgument(withElement(type, builder.getF32Type()),
                           stateAttrs(u.id, "master"), u.name + ".master");
    auto update =
        AdamWOp::create(builder, u.param.getLoc(), u.param, u.grad, expAvg,
                        expAvgSq, master, lr, step, squares, beta1, beta2, eps,
                        weightDecay, maxGradNorm, microBatches);
    NamedAttrList paramAttrs;
    paramAttrs.set(kParamUpdateAttrName, builder.getI64IntegerAttr(u.id));
    results.push_back(update.getNewParam());
    resultAttrs.push_back(paramAttrs.getDictionary(context));
    results.push_back(update.getNewExpAvg());
    resultAttrs.push_back(stateAttrs(u.id, "exp_avg").getDictionary(context));
    results.push_back(update.getNewExpAvgSq());
    resultAttrs.push_back(
        stateAttrs(u.id, "exp_avg_sq").getDictionary(context));
    if (master) {
      results.push_back(update.getNewMaster());
      resultAttrs.push_back(stateAttrs(u.id, "master").getDictionary(context));
    }
  }
  NamedAttrList squaresAttrs;
  squaresAttrs.set(kGradSquaresAttrName, UnitAttr::get(context));
  results.push_back(squares);
  resultAttrs.push_back(squaresAttrs.getDictionary(context));

  func::ReturnOp::create(builder, terminator.getLoc(), results);
  terminator.erase();
  fn.setType(FunctionType::get(context, fn.getArgumentTypes(),
                               ValueRange(results).getTypes()));
  fn.setAllResultAttrs(resultAttrs);
  fn->setAttr(
      kOptimizerAttrName,
      builder.getDictionaryAttr(
          {builder.getNamedAttr("name", builder.getStringAttr("adamw")),
           builder.getNamedAttr("beta1", builder.getF64FloatAttr(beta1)),
           builder.getNamedAttr("beta2", builder.getF64FloatAttr(beta2)),
           builder.getNamedAttr("eps", builder.getF64FloatAttr(eps)),
           builder.getNamedAttr("weight_decay",
                                builder.getF64FloatAttr(weightDecay)),
           builder.getNamedAttr("max_grad_norm",
                                builder.getF64FloatAttr(maxGradNorm)),
           builder.getNamedAttr("master_dtype",
                                builder.getStringAttr(masterDtype)),
           builder.getNamedAttr("moment_dtype",
                                builder.getStringAttr(momentDtype)),
           builder.getNamedAttr("micro_batches",
                                builder.getI64IntegerAttr(microBatches))}));
  return success();
}

} // namespace
