//===- AccumulateGradients.cpp - local gradient accumulation per parameter ===//
//
// With N micro-batches per optimizer step, a gradient reduced in every
// micro-batch costs N reductions; summed locally in an fp32 accumulator of
// the parameter's full shape, one. The first is what the trainer does by
// default (it sums the reduced shards); this pass picks the parameters
// worth the second, against the stream simulator and the memory budget,
// and makes the step's two forms: the final one (gradient + accumulator,
// reduced as before) and the accumulating one (accumulator += gradient, no
// reduction).
//
//===----------------------------------------------------------------------===//
#include "dc/Analysis/Accumulators.h"
#include "dc/Analysis/MemoryTimeline.h"
#include "dc/Analysis/StreamSimulator.h"
#include "dc/Dialect/DC/IR/TypeSizes.h"
#include "dc/Schedule/Passes.h"
#include "dc/Schedule/Planning.h"
#include "dc/Support/ByteSize.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringSet.h"

namespace dc {
#define GEN_PASS_DEF_DCACCUMULATEGRADIENTS
#include "dc/Schedule/Passes.h.inc"
} // namespace dc

using namespace mlir;
using namespace dc;

namespace {

/// A gradient result that could be accumulated locally: it is the wait of
/// one reduction (a reduce-scatter bucket's, or an all-reduce's) of a full
/// floating-point gradient, and nothing else reads that wait.
struct Candidate {
  int64_t id = 0;
  std::string name;
  unsigned result = 0;          // the gradient result of the step
  Operation *start = nullptr;   // its reduce_scatter_start / all_reduce_start
  unsigned position = 0;        // its gradient among the start's
  Value future;                 // the future the result waits for
  Operation *waiter = nullptr;  // dc.wait or dc.end_backward
  Value grad;                   // the full gradient
  int64_t accumulatorBytes = 0; // fp32, the parameter's full shape
  double savedSeconds = 0;      // per optimizer step, by the model
  StringRef choice;
};

RankedTensorType accumulatorType(Value grad) {
  auto type = cast<RankedTensorType>(grad.getType());
  return RankedTensorType::get(type.getShape(),
                               Float32Type::get(grad.getContext()));
}

SmallVector<Candidate> findCandidates(func::FuncOp fn) {
  SmallVector<Candidate> found;
  Operation *terminator = fn.getBody().front().getTerminator();
  llvm::DenseMap<int64_t, std::string> names;
  // A block of experts (dc-expert-parallel) is not the parameter's full
  // shape, which an accumulator has: dc-run sums its shard instead.
  llvm::DenseSet<int64_t> expertBlocks;
  for (unsigned i = 0, e = fn.getNumArguments(); i < e; ++i)
    if (auto param = fn.getArgAttrOfType<ParamAttr>(i, kParamAttrName)) {
      names[param.getId()] = param.getName()
                                 ? param.getName().str()
                                 : "param" + std::to_string(param.getId());
      if (fn.getArgAttr(i, kExpertAxisAttrName))
        expertBlocks.insert(param.getId());
    }
  for (unsigned i = 0, e = fn.getNumResults(); i < e; ++i) {
    auto grad = fn.getResultAttrOfType<GradAttr>(i, kGradAttrName);
    if (!grad || expertBlocks.contains(grad.getParam()))
      continue;
    Value value = terminator->getOperand(i);
    Candidate candidate;
    if (!value.hasOneUse())
      continue;
    if (auto wait = value.getDefiningOp<WaitOp>()) {
      candidate.future = wait.getFuture();
      candidate.waiter = wait;
    } else if (auto end = value.getDefiningOp<EndBackwardOp>()) {
      candidate.future =
          end.getFutures()[cast<OpResult>(value).getResultNumber()];
      candidate.waiter = end;
    } else {
      continue;
    }
    if (!candidate.future.hasOneUse())
      continue;
    candidate.start = candidate.future.getDefiningOp();
    if (auto reduce = dyn_cast_or_null<ReduceScatterStartOp>(candidate.start)) {
      candidate.position = cast<OpResult>(candidate.future).getResultNumber();
      candidate.grad = reduce.getGradients()[candidate.position];
    } else if (auto allReduce =
                   dyn_cast_or_null<AllReduceStartOp>(candidate.start)) {
      candidate.grad = allReduce.getInput();
    } else {
      continue;
    }
    auto type = dyn_cast<RankedTensorType>(candidate.grad.getType());
    if (!type || !type.hasStaticShape() ||
        !isa<FloatType>(type.getElementType()))
      continue;
    candidate.id = grad.getParam();
    candidate.name = names.lookup(candidate.id);
    candidate.result = i;
    candidate.accumulatorBytes = type.getNumElements() * 4;
    found.push_back(std::move(candidate));
  }
  return found;
}

Value convertFloat(OpBuilder &builder, Location loc, Value value, Type to) {
  auto from = cast<FloatType>(value.getType());
  auto target = cast<FloatType>(to);
  if (from == target)
    return value;
  if (from.getWidth() < target.getWidth())
    return arith::ExtFOp::create(builder, loc, target, value);
  return arith::TruncFOp::create(builder, loc, target, value);
}

/// `into + addend` elementwise, written into `into` (destination style:
/// updated in place), added in fp32 and rounded once to `into`'s type.
Value addInto(OpBuilder &builder, Location loc, Value addend, Value into) {
  auto type = cast<RankedTensorType>(into.getType());
  int64_t rank = type.getRank();
  SmallVector<AffineMap> maps(2, builder.getMultiDimIdentityMap(rank));
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      builder, loc, TypeRange{type}, ValueRange{addend}, ValueRange{into}, maps,
      iterators, [&](OpBuilder &body, Location at, ValueRange args) {
        Type f32 = body.getF32Type();
        Value sum = arith::AddFOp::create(body, at,
                                          convertFloat(body, at, args[1], f32),
                                          convertFloat(body, at, args[0], f32));
        linalg::YieldOp::create(
            body, at, convertFloat(body, at, sum, type.getElementType()));
      });
  return generic.getResult(0);
}

