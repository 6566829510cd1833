//===- DCToDCRT.cpp - bufferized dc ops to dcrt runtime calls -------------===//
//
// Each dc op in buffer form becomes calls of the dcrt C ABI (dcrt.h). A
// future is lowered to {dcrt_future handle, address of the stack slot the
// runtime writes the buffer's address to}; a wait reads the slot after
// dcrt_wait, so it holds whether the runtime fills it at the start or at
// completion.
//
//===----------------------------------------------------------------------===//
#include "dc/Lowering/DCToDCRT.h"
#include "dc/GPU/Passes.h"
#include "dc/Lowering/Passes.h"

#include "RuntimeFunctions.h"
#include "dc/Dialect/DC/IR/DCDialect.h"
#include "dc/Dialect/DC/IR/TypeSizes.h"
#include "dc/Lowering/GemmForm.h"
#include "dc/Support/Assert.h"
#include "dcrt/dcrt.h"

#include "mlir/Conversion/LLVMCommon/MemRefBuilder.h"
#include "mlir/Conversion/LLVMCommon/Pattern.h"
#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/AttrTypeSubElements.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Transforms/DialectConversion.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/xxhash.h"

namespace dc {
#define GEN_PASS_DEF_DCTODCRT
#include "dc/Lowering/Passes.h.inc"
} // namespace dc

using namespace mlir;
using namespace dc;

