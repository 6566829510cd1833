//===- Classify.cpp -------------------------------------------------------===//
//
// The dispatch classes: which kernel form each op of the step takes.
//
//===----------------------------------------------------------------------===//
#include "MapToGPUInternals.h"

namespace dc::map_to_gpu {

bool hasUnitInnerStride(Type type) {
  auto memref = dyn_cast<MemRefType>(type);
  if (!memref)
    return false;
  SmallVector<int64_t> strides;
  int64_t offset;
  return succeeded(memref.getStridesAndOffset(strides, offset)) &&
         !strides.empty() && strides.back() == 1;
}

std::optional<ReductionForm> matchReduction(linalg::GenericOp op) {
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  unsigned loops = iterators.size();
  if (loops == 0 || iterators.back() != utils::IteratorType::reduction ||
      llvm::count(iterators, utils::IteratorType::reduction) != 1 ||
      op.getNumDpsInits() != 1 || !op.hasPureBufferSemantics())
    return std::nullopt;
  for (AffineMap map : op.getIndexingMapsArray())
    if (!map.isProjectedPermutation())
      return std::nullopt;
  unsigned reductionDim = loops - 1;
  OpOperand *init = op.getDpsInitOperand(0);
  if (op.getMatchingIndexingMap(init).isFunctionOfDim(reductionDim))
    return std::nullopt;
  Block &body = op.getRegion().front();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  ReductionForm form;
  form.output = op.getMatchingBlockArgument(init);
  if (yield.getNumOperands() != 1 || !form.output.hasOneUse())
    return std::nullopt;
  form.combiner = yield.getOperand(0).getDefiningOp();
  if (!form.combiner || form.combiner->getNumOperands() != 2 ||
      *form.output.getUsers().begin() != form.combiner)
    return std::nullopt;
  form.element = form.combiner->getOperand(0) == form.output
                     ? form.combiner->getOperand(1)
                     : form.combiner->getOperand(0);
  auto type = dyn_cast<FloatType>(form.output.getType());
  if (!type || form.element == form.output)
    return std::nullopt;
  const llvm::fltSemantics &semantics = type.getFloatSemantics();
  auto infinity = [&](bool negative) {
    return FloatAttr::get(type, APFloat::getInf(semantics, negative));
  };
  if (isa<arith::AddFOp>(form.combiner)) {
    form.kind = gpu::AllReduceOperation::ADD;
    form.identity = FloatAttr::get(type, APFloat::getZero(semantics));
  } else if (isa<arith::MaximumFOp>(form.combiner)) {
    form.kind = gpu::AllReduceOperation::MAXIMUMF;
    form.identity = infinity(true);
  } else if (isa<arith::MaxNumFOp>(form.combiner)) {
    form.kind = gpu::AllReduceOperation::MAXNUMF;
    form.identity = infinity(true);
  } else if (isa<arith::MinimumFOp>(form.combiner)) {
    form.kind = gpu::AllReduceOperation::MINIMUMF;
    form.identity = infinity(false);
  } else if (isa<arith::MinNumFOp>(form.combiner)) {
    form.kind = gpu::AllReduceOperation::MINNUMF;
    form.identity = infinity(false);
  } else {
    return std::nullopt;
  }
  form.rowContiguous = true;
  for (OpOperand *input : op.getDpsInputOperands()) {
    AffineMap map = op.getMatchingIndexingMap(input);
    if (!map.isFunctionOfDim(reductionDim))
      continue;
    if (map.getResults().back() !=
            getAffineDimExpr(reductionDim, op.getContext()) ||
        !hasUnitInnerStride(input->get().getType()))
      form.rowContiguous = false;
  }
  return form;
}

/// True for an op the host runs: it computes no tensor data and touches no
/// device memory (constants, index arithmetic, views, runtime calls).
bool isHostOp(Operation *op) {
  if (isa<DCDialect>(op->getDialect()) ||
      isa<LLVM::LLVMDialect>(op->getDialect()))
    return true;
  if (isa<func::ReturnOp, UnrealizedConversionCastOp, ViewLikeOpInterface,
          memref::ExtractStridedMetadataOp, memref::DimOp,
          memref::ExtractAlignedPointerAsIndexOp, gpu::LaunchOp>(op))
    return true;
  // Pure scalar arithmetic (arith, index, affine.apply, ub.poison).
  return isPure(op) && op->getNumRegions() == 0 &&
         llvm::none_of(op->getResultTypes(), llvm::IsaPred<ShapedType>);
}

/// The `linalg.fill` of exactly `output` (with a constant) before `op`, with
/// nothing in between that can read or write that output: `op` can
/// overwrite the output instead of folding into what the fill wrote.
/// Between them may lie --profile-ops' hooks (a profiled step runs the same
/// kernels), views, dc's schedule ops (a gather's start and wait, a
/// release), which only touch the runtime's buffers and the operands they
/// name, and other linalg ops on buffers (or kernels made of them) that do
/// not touch the output (dc-rematerialize puts a recomputed operand between
/// the fill and its product; dc-split-column-reductions' partial sums lie
/// between a weight gradient's fill and its second pass).
std::pair<linalg::FillOp, Attribute> getFillBefore(Operation *op,
                                                   Value output) {
  Operation *previous = op->getPrevNode();
  auto skippable = [&](Operation *op) {
    // A view of the step arena names all of it, but reads and writes
    // nothing (the views before a split reduction's passes).
    if (isa<ViewLikeOpInterface>(op) && isMemoryEffectFree(op))
      return true;
    if (isHookOrView(op) || isa_and_nonnull<DCDialect>(op->getDialect()))
      return !mayTouch(op, output);
    // A kernel this pass already made of such an op reads and writes only
    // the buffers its body names.
    if (isa<gpu::LaunchOp>(op))
      return !mayTouchNested(op, output);
    auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
    return linalgOp && linalgOp.hasPureBufferSemantics() &&
           !mayTouchNested(op, output);
  };
  while (previous && skippable(previous))
    previous = previous->getPrevNode();
  auto fill = dyn_cast_or_null<linalg::FillOp>(previous);
  if (!fill || !fill.hasPureBufferSemantics() || fill.getOutputs()[0] != output)
    return {};
  Attribute value;
  if (!matchPattern(fill.getInputs()[0], m_Constant(&value)))
    return {};
  return {fill, value};
}

/// A zero fill of exactly `gemm`'s output before it (getFillBefore): the
/// product can overwrite instead of accumulate.
linalg::FillOp getZeroFillBefore(Operation *gemm) {
  auto [fill, value] =
      getFillBefore(gemm, cast<linalg::LinalgOp>(gemm).getDpsInits()[0]);
  auto zero = dyn_cast_or_null<FloatAttr>(value);
  if (!fill || !zero || !zero.getValue().isZero())
    return {};
  return fill;
}

/// The one linalg op of a sequential loop that a kernel can run with a
/// thread per point of the op and the loop inside each thread: an
/// embedding gradient's `for t: out[idx[t], :] += g[t, :]`. The loop holds
/// only index arithmetic, loads (the indices), subviews and that op; the op
/// is all-parallel, and every output is a subview whose offsets move with
/// the loop only in dims of size 1. Then each thread owns the same
/// coordinates of every output in every iteration: no two threads write one
/// address, and repeated indices add up in loop order, as on the host.
linalg::LinalgOp getColumnParallelLoopOp(scf::ForOp loop) {
  linalg::LinalgOp found;
  for (Operation &op : loop.getBody()->without_terminator()) {
    if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op)) {
      if (found || !linalgOp.hasPureBufferSemantics() ||
          linalgOp.getNumParallelLoops() != linalgOp.getNumLoops() ||
          ShapedType::isDynamicShape(linalgOp.getStaticLoopRanges()) ||
          !llvm::all_of(linalgOp.getIndexingMapsArray(), [](AffineMap map) {
            return map.isProjectedPermutation();
          }))
        return {};
      found = linalgOp;
      continue;
    }
    if (isa<memref::LoadOp, memref::SubViewOp>(op))
      continue;
    if (isPure(&op) && op.getNumRegions() == 0 &&
        llvm::none_of(op.getResultTypes(), llvm::IsaPred<ShapedType>))
      continue;
    return {};
  }
  if (!found || !isa<linalg::GenericOp>(found.getOperation()))
    return {};
  for (Value output : found.getDpsInits()) {
    auto subview = output.getDefiningOp<memref::SubViewOp>();
    if (!subview || subview->getBlock() != loop.getBody())
      return {};
    for (auto [offset, size] :
         llvm::zip(subview.getStaticOffsets(), subview.getStaticSizes()))
      if (size != 1 && ShapedType::isDynamic(offset))
        return {};
    if (llvm::any_of(subview.getStaticStrides(),
                     [](int64_t stride) { return stride != 1; }))
      return {};
  }
  return found;
}