/// Appends an accumulator argument for `candidate`, named after its
/// parameter.
Value addAccumulatorArgument(func::FuncOp fn, const Candidate &candidate) {
  return dc::addAccumulatorArgument(fn, candidate.id, candidate.name,
                                    accumulatorType(candidate.grad));
}

/// The final form: each chosen gradient is reduced with the accumulator
/// added in (the sum of every micro-batch's gradient).
void makeFinal(func::FuncOp fn, ArrayRef<Candidate> chosen) {
  for (const Candidate &candidate : chosen) {
    Value accumulator = addAccumulatorArgument(fn, candidate);
    OpBuilder builder(candidate.start);
    Value sum = addInto(builder, candidate.start->getLoc(), accumulator,
                        candidate.grad);
    if (auto reduce = dyn_cast<ReduceScatterStartOp>(candidate.start))
      reduce.getGradientsMutable()[candidate.position].assign(sum);
    else
      cast<AllReduceStartOp>(candidate.start).getInputMutable().assign(sum);
  }
}

/// The accumulating form: each chosen gradient is added into its
/// accumulator, returned (in the argument's buffer), and neither reduced
/// nor returned itself.
void makeAccumulating(func::FuncOp fn, ArrayRef<Candidate> chosen) {
  Block &body = fn.getBody().front();
  Operation *terminator = body.getTerminator();
  MLIRContext *context = fn.getContext();
  SmallVector<std::pair<Value, int64_t>> updated;
  llvm::MapVector<Operation *, llvm::SmallDenseSet<unsigned>> dropped;
  llvm::BitVector droppedResults(fn.getNumResults());
  for (const Candidate &candidate : chosen) {
    Value accumulator = addAccumulatorArgument(fn, candidate);
    OpBuilder builder(candidate.start);
    updated.push_back({addInto(builder, candidate.start->getLoc(),
                               candidate.grad, accumulator),
                       candidate.id});
    dropped[candidate.start].insert(candidate.position);
    droppedResults.set(candidate.result);
  }

  // The results: the gradients that are still reduced, then the
  // accumulators.
  SmallVector<Value> operands;
  SmallVector<Type> types;
  SmallVector<DictionaryAttr> resultAttrs;
  for (unsigned i = 0, e = fn.getNumResults(); i < e; ++i) {
    if (droppedResults.test(i))
      continue;
    operands.push_back(terminator->getOperand(i));
    types.push_back(fn.getResultTypes()[i]);
    resultAttrs.push_back(fn.getResultAttrDict(i));
  }
  for (auto [value, id] : updated) {
    operands.push_back(value);
    types.push_back(value.getType());
    NamedAttrList attrs;
    attrs.set(kAccumulatorAttrName,
              IntegerAttr::get(IntegerType::get(context, 64), id));
    resultAttrs.push_back(attrs.getDictionary(context));
  }
  terminator->setOperands(operands);
  fn.setType(FunctionType::get(context, body.getArgumentTypes(), types));
  fn.setAllResultAttrs(resultAttrs);

  // The waits of the dropped reductions, then the reductions themselves.
  for (const Candidate &candidate : chosen)
    if (auto wait = dyn_cast<WaitOp>(candidate.waiter))
      wait.erase();
  llvm::SmallPtrSet<Value, 8> droppedFutures;
  for (const Candidate &candidate : chosen)
    droppedFutures.insert(candidate.future);
  SmallVector<EndBackwardOp> ends(body.getOps<EndBackwardOp>());
  for (EndBackwardOp end : ends) {
    SmallVector<Value> kept;
    for (Value future : end.getFutures())
      if (!droppedFutures.contains(future))
        kept.push_back(future);
    if (kept.size() == end.getFutures().size())
      continue;
    OpBuilder builder(end);
    SmallVector<Value> shards;
    if (!kept.empty())
      llvm::append_range(
          shards,
          EndBackwardOp::create(builder, end.getLoc(), kept).getShards());
    auto shard = shards.begin();
    for (auto [future, result] : llvm::zip(end.getFutures(), end.getShards()))
      if (!droppedFutures.contains(future))
        result.replaceAllUsesWith(*shard++);
    end.erase();
  }
  for (auto &[start, positions] : dropped) {
    if (auto reduce = dyn_cast<ReduceScatterStartOp>(start)) {
      SmallVector<Value> grads;
      SmallVector<Type> futureTypes;
      SmallVector<Value> keptFutures;
      for (auto [i, grad, future] :
           llvm::enumerate(reduce.getGradients(), reduce.getFutures())) {
        if (positions.contains(i))
          continue;
        grads.push_back(grad);
        futureTypes.push_back(future.getType());
        keptFutures.push_back(future);
      }
      if (!grads.empty()) {
        OpBuilder builder(reduce);
        auto rest = ReduceScatterStartOp::create(
            builder, reduce.getLoc(), futureTypes, reduce.getKind(), grads);
        rest->setAttrs(reduce->getAttrs());
        for (auto [old, future] : llvm::zip(keptFutures, rest.getFutures()))
          old.replaceAllUsesWith(future);
      }
    }
    start->erase();
  }
}