FailureOr<FirstWaits> dc::findFirstWaits(ModuleOp module) {
  FirstWaits firstWaits;
  llvm::DenseSet<Operation *> waitedStarts;
  WalkResult walk = module.walk([&](Operation *op) {
    if (!isa<WaitOp, EndBackwardOp>(op))
      return WalkResult::advance();
    SmallVector<bool> &first = firstWaits[op];
    for (Value future : op->getOperands()) {
      Operation *start = future.getDefiningOp();
      if (!start || start->getBlock() != op->getBlock()) {
        op->emitError("waits a future made outside its block; dc-to-dcrt "
                      "needs each start op and its waits in one block");
        return WalkResult::interrupt();
      }
      first.push_back(waitedStarts.insert(start).second);
    }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  return firstWaits;
}

namespace {

/// The dcrt_dtype of an element type.
std::optional<int32_t> getDType(Type type) {
  if (type.isF32())
    return DCRT_F32;
  if (type.isBF16())
    return DCRT_BF16;
  if (type.isF16())
    return DCRT_F16;
  if (type.isSignlessInteger(32))
    return DCRT_I32;
  if (type.isSignlessInteger(64))
    return DCRT_I64;
  // The optimizer's scalars (its learning rate, the squared norm's
  // all-reduce).
  if (type.isF64())
    return DCRT_F64;
  return std::nullopt;
}

/// The grid axis of a gather or reduce-scatter: its buffer form keeps no
/// shard type, so bufferization records the shards' axis on the op; hand-
/// written buffer IR without it means the one axis of a 1-D grid.
template <typename OpTy> int64_t getShardAxis(OpTy op) {
  return static_cast<int64_t>(op.getAxis().value_or(0));
}

/// The verifiers admit only the reductions the runtime has.
int32_t getReduceOp(shard::ReductionKind kind) {
  return kind == shard::ReductionKind::Sum ? DCRT_SUM : DCRT_AVG;
}

MemRefType getBufferType(Value value) {
  Type type = value.getType();
  if (auto future = dyn_cast<FutureType>(type))
    type = future.getValue();
  return cast<MemRefType>(type);
}

/// Shared by the patterns: dcrt calls, stack arrays, futures.
template <typename OpTy>
class DCRTPattern : public ConvertOpToLLVMPattern<OpTy> {
public:
  DCRTPattern(const LLVMTypeConverter &converter, const FirstWaits &firstWaits)
      : ConvertOpToLLVMPattern<OpTy>(converter), firstWaits(firstWaits) {}

protected:
  Type ptrType() const {
    return LLVM::LLVMPointerType::get(this->getContext());
  }
  Type i32Type() const { return IntegerType::get(this->getContext(), 32); }
  Type i64Type() const { return IntegerType::get(this->getContext(), 64); }

  Value i32(OpBuilder &builder, Location loc, int64_t value) const {
    return LLVM::ConstantOp::create(builder, loc, i32Type(), value);
  }
  Value i64(OpBuilder &builder, Location loc, int64_t value) const {
    return LLVM::ConstantOp::create(builder, loc, i64Type(), value);
  }

  /// The dcrt_dtype of `type`'s elements; fails with an error on `op`.
  FailureOr<int32_t> dtype(Operation *op, MemRefType type) const {
    if (std::optional<int32_t> code = getDType(type.getElementType()))
      return *code;
    return op->emitError() << "element type " << type.getElementType()
                           << " has no dcrt_dtype (f32, bf16, f16, i32, i64)";
  }

  /// Calls dcrt function `name` (RuntimeFunctions.cpp has its signature),
  /// declaring it on first use; fails (with an error) if the module
  /// declares it with another type. The result is null for a void function.
  FailureOr<Value> call(OpBuilder &builder, Operation *op, StringRef name,
                        ValueRange args) const {
    FailureOr<LLVM::LLVMFuncOp> fn = lookupOrCreateRuntimeFunction(
        builder, op->getParentOfType<ModuleOp>(), name);
    if (failed(fn))
      return failure();
    auto callOp = LLVM::CallOp::create(builder, op->getLoc(), *fn, args);
    return callOp.getNumResults() ? callOp.getResult() : Value();
  }

  /// `count` stack slots of `type` in the entry block of `op`'s function
  /// (static allocas, however often the op runs).
  Value stackSlots(OpBuilder &builder, Operation *op, Type type,
                   int64_t count) const {
    OpBuilder::InsertionGuard guard(builder);
    auto fn = op->getParentOfType<FunctionOpInterface>();
    builder.setInsertionPointToStart(&fn.getFunctionBody().front());
    Value size = i64(builder, op->getLoc(), count);
    return LLVM::AllocaOp::create(builder, op->getLoc(), ptrType(), type, size);
  }

  /// Address of slot `i` of the stack array `base` of `type`.
  Value slot(OpBuilder &builder, Location loc, Type type, Value base,
             int64_t i) const {
    return LLVM::GEPOp::create(builder, loc, ptrType(), type, base,
                               ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(i)});
  }

  /// A stack array holding `values` (all of `type`).
  Value array(OpBuilder &builder, Operation *op, Type type,
              ValueRange values) const {
    Value base = stackSlots(builder, op, type, values.size());
    for (auto [i, value] : llvm::enumerate(values))
      LLVM::StoreOp::create(builder, op->getLoc(), value,
                            slot(builder, op->getLoc(), type, base, i));
    return base;
  }

  Value alignedPtr(OpBuilder &builder, Location loc, Value memref) const {
    return MemRefDescriptor(memref).alignedPtr(builder, loc);
  }

  /// Replaces `op`, whose operands are all buffers, by a call of dcrt
  /// function `name` with the stack array of `fields` (its int64_t
  /// descriptor) and then each operand's address (offset included), in the
  /// op's order.
  LogicalResult callWithDescriptor(ConversionPatternRewriter &rewriter,
                                   Operation *op, ValueRange buffers,
                                   StringRef name, ValueRange fields) const {
    SmallVector<Value> args = {array(rewriter, op, i64Type(), fields)};
    for (auto [value, buffer] : llvm::zip(op->getOperands(), buffers)) {
      MemRefDescriptor descriptor(buffer);
      args.push_back(descriptor.bufferPtr(rewriter, op->getLoc(),
                                          *this->getTypeConverter(),
                                          cast<MemRefType>(value.getType())));
    }
    if (failed(call(rewriter, op, name, args)))
      return failure();
    rewriter.eraseOp(op);
    return success();
  }

  /// The futures of a start op: its handle with each of its `count` slots.
  SmallVector<Value> futures(OpBuilder &builder, Location loc, Value handle,
                             Value slots, int64_t count) const {
    Type type = LLVM::LLVMStructType::getLiteral(this->getContext(),
                                                 {ptrType(), ptrType()});
    SmallVector<Value> result;
    for (int64_t i = 0; i < count; ++i) {
      Value future = LLVM::PoisonOp::create(builder, loc, type);
      future = LLVM::InsertValueOp::create(builder, loc, future, handle,
                                           ArrayRef<int64_t>{0});
      future = LLVM::InsertValueOp::create(
          builder, loc, future, slot(builder, loc, ptrType(), slots, i),
          ArrayRef<int64_t>{1});
      result.push_back(future);
    }
    return result;
  }

  /// Waits the futures of `op` (dcrt_wait where `op` is the first waiter of
  /// their start) and returns their buffers as memref descriptors.
  FailureOr<SmallVector<Value>> waitBuffers(OpBuilder &builder, Operation *op,
                                            ValueRange futures) const {
    Location loc = op->getLoc();
    ArrayRef<bool> first = firstWaits.at(op);
    SmallVector<Value> buffers;
    for (auto [i, future] : llvm::enumerate(futures)) {
      if (first[i] &&
          failed(call(builder, op, "dcrt_wait",
                      LLVM::ExtractValueOp::create(builder, loc, future,
                                                   ArrayRef<int64_t>{0})
                          .getResult())))
        return failure();
    }
    for (auto [future, result] : llvm::zip(futures, op->getResults())) {
      Value slotPtr = LLVM::ExtractValueOp::create(builder, loc, future,
                                                   ArrayRef<int64_t>{1});
      Value address = LLVM::LoadOp::create(builder, loc, ptrType(), slotPtr);
      buffers.push_back(MemRefDescriptor::fromStaticShape(
          builder, loc, *this->getTypeConverter(),
          cast<MemRefType>(result.getType()), address));
    }
    return buffers;
  }

  const FirstWaits &firstWaits;
};

struct GatherStartLowering : public DCRTPattern<GatherStartOp> {
  using DCRTPattern::DCRTPattern;

  LogicalResult
  matchAndRewrite(GatherStartOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    SmallVector<Value> shards, local, full, src, dst;
    for (auto [shard, future, buffer] :
         llvm::zip(op.getShards(), op.getFutures(), adaptor.getShards())) {
      MemRefType shardType = getBufferType(shard);
      MemRefType fullType = getBufferType(future);
      FailureOr<int32_t> srcType = dtype(op, shardType);
      FailureOr<int32_t> dstType = dtype(op, fullType);
      if (failed(srcType) || failed(dstType))
        return failure();
      shards.push_back(alignedPtr(rewriter, loc, buffer));
      local.push_back(i64(rewriter, loc, shardType.getNumElements()));
      full.push_back(i64(rewriter, loc, fullType.getNumElements()));
      src.push_back(i32(rewriter, loc, *srcType));
      dst.push_back(i32(rewriter, loc, *dstType));
    }
    int64_t n = shards.size();
    Value outFull = stackSlots(rewriter, op, ptrType(), n);
    FailureOr<Value> handle =
        call(rewriter, op, "dcrt_gather_start",
             {i32(rewriter, loc, getShardAxis(op)), i32(rewriter, loc, n),
              array(rewriter, op, ptrType(), shards),
              array(rewriter, op, i64Type(), local),
              array(rewriter, op, i64Type(), full),
              array(rewriter, op, i32Type(), src),
              array(rewriter, op, i32Type(), dst), outFull});
    if (failed(handle))
      return failure();
    if (op.getPersistent()) {
      // Kept for the rest of the step, then returned to the arena.
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPoint(op->getBlock()->getTerminator());
      for (int64_t i = 0; i < n; ++i)
        if (failed(call(
                rewriter, op, "dcrt_release",
                LLVM::LoadOp::create(rewriter, loc, ptrType(),
                                     slot(rewriter, loc, ptrType(), outFull, i))
                    .getResult())))
          return failure();
    }
    rewriter.replaceOp(op, futures(rewriter, loc, *handle, outFull, n));
    return success();
  }
};

struct ReduceScatterStartLowering : public DCRTPattern<ReduceScatterStartOp> {
  using DCRTPattern::DCRTPattern;

  LogicalResult
  matchAndRewrite(ReduceScatterStartOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    SmallVector<Value> grads, full, gradTypes, local, shardTypes;
    for (auto [grad, future, buffer] : llvm::zip(
             op.getGradients(), op.getFutures(), adaptor.getGradients())) {
      MemRefType gradType = getBufferType(grad);
      MemRefType shardType = getBufferType(future);
      FailureOr<int32_t> gradCode = dtype(op, gradType);
      FailureOr<int32_t> shardCode = dtype(op, shardType);
      if (failed(gradCode) || failed(shardCode))
        return failure();
      grads.push_back(alignedPtr(rewriter, loc, buffer));
      full.push_back(i64(rewriter, loc, gradType.getNumElements()));
      gradTypes.push_back(i32(rewriter, loc, *gradCode));
      local.push_back(i64(rewriter, loc, shardType.getNumElements()));
      shardTypes.push_back(i32(rewriter, loc, *shardCode));
    }
    int64_t n = grads.size();
    Value outShards = stackSlots(rewriter, op, ptrType(), n);
    FailureOr<Value> handle =
        call(rewriter, op, "dcrt_reduce_scatter_start",
             {i32(rewriter, loc, getShardAxis(op)), i32(rewriter, loc, n),
              i32(rewriter, loc, getReduceOp(op.getKind())),
              array(rewriter, op, ptrType(), grads),
              array(rewriter, op, i64Type(), full),
              array(rewriter, op, i32Type(), gradTypes),
              array(rewriter, op, i64Type(), local),
              array(rewriter, op, i32Type(), shardTypes), outShards});
    if (failed(handle))
      return failure();
    rewriter.replaceOp(op, futures(rewriter, loc, *handle, outShards, n));
    return success();
  }
};

struct AllReduceStartLowering : public DCRTPattern<AllReduceStartOp> {
  using DCRTPattern::DCRTPattern;

  LogicalResult
  matchAndRewrite(AllReduceStartOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MemRefType type = getBufferType(op.getInput());
    FailureOr<int32_t> code = dtype(op, type);
    if (failed(code))
      return failure();
    Value out = stackSlots(rewriter, op, ptrType(), 1);
    FailureOr<Value> handle =
        call(rewriter, op, "dcrt_all_reduce_start",
             {i32(rewriter, loc, op.getAxis()),
              i32(rewriter, loc, getReduceOp(op.getKind())),
              alignedPtr(rewriter, loc, adaptor.getInput()),
              i64(rewriter, loc, type.getNumElements()),
              i32(rewriter, loc, *code), out});
    if (failed(handle))
      return failure();
    rewriter.replaceOp(op, futures(rewriter, loc, *handle, out, 1));
    return success();
  }
};

/// The runtime call that brings a host buffer back to the device: a step
/// argument (a parameter shard kept in host memory) is the caller's, so it
/// is uploaded and left alone; any other is a host copy (the wait of a
/// dc.offload_start, as the verifier ensures), which is reloaded and
/// returns to the host pool.
StringRef getReloadFunction(ReloadStartOp op) {
  return isa<BlockArgument>(op.getHost()) ? "dcrt_upload_into"
                                          : "dcrt_reload_into";
}

/// dc.offload_start: copy the bytes of one buffer to a host-pool buffer the
/// runtime picks, or into the caller's host buffer (`into`).
struct OffloadStartLowering : public DCRTPattern<OffloadStartOp> {
  using DCRTPattern::DCRTPattern;

  LogicalResult
  matchAndRewrite(OffloadStartOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value out = stackSlots(rewriter, op, ptrType(), 1);
    Value source = alignedPtr(rewriter, loc, adaptor.getValue());
    Value bytes =
        i64(rewriter, loc, getTypeBytes(getBufferType(op.getValue())));
    FailureOr<Value> handle;
    if (op.getDestination()) {
      // Into the caller's host buffer, which the future's slot names.
      Value destination = alignedPtr(rewriter, loc, adaptor.getDestination());
      LLVM::StoreOp::create(rewriter, loc, destination, out);
      handle = call(rewriter, op, "dcrt_download_into",
                    {source, bytes, destination});
    } else {
      handle = call(rewriter, op, "dcrt_offload_start", {source, bytes, out});
    }
    if (failed(handle))
      return failure();
    rewriter.replaceOp(op, futures(rewriter, loc, *handle, out, 1));
    return success();
  }
};

/// dc.reload_start: copy the bytes of a host buffer into its destination,
/// which the future's slot names (no buffer of the runtime's own).
struct ReloadStartLowering : public DCRTPattern<ReloadStartOp> {
  using DCRTPattern::DCRTPattern;

  LogicalResult
  matchAndRewrite(ReloadStartOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (!op.getDestination())
      return rewriter.notifyMatchFailure(op, "not in buffer form");
    Location loc = op.getLoc();
    Value destination = alignedPtr(rewriter, loc, adaptor.getDestination());
    Value out = stackSlots(rewriter, op, ptrType(), 1);
    LLVM::StoreOp::create(rewriter, loc, destination, out);
    FailureOr<Value> handle =
        call(rewriter, op, getReloadFunction(op),
             {alignedPtr(rewriter, loc, adaptor.getHost()),
              i64(rewriter, loc, getTypeBytes(getBufferType(op.getHost()))),
              destination});
    if (failed(handle))
      return failure();
    rewriter.replaceOp(op, futures(rewriter, loc, *handle, out, 1));
    return success();
  }
};

template <typename OpTy> struct WaitLowering : public DCRTPattern<OpTy> {
  using DCRTPattern<OpTy>::DCRTPattern;

  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    FailureOr<SmallVector<Value>> buffers =
        this->waitBuffers(rewriter, op, adaptor.getOperands());
    if (failed(buffers))
      return failure();
    rewriter.replaceOp(op, *buffers);
    return success();
  }
};

/// dc.all_to_all and dc.all_to_all_start: dcrt_all_to_all_start into the
/// output buffer. The synchronous form waits at once; the start form hands
/// the handle to its dc.wait, and the future's slot names the output (no
/// buffer of the runtime's own), as for dc.reload_start.
template <typename OpTy> struct AllToAllLowering : public DCRTPattern<OpTy> {
  using DCRTPattern<OpTy>::DCRTPattern;

  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (!op.getOutput())
      return rewriter.notifyMatchFailure(op, "not in buffer form");
    Location loc = op.getLoc();
    MemRefType type = getBufferType(op.getInput());
    FailureOr<int32_t> code = this->dtype(op, type);
    if (failed(code))
      return failure();
    SmallVector<Value> shape =
        llvm::map_to_vector(type.getShape(), [&](int64_t dim) {
          return this->i64(rewriter, loc, dim);
        });
    Value output = this->alignedPtr(rewriter, loc, adaptor.getOutput());
    FailureOr<Value> handle =
        this->call(rewriter, op, "dcrt_all_to_all_start",
                   {this->i32(rewriter, loc, op.getAxis()),
                    this->alignedPtr(rewriter, loc, adaptor.getInput()), output,
                    this->i32(rewriter, loc, type.getRank()),
                    this->array(rewriter, op, this->i64Type(), shape),
                    this->i64(rewriter, loc, op.getSplitDim()),
                    this->i64(rewriter, loc, op.getConcatDim()),
                    this->i32(rewriter, loc, *code)});
    if (failed(handle))
      return failure();
    if constexpr (std::is_same_v<OpTy, AllToAllOp>) {
      if (failed(this->call(rewriter, op, "dcrt_wait", {*handle})))
        return failure();
      rewriter.eraseOp(op);
    } else {
      Value out = this->stackSlots(rewriter, op, this->ptrType(), 1);
      LLVM::StoreOp::create(rewriter, loc, output, out);
      rewriter.replaceOp(op, this->futures(rewriter, loc, *handle, out, 1));
    }
    return success();
  }
};

