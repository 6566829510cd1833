//===- Elementwise.cpp ----------------------------------------------------===//
//
// Elementwise ops: a thread per point, 16-byte vectors where the layout allows.
//
//===----------------------------------------------------------------------===//
#include "MapToGPUInternals.h"

namespace dc::map_to_gpu {

/// Bytes of one element of `type` when `map` (a function of loop `dim`)
/// reads it contiguously along `dim`: `dim` is its last index, the stride
/// there is 1 and every other stride a multiple of 16 bytes, so each
/// 16-byte step stays aligned. 0: not so.
int64_t getContiguousElementBytes(MemRefType type, AffineMap map,
                                  unsigned dim) {
  unsigned bits = type.getElementTypeBitWidth();
  if (bits < 8 || bits % 8 != 0 || !type.getElementType().isIntOrFloat())
    return 0;
  if (map.getResults().back() != getAffineDimExpr(dim, map.getContext()))
    return 0;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)) || strides.back() != 1)
    return 0;
  for (int64_t stride : ArrayRef<int64_t>(strides).drop_back())
    if (ShapedType::isDynamic(stride) ||
        (stride * bits / 8) % kVectorBytes != 0)
      return 0;
  return bits / 8;
}

/// True if no index of `map` but its last uses loop `last`, and its last
/// is `last` itself or does not use it.
bool isInnerDimOnlyLast(AffineMap map, unsigned last) {
  if (map.getNumResults() == 0)
    return true;
  for (AffineExpr result : map.getResults().drop_back())
    if (result.isFunctionOfDim(last))
      return false;
  AffineExpr inner = map.getResults().back();
  return !inner.isFunctionOfDim(last) ||
         inner == getAffineDimExpr(last, map.getContext());
}

/// Elements per thread of an elementwise op's vectorized kernel: 16 bytes
/// of its narrowest operand (8 for bf16, 4 for f32), when every operand
/// that the innermost loop indexes reads it contiguously (its last index,
/// unit stride, other strides keeping 16-byte rows) and the innermost trip
/// divides evenly. An input's other indices may be any affine function of
/// the outer loops (a rotary embedding reads its partner half at `1 - j`);
/// outputs are projected permutations. 0: not vectorizable.
int64_t getVectorWidth(linalg::GenericOp op, ArrayRef<int64_t> trips) {
  if (trips.empty() || op.getNumReductionLoops() != 0)
    return 0;
  unsigned last = trips.size() - 1;
  int64_t narrowest = kVectorBytes;
  for (OpOperand &operand : op->getOpOperands()) {
    auto type = dyn_cast<MemRefType>(operand.get().getType());
    if (!type) {
      if (isa<ShapedType>(operand.get().getType()) || op.isDpsInit(&operand))
        return 0;
      continue; // a scalar input (a fill's value)
    }
    unsigned bits = type.getElementTypeBitWidth();
    if (bits < 8 || bits % 8 != 0 || !type.getElementType().isIntOrFloat())
      return 0;
    AffineMap map = op.getMatchingIndexingMap(&operand);
    bool isOutput = op.isDpsInit(&operand);
    if (isOutput ? !map.isProjectedPermutation()
                 : !isInnerDimOnlyLast(map, last))
      return 0;
    if (!map.isFunctionOfDim(last)) {
      if (isOutput) // every lane would write the same element
        return 0;
      continue;
    }
    int64_t bytes = getContiguousElementBytes(type, map, last);
    if (bytes == 0)
      return 0;
    narrowest = std::min(narrowest, bytes);
  }
  int64_t width = kVectorBytes / narrowest;
  if (width < 2 || trips.back() % width != 0)
    return 0;
  return width;
}

/// A loop of two (not the innermost) that an input reads at `1 - d`: a
/// rotary embedding's partner half. A vectorized thread then takes both of
/// its points, so that the element and its partner, and the tables both
/// points read, are loaded once (mapVectorized).
std::optional<unsigned> getPairedDim(linalg::GenericOp op,
                                     ArrayRef<int64_t> trips) {
  MLIRContext *context = op.getContext();
  for (OpOperand *input : op.getDpsInputOperands())
    for (AffineExpr result : op.getMatchingIndexingMap(input).getResults())
      for (unsigned dim = 0; dim + 1 < trips.size(); ++dim)
        if (trips[dim] == 2 && result == getAffineConstantExpr(1, context) -
                                             getAffineDimExpr(dim, context))
          return dim;
  return std::nullopt;
}