/// The trimmed cost of `candidate`'s reduction without it: what the
/// accumulating form runs (nothing, when it was alone).
OpCost costWithout(const Candidate &candidate, const CostModel &costModel) {
  auto reduce = dyn_cast<ReduceScatterStartOp>(candidate.start);
  // Zero seconds on the collective stream: its wait then sees it ready no
  // later than before (the waits were placed on the base timing).
  OpCost none;
  none.stream = StreamKind::Collective;
  if (!reduce || reduce.getGradients().size() == 1)
    return none;
  SmallVector<Value> grads;
  SmallVector<Type> futureTypes;
  for (auto [i, grad, future] :
       llvm::enumerate(reduce.getGradients(), reduce.getFutures()))
    if (i != candidate.position) {
      grads.push_back(grad);
      futureTypes.push_back(future.getType());
    }
  OpBuilder builder(reduce);
  auto trimmed = ReduceScatterStartOp::create(
      builder, reduce.getLoc(), futureTypes, reduce.getKind(), grads);
  trimmed->setAttrs(reduce->getAttrs());
  OpCost cost = costModel.estimate(trimmed);
  trimmed.erase();
  return cost;
}

/// The time of the accumulating add of `candidate`'s gradient.
double addSeconds(const Candidate &candidate, const CostModel &costModel) {
  OpBuilder builder(candidate.start);
  Location loc = candidate.start->getLoc();
  auto empty = tensor::EmptyOp::create(
      builder, loc, accumulatorType(candidate.grad).getShape(),
      builder.getF32Type());
  Value sum = addInto(builder, loc, candidate.grad, empty);
  double seconds = costModel.estimate(sum.getDefiningOp()).seconds;
  sum.getDefiningOp()->erase();
  empty.erase();
  return seconds;
}

