//===- KernelIR.cpp -------------------------------------------------------===//
//
// Building kernel bodies: launches, loads, cloned op bodies, index arithmetic.
//
//===----------------------------------------------------------------------===//
#include "MapToGPUInternals.h"

namespace dc::map_to_gpu {

/// The indices `map` gives at the loop point `ivs` (one per loop): a loop
/// dim is its value; any other affine result (a rotary embedding's partner
/// half, `1 - d3`) is computed in index arithmetic.
SmallVector<Value> applyMap(OpBuilder &builder, Location loc, AffineMap map,
                            ArrayRef<Value> ivs) {
  SmallVector<Value> indices;
  for (AffineExpr result : map.getResults()) {
    if (auto dim = dyn_cast<AffineDimExpr>(result))
      indices.push_back(ivs[dim.getPosition()]);
    else
      indices.push_back(
          affine::expandAffineExpr(builder, loc, result, ivs, ValueRange()));
  }
  return indices;
}

/// `operand`'s element at loop point `ivs` (a scalar operand is itself).
Value loadAt(OpBuilder &builder, Location loc, linalg::LinalgOp op,
             OpOperand &operand, ArrayRef<Value> ivs) {
  if (!isa<MemRefType>(operand.get().getType()))
    return operand.get();
  return memref::LoadOp::create(
      builder, loc, operand.get(),
      applyMap(builder, loc, op.getMatchingIndexingMap(&operand), ivs));
}

/// Clones `op`'s body into `builder` with its block arguments bound to
/// `args` (null: unbound) and linalg.index to `ivs`; leaves out the yield
/// and `skip`. `mapping` maps the body's values to their clones.
void cloneBody(OpBuilder &builder, linalg::GenericOp op, ArrayRef<Value> args,
               ArrayRef<Value> ivs, Operation *skip, IRMapping &mapping) {
  Block &body = op.getRegion().front();
  for (auto [arg, value] : llvm::zip(body.getArguments(), args))
    if (value)
      mapping.map(arg, value);
  for (Operation &inside : body.without_terminator()) {
    if (&inside == skip)
      continue;
    if (auto index = dyn_cast<linalg::IndexOp>(inside)) {
      mapping.map(index.getResult(), ivs[index.getDim()]);
      continue;
    }
    builder.clone(inside, mapping);
  }
}

/// cloneBody at the loop point `ivs`, reading each used operand through its
/// indexing map (but not the output that `skip`, a reduction's combiner,
/// folds into: it is only the combiner's accumulator).
void cloneBodyAt(OpBuilder &builder, Location loc, linalg::GenericOp op,
                 ArrayRef<Value> ivs, Operation *skip, IRMapping &mapping) {
  SmallVector<Value> args(op->getNumOperands());
  for (OpOperand &operand : op->getOpOperands())
    if (!op.getMatchingBlockArgument(&operand).use_empty() &&
        !(skip && op.isDpsInit(&operand)))
      args[operand.getOperandNumber()] = loadAt(builder, loc, op, operand, ivs);
  cloneBody(builder, op, args, ivs, skip, mapping);
}

/// `form`'s combiner applied to `accumulator` and `value`.
Value combine(OpBuilder &builder, const ReductionForm &form, Value accumulator,
              Value value) {
  IRMapping mapping;
  mapping.map(form.output, accumulator);
  mapping.map(form.element, value);
  return builder.clone(*form.combiner, mapping)->getResult(0);
}

/// True when `x` (of `a`'s body) and `y` (of `b`'s body, `a` and `b` over
/// the same loops) are the same value at every loop point: the same pure
/// ops with the same attributes over such values, block arguments reading
/// one buffer through one indexing map, or one value from outside.
bool computeSameValue(linalg::GenericOp a, Value x, linalg::GenericOp b,
                      Value y, unsigned depth) {
  auto inside = [](linalg::GenericOp op, Value value) {
    if (auto arg = dyn_cast<BlockArgument>(value))
      return arg.getOwner() == &op.getRegion().front();
    return op->isProperAncestor(value.getDefiningOp());
  };
  bool insideX = inside(a, x), insideY = inside(b, y);
  if (!insideX || !insideY)
    return !insideX && !insideY && x == y;
  if (depth > 16)
    return false;
  auto argX = dyn_cast<BlockArgument>(x), argY = dyn_cast<BlockArgument>(y);
  if (argX || argY) {
    if (!argX || !argY)
      return false;
    OpOperand &operandX = a->getOpOperand(argX.getArgNumber());
    OpOperand &operandY = b->getOpOperand(argY.getArgNumber());
    return a.isDpsInput(&operandX) && b.isDpsInput(&operandY) &&
           operandX.get() == operandY.get() &&
           a.getMatchingIndexingMap(&operandX) ==
               b.getMatchingIndexingMap(&operandY);
  }
  Operation *opX = x.getDefiningOp(), *opY = y.getDefiningOp();
  if (opX->getName() != opY->getName() ||
      opX->getAttrDictionary() != opY->getAttrDictionary() ||
      cast<OpResult>(x).getResultNumber() !=
          cast<OpResult>(y).getResultNumber() ||
      opX->getNumOperands() != opY->getNumOperands() ||
      opX->getNumRegions() != 0 || !isPure(opX))
    return false;
  for (auto [u, v] : llvm::zip(opX->getOperands(), opY->getOperands()))
    if (!computeSameValue(a, u, b, v, depth + 1))
      return false;
  return true;
}

/// The `width` (at least 1) neighbouring points of a thread's chunk that
/// starts at `chunk`: chunk, chunk + 1, ..., each lane's index along the row.
SmallVector<Value> getChunkLanes(OpBuilder &builder, Location loc, Value chunk,
                                 int64_t width) {
  SmallVector<Value> lanes{chunk};
  for (int64_t lane = 1; lane < width; ++lane)
    lanes.push_back(arith::AddIOp::create(
        builder, loc, chunk,
        arith::ConstantIndexOp::create(builder, loc, lane)));
  return lanes;
}

/// exp(from - to), and exactly 1 when they are equal (also both -inf,
/// where the difference is NaN): the factor that moves a sum of
/// exponentials taken against the max `from` to the max `to`.
Value rescale(OpBuilder &builder, Location loc, Value from, Value to) {
  auto type = cast<FloatType>(from.getType());
  Value same =
      arith::CmpFOp::create(builder, loc, arith::CmpFPredicate::OEQ, from, to);
  Value factor = math::ExpOp::create(
      builder, loc, arith::SubFOp::create(builder, loc, from, to));
  Value one =
      arith::ConstantOp::create(builder, loc, FloatAttr::get(type, 1.0));
  return arith::SelectOp::create(builder, loc, same, one, factor);
}

/// The coordinates of `linear` (less than the product of `trips`) over
/// `trips`, innermost fastest.
SmallVector<Value> delinearize(OpBuilder &builder, Location loc, Value linear,
                               ArrayRef<int64_t> trips) {
  SmallVector<Value> ivs(trips.size());
  int64_t inner = 1;
  for (int64_t d = trips.size() - 1; d >= 0; --d) {
    Value index = linear;
    if (inner != 1)
      index = arith::DivUIOp::create(
          builder, loc, index,
          arith::ConstantIndexOp::create(builder, loc, inner));
    if (d != 0)
      index = arith::RemUIOp::create(
          builder, loc, index,
          arith::ConstantIndexOp::create(builder, loc, trips[d]));
    ivs[d] = index;
    inner *= trips[d];
  }
  return ivs;
}

/// `gpu.launch` of `blocks` blocks of `threads` threads; returns the builder
/// inside its body (before the terminator) and the launch.
gpu::LaunchOp createLaunch(OpBuilder &builder, Location loc, int64_t blocks,
                           int64_t threads) {
  Value one = arith::ConstantIndexOp::create(builder, loc, 1);
  Value gridX = arith::ConstantIndexOp::create(builder, loc, blocks);
  Value blockX = arith::ConstantIndexOp::create(builder, loc, threads);
  auto launch =
      gpu::LaunchOp::create(builder, loc, gridX, one, one, blockX, one, one);
  OpBuilder body = OpBuilder::atBlockBegin(&launch.getBody().front());
  gpu::TerminatorOp::create(body, loc);
  return launch;
}

/// A thread per point of `points` (> 0), in blocks of up to kBlockSize:
/// leaves `builder` inside the launch's guard against the last block's
/// spare threads and returns the thread's point (its linear id).
Value createThreadPerPointLaunch(OpBuilder &builder, Location loc,
                                 int64_t points) {
  int64_t threads = std::min(points, kBlockSize);
  gpu::LaunchOp launch =
      createLaunch(builder, loc, llvm::divideCeil(points, threads), threads);
  builder.setInsertionPoint(launch.getBody().front().getTerminator());
  Value id = arith::AddIOp::create(
      builder, loc,
      arith::MulIOp::create(builder, loc, launch.getBlockIds().x,
                            launch.getBlockSize().x),
      launch.getThreadIds().x);
  Value inRange = arith::CmpIOp::create(
      builder, loc, arith::CmpIPredicate::ult, id,
      arith::ConstantIndexOp::create(builder, loc, points));
  auto guard = scf::IfOp::create(builder, loc, inRange,
                                 /*withElseRegion=*/false);
  builder.setInsertionPointToStart(guard.thenBlock());
  return id;
}

/// The `width` elements of `buffer` from `indices` on, as one aligned
/// 16-byte load.
Value loadVector(OpBuilder &builder, Location loc, Value buffer,
                 ValueRange indices, int64_t width) {
  return vector::LoadOp::create(
      builder, loc, VectorType::get({width}, getElementTypeOrSelf(buffer)),
      buffer, indices, /*nontemporal=*/false, llvm::Align(kVectorBytes));
}

/// cloneBody with `args`; returns the yielded values.
SmallVector<Value> cloneBodyWith(OpBuilder &builder, linalg::GenericOp op,
                                 ArrayRef<Value> args, ArrayRef<Value> ivs) {
  IRMapping mapping;
  cloneBody(builder, op, args, ivs, /*skip=*/nullptr, mapping);
  return llvm::map_to_vector(
      op.getRegion().front().getTerminator()->getOperands(),
      [&](Value value) { return mapping.lookupOrDefault(value); });
}

} // namespace dc::map_to_gpu