/// `map` at `dim` = `value`: the same loops, that one no longer read.
AffineMap fixDim(AffineMap map, unsigned dim, int64_t value) {
  MLIRContext *context = map.getContext();
  return simplifyAffineMap(map.replace(getAffineDimExpr(dim, context),
                                       getAffineConstantExpr(value, context),
                                       map.getNumDims(), map.getNumSymbols()));
}

/// True (i1) if `buffer`'s first element is 16-byte aligned.
Value isVectorAligned(OpBuilder &builder, Location loc, Value buffer) {
  auto type = cast<MemRefType>(buffer.getType());
  Value pointer =
      memref::ExtractAlignedPointerAsIndexOp::create(builder, loc, buffer);
  auto metadata =
      memref::ExtractStridedMetadataOp::create(builder, loc, buffer);
  Value offsetBytes = arith::MulIOp::create(
      builder, loc, metadata.getOffset(),
      arith::ConstantIndexOp::create(builder, loc,
                                     type.getElementTypeBitWidth() / 8));
  Value address = arith::AddIOp::create(builder, loc, pointer, offsetBytes);
  Value misalignment = arith::RemUIOp::create(
      builder, loc, address,
      arith::ConstantIndexOp::create(builder, loc, kVectorBytes));
  return arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::eq,
                               misalignment,
                               arith::ConstantIndexOp::create(builder, loc, 0));
}

/// out[ivs] = combiner(out[ivs], total), if `when` (or always); the
/// identity instead of out[ivs] where the fill that cleared it was folded
/// in, and a converting consumer's value stored beside it (see
/// foldIntoReductionStores).
void KernelMapper::storeFolded(IRRewriter &rewriter, Location loc,
                               linalg::GenericOp op, const ReductionForm &form,
                               ArrayRef<Value> ivs, Value when, Value total) {
  OpBuilder::InsertionGuard guard(rewriter);
  if (when) {
    auto ifOp = scf::IfOp::create(rewriter, loc, when,
                                  /*withElseRegion=*/false);
    rewriter.setInsertionPointToStart(ifOp.thenBlock());
  }
  OpOperand *init = op.getDpsInitOperand(0);
  SmallVector<Value> indices =
      applyMap(rewriter, loc, op.getMatchingIndexingMap(init), ivs);
  Value old =
      op->hasAttr(kOverwritesOutputAttr)
          ? arith::ConstantOp::create(rewriter, loc, form.identity).getResult()
          : memref::LoadOp::create(rewriter, loc, init->get(), indices)
                .getResult();
  Value folded = combine(rewriter, form, old, total);
  memref::StoreOp::create(rewriter, loc, folded, init->get(), indices);
  linalg::GenericOp consumer = convertingConsumers.lookup(op);
  if (!consumer)
    return;
  SmallVector<Value> args(consumer->getNumOperands());
  for (OpOperand *input : consumer.getDpsInputOperands())
    args[input->getOperandNumber()] =
        input->get() == init->get() ? folded : input->get();
  IRMapping mapping;
  cloneBody(rewriter, consumer, args, indices, /*skip=*/nullptr, mapping);
  storeYields(rewriter, loc, consumer, indices, mapping);
  computedConsumers.insert(consumer);
}

