//===- DCOps.cpp - dc op verifiers and interfaces
//---------------------------===//
#include "dc/Dialect/DC/IR/DCDialect.h"

#include "mlir/Dialect/MemRef/Utils/MemRefUtils.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace dc;

/// A gathered or reduced value may change its element type only between
/// floats (cast before sending, to move fewer bytes).
static bool isCompatibleElementType(Type from, Type to) {
  return from == to || (isa<FloatType>(from) && isa<FloatType>(to));
}

/// The shards of one gather group (or one reduce-scatter bucket) move in one
/// collective call, which runs on the communicator of one group of grid
/// axes.
static bool isOnSameGridAxis(ShardType a, ShardType b) {
  return a.getGrid() == b.getGrid() && a.getAxes() == b.getAxes();
}

/// Prints "@grid[axes]".
static std::string gridAxisName(ShardType shard) {
  std::string name;
  llvm::raw_string_ostream os(name);
  os << "@" << shard.getGrid().getValue() << "[";
  llvm::interleaveComma(shard.getAxes(), os);
  os << "]";
  return name;
}

/// `axis` (the buffer form's record of the shards' group: their axis, or
/// -1 for every axis of the grid) may be spelled on shards only as theirs.
static LogicalResult verifyAxisOfShards(Operation *op,
                                        std::optional<uint64_t> axis,
                                        ShardType shard) {
  if (!axis || static_cast<int64_t>(*axis) == shard.getGroupAxis())
    return success();
  return op->emitOpError() << "has axis = " << static_cast<int64_t>(*axis)
                           << " but its shards are "
                           << "split over " << gridAxisName(shard);
}

/// The buffer form's `axis`: a grid axis, or -1 for every axis at once.
static LogicalResult verifyBufferAxis(Operation *op,
                                      std::optional<uint64_t> axis) {
  if (!axis || static_cast<int64_t>(*axis) >= kAllGridAxes)
    return success();
  return op->emitOpError() << "has axis = " << static_cast<int64_t>(*axis)
                           << "; a group is a grid axis, or -1 for every "
                              "axis of the grid";
}

/// Fails, naming both operands, if `values` holds one value twice.
static LogicalResult verifyNoRepeatedOperand(Operation *op, ValueRange values,
                                             StringRef what, StringRef reason) {
  llvm::SmallDenseMap<Value, size_t> firstIndex;
  for (auto [i, value] : llvm::enumerate(values)) {
    auto [it, inserted] = firstIndex.try_emplace(value, i);
    if (!inserted)
      return op->emitOpError() << what << " #" << i << " repeats " << what
                               << " #" << it->second << "; " << reason;
  }
  return success();
}

/// An op is in tensor form or, after bufferization, in buffer form: its
/// `values` must not mix the two.
static LogicalResult verifyOneForm(Operation *op, ValueRange values,
                                   StringRef what) {
  bool buffers = isa<MemRefType>(values.front().getType());
  for (auto [i, value] : llvm::enumerate(values))
    if (isa<MemRefType>(value.getType()) != buffers)
      return op->emitOpError()
             << what << " #" << i << " is " << value.getType() << " but "
             << what << " #0 is " << values.front().getType()
             << "; an op is either on tensors or on buffers";
  return success();
}

/// In buffer form a shard is the rank's flat slice of the full buffer: at
/// least one and at most all of its elements, of a compatible type.
static LogicalResult verifyBufferShard(Operation *op, unsigned i,
                                       MemRefType local, Type fullType,
                                       StringRef what) {
  auto full = dyn_cast<MemRefType>(fullType);
  if (!full || !isDeviceBuffer(full))
    return op->emitOpError()
           << what << " #" << i << " must be a device buffer, got " << fullType;
  if (local.getRank() != 1)
    return op->emitOpError()
           << "shard buffer #" << i << " must be 1-D, got " << local;
  if (local.getNumElements() < 1 ||
      local.getNumElements() > full.getNumElements())
    return op->emitOpError()
           << "shard buffer #" << i << " holds " << local.getNumElements()
           << " elements; a slice of " << full << " holds 1 to "
           << full.getNumElements();
  if (!isCompatibleElementType(local.getElementType(), full.getElementType()))
    return op->emitOpError()
           << "shard buffer #" << i << " of " << local.getElementType()
           << " does not match " << full.getElementType() << " " << what << " #"
           << i;
  return success();
}