LogicalResult KernelMapper::mapFunction(func::FuncOp fn) {
  if (!fn.getBody().hasOneBlock())
    return fn.emitError() << "dc-map-to-gpu: a step with several blocks; "
                             "the GPU target takes structured control "
                             "flow only";
  IRRewriter rewriter(fn.getContext());
  Block &body = fn.getBody().front();
  // Zero fills that only clear a matrix product's output first (before
  // the fills become kernels).
  for (Operation &op : body)
    if (getGemmForm(&op))
      if (linalg::FillOp fill = getZeroFillBefore(&op)) {
        op.setAttr(kGemmOverwriteAttr, rewriter.getUnitAttr());
        rewriter.eraseOp(fill);
      }
  // Row reductions with the ops around them that work on the same rows
  // (a norm's scale, softmax's exponentials): one block per row for all.
  SmallVector<linalg::GenericOp> reductions;
  for (Operation &op : body)
    if (auto generic = dyn_cast<linalg::GenericOp>(op))
      if (std::optional<ReductionForm> form = matchReduction(generic))
        if (form->rowContiguous && generic.getNumLoops() >= 2)
          reductions.push_back(generic);
  convertingConsumers.clear();
  computedConsumers.clear();
  DenseSet<Operation *> fused;
  for (linalg::GenericOp reduction : reductions)
    if (!fused.contains(reduction))
      fuseRowGroup(rewriter, reduction, fused);
  for (Operation &op : llvm::make_early_inc_range(body))
    if (auto generic = dyn_cast<linalg::GenericOp>(op))
      foldIntoReductionStores(rewriter, generic);
  for (Operation &op : llvm::make_early_inc_range(body)) {
    // Already computed by its reduction's kernel, which comes first.
    if (computedConsumers.contains(&op)) {
      rewriter.eraseOp(&op);
      continue;
    }
    if (auto alloc = dyn_cast<memref::AllocOp>(op))
      return alloc.emitError()
             << "dc-map-to-gpu: a device allocation in the step ("
             << alloc.getType()
             << "): dc-assign-step-arena places only statically shaped "
                "buffers that do not escape the step";
    if (auto global = dyn_cast<memref::GetGlobalOp>(op))
      return global.emitError()
             << "dc-map-to-gpu: a constant tensor (" << global.getName()
             << ") lives in host memory; the GPU target does not place "
                "constants in device memory yet";
    if (isa<memref::DeallocOp>(op))
      return op.emitError() << "dc-map-to-gpu: a device deallocation in "
                               "the step";
    if (isHostOp(&op))
      continue;
    if (getGemmForm(&op))
      continue;
    if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op)) {
      if (failed(mapLinalg(rewriter, linalgOp)))
        return failure();
      continue;
    }
    if (auto loop = dyn_cast<scf::ForOp>(op))
      if (linalg::LinalgOp inner = getColumnParallelLoopOp(loop)) {
        mapColumnParallelLoop(rewriter, loop, inner);
        continue;
      }
    if (failed(mapSerial(rewriter, &op)))
      return failure();
  }
  // The host only enqueues: anything else left would touch device memory
  // from the CPU.
  for (Operation &op : body)
    if (!isHostOp(&op) && !getGemmForm(&op))
      return op.emitError()
             << "dc-map-to-gpu: left on the host, where it would touch "
                "device memory";
  return success();
}

