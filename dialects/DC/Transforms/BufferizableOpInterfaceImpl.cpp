//===- BufferizableOpInterfaceImpl.cpp - dc's One-Shot Bufferize models ===//
//
// Every dc op bufferizes to the same op on the buffer forms of its operands
// and results (see DCBase.td). No result aliases an operand: a future's value
// is a buffer the runtime hands out (a gathered parameter in its arena, a
// reduced shard, a host copy), so bufferization adds no allocation and no
// copy for it. Three ops write into a buffer allocated here instead, an
// ordinary temporary that dc-assign-step-arena places: dc.all_to_all (its
// result), dc.all_to_all_start and dc.reload_start (their destination,
// which the future yields; a reloaded value's dc.release goes, its uses end
// its lifetime).
//
//===----------------------------------------------------------------------===//
#include "dc/Dialect/DC/Transforms/BufferizableOpInterfaceImpl.h"

#include "dc/Dialect/DC/IR/DCDialect.h"

#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/IR/DialectRegistry.h"

using namespace mlir;
using namespace mlir::bufferization;
using namespace dc;

Type dc::getBufferFormType(Type type) {
  if (auto tensor = dyn_cast<RankedTensorType>(type))
    return MemRefType::get(tensor.getShape(), tensor.getElementType());
  if (auto shard = dyn_cast<ShardType>(type))
    return MemRefType::get({shard.getLocal()}, shard.getElementType());
  if (auto host = dyn_cast<HostType>(type))
    return getHostValueType(getBufferFormType(host.getValue()));
  if (auto future = dyn_cast<FutureType>(type))
    return FutureType::get(getBufferFormType(future.getValue()));
  return type;
}

