//===- ArtifactManifest.cpp - what the artifact tells the runtime ---------===//
//
// Writes the manifest JSON of dcrt.h from the tensor-level steps and exports
// it, with the ABI version, as LLVM dialect functions that the rest of the
// lowering carries through unchanged.
//
//===----------------------------------------------------------------------===//
#include "dc/Lowering/Manifest.h"
#include "dc/Lowering/Passes.h"

#include "dc/Analysis/Accumulators.h"
#include "dc/Analysis/CostModel.h"
#include "dc/Analysis/IndexBounds.h"
#include "dc/Analysis/MemoryTimeline.h"
#include "dc/Analysis/OptimizerState.h"
#include "dc/Analysis/StepSignature.h"
#include "dc/Dialect/DC/IR/DCDialect.h"
#include "dc/Dialect/DC/IR/TypeSizes.h"
#include "dc/Support/Assert.h"
#include "dcrt/checksum.h"
#include "dcrt/dcrt.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"

#include <algorithm>
#include <cstring>

namespace dc {
#define GEN_PASS_DEF_DCARTIFACTMANIFEST
#include "dc/Lowering/Passes.h.inc"
} // namespace dc

using namespace mlir;
using namespace dc;

namespace {

/// The manifest's name of a dcrt_dtype.
std::optional<StringRef> getDTypeName(Type type) {
  if (type.isF32())
    return StringRef("f32");
  if (type.isBF16())
    return StringRef("bf16");
  if (type.isF16())
    return StringRef("f16");
  if (type.isSignlessInteger(32))
    return StringRef("i32");
  if (type.isSignlessInteger(64))
    return StringRef("i64");
  return std::nullopt;
}

/// The name of argument `i` of `fn`: its dc.name attribute (data, or a
/// gradient accumulator), else "arg<N>". It comes from the IR alone,
/// whichever tool parsed it. A parameter carries no dc.name: the caller
/// names it by its #dc.param, where that has a name.
std::string getArgName(func::FuncOp fn, unsigned i) {
  if (auto name = fn.getArgAttrOfType<StringAttr>(i, kNameAttrName))
    return name.str();
  return "arg" + std::to_string(i);
}

/// The runtime memory a step needs at once, from its memory timeline: what
/// a device backend allocates once at dcrt_init and never grows.
struct PlanBytes {
  /// Gathered tensors.
  int64_t gatherArena = 0;
  /// Offloaded host copies (parameter shards kept in host memory are the
  /// caller's buffers, not the pool's).
  int64_t hostPool = 0;
  /// Reduced gradient shards and all-reduce results (the runtime keeps them
  /// to the end of the step). Reloaded and uploaded tensors are not here:
  /// each is copied into a temporary of the step arena, which
  /// dc-assign-step-arena sizes with the other temporaries.
  int64_t stepBuffers = 0;
  /// The most any one collective stream stages at once: shards cast before
  /// their gather; gradients packed into an fp32 bucket (a bucket whose
  /// gradients do not all have their shards' dtype) or padded (a gradient
  /// the ranks do not divide); an all-reduce widened to fp32; an
  /// all-to-all's input packed to send and its pieces received (twice its
  /// input, from its start to its wait, on the reduce stream).
  int64_t staging = 0;
};

/// The element type of `type` (a tensor, a shard, or their future).
Type getElementTypeOf(Type type) {
  if (auto future = dyn_cast<FutureType>(type))
    type = future.getValue();
  if (auto shard = dyn_cast<ShardType>(type))
    return shard.getElementType();
  if (auto shaped = dyn_cast<ShapedType>(type))
    return shaped.getElementType();
  return type;
}

int64_t getNumElementsOf(Type type) {
  if (auto future = dyn_cast<FutureType>(type))
    type = future.getValue();
  if (auto shard = dyn_cast<ShardType>(type))
    return shard.getLocal();
  if (auto shaped = dyn_cast<ShapedType>(type))
    return shaped.hasStaticShape() ? shaped.getNumElements() : 0;
  return 0;
}

/// Bytes `op` (a start) stages on its collective stream while in flight;
/// `gridShape` gives the ranks a shard is split over (empty: `world`).
int64_t getStagingBytes(Operation *op, int64_t world,
                        ArrayRef<int64_t> gridShape) {
  int64_t bytes = 0;
  if (auto gather = dyn_cast<GatherStartOp>(op)) {
    for (auto [shard, future] :
         llvm::zip(gather.getShards(), gather.getFutures()))
      if (getElementTypeOf(shard.getType()) !=
          getElementTypeOf(future.getType()))
        bytes += getNumElementsOf(shard.getType()) *
                 getElementBytes(getElementTypeOf(future.getType()));
    return bytes;
  }
  if (auto reduce = dyn_cast<ReduceScatterStartOp>(op)) {
    bool sameTypes = true;
    int64_t block = 0, padding = 0, groupRanks = world;
    for (auto [grad, future] :
         llvm::zip(reduce.getGradients(), reduce.getFutures())) {
      Type gradElement = getElementTypeOf(grad.getType());
      int64_t local = getNumElementsOf(future.getType());
      // The bucket's group: its shards' axes, not always the whole grid.
      auto shard =
          dyn_cast<ShardType>(cast<FutureType>(future.getType()).getValue());
      int64_t ranks = shard ? 1 : world;
      if (shard)
        for (int64_t axis : shard.getAxes())
          ranks *= axis < int64_t(gridShape.size()) ? gridShape[axis] : world;
      sameTypes &= gradElement == getElementTypeOf(future.getType());
      block += local;
      if (getNumElementsOf(grad.getType()) != ranks * local)
        padding += ranks * local * getElementBytes(gradElement);
      groupRanks = ranks;
    }
    return sameTypes ? padding : (groupRanks + 1) * block * 4;
  }
  if (auto allReduce = dyn_cast<AllReduceStartOp>(op)) {
    Type element = getElementTypeOf(allReduce.getInput().getType());
    if (getElementBytes(element) == 2 && isa<FloatType>(element))
      return getNumElementsOf(allReduce.getInput().getType()) * 4;
  }
  return 0;
}

/// A buffer's bytes if an op of kind `OpTy` makes it, else 0.
template <typename OpTy> int64_t bytesIfMadeBy(OpResult result, int64_t bytes) {
  return isa<OpTy>(result.getOwner()) ? bytes : 0;
}

/// `timeline`: `fn`'s memory timeline.
FailureOr<PlanBytes> getPlanBytes(func::FuncOp fn,
                                  const MemoryTimeline &timeline, int64_t world,
                                  ArrayRef<int64_t> gridShape) {
  bool usesRuntimeMemory = false;
  fn.walk([&](Operation *op) {
    usesRuntimeMemory |=
        isa<GatherStartOp, OffloadStartOp, ReloadStartOp, ReduceScatterStartOp,
            AllReduceStartOp, AllToAllOp, AllToAllStartOp>(op);
  });
  if (!usesRuntimeMemory)
    return PlanBytes();
  // The all-to-alls' staging, held from each start to its wait (the
  // runtime returns it there); the synchronous form's only at the op.
  const size_t numOps = timeline.getOps().size();
  std::vector<int64_t> exchanges(numOps + 1, 0);
  Block &body = fn.getBody().front();
  for (auto [i, op] : llvm::enumerate(timeline.getOps())) {
    Value input;
    size_t waited = i;
    if (auto sync = dyn_cast<AllToAllOp>(op))
      input = sync.getInput();
    if (auto start = dyn_cast<AllToAllStartOp>(op)) {
      input = start.getInput();
      waited = numOps - 1; // never waited: to the end
      for (Operation *user : start.getFuture().getUsers())
        if (Operation *wait = body.findAncestorOpInBlock(*user))
          waited = timeline.indexOf(wait);
    }
    if (!input)
      continue;
    exchanges[i] += 2 * getTypeBytes(input.getType());
    exchanges[waited + 1] -= 2 * getTypeBytes(input.getType());
  }
  // The peak over the step of `bytesOf(start)` held from the start's first
  // future buffer to its last, plus the `extra` changes per op.
  auto peakOf = [&](auto bytesOf, ArrayRef<int64_t> extra = {}) {
    std::vector<int64_t> delta(numOps + 1, 0);
    llvm::copy(extra, delta.begin());
    for (const Buffer &buffer : timeline.getBuffers()) {
      auto result = dyn_cast<OpResult>(buffer.value);
      if (!result)
        continue;
      int64_t bytes = bytesOf(result, buffer.bytes);
      if (bytes == 0)
        continue;
      delta[buffer.begin] += bytes;
      delta[buffer.end + 1] -= bytes;
    }
    int64_t live = 0, peak = 0;
    for (int64_t change : delta)
      peak = std::max(peak, live += change);
    return peak;
  };
  PlanBytes plan;
  plan.gatherArena = peakOf(bytesIfMadeBy<GatherStartOp>);
  // Copies into the caller's host buffers (`into`) take none of the pool.
  plan.hostPool = peakOf([](OpResult result, int64_t bytes) -> int64_t {
    auto offload = dyn_cast<OffloadStartOp>(result.getOwner());
    return offload && !offload.getDestination() ? bytes : 0;
  });
  // Reductions live to the end of the step: all of them at once.
  fn.walk([&](Operation *op) {
    if (isa<ReduceScatterStartOp, AllReduceStartOp>(op))
      for (Value result : op->getResults())
        plan.stepBuffers += getTypeBytes(result.getType());
  });
  // Staging of one stream: counted once per start (its first future).
  auto stagingOf = [&](auto isStream, ArrayRef<int64_t> extra) {
    return peakOf(
        [&](OpResult result, int64_t) {
          Operation *start = result.getOwner();
          return result.getResultNumber() == 0 && isStream(start)
                     ? getStagingBytes(start, world, gridShape)
                     : int64_t(0);
        },
        extra);
  };
  plan.staging = std::max(
      stagingOf([](Operation *op) { return isa<GatherStartOp>(op); }, {}),
      stagingOf(
          [](Operation *op) {
            return isa<ReduceScatterStartOp, AllReduceStartOp>(op);
          },
          exchanges));
  return plan;
}

/// Fails, naming the op, if `fn` holds an op the lowering cannot take: one
/// outside the dialects it lowers or a call of a function without a body.
LogicalResult checkLowerable(func::FuncOp fn) {
  static const llvm::StringSet<> dialects = {
      "affine", "arith", "bufferization", "cf",  "dc",     "func",
      "linalg", "math",  "memref",        "scf", "tensor", "ub"};
  WalkResult walk = fn.walk([&](Operation *op) {
    if (op == fn)
      return WalkResult::advance();
    StringRef dialect = op->getName().getDialectNamespace();
    // A rank's place in the grid (dc-ulysses' positions) is dcrt_rank.
    if (!dialects.contains(dialect) &&
        !isa<shard::ProcessMultiIndexOp, shard::ProcessLinearIndexOp>(op)) {
      op->emitError() << "'" << op->getName()
                      << "' is not supported: the CPU lowering takes func, "
                         "linalg, tensor, arith, math, scf, memref and dc "
                         "ops";
      return WalkResult::interrupt();
    }
    if (auto call = dyn_cast<func::CallOp>(op)) {
      auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
          call, call.getCalleeAttr());
      if (!callee || callee.isExternal()) {
        call.emitError() << "calls @" << call.getCallee()
                         << ", which has no body; an artifact cannot call "
                            "outside functions";
        return WalkResult::interrupt();
      }
    }
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

struct ArtifactManifestPass
    : public dc::impl::DCArtifactManifestBase<ArtifactManifestPass> {
  using DCArtifactManifestBase::DCArtifactManifestBase;

  void runOnOperation() override;

private:
  LogicalResult findWorld(ModuleOp module);
  LogicalResult writeTensor(llvm::json::OStream &json, Location loc, Type type,
                            const Twine &what,
                            std::optional<int64_t> expertAxis = std::nullopt,
                            bool optimizerScalar = false);
  LogicalResult writeStep(llvm::json::OStream &json, func::FuncOp fn);
  void exportFunctions(ModuleOp module, StringRef manifest);

  std::string gridName = "world";
  int64_t world = 1;
  SmallVector<int64_t> gridShape;
  PlanBytes plan;
};

/// The world is the module's one grid (or a single rank without one); the
/// runtime makes a communicator per axis of it ("grid_shape").
LogicalResult ArtifactManifestPass::findWorld(ModuleOp module) {
  auto grids = llvm::to_vector(module.getOps<shard::GridOp>());
  if (grids.size() > 1)
    return grids[1].emitError()
           << "a second grid; the dcrt runtime has one communicator, the "
              "world, so an artifact has one grid";
  if (!grids.empty()) {
    shard::GridOp grid = grids.front();
    gridName = grid.getSymName().str();
    for (int64_t size : grid.getShape()) {
      if (ShapedType::isDynamic(size))
        return grid.emitError()
               << "has a dynamic axis; an artifact needs the world size";
      world *= size;
    }
    gridShape.assign(grid.getShape().begin(), grid.getShape().end());
  }
  if (worldSize != 0 && worldSize != world)
    return module.emitError()
           << "the module runs on " << world << " rank(s)"
           << (grids.empty() ? " (it has no grid)" : "")
           << " but world-size=" << int64_t(worldSize) << " was asked for";
  return success();
}

/// Writes "shape", "dtype" and, for a shard, "local" of `type`. A block of
/// experts (`expertAxis`, dc-expert-parallel) is written as the full
/// tensor, sharded over its axis first (which block) and then the axes the
/// block is sharded over (which slot of it): dc-run then finds the rank's
/// elements, and checkpoints hold full tensors.
LogicalResult ArtifactManifestPass::writeTensor(
    llvm::json::OStream &json, Location loc, Type type, const Twine &what,
    std::optional<int64_t> expertAxis, bool optimizerScalar) {
  if (isa<HostType>(type))
    return emitError(loc) << what << " is " << type
                          << ", in host memory; an artifact keeps only "
                             "parameter shard arguments (dc-offload-params) "
                             "and optimizer state arguments "
                             "(dc-offload-optimizer-state) in host memory";
  RankedTensorType tensor;
  std::optional<int64_t> local;
  ArrayRef<int64_t> shardAxes;
  if (auto shard = dyn_cast<ShardType>(type)) {
    tensor = shard.getLogical();
    local = shard.getLocal();
    shardAxes = shard.getAxes();
  } else {
    tensor = dyn_cast<RankedTensorType>(type);
  }
  if (!tensor || !tensor.hasStaticShape())
    return emitError(loc) << what << " has type " << type
                          << "; an artifact takes statically shaped "
                             "tensors";
  std::optional<StringRef> dtype = getDTypeName(tensor.getElementType());
  // The optimizer's f64 scalars (its learning rate, the squared norm) are
  // the only f64 tensors a step exchanges: dc-run fills and reads them.
  if (optimizerScalar && tensor.getElementType().isF64() &&
      tensor.getRank() == 0)
    dtype = StringRef("f64");
  if (!dtype)
    return emitError(loc) << what << " has element type "
                          << tensor.getElementType()
                          << ", which the dcrt runtime has no dtype for "
                             "(f32, bf16, f16, i32, i64)";
  if (expertAxis) {
    if (*expertAxis < 0 || *expertAxis >= int64_t(gridShape.size()))
      return emitError(loc)
             << what << " is a block of experts on grid axis " << *expertAxis
             << ", which the grid @" << gridName << " does not have";
    SmallVector<int64_t> shape(tensor.getShape());
    shape[0] *= gridShape[*expertAxis];
    json.attributeArray("shape", [&] {
      for (int64_t dim : shape)
        json.value(dim);
    });
    json.attribute("dtype", *dtype);
    json.attribute("local", local ? *local : tensor.getNumElements());
    json.attributeArray("shard_axes", [&] {
      json.value(*expertAxis);
      for (int64_t axis : shardAxes)
        json.value(axis);
    });
    return success();
  }
  json.attributeArray("shape", [&] {
    for (int64_t dim : tensor.getShape())
      json.value(dim);
  });
  json.attribute("dtype", *dtype);
  if (local) {
    json.attribute("local", *local);
    // The shard's group, where the grid has axes it does not span: ranks
    // that differ only on those hold the same slot (absent: every axis).
    if (gridShape.size() > 1)
      json.attributeArray("shard_axes", [&] {
        for (int64_t axis : shardAxes)
          json.value(axis);
      });
  }
  return success();
}

LogicalResult ArtifactManifestPass::writeStep(llvm::json::OStream &json,
                                              func::FuncOp fn) {
  if (failed(verifyStepSignature(fn)))
    return failure();
  auto entry = StringAttr::get(&getContext(), "dc_entry_" + fn.getSymName());
  fn->setAttr("dc.entry", entry);
  LogicalResult result = success();
  std::optional<MemoryTimeline> timeline;
  json.object([&] {
    json.attribute("name", fn.getSymName());
    json.attribute("entry", entry.getValue());
    // What one rank computes per step, for dc-run's TFLOP/s: a loop counts
    // its body times its trip count, so nothing inside one is counted again.
    double flops = 0;
    fn.walk<WalkOrder::PreOrder>([&](Operation *op) {
      flops += CostModel::countFlops(op);
      return isa<scf::ForOp>(op) ? WalkResult::skip() : WalkResult::advance();
    });
    json.attribute("flops", flops);
    // Gradient accumulation (dc-accumulate-gradients): the final form
    // names its accumulating form and the accumulating form its final one.
    if (auto other =
            fn->getAttrOfType<FlatSymbolRefAttr>(kAccumulatingStepAttrName))
      json.attribute("accumulating_step", other.getValue());
    if (auto other =
            fn->getAttrOfType<FlatSymbolRefAttr>(kAccumulatesForAttrName))
      json.attribute("accumulates_for", other.getValue());
    if (auto micro = fn->getAttrOfType<IntegerAttr>(kMicroBatchesAttrName))
      json.attribute("micro_batches", micro.getInt());
    // The optimizer inside the step (dc-optimizer-in-step): its
    // hyperparameters, which dc-run must not contradict.
    if (auto optimizer = fn->getAttrOfType<DictionaryAttr>(kOptimizerAttrName))
      json.attributeObject("optimizer", [&] {
        for (NamedAttribute entry : optimizer) {
          if (auto text = dyn_cast<StringAttr>(entry.getValue()))
            json.attribute(entry.getName(), text.getValue());
          else if (auto number = dyn_cast<FloatAttr>(entry.getValue()))
            json.attribute(entry.getName(), number.getValueAsDouble());
          else if (auto count = dyn_cast<IntegerAttr>(entry.getValue()))
            json.attribute(entry.getName(), count.getInt());
        }
      });
    // A block of experts (dc-expert-parallel) is written whole, and so is
    // everything of its shape that belongs to it: its gradient, its
    // accumulator, its update and its optimizer state.
    llvm::DenseMap<int64_t, int64_t> expertAxisOfParam;
    for (unsigned i = 0, e = fn.getNumArguments(); i < e; ++i)
      if (auto param = fn.getArgAttrOfType<ParamAttr>(i, kParamAttrName))
        if (auto axis =
                fn.getArgAttrOfType<IntegerAttr>(i, kExpertAxisAttrName))
          expertAxisOfParam[param.getId()] = axis.getInt();
    auto expertAxisOf =
        [&](std::optional<int64_t> param) -> std::optional<int64_t> {
      if (param)
        if (auto it = expertAxisOfParam.find(*param);
            it != expertAxisOfParam.end())
          return it->second;
      return std::nullopt;
    };
    json.attributeArray("args", [&] {
      // The first error of a step is enough (one per argument repeats).
      for (BlockArgument arg : fn.getArguments()) {
        if (failed(result))
          return;
        unsigned i = arg.getArgNumber();
        fn.setArgAttr(i, bufferization::BufferizationDialect::kWritableAttrName,
                      BoolAttr::get(&getContext(), false));
        json.object([&] {
          std::string name = getArgName(fn, i);
          if (auto param = fn.getArgAttrOfType<ParamAttr>(i, kParamAttrName)) {
            json.attribute("kind", "param");
            json.attribute("id", param.getId());
            if (param.getName())
              name = param.getName().str();
          } else if (std::optional<int64_t> id = getAccumulatedParam(fn, i)) {
            // An fp32 gradient accumulator the caller keeps across the
            // micro-batches of an optimizer step.
            json.attribute("kind", "grad_accum");
            json.attribute("param", *id);
          } else if (std::optional<OptimizerStateRef> state =
                         getOptimizerState(fn.getArgAttrDict(i))) {
            // A moment or master the caller keeps across steps.
            json.attribute("kind", "opt_state");
            json.attribute("param", state->param);
            json.attribute("state", state->state);
          } else if (fn.getArgAttr(i, kLearningRateAttrName)) {
            json.attribute("kind", "learning_rate");
          } else if (fn.getArgAttr(i, kStepCountAttrName)) {
            json.attribute("kind", "step_count");
          } else {
            json.attribute("kind", "data");
          }
          json.attribute("name", name);
          // A parameter shard kept in host memory (dc-offload-params), or
          // optimizer state (dc-offload-optimizer-state): the caller
          // allocates it there; the step uploads it (and writes the state
          // back into it).
          Type type = arg.getType();
          auto host = dyn_cast<HostType>(type);
          bool hostShard = host && ((isa<ShardType>(host.getValue()) &&
                                     fn.getArgAttr(i, kParamAttrName)) ||
                                    getOptimizerState(fn.getArgAttrDict(i)));
          if (hostShard)
            type = host.getValue();
          std::optional<int64_t> owner = getAccumulatedParam(fn, i);
          if (auto param = fn.getArgAttrOfType<ParamAttr>(i, kParamAttrName))
            owner = param.getId();
          else if (std::optional<OptimizerStateRef> state =
                       getOptimizerState(fn.getArgAttrDict(i)))
            owner = state->param;
          std::optional<int64_t> expertAxis = expertAxisOf(owner);
          if (failed(writeTensor(
                  json, arg.getLoc(), type, "argument #" + Twine(i), expertAxis,
                  fn.getArgAttr(i, kLearningRateAttrName) != nullptr)))
            result = failure();
          if (hostShard)
            json.attribute("memory", "host");
          // A sequence-sharded data argument (dc-ulysses): the rank holds
          // its part of dim "seq_dim", by its coordinate on "seq_axis".
          auto seqDim = fn.getArgAttrOfType<IntegerAttr>(i, kSeqDimAttrName);
          auto seqAxis = fn.getArgAttrOfType<IntegerAttr>(i, kSeqAxisAttrName);
          if (seqDim && seqAxis && !fn.getArgAttr(i, kParamAttrName)) {
            json.attribute("seq_dim", seqDim.getInt());
            json.attribute("seq_axis", seqAxis.getInt());
          }
          // Ids past the tables the step reads at them would read and
          // write outside those tables: dc.vocab may not exceed the
          // smallest extent they index, and without dc.vocab that extent
          // is the argument's vocabulary (dc-run's --vocab may only
          // narrow it).
          auto tensor = dyn_cast<RankedTensorType>(arg.getType());
          std::optional<IndexBound> bound;
          if (tensor && tensor.getElementType().isSignlessInteger() &&
              !fn.getArgAttr(i, kParamAttrName))
            bound = findIndexBound(arg);
          if (Attribute vocab = fn.getArgAttr(i, kVocabAttrName)) {
            auto value = dyn_cast<IntegerAttr>(vocab);
            if (!value || value.getInt() <= 0 ||
                fn.getArgAttr(i, kParamAttrName) || !tensor ||
                !tensor.getElementType().isSignlessInteger()) {
              emitError(arg.getLoc())
                  << "argument #" << i << ": " << kVocabAttrName
                  << " must be a positive integer on an integer data "
                     "argument (token ids), got "
                  << vocab;
              result = failure();
            } else if (bound && value.getInt() > bound->bound) {
              InFlightDiagnostic diag =
                  emitError(arg.getLoc())
                  << "argument #" << i << ": " << kVocabAttrName << " = "
                  << value.getInt() << " exceeds the " << bound->bound
                  << " entries its ids index: a larger id would read or "
                     "write outside the table";
              diag.attachNote(bound->where)
                  << "indexed here (an extent of " << bound->bound << ")";
              result = failure();
            } else {
              json.attribute("vocab", value.getInt());
            }
          } else if (bound) {
            json.attribute("vocab", bound->bound);
          }
        });
      }
    });
    SmallVector<int64_t> inArguments;
    json.attributeArray("results", [&] {
      for (auto [i, type] : llvm::enumerate(fn.getResultTypes())) {
        if (getAccumulatingResultParam(fn, i) ||
            fn.getResultAttr(i, kParamUpdateAttrName) ||
            getOptimizerState(fn.getResultAttrDict(i)))
          inArguments.push_back(static_cast<int64_t>(i));
        if (failed(result))
          return;
        json.object([&] {
          if (fn.getResultAttr(i, kLossAttrName)) {
            json.attribute("kind", "loss");
          } else if (std::optional<int64_t> id =
                         getAccumulatingResultParam(fn, i)) {
            // The accumulator updated, in its argument's buffer.
            json.attribute("kind", "grad_accum");
            json.attribute("param", *id);
          } else if (auto id = fn.getResultAttrOfType<IntegerAttr>(
                         i, kParamUpdateAttrName)) {
            // The parameter updated, in its argument's buffer.
            json.attribute("kind", "param_update");
            json.attribute("param", id.getInt());
          } else if (std::optional<OptimizerStateRef> state =
                         getOptimizerState(fn.getResultAttrDict(i))) {
            // The state updated, in its argument's buffer.
            json.attribute("kind", "opt_state");
            json.attribute("param", state->param);
            json.attribute("state", state->state);
          } else if (fn.getResultAttr(i, kGradSquaresAttrName)) {
            // The squared global gradient norm (f64).
            json.attribute("kind", "grad_squares");
          } else if (auto grad =
                         fn.getResultAttrOfType<GradAttr>(i, kGradAttrName)) {
            json.attribute("kind", "grad");
            json.attribute("param", grad.getParam());
          } else {
            fn.emitError() << "result #" << i
                           << " is neither the loss (dc.loss) nor a "
                              "gradient (dc.grad); the runtime knows no "
                              "other results";
            result = failure();
          }
          std::optional<int64_t> owner = getAccumulatingResultParam(fn, i);
          if (auto grad = fn.getResultAttrOfType<GradAttr>(i, kGradAttrName))
            owner = grad.getParam();
          else if (auto id = fn.getResultAttrOfType<IntegerAttr>(
                       i, kParamUpdateAttrName))
            owner = id.getInt();
          else if (std::optional<OptimizerStateRef> state =
                       getOptimizerState(fn.getResultAttrDict(i)))
            owner = state->param;
          std::optional<int64_t> expertAxis = expertAxisOf(owner);
          if (failed(writeTensor(
                  json, fn.getLoc(), type, "result #" + Twine(i), expertAxis,
                  fn.getResultAttr(i, kGradSquaresAttrName) != nullptr)))
            result = failure();
        });
      }
    });
    if (!inArguments.empty())
      fn->setAttr(kResultsInArgumentsAttrName,
                  DenseI64ArrayAttr::get(&getContext(), inArguments));
    // The device memory dc's plan says the step peaks at (the memory
    // timeline's: the arguments it holds on the device, gathered copies,
    // temporaries and results), which dc-run holds the measured peak to.
    // (A step whose tensors could not be written has no plan.)
    if (succeeded(result)) {
      FailureOr<MemoryTimeline> computed = MemoryTimeline::compute(fn);
      if (failed(computed)) {
        result = failure();
        return;
      }
      timeline = std::move(*computed);
      json.attribute("planned_peak_bytes", timeline->getPeakDeviceBytes());
    }
  });
  // The same timeline sizes the runtime's pools.
  if (!timeline)
    return failure();
  FailureOr<PlanBytes> stepPlan = getPlanBytes(fn, *timeline, world, gridShape);
  if (failed(stepPlan))
    return failure();
  plan.gatherArena = std::max(plan.gatherArena, stepPlan->gatherArena);
  plan.hostPool = std::max(plan.hostPool, stepPlan->hostPool);
  plan.stepBuffers = std::max(plan.stepBuffers, stepPlan->stepBuffers);
  plan.staging = std::max(plan.staging, stepPlan->staging);
  return result;
}

/// The manifest's last member, `"checksum"`: the FNV-1a 64-bit hash of
/// every byte before it, in 16 lowercase hex digits (dcrt.h). dc-run refuses
/// a manifest whose text does not match it, so an artifact edited after
/// dc-compile wrote it (a world size, a shape) does not run. Every writer of
/// the text seals it again, replacing the member an earlier one added; a
/// terminating NUL stays last.
static std::string sealManifest(StringRef text) {
  constexpr StringLiteral key = ",\"checksum\":\"";
  constexpr size_t member = key.size() + 16 + 2; // the hex digits, "}
  bool terminated = text.consume_back(StringRef("\0", 1));
  if (text.size() >= member &&
      text.substr(text.size() - member).starts_with(key))
    text = text.drop_back(member);
  else if (text.ends_with("}"))
    text = text.drop_back(1);
  else
    DC_UNREACHABLE("the manifest is a JSON object");
  uint64_t hash = dcrt_fnv1a64(DCRT_FNV1A64_SEED, text.data(), text.size());
  std::string sealed;
  llvm::raw_string_ostream os(sealed);
  os << text << key << llvm::format_hex_no_prefix(hash, 16) << "\"}";
  if (terminated)
    os << '\0';
  return sealed;
}

/// Adds `dc_artifact_abi_version` and `dc_artifact_manifest`.
void ArtifactManifestPass::exportFunctions(ModuleOp module,
                                           StringRef manifest) {
  MLIRContext *context = &getContext();
  Location loc = module.getLoc();
  auto i32 = IntegerType::get(context, 32);
  auto ptr = LLVM::LLVMPointerType::get(context);
  OpBuilder builder = OpBuilder::atBlockEnd(module.getBody());

  auto version =
      LLVM::LLVMFuncOp::create(builder, loc, "dc_artifact_abi_version",
                               LLVM::LLVMFunctionType::get(i32, {}));
  OpBuilder body = OpBuilder::atBlockBegin(version.addEntryBlock(builder));
  LLVM::ReturnOp::create(
      body, loc,
      LLVM::ConstantOp::create(body, loc, i32, DCRT_ABI_VERSION).getResult());

  auto manifestFn =
      LLVM::LLVMFuncOp::create(builder, loc, "dc_artifact_manifest",
                               LLVM::LLVMFunctionType::get(ptr, {}));
  body.setInsertionPointToStart(manifestFn.addEntryBlock(builder));
  // A C string: the global holds the terminating NUL.
  Value text = LLVM::createGlobalString(
      loc, body, "dc_manifest_json",
      sealManifest((manifest + Twine('\0')).str()), LLVM::Linkage::Internal);
  LLVM::ReturnOp::create(body, loc, text);
}

void ArtifactManifestPass::runOnOperation() {
  ModuleOp module = getOperation();
  for (StringRef name : {"dc_artifact_abi_version", "dc_artifact_manifest"})
    if (Operation *existing = module.lookupSymbol(name)) {
      existing->emitError()
          << "@" << name << " is exported by the artifact itself";
      return signalPassFailure();
    }
  if (failed(findWorld(module)))
    return signalPassFailure();
  for (auto fn : module.getOps<func::FuncOp>())
    if (!fn.isExternal() && failed(checkLowerable(fn)))
      return signalPassFailure();

  std::string manifest;
  llvm::raw_string_ostream os(manifest);
  llvm::json::OStream json(os);
  LogicalResult result = success();
  std::string steps;
  llvm::raw_string_ostream stepsOs(steps);
  llvm::json::OStream stepsJson(stepsOs);
  // Steps first: they also give the plan, which comes before them.
  stepsJson.array([&] {
    for (auto fn : module.getOps<func::FuncOp>())
      if (fn.isPublic() && !fn.isExternal() && failed(writeStep(stepsJson, fn)))
        result = failure();
  });
  if (failed(result))
    return signalPassFailure();
  if (steps == "[]") {
    module.emitError("no step: an artifact exports the public functions with "
                     "a body, and this module has none");
    return signalPassFailure();
  }

  json.object([&] {
    json.attribute("abi", DCRT_ABI_VERSION);
    // The lowering, for the runtime to pick its backend.
    json.attribute("target", stringifyLowering(
                                 getModuleTarget(module).description.lowering));
    if (checkFinite)
      json.attribute("check_finite", true);
    json.attribute("world_size", world);
    json.attribute("grid", gridName);
    // Absent, the grid is one axis of the world size.
    if (gridShape.size() > 1)
      json.attributeArray("grid_shape", [&] {
        for (int64_t size : gridShape)
          json.value(size);
      });
    json.attributeObject("plan", [&] {
      json.attribute("gather_arena_bytes", plan.gatherArena);
      json.attribute("host_pool_bytes", plan.hostPool);
      // Filled in by dc-assign-step-arena, once the step is bufferized.
      json.attribute("step_arena_bytes", 0);
      json.attribute("step_buffer_bytes", plan.stepBuffers);
      json.attribute("staging_bytes", plan.staging);
    });
    json.attributeBegin("steps");
    json.rawValue(steps);
    json.attributeEnd();
  });
  exportFunctions(module, manifest);
}

} // namespace

/// Replaces the manifest global's text with `json`.
static void setManifestText(LLVM::GlobalOp global, StringRef text) {
  std::string json = sealManifest(text);
  MLIRContext *context = global.getContext();
  global.setValueAttr(StringAttr::get(context, json));
  global.setGlobalType(
      LLVM::LLVMArrayType::get(IntegerType::get(context, 8), json.size()));
}

LogicalResult dc::setManifestResultArenaOffsets(ModuleOp module, StringRef step,
                                                ArrayRef<int64_t> offsets) {
  auto global = module.lookupSymbol<LLVM::GlobalOp>("dc_manifest_json");
  if (!global || offsets.empty())
    return success();
  auto text = dyn_cast_or_null<StringAttr>(global.getValueOrNull());
  std::string json = text ? text.getValue().str() : std::string();
  // dc-artifact-manifest writes compact JSON, each step's name first and
  // its results as flat objects (no object inside one): the i-th '}' after
  // "results":[ closes result #i. Edited in place, so every other field
  // keeps its place.
  std::string name = ("{\"name\":\"" + step + "\",").str();
  size_t at = json.find(name);
  if (at != std::string::npos)
    at = json.find("\"results\":[", at);
  if (at == std::string::npos)
    return global.emitError()
           << "the manifest has no results of step '" << step << "'";
  at += std::strlen("\"results\":[");
  for (int64_t offset : offsets) {
    size_t end = json[at] == '{' ? json.find('}', at) : std::string::npos;
    if (end == std::string::npos)
      return global.emitError()
             << "the manifest's step '" << step << "' has fewer than "
             << offsets.size() << " results";
    std::string field = (",\"arena_offset\":" + Twine(offset)).str();
    json.insert(end, field);
    at = end + field.size() + 1;
    if (json[at] == ',')
      ++at;
  }
  setManifestText(global, json);
  return success();
}

LogicalResult dc::setManifestPlanBytes(ModuleOp module, StringRef field,
                                       int64_t bytes) {
  auto global = module.lookupSymbol<LLVM::GlobalOp>("dc_manifest_json");
  if (!global)
    return success();
  auto text = dyn_cast_or_null<StringAttr>(global.getValueOrNull());
  // dc-artifact-manifest writes compact JSON: "<field>":0.
  std::string key = ("\"" + field + "\":0").str();
  size_t at = text ? text.getValue().find(key) : StringRef::npos;
  if (at == StringRef::npos)
    return global.emitError()
           << "the manifest has no plan field \"" << field << "\" to fill in";
  std::string json = text.getValue().str();
  json.replace(at, key.size(), ("\"" + field + "\":" + Twine(bytes)).str());
  setManifestText(global, json);
  return success();
}