/// The runtime reduces by sum or average (DCRT_SUM, DCRT_AVG) only.
static LogicalResult verifyReductionKind(Operation *op,
                                         shard::ReductionKind kind) {
  if (kind != shard::ReductionKind::Sum &&
      kind != shard::ReductionKind::Average)
    return op->emitOpError()
           << "reduces by " << shard::stringifyReductionKind(kind)
           << "; dc reduces by sum or average";
  return success();
}

/// Gradients are reduced in f32 by the runtime, whatever they are stored in:
/// integers are not gradients.
static LogicalResult verifyFloatGradient(Operation *op, unsigned i,
                                         Type element) {
  if (!isa<FloatType>(element))
    return op->emitOpError() << "gradient #" << i << " is " << element
                             << "; only float gradients are reduced";
  return success();
}

static LogicalResult verifyShardOperands(Operation *op,
                                         SymbolTableCollection &symbols) {
  for (Type type : op->getOperandTypes())
    if (failed(verifyShardAgainstGrid(op, type, symbols)))
      return failure();
  for (Type type : op->getResultTypes())
    if (failed(verifyShardAgainstGrid(op, type, symbols)))
      return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// GatherStartOp
//===----------------------------------------------------------------------===//

LogicalResult GatherStartOp::verify() {
  if (getShards().empty())
    return emitOpError("needs at least one shard");
  if (getShards().size() != getFutures().size())
    return emitOpError() << "has " << getShards().size() << " shards but "
                         << getFutures().size() << " futures";
  if (failed(verifyNoRepeatedOperand(*this, getShards(), "shard",
                                     "a group gathers each parameter once")) ||
      failed(verifyOneForm(*this, getShards(), "shard")))
    return failure();
  if (isa<MemRefType>(getShards()[0].getType())) {
    if (failed(verifyBufferAxis(*this, getAxis())))
      return failure();
    for (auto [i, shard, future] : llvm::enumerate(getShards(), getFutures()))
      if (failed(verifyBufferShard(
              *this, i, cast<MemRefType>(shard.getType()),
              cast<FutureType>(future.getType()).getValue(), "future")))
        return failure();
    return success();
  }
  auto firstShard = cast<ShardType>(getShards()[0].getType());
  for (auto [i, shardValue, future] :
       llvm::enumerate(getShards(), getFutures())) {
    auto shard = cast<ShardType>(shardValue.getType());
    if (!isOnSameGridAxis(shard, firstShard))
      return emitOpError() << "shard #" << i << " is split over "
                           << gridAxisName(shard) << " but shard #0 over "
                           << gridAxisName(firstShard)
                           << "; one group must use one communicator";
    if (failed(verifyAxisOfShards(*this, getAxis(), shard)))
      return failure();
    auto full = dyn_cast<RankedTensorType>(
        cast<FutureType>(future.getType()).getValue());
    if (!full)
      return emitOpError() << "future #" << i << " must hold a tensor";
    if (full.getShape() != shard.getLogical().getShape())
      return emitOpError() << "future #" << i << " holds " << full
                           << " but the shard's logical tensor is "
                           << shard.getLogical();
    if (!isCompatibleElementType(shard.getElementType(), full.getElementType()))
      return emitOpError() << "cannot gather " << shard.getElementType()
                           << " shard #" << i << " as "
                           << full.getElementType();
  }
  return success();
}

LogicalResult GatherStartOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyShardOperands(*this, symbols);
}

//===----------------------------------------------------------------------===//
// ReleaseOp
//===----------------------------------------------------------------------===//

LogicalResult ReleaseOp::verify() {
  auto wait = getValue().getDefiningOp<WaitOp>();
  Operation *start = wait ? wait.getFuture().getDefiningOp() : nullptr;
  if (!isa_and_nonnull<GatherStartOp, ReloadStartOp>(start))
    return emitOpError("operand must be a gathered parameter or a reloaded "
                       "value (the result of dc.wait on a dc.gather_start or "
                       "dc.reload_start future)");
  if (auto gather = dyn_cast<GatherStartOp>(start);
      gather && gather.getPersistent())
    return emitOpError("releases a persistent gather; persistent gathers stay "
                       "live until the end of the step");
  if (isa<ReloadStartOp>(start) && isa<MemRefType>(getValue().getType()))
    return emitOpError("releases a reloaded buffer; in buffer form that is "
                       "the reload's destination, an ordinary temporary that "
                       "lives until its last use (it has no release)");
  return success();
}

//===----------------------------------------------------------------------===//
// ReduceScatterStartOp
//===----------------------------------------------------------------------===//

