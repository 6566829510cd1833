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
    // Dropping a cached gather touches no data.
    return !std::is_same_v<OpTy, InvalidateGatheredOp>;
  }

  bool bufferizesToMemoryWrite(Operation *op, OpOperand &operand,
                               const AnalysisState &state) const {
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

/// dc.attention and dc.attention_grad, left fused for a target that calls
/// the runtime's flash attention: they bufferize to dc.attention_into and
/// dc.attention_grad_into, which read their operands' buffers and write
/// freshly allocated outputs (memref.alloc, which dc-assign-step-arena
/// places). A strided view is copied to a dense buffer first, except a
/// [B, S, H, D] operand of the bshd form, which the runtime reads in place
/// (a column slice of a fused q/k/v projection, say).
/// A rank-4 device view whose innermost stride is 1: what the bshd form of
/// dc.attention_into takes for every operand but lse.
static bool isStridedView(MemRefType type) {
  SmallVector<int64_t> strides;
  int64_t offset;
  return type.getRank() == 4 && isStridedDeviceBuffer(type) &&
         succeeded(type.getStridesAndOffset(strides, offset)) &&
         strides.back() == 1;
}

template <typename OpTy, typename IntoOpTy>
struct AttentionModel : public BufferizableOpInterface::ExternalModel<
                            AttentionModel<OpTy, IntoOpTy>, OpTy> {
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
    bool bshd = cast<OpTy>(op).getBshd();
    SmallVector<Value> operands;
    for (Value operand : op->getOperands()) {
      FailureOr<Value> buffer = getBuffer(rewriter, operand, options, state);
      if (failed(buffer))
        return failure();
      Value dense = *buffer;
      if (!isDeviceBuffer(dense.getType()) &&
          !(bshd && isStridedView(cast<MemRefType>(dense.getType())))) {
        // A strided view: the runtime takes dense row-major buffers.
        auto type = cast<MemRefType>(getBufferFormType(operand.getType()));
        FailureOr<Value> copy =
            options.createAlloc(rewriter, op->getLoc(), type, {});
        if (failed(copy) ||
            failed(options.createMemCpy(rewriter, op->getLoc(), dense, *copy)))
          return failure();
        dense = *copy;
      }
      operands.push_back(dense);
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
    // The same properties (scale, causal) on the buffer form.
    llvm::append_range(operands, outputs);
    OperationState into(op->getLoc(), IntoOpTy::getOperationName(), operands,
                        {}, op->getDiscardableAttrDictionary().getValue());
    into.propertiesAttr = op->getPropertiesAsAttribute();
    rewriter.create(into);
    replaceOpWithBufferizedValues(rewriter, op, outputs);
    return success();
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
    AttentionOp::attachInterface<AttentionModel<AttentionOp, AttentionIntoOp>>(
        *context);
    AttentionGradOp::attachInterface<
        AttentionModel<AttentionGradOp, AttentionGradIntoOp>>(*context);
  });
}