/// `op` with its parallel loops first, the others after in their order.
FailureOr<linalg::GenericOp>
KernelMapper::putParallelDimsFirst(IRRewriter &rewriter, linalg::GenericOp op) {
  SmallVector<unsigned> order;
  for (auto [i, type] : llvm::enumerate(op.getIteratorTypesArray()))
    if (type == utils::IteratorType::parallel)
      order.push_back(i);
  for (auto [i, type] : llvm::enumerate(op.getIteratorTypesArray()))
    if (type != utils::IteratorType::parallel)
      order.push_back(i);
  if (llvm::equal(order, llvm::seq<unsigned>(0, order.size())))
    return op;
  rewriter.setInsertionPoint(op);
  return linalg::interchangeGenericOp(rewriter, op, order);
}

/// For a reduction that mapLinalg gives a kernel of its own (a row
/// reduction outside any row group, a column reduction such as a norm's
/// weight gradient and its split's partial sums; not a matrix product,
/// which stays a library call), whose kernel stores each output element
/// once (storeFolded): the identity fill of its output just before it
/// becomes part of that store (one launch fewer), and so does an
/// elementwise op right after it that reads only that output at the same
/// point (a bf16 gradient's conversion: another launch, and a pass over
/// the output, fewer).
void KernelMapper::foldIntoReductionStores(IRRewriter &rewriter,
                                           linalg::GenericOp op) {
  if (!op.hasPureBufferSemantics() || op.getNumReductionLoops() != 1 ||
      getGemmForm(op))
    return;
  SmallVector<int64_t> trips = op.getStaticLoopRanges();
  if (ShapedType::isDynamicShape(trips))
    return;
  FailureOr<linalg::GenericOp> ordered = putParallelDimsFirst(rewriter, op);
  if (failed(ordered))
    return;
  op = *ordered;
  std::optional<ReductionForm> form = matchReduction(op);
  if (!form || op.getStaticLoopRanges().back() <= 0)
    return;
  Value output = op.getDpsInits()[0];
  if (llvm::any_of(op.getDpsInputs(),
                   [&](Value input) { return mayAlias(input, output); }))
    return;
  auto [fill, value] = getFillBefore(op, output);
  auto fillValue = dyn_cast_or_null<FloatAttr>(value);
  auto identity = cast<FloatAttr>(form->identity);
  if (fill && fillValue && fillValue.getType() == identity.getType() &&
      fillValue.getValue().bitwiseIsEqual(identity.getValue())) {
    op->setAttr(kOverwritesOutputAttr, rewriter.getUnitAttr());
    rewriter.eraseOp(fill);
  }
  if (linalg::GenericOp consumer = getConvertingConsumer(op))
    convertingConsumers[op] = consumer;
}