namespace {

/// !dc.shard and !dc.host bufferize to their buffer forms.
template <typename T>
struct TensorLikeModel
    : public TensorLikeType::ExternalModel<TensorLikeModel<T>, T> {
  FailureOr<BufferLikeType>
  getBufferType(Type type, const BufferizationOptions &options,
                function_ref<InFlightDiagnostic()> emitError) const {
    return cast<BufferLikeType>(getBufferFormType(type));
  }

  LogicalResult verifyCompatibleBufferType(
      Type type, BufferLikeType bufferType,
      function_ref<InFlightDiagnostic()> emitError) const {
    if (bufferType == getBufferFormType(type))
      return success();
    return emitError() << bufferType << " is not the buffer form "
                       << getBufferFormType(type) << " of " << type;
  }
};

/// Creates `op` again with `operands` and `resultTypes`, keeping its
/// attributes.
Operation *rebuild(RewriterBase &rewriter, Operation *op, ValueRange operands,
                   TypeRange resultTypes) {
  OperationState state(op->getLoc(), op->getName(), operands, resultTypes,
                       op->getDiscardableAttrDictionary().getValue());
  state.propertiesAttr = op->getPropertiesAsAttribute();
  return rewriter.create(state);
}

template <typename OpTy>
struct DCOpModel
    : public BufferizableOpInterface::ExternalModel<DCOpModel<OpTy>, OpTy> {
  bool bufferizesToMemoryRead(Operation *op, OpOperand &operand,
                              const AnalysisState &state) const {
    if (isDownloadDestination(op, operand))
      return false;
    // Dropping a cached gather touches no data.
    return !std::is_same_v<OpTy, InvalidateGatheredOp>;
  }

  /// The caller's host buffer a dc.offload_start writes back into (a step
  /// argument): the runtime overwrites it after every read of it in the
  /// step (the update it feeds comes first), so One-Shot Bufferize must
  /// not give the write a copy of its own, which would leave the caller's
  /// buffer unchanged.
  static bool isDownloadDestination(Operation *op, OpOperand &operand) {
    if constexpr (std::is_same_v<OpTy, OffloadStartOp>)
      return cast<OffloadStartOp>(op).getDestination() &&
             operand.getOperandNumber() == 1;
    return false;
  }

  bool bufferizesToMemoryWrite(Operation *op, OpOperand &operand,
                               const AnalysisState &state) const {
    if (isDownloadDestination(op, operand))
      return false;
    // The runtime reads these operands until the wait. Modelling that as a
    // write keeps later ops from writing the buffer in place meanwhile: a
    // value used again gives the transfer its own copy. Shards are never
    // written by compute, so an offloaded shard needs no such care.
    if constexpr (std::is_same_v<OpTy, OffloadStartOp>)
      return !isa<ShardType>(operand.get().getType());
    return llvm::is_one_of<OpTy, ReduceScatterStartOp, AllReduceStartOp,
                           AllToAllStartOp>::value;
  }

  AliasingValueList getAliasingValues(Operation *op, OpOperand &operand,
                                      const AnalysisState &state) const {
    return {};
  }

  bool bufferizesToAllocation(Operation *op, Value value) const {
    return std::is_same_v<OpTy, AllToAllOp>;
  }

  FailureOr<BufferLikeType>
  getBufferType(Operation *op, Value value, const BufferizationOptions &options,
                const BufferizationState &state,
                SmallVector<Value> &invocationStack) const {
    return cast<BufferLikeType>(getBufferFormType(value.getType()));
  }

  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    SmallVector<Value> operands;
    for (Value operand : op->getOperands()) {
      Type type = operand.getType();
      if (isa<TensorLikeType>(type)) {
        FailureOr<Value> buffer = getBuffer(rewriter, operand, options, state);
        if (failed(buffer))
          return failure();
        // The runtime moves dense row-major buffers: a strided view (a
        // slice of a larger tensor, such as one expert's gradient in the
        // stacked gradient of all experts) goes through a dense copy.
        // (A released or invalidated value is the gathered buffer itself.)
        constexpr bool movesData =
            !llvm::is_one_of<OpTy, ReleaseOp, InvalidateGatheredOp>::value;
        auto dense = dyn_cast<MemRefType>(getBufferFormType(type));
        if (movesData && dense && buffer->getType() != dense) {
          rewriter.setInsertionPoint(op);
          FailureOr<Value> copy =
              options.createAlloc(rewriter, op->getLoc(), dense, {});
          if (failed(copy) || failed(options.createMemCpy(
                                  rewriter, op->getLoc(), *buffer, *copy)))
            return failure();
          buffer = *copy;
        }
        operands.push_back(*buffer);
        continue;
      }
      // Futures come from start ops, which bufferize first (in block order).
      if (getBufferFormType(type) != type)
        return op->emitError() << "operand of type " << type
                               << " does not come from a bufferized dc op";
      operands.push_back(operand);
    }
    rewriter.setInsertionPoint(op);
    if constexpr (std::is_same_v<OpTy, ReleaseOp>) {
      // A reloaded buffer is its reload's destination: nothing to free.
      auto wait = operands.front().getDefiningOp<WaitOp>();
      if (wait && wait.getFuture().getDefiningOp<ReloadStartOp>()) {
        rewriter.eraseOp(op);
        return success();
      }
    }
    if constexpr (llvm::is_one_of<OpTy, ReloadStartOp,
                                  AllToAllStartOp>::value) {
      // The copy's (exchange's) destination: a temporary the step arena plans,
      // live from here to the last use of what the wait yields.
      auto type = cast<MemRefType>(
          cast<FutureType>(getBufferFormType(op->getResult(0).getType()))
              .getValue());
      FailureOr<Value> destination =
          options.createAlloc(rewriter, op->getLoc(), type, {});
      if (failed(destination))
        return failure();
      operands.push_back(*destination);
    }
    if constexpr (std::is_same_v<OpTy, AllToAllOp>) {
      auto type = cast<MemRefType>(
          getBufferFormType(cast<AllToAllOp>(op).getResult().getType()));
      FailureOr<Value> output =
          options.createAlloc(rewriter, op->getLoc(), type, {});
      if (failed(output))
        return failure();
      operands.push_back(*output);
      rebuild(rewriter, op, operands, {});
      replaceOpWithBufferizedValues(rewriter, op, *output);
      return success();
    }
    SmallVector<Type> resultTypes =
        llvm::map_to_vector(op->getResultTypes(), getBufferFormType);
    Operation *bufferOp = rebuild(rewriter, op, operands, resultTypes);
    // A memref does not say which grid axes it is split over: keep the
    // shards' group for the lowering (one per op, as the verifier checks;
    // their axis, or kAllGridAxes for every axis; absent means axis 0).
    if constexpr (llvm::is_one_of<OpTy, GatherStartOp,
                                  ReduceScatterStartOp>::value) {
      Type shard =
          std::is_same_v<OpTy, GatherStartOp>
              ? op->getOperand(0).getType()
              : cast<FutureType>(op->getResult(0).getType()).getValue();
      if (auto shardType = dyn_cast<ShardType>(shard);
          shardType && shardType.getGroupAxis() != 0)
        cast<OpTy>(bufferOp).setAxis(shardType.getGroupAxis());
    }
    replaceOpWithBufferizedValues(rewriter, op, bufferOp->getResults());
    return success();
  }
};