struct AccumulateGradientsPass
    : public dc::impl::DCAccumulateGradientsBase<AccumulateGradientsPass> {
  using DCAccumulateGradientsBase::DCAccumulateGradientsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(checkOptionRange(module, getArgument(), "micro-batches",
                                microBatches, 1, 1 << 20)))
      return signalPassFailure();
    if (microBatches == 1 && local.empty())
      return;
    if (microBatches == 1) {
      module.emitError() << getArgument()
                         << ": local=... needs micro-batches > 1";
      return signalPassFailure();
    }
    llvm::StringSet<> forced;
    for (const std::string &name : local)
      forced.insert(name);
    llvm::StringSet<> seen;
    auto plan = [&](func::FuncOp fn, const PlanningSetup &setup,
                    const CostModel &costModel) -> LogicalResult {
      // The accumulating form this pass made, and functions without
      // parameters, are not planned.
      if (fn->hasAttr(kAccumulatesForAttrName) ||
          llvm::none_of(llvm::seq(fn.getNumArguments()), [&](unsigned i) {
            return fn.getArgAttr(i, kParamAttrName) != nullptr;
          }))
        return success();
      return planStep(fn, setup, costModel, forced, seen);
    };
    if (failed(planEachStep(module, getArgument(), profile, optimizerStateBytes,
                            plan)))
      return signalPassFailure();
    for (const auto &name : forced)
      if (!seen.contains(name.getKey())) {
        module.emitError() << getArgument() << ": local=" << name.getKey()
                           << " names no parameter of any step";
        return signalPassFailure();
      }
  }

  LogicalResult planStep(func::FuncOp fn, const PlanningSetup &setup,
                         const CostModel &costModel,
                         const llvm::StringSet<> &forced,
                         llvm::StringSet<> &seen) {
    MLIRContext *context = fn.getContext();
    for (unsigned i = 0, e = fn.getNumArguments(); i < e; ++i)
      if (auto param = fn.getArgAttrOfType<ParamAttr>(i, kParamAttrName))
        if (param.getName() && forced.contains(param.getName().getValue()))
          seen.insert(param.getName().getValue());
    SmallVector<Candidate> candidates = findCandidates(fn);
    for (const auto &name : forced)
      if (seen.contains(name.getKey()) &&
          llvm::none_of(candidates, [&](const Candidate &candidate) {
            return candidate.name == name.getKey();
          }))
        return fn.emitError()
               << getArgument() << ": cannot accumulate '" << name.getKey()
               << "' locally: its gradient is not the wait of one "
                  "reduce-scatter or all-reduce of a full gradient";

    FailureOr<MemoryTimeline> timeline = MemoryTimeline::compute(fn);
    if (failed(timeline))
      return failure();
    std::vector<OpCost> costs = costModel.estimateFunction(fn);
    StreamSimulator simulator(costModel);
    double base = simulator.run(*timeline, costs).stepSeconds;
    double microBatchCount = static_cast<double>(int64_t(microBatches));
    for (Candidate &candidate : candidates) {
      // The accumulating form, with this gradient alone accumulated: its
      // reduction trimmed (or gone) and the add on the compute stream.
      std::vector<OpCost> trial = costs;
      size_t at = timeline->indexOf(candidate.start);
      trial[at] = costWithout(candidate, costModel);
      double add = addSeconds(candidate, costModel);
      for (size_t i = at; i-- > 0;)
        if (trial[i].stream == StreamKind::Compute) {
          trial[i].seconds += add;
          break;
        }
      double accumulating = simulator.run(*timeline, trial).stepSeconds;
      // N - 1 accumulating micro-batches save that; the final one adds.
      candidate.savedSeconds =
          (microBatchCount - 1) * (base - accumulating) - add;
    }

    // Forced ones first, then the most time saved per byte held, while the
    // step's peak and every accumulator fit.
    SmallVector<Candidate *> order;
    for (Candidate &candidate : candidates)
      order.push_back(&candidate);
    llvm::stable_sort(order, [](const Candidate *a, const Candidate *b) {
      return a->savedSeconds * b->accumulatorBytes >
             b->savedSeconds * a->accumulatorBytes;
    });
    int64_t held = 0;
    for (Candidate *candidate : order)
      if (forced.contains(candidate->name)) {
        candidate->choice = "forced";
        held += candidate->accumulatorBytes;
      }
    int64_t peak = timeline->getPeakDeviceBytes();
    for (Candidate *candidate : order) {
      if (!candidate->choice.empty())
        continue;
      if (candidate->savedSeconds <= 0) {
        candidate->choice = "no gain";
      } else if (peak + held + candidate->accumulatorBytes >
                 setup.budgetBytes) {
        candidate->choice = "over budget";
      } else {
        candidate->choice = "local";
        held += candidate->accumulatorBytes;
      }
    }

    // The plan, for dc-report, in the order of the step's results.
    auto i64 = IntegerType::get(context, 64);
    SmallVector<Attribute> entries;
    SmallVector<Candidate> chosen;
    for (Candidate &candidate : candidates) {
      NamedAttrList entry;
      entry.set("name", StringAttr::get(context, candidate.name));
      entry.set("id", IntegerAttr::get(i64, candidate.id));
      entry.set("bytes", IntegerAttr::get(i64, candidate.accumulatorBytes));
      entry.set("saved_s", FloatAttr::get(Float64Type::get(context),
                                          candidate.savedSeconds));
      entry.set("choice", StringAttr::get(context, candidate.choice));
      entries.push_back(entry.getDictionary(context));
      if (candidate.choice == "local" || candidate.choice == "forced")
        chosen.push_back(candidate);
    }
    fn->setAttr(kAccumulationPlanAttrName, ArrayAttr::get(context, entries));
    fn->setAttr(kMicroBatchesAttrName, IntegerAttr::get(i64, microBatches));
    if (chosen.empty())
      return success();

    FailureOr<func::FuncOp> accumulating =
        makeAccumulatingForm(fn, getArgument());
    if (failed(accumulating))
      return failure();
    func::FuncOp clone = *accumulating;
    // The same candidates in the clone (found the same way, in order).
    SmallVector<Candidate> cloneChosen;
    for (Candidate &candidate : findCandidates(clone))
      if (llvm::any_of(
              chosen, [&](const Candidate &c) { return c.id == candidate.id; }))
        cloneChosen.push_back(candidate);
    makeAccumulating(clone, cloneChosen);
    makeFinal(fn, chosen);
    return success();
  }
};

} // namespace