/// The elementwise op after `reduction` (past views and profiling hooks
/// that touch neither) that reads only `reduction`'s output, each point
/// at itself, and writes a buffer that no operand of `reduction` can
/// overlap, with operands that exist at `reduction`; or null.
linalg::GenericOp
KernelMapper::getConvertingConsumer(linalg::GenericOp reduction) {
  Value output = reduction.getDpsInits()[0];
  auto skippable = [&](Operation *op) {
    return isHookOrView(op) && !mayTouch(op, output);
  };
  Operation *next = reduction->getNextNode();
  while (next && skippable(next))
    next = next->getNextNode();
  auto consumer = dyn_cast_or_null<linalg::GenericOp>(next);
  if (!consumer || !consumer.hasPureBufferSemantics() ||
      consumer.getNumDpsInits() != 1 ||
      consumer.getNumParallelLoops() != consumer.getNumLoops() ||
      consumer.getNumLoops() != cast<MemRefType>(output.getType()).getRank() ||
      !llvm::all_of(consumer.getIndexingMapsArray(),
                    [](AffineMap map) { return map.isIdentity(); }))
    return {};
  bool readsOutput = false;
  for (OpOperand *input : consumer.getDpsInputOperands()) {
    if (input->get() == output)
      readsOutput = true;
    else if (isa<ShapedType>(input->get().getType()))
      return {};
  }
  OpOperand *init = consumer.getDpsInitOperand(0);
  Value written = init->get();
  if (!readsOutput || !consumer.getMatchingBlockArgument(init).use_empty() ||
      llvm::any_of(reduction->getOperands(),
                   [&](Value operand) {
                     return isa<MemRefType>(operand.getType()) &&
                            mayAlias(operand, written);
                   }) ||
      !llvm::all_of(consumer.getRegion().front().without_terminator(),
                    [](Operation &inside) { return isPure(&inside); }))
    return {};
  // Nothing between them may touch what the consumer writes, and every
  // operand of the consumer must exist where the reduction's kernel is.
  for (Operation *between = reduction->getNextNode(); between != consumer;
       between = between->getNextNode())
    if (mayTouch(between, written))
      return {};
  for (Value operand : consumer->getOperands())
    if (Operation *def = operand.getDefiningOp())
      if (def->getBlock() == reduction->getBlock() &&
          !def->isBeforeInBlock(reduction))
        return {};
  return consumer;
}