/// Ops a target runs as one library call (dc.attention and
/// dc.attention_grad left fused for the runtime's flash attention; the
/// mixture-of-experts ops): each bufferizes to its buffer form (IntoOpTy),
/// which reads its operands' buffers and writes freshly allocated outputs
/// (memref.alloc, which dc-assign-step-arena places), with the same
/// properties (or, with IntoOpTy void, the buffer form Layout::build
/// makes from the inputs and outputs). An operand buffer the call cannot
/// read as it is (a view `Layout::reads` rejects) is copied to a dense
/// buffer first.
template <typename OpTy, typename IntoOpTy, typename Layout>
struct LibraryCallModel : public BufferizableOpInterface::ExternalModel<
                              LibraryCallModel<OpTy, IntoOpTy, Layout>, OpTy> {
  bool bufferizesToMemoryRead(Operation *op, OpOperand &operand,
                              const AnalysisState &state) const {
    return true;
  }

  bool bufferizesToMemoryWrite(Operation *op, OpOperand &operand,
                               const AnalysisState &state) const {
    return false;
  }

  AliasingValueList getAliasingValues(Operation *op, OpOperand &operand,
                                      const AnalysisState &state) const {
    return {};
  }

  bool bufferizesToAllocation(Operation *op, Value value) const { return true; }

  FailureOr<BufferLikeType>
  getBufferType(Operation *op, Value value, const BufferizationOptions &options,
                const BufferizationState &state,
                SmallVector<Value> &invocationStack) const {
    return cast<BufferLikeType>(getBufferFormType(value.getType()));
  }

  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    // The library's grouping has no capacity: dc-expand-experts rewrites a
    // capacity into two plain groupings before bufferization.
    if constexpr (std::is_same_v<OpTy, GroupByExpertOp>)
      if (cast<OpTy>(op).getCapacity())
        return op->emitError("dc.group_by_expert with a capacity must be "
                             "expanded (dc-expand-experts) before it is "
                             "bufferized");
    SmallVector<Value> operands;
    for (OpOperand &operand : op->getOpOperands()) {
      FailureOr<Value> buffer =
          getBuffer(rewriter, operand.get(), options, state);
      if (failed(buffer))
        return failure();
      Value read = *buffer;
      if (!isDeviceBuffer(read.getType()) &&
          !Layout::reads(cast<OpTy>(op), operand.getOperandNumber(),
                         cast<MemRefType>(read.getType()))) {
        auto type =
            cast<MemRefType>(getBufferFormType(operand.get().getType()));
        FailureOr<Value> copy =
            options.createAlloc(rewriter, op->getLoc(), type, {});
        if (failed(copy) ||
            failed(options.createMemCpy(rewriter, op->getLoc(), read, *copy)))
          return failure();
        read = *copy;
      }
      operands.push_back(read);
    }
    SmallVector<Value> outputs;
    for (Value result : op->getResults()) {
      auto type = cast<MemRefType>(getBufferFormType(result.getType()));
      FailureOr<Value> output =
          options.createAlloc(rewriter, op->getLoc(), type, {});
      if (failed(output))
        return failure();
      outputs.push_back(*output);
    }
    if constexpr (std::is_void_v<IntoOpTy>) {
      Layout::build(rewriter, cast<OpTy>(op), operands, outputs);
    } else {
      llvm::append_range(operands, outputs);
      OperationState into(op->getLoc(), IntoOpTy::getOperationName(), operands,
                          {}, op->getDiscardableAttrDictionary().getValue());
      into.propertiesAttr = op->getPropertiesAsAttribute();
      rewriter.create(into);
    }
    replaceOpWithBufferizedValues(rewriter, op, outputs);
    return success();
  }
};

/// The bshd form of dc.attention_into reads its rank-4 [B, S, H, D]
/// operands as strided views in place (a column slice of a fused q/k/v
/// projection, say); every other operand is dense.
struct AttentionLayout {
  template <typename OpTy>
  static bool reads(OpTy op, unsigned operand, MemRefType buffer) {
    SmallVector<int64_t> strides;
    int64_t offset;
    return op.getBshd() && buffer.getRank() == 4 &&
           isStridedDeviceBuffer(buffer) &&
           succeeded(buffer.getStridesAndOffset(strides, offset)) &&
           strides.back() == 1;
  }
};

/// The routing calls read float operands with a row stride (hasStridedRows;
/// a multi-dim top-k's scores dense) and index operands dense.
struct RoutingLayout {
  static bool reads(Operation *op, unsigned operand, MemRefType buffer) {
    if (!isa<FloatType>(buffer.getElementType()))
      return false;
    if (isa<TopKOp>(op) && buffer.getRank() > 2)
      return false;
    return hasStridedRows(buffer);
  }
};

/// The parameter's element count and the axis dcrt_adamw finds this
/// rank's elements by (its shard's group axis, or -2 where it is not
/// sharded).
std::pair<int64_t, int64_t> slotOf(Type type) {
  if (auto shard = dyn_cast<ShardType>(type))
    return {shard.getLogical().getNumElements(), shard.getGroupAxis()};
  return {cast<ShapedType>(type).getNumElements(), -2};
}