/// dc.release and dc.invalidate_gathered: one call on one buffer.
template <typename OpTy> struct BufferCallLowering : public DCRTPattern<OpTy> {
  BufferCallLowering(const LLVMTypeConverter &converter,
                     const FirstWaits &firstWaits, StringRef function)
      : DCRTPattern<OpTy>(converter, firstWaits), function(function) {}

  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (failed(this->call(
            rewriter, op, function,
            this->alignedPtr(rewriter, op.getLoc(), adaptor.getOperands()[0]))))
      return failure();
    rewriter.eraseOp(op);
    return success();
  }

  StringRef function;
};

/// dc.check_finite: dcrt_check_finite(data, numel, dtype, flags, site),
/// the site a C string that lives as long as the artifact.
struct CheckFiniteLowering : public DCRTPattern<CheckFiniteOp> {
  using DCRTPattern::DCRTPattern;

  LogicalResult
  matchAndRewrite(CheckFiniteOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MemRefType type = op.getBuffer().getType();
    FailureOr<int32_t> code = dtype(op, type);
    if (failed(code))
      return failure();
    Value data = MemRefDescriptor(adaptor.getBuffer())
                     .bufferPtr(rewriter, loc, *getTypeConverter(), type);
    // One global per distinct site, named by a hash of its text.
    std::string text = op.getSite().str();
    std::string symbol =
        "dc_finite_site_" + llvm::utohexstr(llvm::xxh3_64bits(text));
    auto module = op->getParentOfType<ModuleOp>();
    Value site;
    if (auto global = module.lookupSymbol<LLVM::GlobalOp>(symbol))
      site = LLVM::AddressOfOp::create(rewriter, loc, global);
    else
      site = LLVM::createGlobalString(loc, rewriter, symbol,
                                      text + std::string(1, '\0'),
                                      LLVM::Linkage::Internal);
    if (failed(call(
            rewriter, op, "dcrt_check_finite",
            {data, i64(rewriter, loc, type.getNumElements()),
             i32(rewriter, loc, *code),
             i32(rewriter, loc, op.getAllowInf() ? DCRT_FINITE_ALLOW_INF : 0),
             site})))
      return failure();
    rewriter.eraseOp(op);
    return success();
  }
};