/// An elementwise op with `width` consecutive innermost points per
/// group: 16-byte vector loads and stores of the contiguous operands, a
/// scalar load of the others, the body unrolled `width` times. Each
/// thread takes a few groups, a block's width apart (so a warp's accesses
/// stay contiguous), enough that up to kLoadsInFlight 16-byte loads are
/// in flight per thread: all its loads first (a group past the end reads
/// the last group instead, and stores nothing), then the math and the
/// stores. A loop of two that an input reads at `1 - d` (a rotary
/// embedding's partner half, getPairedDim) is not spread over threads:
/// a group is both of its points, and a load both make is made once. A
/// buffer not 16-byte aligned at run time (a view at an odd offset)
/// takes the same points one at a time instead.
void KernelMapper::mapVectorized(IRRewriter &rewriter, linalg::GenericOp op,
                                 ArrayRef<int64_t> trips, int64_t width) {
  Location loc = op.getLoc();
  SmallVector<int64_t> groupTrips(trips);
  groupTrips.back() /= width;
  // Both points of a paired loop (getPairedDim) are one thread's.
  std::optional<unsigned> paired = getPairedDim(op, trips);
  if (paired)
    groupTrips[*paired] = 1;
  int64_t groups = computeProduct(groupTrips);
  rewriter.setInsertionPoint(op);
  if (groups == 0)
    return;
  unsigned last = trips.size() - 1;
  Block &body = op.getRegion().front();
  auto isRead = [&](OpOperand &operand) {
    return !body.getArgument(operand.getOperandNumber()).use_empty();
  };
  auto movesAlong = [&](OpOperand &operand) {
    return isa<MemRefType>(operand.get().getType()) &&
           op.getMatchingIndexingMap(&operand).isFunctionOfDim(last);
  };
  // The points of a group: one, or both values of the paired loop.
  SmallVector<int64_t> pairValues = {0};
  if (paired)
    pairValues.push_back(1);
  // `operand`'s map at one of those points: reads that meet there (the
  // element and its partner) are one load.
  auto mapAt = [&](OpOperand &operand, int64_t pairValue) {
    AffineMap map = op.getMatchingIndexingMap(&operand);
    return paired ? fixDim(map, *paired, pairValue) : map;
  };
  llvm::SmallDenseSet<std::pair<Value, AffineMap>> distinctLoads;
  for (OpOperand &operand : op->getOpOperands())
    if (isRead(operand) && movesAlong(operand))
      for (int64_t pairValue : pairValues)
        distinctLoads.insert({operand.get(), mapAt(operand, pairValue)});
  int64_t vectorLoads = distinctLoads.size();
  int64_t threads = std::min(groups, kBlockSize);
  int64_t perThread = 1;
  while (perThread * 2 * std::max<int64_t>(vectorLoads, 1) <= kLoadsInFlight &&
         threads * perThread * 2 <= groups)
    perThread *= 2;
  int64_t span = threads * perThread;
  gpu::LaunchOp launch =
      createLaunch(rewriter, loc, llvm::divideCeil(groups, span), threads);
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(launch.getBody().front().getTerminator());
  auto index = [&](int64_t value) -> Value {
    return arith::ConstantIndexOp::create(rewriter, loc, value);
  };
  Value base = arith::AddIOp::create(
      rewriter, loc,
      arith::MulIOp::create(rewriter, loc, launch.getBlockIds().x, index(span)),
      launch.getThreadIds().x);
  // Each point's first lane (its group clamped to the last group), its
  // group, and whether that is a group at all (null: always).
  struct Point {
    SmallVector<Value> ivs;
    int64_t group;
    int64_t pairValue;
  };
  SmallVector<Point> points;
  SmallVector<Value> valid;
  for (int64_t k = 0; k < perThread; ++k) {
    Value group =
        k == 0 ? base
               : arith::AddIOp::create(rewriter, loc, base, index(k * threads))
                     .getResult();
    Value inRange;
    if (groups % span != 0) {
      inRange = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::ult,
                                      group, index(groups));
      group = arith::MinUIOp::create(rewriter, loc, group, index(groups - 1));
    }
    valid.push_back(inRange);
    SmallVector<Value> ivs = delinearize(rewriter, loc, group, groupTrips);
    ivs.back() = arith::MulIOp::create(rewriter, loc, ivs.back(), index(width));
    for (int64_t pairValue : pairValues) {
      if (paired)
        ivs[*paired] = index(pairValue);
      points.push_back({ivs, k, pairValue});
    }
  }
  Value aligned;
  for (OpOperand &operand : op->getOpOperands()) {
    if ((!isRead(operand) && !op.isDpsInit(&operand)) || !movesAlong(operand))
      continue;
    Value check = isVectorAligned(rewriter, loc, operand.get());
    aligned =
        aligned ? arith::AndIOp::create(rewriter, loc, aligned, check) : check;
  }
  auto ifAligned = scf::IfOp::create(rewriter, loc, aligned,
                                     /*withElseRegion=*/true);
  auto pointAt = [&](ArrayRef<Value> ivs, int64_t lane) {
    SmallVector<Value> point(ivs);
    if (lane != 0)
      point.back() =
          arith::AddIOp::create(rewriter, loc, point.back(), index(lane));
    return point;
  };
  // Stores of group `k` go into `emit`, under its range check.
  auto guarded = [&](int64_t k, llvm::function_ref<void()> emit) {
    OpBuilder::InsertionGuard inIf(rewriter);
    if (valid[k]) {
      auto ifValid = scf::IfOp::create(rewriter, loc, valid[k],
                                       /*withElseRegion=*/false);
      rewriter.setInsertionPointToStart(ifValid.thenBlock());
    }
    emit();
  };
  // Vector path: every point's loads (each distinct one of a group once),
  // then each point's math and stores.
  rewriter.setInsertionPointToStart(ifAligned.thenBlock());
  SmallVector<SmallVector<Value>> loaded;
  DenseMap<std::tuple<int64_t, Value, AffineMap>, Value> loadedOnce;
  for (const Point &point : points) {
    SmallVector<Value> &values = loaded.emplace_back(op->getNumOperands());
    for (OpOperand &operand : op->getOpOperands()) {
      unsigned i = operand.getOperandNumber();
      if (!isRead(operand))
        continue;
      if (!isa<MemRefType>(operand.get().getType())) {
        values[i] = operand.get();
        continue;
      }
      AffineMap map = mapAt(operand, point.pairValue);
      Value &load = loadedOnce[{point.group, operand.get(), map}];
      if (!load) {
        SmallVector<Value> indices = applyMap(rewriter, loc, map, point.ivs);
        load =
            movesAlong(operand)
                ? loadVector(rewriter, loc, operand.get(), indices, width)
                : memref::LoadOp::create(rewriter, loc, operand.get(), indices)
                      .getResult();
      }
      values[i] = load;
    }
  }
  for (auto [point, values] : llvm::zip(points, loaded)) {
    SmallVector<SmallVector<Value>> lanes;
    for (int64_t lane = 0; lane < width; ++lane) {
      SmallVector<Value> args(op->getNumOperands());
      for (OpOperand &operand : op->getOpOperands()) {
        unsigned i = operand.getOperandNumber();
        if (values[i])
          args[i] =
              movesAlong(operand)
                  ? vector::ExtractOp::create(rewriter, loc, values[i], lane)
                        .getResult()
                  : values[i];
      }
      lanes.push_back(
          cloneBodyWith(rewriter, op, args, pointAt(point.ivs, lane)));
    }
    SmallVector<Value> vectors;
    for (auto [j, output] : llvm::enumerate(op.getDpsInitsMutable())) {
      SmallVector<Value> elements;
      for (SmallVector<Value> &results : lanes)
        elements.push_back(results[j]);
      Type element = getElementTypeOrSelf(output.get().getType());
      vectors.push_back(vector::FromElementsOp::create(
          rewriter, loc, VectorType::get({width}, element), elements));
    }
    guarded(point.group, [&] {
      for (auto [vector, output] : llvm::zip(vectors, op.getDpsInitsMutable()))
        vector::StoreOp::create(
            rewriter, loc, vector, output.get(),
            applyMap(rewriter, loc, op.getMatchingIndexingMap(&output),
                     point.ivs),
            /*nontemporal=*/false, llvm::Align(kVectorBytes));
    });
  }
  // Scalar path, one point at a time, a group after another.
  rewriter.setInsertionPointToStart(ifAligned.elseBlock());
  for (const Point &point : points)
    guarded(point.group, [&] {
      for (int64_t lane = 0; lane < width; ++lane) {
        SmallVector<Value> at = pointAt(point.ivs, lane);
        SmallVector<Value> args(op->getNumOperands());
        for (OpOperand &operand : op->getOpOperands())
          if (isRead(operand))
            args[operand.getOperandNumber()] =
                loadAt(rewriter, loc, op, operand, at);
        SmallVector<Value> results = cloneBodyWith(rewriter, op, args, at);
        for (auto [value, output] : llvm::zip(results, op.getDpsInitsMutable()))
          memref::StoreOp::create(
              rewriter, loc, value, output.get(),
              applyMap(rewriter, loc, op.getMatchingIndexingMap(&output), at));
      }
    });
}

} // namespace dc::map_to_gpu