LogicalResult ReduceScatterStartOp::verify() {
  if (getGradients().empty())
    return emitOpError("needs at least one gradient");
  if (getGradients().size() != getFutures().size())
    return emitOpError() << "has " << getGradients().size() << " gradients but "
                         << getFutures().size() << " futures";
  if (failed(verifyReductionKind(*this, getKind())) ||
      failed(verifyOneForm(*this, getGradients(), "gradient")))
    return failure();
  if (isa<MemRefType>(getGradients()[0].getType())) {
    if (failed(verifyBufferAxis(*this, getAxis())))
      return failure();
    for (auto [i, grad, future] :
         llvm::enumerate(getGradients(), getFutures())) {
      auto shard =
          dyn_cast<MemRefType>(cast<FutureType>(future.getType()).getValue());
      if (!shard)
        return emitOpError()
               << "future #" << i << " must hold a shard buffer (memref)";
      if (failed(
              verifyBufferShard(*this, i, shard, grad.getType(), "gradient")) ||
          failed(verifyFloatGradient(
              *this, i, cast<MemRefType>(grad.getType()).getElementType())))
        return failure();
    }
    return success();
  }
  ShardType firstShard;
  for (auto [i, grad, future] : llvm::enumerate(getGradients(), getFutures())) {
    auto full = cast<RankedTensorType>(grad.getType());
    auto shard =
        dyn_cast<ShardType>(cast<FutureType>(future.getType()).getValue());
    if (!shard)
      return emitOpError() << "future #" << i << " must hold a !dc.shard";
    if (!firstShard)
      firstShard = shard;
    if (!isOnSameGridAxis(shard, firstShard))
      return emitOpError() << "gradient #" << i << " is scattered over "
                           << gridAxisName(shard) << " but gradient #0 over "
                           << gridAxisName(firstShard)
                           << "; one bucket must use one communicator";
    if (failed(verifyAxisOfShards(*this, getAxis(), shard)))
      return failure();
    if (full.getShape() != shard.getLogical().getShape())
      return emitOpError() << "gradient #" << i << " is " << full
                           << " but its shard's logical tensor is "
                           << shard.getLogical();
    if (!isCompatibleElementType(full.getElementType(), shard.getElementType()))
      return emitOpError() << "cannot reduce " << full.getElementType()
                           << " gradient #" << i << " into a "
                           << shard.getElementType() << " shard";
    if (failed(verifyFloatGradient(*this, i, full.getElementType())))
      return failure();
  }
  return success();
}

LogicalResult
ReduceScatterStartOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyShardOperands(*this, symbols);
}

//===----------------------------------------------------------------------===//
// EndBackwardOp
//===----------------------------------------------------------------------===//

LogicalResult EndBackwardOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location, ValueRange operands,
    DictionaryAttr attributes, OpaqueProperties properties, RegionRange regions,
    SmallVectorImpl<Type> &inferredReturnTypes) {
  for (Value operand : operands) {
    auto future = dyn_cast<FutureType>(operand.getType());
    if (!future)
      return emitOptionalError(location, "operand is not a !dc.future");
    inferredReturnTypes.push_back(future.getValue());
  }
  return success();
}

LogicalResult EndBackwardOp::verify() {
  if (failed(verifyNoRepeatedOperand(*this, getFutures(), "operand",
                                     "each future is taken exactly once")))
    return failure();
  for (auto [i, future] : llvm::enumerate(getFutures()))
    if (!future.getDefiningOp<ReduceScatterStartOp>())
      return emitOpError() << "operand #" << i
                           << " is not a dc.reduce_scatter_start future";
  return success();
}

//===----------------------------------------------------------------------===//
// OffloadStartOp, ReloadStartOp
//===----------------------------------------------------------------------===//

LogicalResult OffloadStartOp::verify() {
  Value destination = getDestination();
  if (!destination)
    return success();
  Type host = cast<FutureType>(getFuture().getType()).getValue();
  if (destination.getType() != host)
    return emitOpError() << "destination type " << destination.getType()
                         << " is not the host value's type " << host;
  // Only a caller's buffer: the runtime's host copies are its own.
  if (auto arg = dyn_cast<BlockArgument>(destination))
    if (arg.getOwner()->isEntryBlock() &&
        isa<FunctionOpInterface>(arg.getOwner()->getParentOp()))
      return success();
  return emitOpError("writes into a host value that is not a step argument "
                     "(the caller's buffer)");
}

LogicalResult OffloadStartOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyShardOperands(*this, symbols);
}