struct ClearGatheredLowering : public DCRTPattern<ClearGatheredOp> {
  using DCRTPattern::DCRTPattern;

  LogicalResult
  matchAndRewrite(ClearGatheredOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (failed(call(rewriter, op, "dcrt_clear_gathered", {})))
      return failure();
    rewriter.eraseOp(op);
    return success();
  }
};

/// dc.step_arena: the runtime's arena base as a buffer of the planned size.
struct StepArenaLowering : public DCRTPattern<StepArenaOp> {
  using DCRTPattern::DCRTPattern;

  LogicalResult
  matchAndRewrite(StepArenaOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    FailureOr<Value> base = call(rewriter, op, "dcrt_step_arena", {});
    if (failed(base))
      return failure();
    Value arena = MemRefDescriptor::fromStaticShape(
        rewriter, op.getLoc(), *getTypeConverter(), op.getArena().getType(),
        *base);
    rewriter.replaceOp(op, arena);
    return success();
  }
};

/// A library matrix product (GemmForm.h): dcrt_matmul with its descriptor
/// (dcrt_matmul_desc, sixteen int64_t) built on the stack. Row strides and
/// batch strides come from the buffers' descriptors, so views work.
template <typename OpTy> struct MatmulLowering : public DCRTPattern<OpTy> {
  using DCRTPattern<OpTy>::DCRTPattern;

  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    std::optional<GemmForm> form = getGemmForm(op);
    if (!form)
      return rewriter.notifyMatchFailure(op, "not a library matrix product");
    Location loc = op.getLoc();
    auto linalgOp = cast<linalg::LinalgOp>(op.getOperation());
    SmallVector<Value> buffers = {adaptor.getOperands()[0],
                                  adaptor.getOperands()[1],
                                  adaptor.getOperands()[2]};
    SmallVector<Value> pointers, rowStrides, batchStrides, dtypes;
    for (auto [buffer, value] :
         llvm::zip(buffers, linalgOp->getOperands().take_front(3))) {
      auto type = cast<MemRefType>(value.getType());
      FailureOr<int32_t> code = this->dtype(op, type);
      if (failed(code))
        return failure();
      MemRefDescriptor descriptor(buffer);
      pointers.push_back(
          descriptor.bufferPtr(rewriter, loc, *this->getTypeConverter(), type));
      int64_t rank = type.getRank();
      rowStrides.push_back(descriptor.stride(rewriter, loc, rank - 2));
      batchStrides.push_back(form->batched ? descriptor.stride(rewriter, loc, 0)
                                           : this->i64(rewriter, loc, 0));
      dtypes.push_back(this->i64(rewriter, loc, *code));
    }
    auto i64 = [&](int64_t value) { return this->i64(rewriter, loc, value); };
    SmallVector<Value> fields = {
        i64(form->batch),  i64(form->m),
        i64(form->n),      i64(form->k),
        rowStrides[0],     rowStrides[1],
        rowStrides[2],     batchStrides[0],
        batchStrides[1],   batchStrides[2],
        i64(form->transA), i64(form->transB),
        dtypes[0],         dtypes[1],
        dtypes[2],         i64(op->hasAttr(kGemmOverwriteAttr) ? 0 : 1)};
    Value desc = this->array(rewriter, op, this->i64Type(), fields);
    if (failed(this->call(rewriter, op, "dcrt_matmul",
                          {desc, pointers[0], pointers[1], pointers[2]})))
      return failure();
    rewriter.eraseOp(op);
    return success();
  }
};