/// dc.grad_squares and dc.adamw read dense buffers only (a shard's flat
/// local buffer); their buffer forms carry the slot's attributes, which the
/// flat buffers no longer show.
struct OptimizerLayout {
  static bool reads(Operation *op, unsigned operand, MemRefType buffer) {
    return false;
  }

  static void build(RewriterBase &rewriter, GradSquaresOp op, ValueRange inputs,
                    ValueRange outputs) {
    auto [fullNumel, shardAxis] = slotOf(op.getGrad().getType());
    GradSquaresIntoOp::create(rewriter, op.getLoc(), inputs[0], inputs[1],
                              outputs[0], rewriter.getI64IntegerAttr(fullNumel),
                              rewriter.getI64IntegerAttr(shardAxis),
                              op.getExpertAxisAttr(), op.getMicroBatchesAttr());
  }

  static void build(RewriterBase &rewriter, GradAccumulateOp op,
                    ValueRange inputs, ValueRange outputs) {
    auto [fullNumel, shardAxis] = slotOf(op.getGrad().getType());
    GradAccumulateIntoOp::create(rewriter, op.getLoc(), inputs[0], inputs[1],
                                 outputs[0], fullNumel, shardAxis);
  }

  static void build(RewriterBase &rewriter, AdamWOp op, ValueRange inputs,
                    ValueRange outputs) {
    auto [fullNumel, shardAxis] = slotOf(op.getParam().getType());
    // Operands: param, grad, exp_avg, exp_avg_sq, [master], lr, step,
    // squares; results: param, exp_avg, exp_avg_sq, [master].
    bool master = op.getMaster() != nullptr;
    unsigned scalars = master ? 5 : 4;
    AdamWIntoOp::create(
        rewriter, op.getLoc(), inputs[0], inputs[1], inputs[2], inputs[3],
        master ? inputs[4] : Value(), inputs[scalars], inputs[scalars + 1],
        inputs[scalars + 2], outputs[0], outputs[1], outputs[2],
        master ? outputs[3] : Value(), rewriter.getI64IntegerAttr(fullNumel),
        rewriter.getI64IntegerAttr(shardAxis), op.getBeta1Attr(),
        op.getBeta2Attr(), op.getEpsAttr(), op.getWeightDecayAttr(),
        op.getMaxGradNormAttr(), op.getMicroBatchesAttr());
  }
};

template <typename... OpTys> void attachOpModels(MLIRContext *context) {
  (OpTys::template attachInterface<DCOpModel<OpTys>>(*context), ...);
}

} // namespace

void dc::registerBufferizableOpInterfaceExternalModels(
    DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *context, DCDialect *dialect) {
    ShardType::attachInterface<TensorLikeModel<ShardType>>(*context);
    HostType::attachInterface<TensorLikeModel<HostType>>(*context);
    attachOpModels<GatherStartOp, WaitOp, ReleaseOp, ReduceScatterStartOp,
                   EndBackwardOp, AllReduceStartOp, OffloadStartOp,
                   ReloadStartOp, AllToAllOp, AllToAllStartOp,
                   InvalidateGatheredOp>(context);
    AttentionOp::attachInterface<
        LibraryCallModel<AttentionOp, AttentionIntoOp, AttentionLayout>>(
        *context);
    AttentionGradOp::attachInterface<LibraryCallModel<
        AttentionGradOp, AttentionGradIntoOp, AttentionLayout>>(*context);
    TopKOp::attachInterface<
        LibraryCallModel<TopKOp, TopKIntoOp, RoutingLayout>>(*context);
    GroupByExpertOp::attachInterface<
        LibraryCallModel<GroupByExpertOp, GroupByExpertIntoOp, RoutingLayout>>(
        *context);
    GatherRowsOp::attachInterface<
        LibraryCallModel<GatherRowsOp, GatherRowsIntoOp, RoutingLayout>>(
        *context);
    ScatterAddRowsOp::attachInterface<LibraryCallModel<
        ScatterAddRowsOp, ScatterAddRowsIntoOp, RoutingLayout>>(*context);
    GroupedMatmulOp::attachInterface<
        LibraryCallModel<GroupedMatmulOp, GroupedMatmulIntoOp, RoutingLayout>>(
        *context);
    GroupedWeightGradOp::attachInterface<LibraryCallModel<
        GroupedWeightGradOp, GroupedWeightGradIntoOp, RoutingLayout>>(*context);
    GradSquaresOp::attachInterface<
        LibraryCallModel<GradSquaresOp, void, OptimizerLayout>>(*context);
    AdamWOp::attachInterface<LibraryCallModel<AdamWOp, void, OptimizerLayout>>(
        *context);
    GradAccumulateOp::attachInterface<
        LibraryCallModel<GradAccumulateOp, void, OptimizerLayout>>(*context);
  });
}