LogicalResult ReloadStartOp::verify() {
  // The buffer form copies into a destination the step plans (an arena
  // temporary); the tensor form has none.
  bool bufferForm = isa<MemRefType>(getHost().getType());
  if (bufferForm && !getDestination())
    return emitOpError("in buffer form needs a destination (`into`), the "
                       "device buffer the copy writes");
  if (!bufferForm && getDestination())
    return emitOpError(
        "of a !dc.host value takes no destination; only the "
        "buffer form (a #dc.host_memory memref) copies into one");
  Type value = cast<FutureType>(getFuture().getType()).getValue();
  if (getDestination() && getDestination().getType() != value)
    return emitOpError() << "destination type " << getDestination().getType()
                         << " is not the reloaded buffer's type " << value;
  // The runtime brings back its own host copies (dcrt_reload_into) and the
  // caller's host buffers, step arguments (dcrt_upload_into).
  Value host = getHost();
  if (auto arg = dyn_cast<BlockArgument>(host))
    if (arg.getOwner()->isEntryBlock() &&
        isa<FunctionOpInterface>(arg.getOwner()->getParentOp()))
      return success();
  if (auto wait = host.getDefiningOp<WaitOp>())
    if (wait.getFuture().getDefiningOp<OffloadStartOp>())
      return success();
  return emitOpError("reloads a host value that is neither a step argument "
                     "(a parameter kept in host memory) nor the host copy of "
                     "a dc.offload_start (the dc.wait of its future)");
}

LogicalResult ReloadStartOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyShardOperands(*this, symbols);
}

//===----------------------------------------------------------------------===//
// AllToAllOp
//===----------------------------------------------------------------------===//

ShapedType AllToAllOp::getOutputType() {
  Value shaped = getOutput() ? Value(getOutput()) : Value(getResult());
  return cast<ShapedType>(shaped.getType());
}

/// The shape rule both all-to-all forms share: same rank and element type,
/// static shapes, split and concat dims in range.
static LogicalResult verifyExchange(Operation *op, ShapedType input,
                                    ShapedType result, int64_t split,
                                    int64_t concat) {
  int64_t rank = input.getRank();
  if (!input.hasStaticShape() || !result.hasStaticShape())
    return op->emitOpError("needs statically shaped tensors");
  if (result.getRank() != rank)
    return op->emitOpError() << "result rank " << result.getRank()
                             << " differs from input rank " << rank;
  if (input.getElementType() != result.getElementType())
    return op->emitOpError("must not change the element type");
  for (auto [name, dim] : {std::pair<StringRef, int64_t>{"split_dim", split},
                           {"concat_dim", concat}})
    if (dim < 0 || dim >= rank)
      return op->emitOpError()
             << name << " " << dim << " is out of range for a rank-" << rank
             << " tensor";
  return success();
}

/// The result shape for the size of the grid axis: split dim divided,
/// concat dim multiplied.
static LogicalResult verifyExchangeShape(Operation *op, FlatSymbolRefAttr grid,
                                         int64_t axis, ShapedType input,
                                         ShapedType result, int64_t split,
                                         int64_t concat,
                                         SymbolTableCollection &symbols) {
  FailureOr<int64_t> parts = getGridAxisSize(op, grid, axis, symbols);
  if (failed(parts))
    return failure();
  if (input.getDimSize(split) % *parts != 0)
    return op->emitOpError()
           << "split dim " << split << " of size " << input.getDimSize(split)
           << " is not divisible by the axis size " << *parts;
  SmallVector<int64_t> expected(input.getShape());
  expected[split] /= *parts;
  expected[concat] *= *parts;
  if (result.getShape() != ArrayRef<int64_t>(expected))
    return op->emitOpError()
           << "result shape must be " << input.clone(expected)
           << " for an axis of size " << *parts << ", got " << result;
  return success();
}

LogicalResult AllToAllOp::verify() {
  bool buffers = isa<MemRefType>(getInput().getType());
  if (buffers && (!getOutput() || getResult()))
    return emitOpError("on buffers writes into an output buffer and has no "
                       "result");
  if (!buffers && (getOutput() || !getResult()))
    return emitOpError("on tensors has a result and no output buffer");
  return verifyExchange(*this, cast<ShapedType>(getInput().getType()),
                        getOutputType(), getSplitDim(), getConcatDim());
}

LogicalResult AllToAllOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyExchangeShape(
      *this, getGridAttr(), getAxis(), cast<ShapedType>(getInput().getType()),
      getOutputType(), getSplitDim(), getConcatDim(), symbols);
}