/// dc.attention_into and dc.attention_grad_into: dcrt_attention_fwd and
/// dcrt_attention_bwd with their descriptor (dcrt_attention_desc, all
/// int64_t) built on the stack: batch is the product of q's batch dims,
/// batch_kv that of k's (smaller with grouped-query attention). Dense
/// buffers need only those sizes (heads 0); the bshd form's [B, S, H, D]
/// views pass heads = H and each buffer's {B, H, S} strides, read from its
/// memref descriptor.
template <typename OpTy> struct AttentionLowering : public DCRTPattern<OpTy> {
  AttentionLowering(const LLVMTypeConverter &converter,
                    const FirstWaits &firstWaits, StringRef function)
      : DCRTPattern<OpTy>(converter, firstWaits), function(function) {}

  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto qType = cast<MemRefType>(op.getQ().getType());
    auto kType = cast<MemRefType>(op.getK().getType());
    FailureOr<int32_t> code = this->dtype(op, qType);
    if (failed(code))
      return failure();
    bool bshd = op.getBshd();
    ArrayRef<int64_t> shape = qType.getShape();
    int64_t seqDim = getAttentionSeqDim(shape.size(), bshd);
    // Every dim but the sequence and head_dim is a batch dim.
    auto batchOf = [&](MemRefType type) {
      int64_t batch = 1;
      for (auto [dim, size] : llvm::enumerate(type.getShape().drop_back()))
        if (static_cast<int64_t>(dim) != seqDim)
          batch *= size;
      return batch;
    };
    float scale = op.getScale().convertToFloat();
    auto i64 = [&](int64_t value) { return this->i64(rewriter, loc, value); };
    SmallVector<Value> fields = {
        i64(sizeof(dcrt_attention_desc)),
        i64(*code),
        i64(batchOf(qType)),
        i64(shape[seqDim]),
        i64(kType.getShape()[seqDim]),
        i64(shape.back()),
        i64(op.getCausal() ? 1 : 0),
        i64(static_cast<int64_t>(llvm::bit_cast<uint32_t>(scale))),
        i64(batchOf(kType)),
        i64(bshd ? shape[2] : 0)};
    if (bshd) {
      // {outer, head, seq} strides of q, k, v, o, then dO, dq, dk, dv (the
      // backward's; zero in the forward), in the descriptor's order.
      SmallVector<Value> buffers = {adaptor.getQ(), adaptor.getK(),
                                    adaptor.getV(), adaptor.getO()};
      if constexpr (std::is_same_v<OpTy, AttentionGradIntoOp>)
        buffers.append({adaptor.getDO(), adaptor.getDq(), adaptor.getDk(),
                        adaptor.getDv()});
      for (Value buffer : buffers) {
        MemRefDescriptor descriptor(buffer);
        for (unsigned dim : {0u, 2u, 1u})
          fields.push_back(descriptor.stride(rewriter, loc, dim));
      }
    }
    // The dense layout's stride fields (and the forward's backward ones)
    // are unread: zero.
    fields.append(sizeof(dcrt_attention_desc) / sizeof(int64_t) - fields.size(),
                  i64(0));
    return this->callWithDescriptor(rewriter, op, adaptor.getOperands(),
                                    function, fields);
  }

  StringRef function;
};

/// The descriptor fields of a mixture-of-experts buffer op's dcrt call
/// after struct_size, in the struct's order (dcrt.h), all known when
/// compiling: shapes, dtypes and the row strides of the views
/// (getRowStride). `code` gives an operand's dcrt_dtype.
using DTypeOf = function_ref<int64_t(Value)>;

/// The rows of a top-k's scores: every dim but the last.
static int64_t rowsOf(Value value) {
  ArrayRef<int64_t> shape = cast<MemRefType>(value.getType()).getShape();
  int64_t rows = 1;
  for (int64_t size : shape.drop_back())
    rows *= size;
  return rows;
}

static int64_t strideOf(Value value) {
  return getRowStride(cast<MemRefType>(value.getType()));
}

/// Elements of a row: every dim after the first.
static int64_t widthOf(Value value) {
  return cast<MemRefType>(value.getType()).getNumElements() /
         cast<MemRefType>(value.getType()).getShape().front();
}

static SmallVector<int64_t> describe(TopKIntoOp op, DTypeOf code) {
  auto scores = op.getScores().getType();
  int64_t experts = scores.getShape().back();
  // A rank-1 or dense multi-dim scores tensor is rows of `experts`; a
  // rank-2 view has its own row stride.
  int64_t ld = scores.getRank() == 2 ? strideOf(op.getScores()) : experts;
  return {code(op.getScores()),
          code(op.getIndices()),
          rowsOf(op.getScores()),
          experts,
          static_cast<int64_t>(op.getK()),
          ld,
          op.getValues().getType().getShape().back(),
          op.getIndices().getType().getShape().back()};
}

static SmallVector<int64_t> describe(GroupByExpertIntoOp op, DTypeOf code) {
  return {code(op.getIds()), code(op.getOrder()), code(op.getEnds()),
          op.getIds().getType().getNumElements(),
          static_cast<int64_t>(op.getExperts())};
}

/// dcrt_row_map_desc: the indexed rows are the index's, the table's those
/// of the other operand (gather's source, scatter-add's result).
template <typename OpTy>
static SmallVector<int64_t> describeRowMap(OpTy op, DTypeOf code, Value table) {
  return {code(op.getSource()),
          code(op.getIndex()),
          op.getIndex().getType().getShape().front(),
          cast<MemRefType>(table.getType()).getShape().front(),
          widthOf(op.getSource()),
          strideOf(op.getSource()),
          strideOf(op.getResult())};
}

static SmallVector<int64_t> describe(GatherRowsIntoOp op, DTypeOf code) {
  return describeRowMap(op, code, op.getSource());
}

static SmallVector<int64_t> describe(ScatterAddRowsIntoOp op, DTypeOf code) {
  return describeRowMap(op, code, op.getResult());
}

static SmallVector<int64_t> describe(GroupedMatmulIntoOp op, DTypeOf code) {
  ArrayRef<int64_t> lhs = op.getLhs().getType().getShape();
  ArrayRef<int64_t> rhs = op.getRhs().getType().getShape();
  bool transpose = op.getTransposeRhs();
  return {code(op.getLhs()),
          code(op.getEnds()),
          lhs[0],
          rhs[0],
          lhs[1],
          transpose ? rhs[1] : rhs[2],
          transpose ? 1 : 0,
          /*accumulate=*/0,
          strideOf(op.getLhs()),
          rhs[2],
          strideOf(op.getResult()),
          strideOf(op.getRhs()),
          /*out_expert_stride=*/0};
}

static SmallVector<int64_t> describe(GroupedWeightGradIntoOp op, DTypeOf code) {
  ArrayRef<int64_t> lhs = op.getLhs().getType().getShape();
  ArrayRef<int64_t> out = op.getResult().getType().getShape();
  return {code(op.getLhs()),
          code(op.getEnds()),
          lhs[0],
          out[0],
          lhs[1],
          out[2],
          /*transpose_rhs=*/0,
          /*accumulate=*/0,
          strideOf(op.getLhs()),
          strideOf(op.getRhs()),
          out[2],
          /*rhs_expert_stride=*/0,
          strideOf(op.getResult())};
}