/// One thread per point of the op's parallel iteration space.
LogicalResult KernelMapper::mapLinalg(IRRewriter &rewriter,
                                      linalg::LinalgOp op) {
  if (!op.hasPureBufferSemantics())
    return op.emitError() << "dc-map-to-gpu: a linalg op on tensors after "
                             "bufferization";
  // No loops (a 0-d op, such as the loss's scalar): one thread.
  if (op.getNumLoops() == 0)
    return mapSerial(rewriter, op);
  // Named ops (fill, copy, exp, ...) as generics: the dispatch classes
  // below read only a generic's maps and body.
  if (!isa<linalg::GenericOp>(op.getOperation())) {
    rewriter.setInsertionPoint(op);
    FailureOr<linalg::GenericOp> generic =
        linalg::generalizeNamedOp(rewriter, op);
    if (succeeded(generic))
      op = *generic;
  }
  // Parallel dims outermost: a reduction over rows (a norm's weight
  // gradient) is then parallel over its columns.
  if (auto generic = dyn_cast<linalg::GenericOp>(op.getOperation())) {
    FailureOr<linalg::GenericOp> ordered =
        putParallelDimsFirst(rewriter, generic);
    if (failed(ordered))
      return generic.emitError() << "dc-map-to-gpu: cannot put the "
                                    "parallel dims first";
    generic = *ordered;
    op = generic;
    if (std::optional<ReductionForm> form = matchReduction(generic)) {
      SmallVector<int64_t> trips = generic.getStaticLoopRanges();
      if (!ShapedType::isDynamicShape(trips) && trips.back() > 0) {
        if (form->rowContiguous || trips.size() < 2)
          mapRowReduction(rewriter, generic, *form, trips);
        else
          mapColumnReduction(rewriter, generic, *form, trips);
        rewriter.eraseOp(generic);
        return success();
      }
    }
    SmallVector<int64_t> trips = generic.getStaticLoopRanges();
    if (!ShapedType::isDynamicShape(trips))
      if (int64_t width = getVectorWidth(generic, trips)) {
        mapVectorized(rewriter, generic, trips, width);
        rewriter.eraseOp(generic);
        return success();
      }
  }
  Operation *anchor = op;
  rewriter.setInsertionPoint(anchor);
  FailureOr<linalg::LinalgLoops> loops =
      linalg::linalgOpToParallelLoops(rewriter, op);
  if (failed(loops))
    return op.emitError() << "dc-map-to-gpu: cannot lower to loops";
  rewriter.eraseOp(op);
  if (loops->empty())
    return success();
  auto parallel = dyn_cast<scf::ParallelOp>(loops->front());
  if (!parallel)
    return mapSerial(rewriter, loops->front());
  return mapParallel(rewriter, parallel);
}