//===----------------------------------------------------------------------===//
// AllToAllStartOp
//===----------------------------------------------------------------------===//

ShapedType AllToAllStartOp::getOutputType() {
  return dyn_cast<ShapedType>(
      cast<FutureType>(getFuture().getType()).getValue());
}

LogicalResult AllToAllStartOp::verify() {
  // Like dc.reload_start: the buffer form exchanges into a destination the
  // step plans, and the future yields it.
  bool buffers = isa<MemRefType>(getInput().getType());
  Type value = cast<FutureType>(getFuture().getType()).getValue();
  if (buffers && !getOutput())
    return emitOpError("in buffer form needs an output buffer (`into`), the "
                       "device buffer the exchange writes");
  if (!buffers && getOutput())
    return emitOpError("on tensors takes no output buffer; only the buffer "
                       "form exchanges into one");
  if (buffers ? !isa<MemRefType>(value) : !isa<RankedTensorType>(value))
    return emitOpError() << "future must hold a "
                         << (buffers ? "buffer" : "ranked tensor")
                         << " like its input, got " << value;
  if (getOutput() && getOutput().getType() != value)
    return emitOpError() << "output type " << getOutput().getType()
                         << " is not the future's value type " << value;
  return verifyExchange(*this, cast<ShapedType>(getInput().getType()),
                        getOutputType(), getSplitDim(), getConcatDim());
}

LogicalResult
AllToAllStartOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyExchangeShape(
      *this, getGridAttr(), getAxis(), cast<ShapedType>(getInput().getType()),
      getOutputType(), getSplitDim(), getConcatDim(), symbols);
}

//===----------------------------------------------------------------------===//
// AllReduceStartOp
//===----------------------------------------------------------------------===//

LogicalResult AllReduceStartOp::verify() {
  if (failed(verifyReductionKind(*this, getKind())))
    return failure();
  Type input = getInput().getType();
  if (auto shard = dyn_cast<ShardType>(input))
    input = shard.getLogical();
  Type element = getElementTypeOrSelf(input);
  if (getKind() == shard::ReductionKind::Average && !isa<FloatType>(element))
    return emitOpError() << "cannot average " << element << " values; use sum";
  return success();
}

LogicalResult
AllReduceStartOp::verifySymbolUses(SymbolTableCollection &symbols) {
  if (failed(getGridAxisSize(*this, getGridAttr(), getAxis(), symbols)))
    return failure();
  auto shard = dyn_cast<ShardType>(getInput().getType());
  if (!shard)
    return success();
  // A shard is reduced over the axis its slices repeat along, never the
  // axis it is split over (that would sum different slices).
  if (shard.getGrid() != getGridAttr() ||
      shard.isSplitOver(static_cast<int64_t>(getAxis())))
    return emitOpError() << "all-reduces a shard of " << gridAxisName(shard)
                         << " over " << getGridAttr() << "[" << getAxis()
                         << "]; a shard is all-reduced over another axis of "
                            "its own grid";
  return verifyShardOperands(*this, symbols);
}

//===----------------------------------------------------------------------===//
// InvalidateGatheredOp
//===----------------------------------------------------------------------===//

LogicalResult
InvalidateGatheredOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyShardOperands(*this, symbols);
}

#define GET_OP_CLASSES
#include "dc/Dialect/DC/IR/DCOps.cpp.inc"

//===----------------------------------------------------------------------===//
// StepArenaOp
//===----------------------------------------------------------------------===//

LogicalResult CheckFiniteOp::verify() {
  MemRefType type = getBuffer().getType();
  Type element = type.getElementType();
  if (!(element.isF32() || element.isBF16() || element.isF16()))
    return emitOpError() << "checks f32, bf16 or f16 buffers, got " << type;
  if (!type.hasStaticShape() || type.getMemorySpace() ||
      !memref::isStaticShapeAndContiguousRowMajor(type))
    return emitOpError() << "needs a statically shaped, contiguous buffer in "
                            "device memory, got "
                         << type;
  return success();
}

LogicalResult StepArenaOp::verify() {
  MemRefType type = getArena().getType();
  if (type.getRank() != 1 || !type.hasStaticShape() ||
      type.getNumElements() < 1 || !type.getElementType().isInteger(8) ||
      !type.getLayout().isIdentity() || type.getMemorySpace())
    return emitOpError() << "must be a non-empty, statically sized 1-D i8 "
                            "buffer in device memory, got "
                         << type;
  return success();
}