/// The mixture-of-experts buffer ops: one dcrt call each, its descriptor
/// (DescTy, all int64_t) built on the stack from describe(), then the
/// operands' addresses in the op's order (the call's).
template <typename OpTy, typename DescTy>
struct RoutingLowering : public DCRTPattern<OpTy> {
  RoutingLowering(const LLVMTypeConverter &converter,
                  const FirstWaits &firstWaits, StringRef function)
      : DCRTPattern<OpTy>(converter, firstWaits), function(function) {}

  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    bool invalid = false;
    auto code = [&](Value value) -> int64_t {
      FailureOr<int32_t> dtype =
          this->dtype(op, cast<MemRefType>(value.getType()));
      invalid |= failed(dtype);
      return succeeded(dtype) ? *dtype : 0;
    };
    SmallVector<int64_t> values = {static_cast<int64_t>(sizeof(DescTy))};
    llvm::append_range(values, describe(op, code));
    if (invalid)
      return failure();
    static_assert(sizeof(DescTy) % sizeof(int64_t) == 0);
    DC_ASSERT(values.size() == sizeof(DescTy) / sizeof(int64_t),
              "describe() fills every field of the descriptor");
    SmallVector<Value> fields;
    for (int64_t value : values)
      fields.push_back(this->i64(rewriter, loc, value));
    return this->callWithDescriptor(rewriter, op, adaptor.getOperands(),
                                    function, fields);
  }

  StringRef function;
};

/// dc.grad_squares_into and dc.adamw_into: one dcrt call each, its
/// descriptor (dcrt_adamw_desc: int64_t fields, then the hyperparameters'
/// doubles stored by their bits) on the stack, then the buffers' addresses
/// in the call's order, null for an absent master.
template <typename OpTy> struct OptimizerLowering : public DCRTPattern<OpTy> {
  using DCRTPattern<OpTy>::DCRTPattern;

  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto code = [&](Value value) -> FailureOr<int32_t> {
      return this->dtype(op, cast<MemRefType>(value.getType()));
    };
    auto local = [](Value value) {
      return cast<MemRefType>(value.getType()).getNumElements();
    };
    auto bits = [](APFloat value) {
      return llvm::bit_cast<int64_t>(value.convertToDouble());
    };
    Value param, master;
    int64_t beta1 = 0, beta2 = 0, eps = 0, weightDecay = 0, maxNorm = 0;
    int64_t distinctAxes = 0, microBatches = 1;
    if constexpr (std::is_same_v<OpTy, AdamWIntoOp>) {
      param = op.getParam();
      master = op.getMaster();
      beta1 = bits(op.getBeta1());
      beta2 = bits(op.getBeta2());
      eps = bits(op.getEps());
      weightDecay = bits(op.getWeightDecay());
      maxNorm = bits(op.getMaxGradNorm());
      microBatches = op.getMicroBatches();
    } else {
      param = op.getGrad();
    }
    if constexpr (std::is_same_v<OpTy, GradSquaresIntoOp>) {
      if (std::optional<int64_t> axis = op.getExpertAxis())
        distinctAxes = int64_t(1) << *axis;
      microBatches = op.getMicroBatches();
    }
    FailureOr<int32_t> paramType = code(param), gradType = code(op.getGrad());
    if (failed(paramType) || failed(gradType))
      return failure();
    // dc.grad_squares reads the gradient alone: the other dtypes are the
    // gradient's, and the moments' f32.
    int64_t momentType = DCRT_F32;
    if constexpr (std::is_same_v<OpTy, AdamWIntoOp>) {
      FailureOr<int32_t> moment = code(op.getExpAvg());
      if (failed(moment))
        return failure();
      momentType = *moment;
    }
    SmallVector<int64_t> values = {
        static_cast<int64_t>(sizeof(dcrt_adamw_desc)),
        static_cast<int64_t>(op.getFullNumel()),
        local(param),
        static_cast<int64_t>(op.getShardAxis()),
        *paramType,
        *gradType,
        master ? int64_t(DCRT_F32) : int64_t(-1),
        momentType,
        beta1,
        beta2,
        eps,
        weightDecay,
        maxNorm,
        distinctAxes,
        microBatches};
    static_assert(sizeof(dcrt_adamw_desc) == 15 * sizeof(int64_t));
    SmallVector<Value> fields;
    for (int64_t value : values)
      fields.push_back(this->i64(rewriter, loc, value));
    SmallVector<Value> args = {
        this->array(rewriter, op, this->i64Type(), fields)};
    auto address = [&](Value original, Value converted) -> Value {
      if (!original)
        return LLVM::ZeroOp::create(rewriter, loc, this->ptrType());
      MemRefDescriptor descriptor(converted);
      return descriptor.bufferPtr(rewriter, loc, *this->getTypeConverter(),
                                  cast<MemRefType>(original.getType()));
    };
    StringRef function;
    if constexpr (std::is_same_v<OpTy, AdamWIntoOp>) {
      function = "dcrt_adamw";
      for (auto [original, converted] :
           {std::pair{op.getParam(), adaptor.getParam()},
            {op.getGrad(), adaptor.getGrad()},
            {op.getExpAvg(), adaptor.getExpAvg()},
            {op.getExpAvgSq(), adaptor.getExpAvgSq()},
            {op.getMaster(), adaptor.getMaster()},
            {op.getLr(), adaptor.getLr()},
            {op.getStep(), adaptor.getStep()},
            {op.getSquares(), adaptor.getSquares()},
            {op.getNewParam(), adaptor.getNewParam()},
            {op.getNewExpAvg(), adaptor.getNewExpAvg()},
            {op.getNewExpAvgSq(), adaptor.getNewExpAvgSq()},
            {op.getNewMaster(), adaptor.getNewMaster()}})
        args.push_back(address(original, converted));
    } else if constexpr (std::is_same_v<OpTy, GradAccumulateIntoOp>) {
      function = "dcrt_grad_accumulate";
      for (auto [original, converted] :
           {std::pair{op.getGrad(), adaptor.getGrad()},
            {op.getSum(), adaptor.getSum()},
            {op.getResult(), adaptor.getResult()}})
        args.push_back(address(original, converted));
    } else {
      function = "dcrt_grad_squares";
      for (auto [original, converted] :
           {std::pair{op.getGrad(), adaptor.getGrad()},
            {op.getSquares(), adaptor.getSquares()},
            {op.getResult(), adaptor.getResult()}})
        args.push_back(address(original, converted));
    }
    if (failed(this->call(rewriter, op, function, args)))
      return failure();
    rewriter.eraseOp(op);
    return success();
  }
};

/// gpu.launch_func of a kernel compiled into a gpu.binary: the binary
/// becomes a constant global, and the launch dcrt_launch_kernel with one
/// stack slot per kernel parameter (dcrt_launch_kernel_coresident where
/// dc-mark-coresident-launches marked it). A buffer passes its whole descriptor
/// (allocated and aligned pointer, offset, sizes, strides), field by field,
/// as the kernel's NVVM lowering expects.
struct LaunchFuncLowering : public DCRTPattern<gpu::LaunchFuncOp> {
  using DCRTPattern::DCRTPattern;