/// A top-level scf.parallel of static bounds as a 1-D grid of threads.
LogicalResult KernelMapper::mapParallel(IRRewriter &rewriter,
                                        scf::ParallelOp loop) {
  SmallVector<int64_t> lower, upper, step, trips;
  for (auto [lb, ub, st] :
       llvm::zip(loop.getLowerBound(), loop.getUpperBound(), loop.getStep())) {
    std::optional<int64_t> l = getConstantIntValue(lb),
                           u = getConstantIntValue(ub),
                           s = getConstantIntValue(st);
    if (!l || !u || !s || *s <= 0)
      return mapSerial(rewriter, loop);
    lower.push_back(*l);
    step.push_back(*s);
    trips.push_back(std::max<int64_t>(0, llvm::divideCeil(*u - *l, *s)));
  }
  int64_t total = computeProduct(trips);
  Location loc = loop.getLoc();
  if (total == 0) {
    rewriter.eraseOp(loop);
    return success();
  }
  rewriter.setInsertionPoint(loop);
  OpBuilder::InsertionGuard guard(rewriter);
  Value id = createThreadPerPointLaunch(rewriter, loc, total);
  // Innermost dim fastest: neighbouring threads, neighbouring elements.
  IRMapping mapping;
  for (auto [d, index] :
       llvm::enumerate(delinearize(rewriter, loc, id, trips))) {
    Value iv = index;
    if (step[d] != 1)
      iv = arith::MulIOp::create(
          rewriter, loc, iv,
          arith::ConstantIndexOp::create(rewriter, loc, step[d]));
    if (lower[d] != 0)
      iv = arith::AddIOp::create(
          rewriter, loc, iv,
          arith::ConstantIndexOp::create(rewriter, loc, lower[d]));
    mapping.map(loop.getInductionVars()[d], iv);
  }
  for (Operation &inside : loop.getBody()->without_terminator())
    rewriter.clone(inside, mapping);
  rewriter.eraseOp(loop);
  return success();
}

/// `op` (and the linalg ops in it, as sequential loops) in one thread.
LogicalResult KernelMapper::mapSerial(IRRewriter &rewriter, Operation *op) {
  for (Value result : op->getResults())
    if (!result.use_empty())
      return op->emitError()
             << "dc-map-to-gpu: runs on the GPU but its result is used "
                "by the host";
  rewriter.setInsertionPoint(op);
  gpu::LaunchOp launch = createLaunch(rewriter, op->getLoc(), 1, 1);
  rewriter.moveOpBefore(op, launch.getBody().front().getTerminator());
  SmallVector<linalg::LinalgOp> nested;
  launch.getBody().walk(
      [&](linalg::LinalgOp linalgOp) { nested.push_back(linalgOp); });
  for (linalg::LinalgOp linalgOp : nested) {
    rewriter.setInsertionPoint(linalgOp);
    if (failed(linalg::linalgOpToLoops(rewriter, linalgOp)))
      return linalgOp.emitError() << "dc-map-to-gpu: cannot lower to loops";
    rewriter.eraseOp(linalgOp);
  }
  return success();
}

} // namespace dc::map_to_gpu