  LogicalResult
  matchAndRewrite(gpu::LaunchFuncOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto module = op->getParentOfType<ModuleOp>();
    auto binary = module.lookupSymbol<gpu::BinaryOp>(op.getKernelModuleName());
    if (!binary || binary.getObjects().size() != 1)
      return op.emitError()
             << "dc-to-dcrt: kernel module " << op.getKernelModuleName()
             << " is not compiled to one gpu.binary object "
                "(run gpu-module-to-binary)";
    auto object = cast<gpu::ObjectAttr>(binary.getObjects()[0]);
    StringRef bytes = object.getObject().getValue();

    // The binary and the kernel's name, once per module.
    std::string binaryName = ("dc_kernels_" + binary.getSymName()).str();
    std::string kernelName = ("dc_kernel_name_" + binary.getSymName() + "_" +
                              op.getKernelName().getValue())
                                 .str();
    OpBuilder global = OpBuilder::atBlockEnd(module.getBody());
    auto i8 = IntegerType::get(getContext(), 8);
    auto binaryGlobal = module.lookupSymbol<LLVM::GlobalOp>(binaryName);
    if (!binaryGlobal)
      binaryGlobal = LLVM::GlobalOp::create(
          global, loc, LLVM::LLVMArrayType::get(i8, bytes.size()),
          /*isConstant=*/true, LLVM::Linkage::Internal, binaryName,
          StringAttr::get(getContext(), bytes), /*alignment=*/16);
    auto nameGlobal = module.lookupSymbol<LLVM::GlobalOp>(kernelName);
    if (!nameGlobal) {
      std::string text = (op.getKernelName().getValue() + Twine('\0')).str();
      nameGlobal = LLVM::GlobalOp::create(
          global, loc, LLVM::LLVMArrayType::get(i8, text.size()),
          /*isConstant=*/true, LLVM::Linkage::Internal, kernelName,
          StringAttr::get(getContext(), text));
    }
    Value binaryPtr =
        LLVM::AddressOfOp::create(rewriter, loc, binaryGlobal).getResult();
    Value namePtr =
        LLVM::AddressOfOp::create(rewriter, loc, nameGlobal).getResult();

    // Kernel parameters, flattened.
    SmallVector<Value> params;
    for (auto [original, converted] :
         llvm::zip(op.getKernelOperands(), adaptor.getKernelOperands())) {
      auto memref = dyn_cast<MemRefType>(original.getType());
      if (!memref) {
        params.push_back(converted);
        continue;
      }
      MemRefDescriptor descriptor(converted);
      params.push_back(descriptor.allocatedPtr(rewriter, loc));
      params.push_back(descriptor.alignedPtr(rewriter, loc));
      params.push_back(descriptor.offset(rewriter, loc));
      for (int64_t d = 0; d < memref.getRank(); ++d)
        params.push_back(descriptor.size(rewriter, loc, d));
      for (int64_t d = 0; d < memref.getRank(); ++d)
        params.push_back(descriptor.stride(rewriter, loc, d));
    }
    SmallVector<Value> slots;
    for (Value param : params) {
      Value slotPtr = stackSlots(rewriter, op, param.getType(), 1);
      LLVM::StoreOp::create(rewriter, loc, param, slotPtr);
      slots.push_back(slotPtr);
    }
    Value args =
        slots.empty()
            ? LLVM::ZeroOp::create(rewriter, loc, ptrType()).getResult()
            : array(rewriter, op, ptrType(), slots);

    SmallVector<Value> dims;
    for (Value dim : {adaptor.getGridSizeX(), adaptor.getGridSizeY(),
                      adaptor.getGridSizeZ(), adaptor.getBlockSizeX(),
                      adaptor.getBlockSizeY(), adaptor.getBlockSizeZ()})
      dims.push_back(dim);
    Value shared = adaptor.getDynamicSharedMemorySize();
    if (!shared)
      shared = i32(rewriter, loc, 0);
    SmallVector<Value> operands = {
        binaryPtr, i64(rewriter, loc, bytes.size()),
        namePtr,   array(rewriter, op, i64Type(), dims),
        shared,    args};
    // A kernel whose blocks wait for each other (a finishing pass): the
    // runtime checks that so many fit on the GPU at once.
    StringRef callee = "dcrt_launch_kernel";
    if (auto coresident =
            op->getAttrOfType<IntegerAttr>(kCoresidentBlocksAttr)) {
      callee = "dcrt_launch_kernel_coresident";
      operands.push_back(i64(rewriter, loc, coresident.getInt()));
    }
    if (failed(call(rewriter, op, callee, operands)))
      return failure();
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void dc::populateDCToDCRTPatterns(LLVMTypeConverter &converter,
                                  RewritePatternSet &patterns,
                                  const FirstWaits &firstWaits) {
  MLIRContext *context = patterns.getContext();
  auto ptr = LLVM::LLVMPointerType::get(context);
  // A buffer-form future is {dcrt_future, address of its buffer's slot}.
  converter.addConversion([=](FutureType type) -> std::optional<Type> {
    if (!isa<MemRefType>(type.getValue()))
      return std::nullopt;
    return LLVM::LLVMStructType::getLiteral(context, {ptr, ptr});
  });
  // Host buffers are plain host addresses.
  converter.addTypeAttributeConversion(
      [](BaseMemRefType,
         HostMemoryAttr attr) -> TypeConverter::AttributeConversionResult {
        return IntegerAttr::get(IntegerType::get(attr.getContext(), 64), 0);
      });

  patterns.add<GatherStartLowering, ReduceScatterStartLowering,
               AllReduceStartLowering, WaitLowering<WaitOp>,
               WaitLowering<EndBackwardOp>, AllToAllLowering<AllToAllOp>,
               AllToAllLowering<AllToAllStartOp>, ClearGatheredLowering,
               StepArenaLowering, CheckFiniteLowering>(converter, firstWaits);
  patterns.add<OffloadStartLowering, ReloadStartLowering>(converter,
                                                          firstWaits);
  patterns.add<LaunchFuncLowering>(converter, firstWaits);
  patterns.add<BufferCallLowering<ReleaseOp>>(converter, firstWaits,
                                              "dcrt_release");
  patterns.add<AttentionLowering<AttentionIntoOp>>(converter, firstWaits,
                                                   "dcrt_attention_fwd");
  patterns.add<AttentionLowering<AttentionGradIntoOp>>(converter, firstWaits,
                                                       "dcrt_attention_bwd");
  patterns.add<BufferCallLowering<InvalidateGatheredOp>>(
      converter, firstWaits, "dcrt_invalidate_gathered");
  patterns.add<RoutingLowering<TopKIntoOp, dcrt_topk_desc>>(
      converter, firstWaits, "dcrt_topk");
  patterns.add<RoutingLowering<GroupByExpertIntoOp, dcrt_group_by_expert_desc>>(
      converter, firstWaits, "dcrt_group_by_expert");
  patterns.add<RoutingLowering<GatherRowsIntoOp, dcrt_row_map_desc>>(
      converter, firstWaits, "dcrt_gather_rows");
  patterns.add<RoutingLowering<ScatterAddRowsIntoOp, dcrt_row_map_desc>>(
      converter, firstWaits, "dcrt_scatter_add_rows");
  patterns.add<RoutingLowering<GroupedMatmulIntoOp, dcrt_grouped_matmul_desc>>(
      converter, firstWaits, "dcrt_grouped_matmul");
  patterns
      .add<RoutingLowering<GroupedWeightGradIntoOp, dcrt_grouped_matmul_desc>>(
          converter, firstWaits, "dcrt_grouped_weight_grad");
  patterns.add<OptimizerLowering<GradSquaresIntoOp>,
               OptimizerLowering<GradAccumulateIntoOp>,
               OptimizerLowering<AdamWIntoOp>>(converter, firstWaits);
}

/// shard.process_multi_index / process_linear_index (dc-ulysses' rank
/// positions): this rank's place in the grid, from dcrt_rank. The runtime
/// numbers ranks row-major over the grid, as the shard dialect does (the
/// last axis varies fastest). Host code only: plain index arithmetic.
static LogicalResult lowerProcessIndices(ModuleOp module) {
  SmallVector<Operation *> ops;
  module.walk([&](Operation *op) {
    if (isa<shard::ProcessMultiIndexOp, shard::ProcessLinearIndexOp>(op))
      ops.push_back(op);
  });
  for (Operation *op : ops) {
    auto gridName = op->getAttrOfType<FlatSymbolRefAttr>("grid");
    auto grid =
        SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(op, gridName);
    if (!grid || ShapedType::isDynamicShape(grid.getShape()))
      return op->emitError()
             << "needs a statically shaped shard.grid " << gridName;
    OpBuilder builder(op);
    Location loc = op->getLoc();
    FailureOr<LLVM::LLVMFuncOp> rankFn =
        lookupOrCreateRuntimeFunction(builder, module, "dcrt_rank");
    if (failed(rankFn))
      return failure();
    Value linear = arith::IndexCastOp::create(
        builder, loc, builder.getIndexType(),
        LLVM::CallOp::create(builder, loc, *rankFn, ValueRange()).getResult());
    SmallVector<Value> results;
    if (isa<shard::ProcessLinearIndexOp>(op)) {
      results.push_back(linear);
    } else {
      ArrayRef<int64_t> shape = grid.getShape();
      SmallVector<shard::GridAxis> axes(
          cast<shard::ProcessMultiIndexOp>(op).getAxes());
      if (axes.empty())
        for (int64_t a = 0, e = shape.size(); a < e; ++a)
          axes.push_back(a);
      auto index = [&](int64_t value) -> Value {
        return arith::ConstantIndexOp::create(builder, loc, value);
      };
      for (shard::GridAxis a : axes) {
        int64_t stride = 1;
        for (int64_t next = a + 1, e = shape.size(); next < e; ++next)
          stride *= shape[next];
        results.push_back(arith::RemUIOp::create(
            builder, loc,
            arith::DivUIOp::create(builder, loc, linear, index(stride)),
            index(shape[a])));
      }
    }
    op->replaceAllUsesWith(results);
    op->erase();
  }
  return success();
}

namespace {

struct DCToDCRTPass : public dc::impl::DCToDCRTBase<DCToDCRTPass> {
  using DCToDCRTBase::DCToDCRTBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *context = &getContext();
    // dcrt_* names are the runtime's: only declarations of its functions
    // may use them (their types are checked where they are called).
    for (Operation &op : *module.getBody()) {
      auto symbol = dyn_cast<SymbolOpInterface>(op);
      auto declaration = dyn_cast<LLVM::LLVMFuncOp>(op);
      if (symbol && symbol.getName().starts_with("dcrt_") &&
          !(declaration && declaration.isExternal())) {
        op.emitError() << "@" << symbol.getName()
                       << ": names dcrt_* are reserved for the runtime";
        return signalPassFailure();
      }
    }
    // The runtime calls take the buffers' aligned pointers: each dc op must
    // hold the dense buffers its verifier demands (a strided view here would
    // lose its offset). dc-compile verifies only at the end, so the dc ops
    // are checked here, where it matters (they are few).
    WalkResult invalid = module.walk([](Operation *op) {
      if (!isa<DCDialect>(op->getDialect()) ||
          succeeded(mlir::verify(op, /*verifyRecursively=*/false)))
        return WalkResult::advance();
      return WalkResult::interrupt();
    });
    if (invalid.wasInterrupted())
      return signalPassFailure();
    FailureOr<FirstWaits> firstWaits = findFirstWaits(module);
    if (failed(firstWaits) || failed(lowerProcessIndices(module)))
      return signalPassFailure();

    LLVMTypeConverter converter(context);
    RewritePatternSet patterns(context);
    populateDCToDCRTPatterns(converter, patterns, *firstWaits);

    if (matmulCalls)
      patterns.add<MatmulLowering<linalg::MatmulOp>,
                   MatmulLowering<linalg::BatchMatmulOp>,
                   MatmulLowering<linalg::GenericOp>>(converter, *firstWaits);

    ConversionTarget target(*context);
    target.addLegalDialect<LLVM::LLVMDialect>();
    target.addIllegalDialect<DCDialect>();
    target.addIllegalOp<gpu::LaunchFuncOp>();
    if (matmulCalls)
      target.addDynamicallyLegalOp<linalg::MatmulOp, linalg::BatchMatmulOp,
                                   linalg::GenericOp>(
          [](Operation *op) { return !getGemmForm(op); });
    if (failed(applyPartialConversion(module, target, std::move(patterns))))
      return signalPassFailure();

    // The kernels are globals now.
    for (auto binary :
         llvm::make_early_inc_range(module.getOps<gpu::BinaryOp>()))
      binary.erase();
    module->removeAttr(gpu::GPUDialect::getContainerModuleAttrName());

    // The grids described the world, which is the runtime's communicator.
    for (auto grid : llvm::make_early_inc_range(module.getOps<shard::GridOp>()))
      grid.erase();

    // What is left in #dc.host_memory (step arguments: parameter shards kept
    // in host memory) is a plain host address like any other buffer; the
    // default memory space is the one the LLVM lowering knows.
    AttrTypeReplacer replacer;
    replacer.addReplacement([](MemRefType type) -> std::optional<Type> {
      if (!isa_and_nonnull<HostMemoryAttr>(type.getMemorySpace()))
        return std::nullopt;
      return MemRefType::get(type.getShape(), type.getElementType(),
                             type.getLayout());
    });
    replacer.recursivelyReplaceElementsIn(module, /*replaceAttrs=*/true,
                                          /*replaceLocs=*/false,
                                          /*replaceTypes=*/true);
  }
};

} // namespace
