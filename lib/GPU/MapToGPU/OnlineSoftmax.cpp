//===- OnlineSoftmax.cpp --------------------------------------------------===//
//
// A row max and the sum of exponentials that reads it, in one pass.
//
//===----------------------------------------------------------------------===//
#include "MapToGPUInternals.h"

namespace dc::map_to_gpu {

/// members[i] as the max of an online softmax (see OnlineSoftmax): a
/// later row sum of exp(x - max) over the same row length whose x is
/// computed as the max's element is, and which reads the max's output at
/// its row (same memory, same layout). Only per-row members lie between
/// them, and none writes what either reads; no other operand of the sum
/// reads the max's output.
std::optional<OnlineSoftmax>
KernelMapper::matchOnlineSoftmax(ArrayRef<RowMember> members, size_t i,
                                 unsigned rows) {
  const RowMember &max = members[i];
  if (max.kind != RowMember::Reduce ||
      (max.form->kind != gpu::AllReduceOperation::MAXIMUMF &&
       max.form->kind != gpu::AllReduceOperation::MAXNUMF))
    return std::nullopt;
  Value maxBuffer = max.op.getDpsInits()[0];
  size_t j = i + 1;
  while (j < members.size() && members[j].kind == RowMember::PerRow)
    ++j;
  if (j == members.size())
    return std::nullopt;
  const RowMember &sum = members[j];
  if (sum.kind != RowMember::Reduce ||
      sum.form->kind != gpu::AllReduceOperation::ADD ||
      sum.op.getStaticLoopRanges().back() !=
          max.op.getStaticLoopRanges().back())
    return std::nullopt;
  auto exp = sum.form->element.getDefiningOp<math::ExpOp>();
  auto sub =
      exp ? exp.getOperand().getDefiningOp<arith::SubFOp>() : arith::SubFOp();
  if (!sub || !exp->hasOneUse() || !sub->hasOneUse())
    return std::nullopt;
  auto shift = dyn_cast<BlockArgument>(sub.getRhs());
  if (!shift || shift.getOwner() != &sum.op.getRegion().front() ||
      !shift.hasOneUse())
    return std::nullopt;
  OpOperand &shiftOperand = sum.op->getOpOperand(shift.getArgNumber());
  AffineMap shiftMap = sum.op.getMatchingIndexingMap(&shiftOperand);
  if (!sum.op.isDpsInput(&shiftOperand) ||
      !sameLayout(shiftOperand.get(), maxBuffer) ||
      shiftMap.getNumResults() != rows || !isRowLocal(shiftMap, rows) ||
      max.op.getMatchingIndexingMap(max.op.getDpsInitOperand(0)) != shiftMap ||
      !computeSameValue(max.op, max.form->element, sum.op, sub.getLhs()))
    return std::nullopt;
  auto reads = [](linalg::GenericOp op) {
    SmallVector<Value> buffers;
    for (OpOperand *input : op.getDpsInputOperands())
      if (isa<MemRefType>(input->get().getType()))
        buffers.push_back(input->get());
    return buffers;
  };
  for (OpOperand *input : sum.op.getDpsInputOperands())
    if (input != &shiftOperand && isa<MemRefType>(input->get().getType()) &&
        mayAlias(input->get(), maxBuffer))
      return std::nullopt;
  SmallVector<Value> read = reads(max.op);
  llvm::append_range(read, reads(sum.op));
  read.push_back(maxBuffer);
  for (size_t k = i + 1; k < j; ++k)
    for (Value written : members[k].op.getDpsInits())
      for (Value buffer : read)
        if (mayAlias(written, buffer))
          return std::nullopt;
  return OnlineSoftmax{i, j, shift.getArgNumber()};
}

/// One chunk of an online softmax: the max member's elements at `point`
/// (given in `xs`, or computed), the running max `m` grown by them, the
/// sum member's exponentials against the grown max added to `s` moved
/// to it. Returns the grown max and sum.
std::pair<Value, Value> KernelMapper::foldOnlineChunk(
    IRRewriter &rewriter, Location loc, const RowMember &max,
    const RowMember &sum, unsigned shift, ArrayRef<Value> point,
    ArrayRef<Value> lanes, bool vectors, KeptRowValues *cache,
    ArrayRef<Value> xs, Value m, Value s) {
  Value chunkMax = xs.front();
  for (Value x : xs.drop_front())
    chunkMax = combine(rewriter, *max.form, chunkMax, x);
  Value grown = combine(rewriter, *max.form, m, chunkMax);
  SmallVector<Value> terms;
  emitRowPoint(rewriter, loc, sum, point, lanes, vectors, cache, nullptr,
               {{shift, grown}}, &terms);
  Value total =
      arith::MulFOp::create(rewriter, loc, s, rescale(rewriter, loc, m, grown));
  for (Value term : terms)
    total = combine(rewriter, *sum.form, total, term);
  // Only -inf so far: every exp(x - max) was NaN; the sum is still 0.
  Value none = arith::CmpFOp::create(
      rewriter, loc, arith::CmpFPredicate::OEQ, grown,
      arith::ConstantOp::create(rewriter, loc, max.form->identity));
  total = arith::SelectOp::create(
      rewriter, loc, none,
      arith::ConstantOp::create(rewriter, loc, sum.form->identity), total);
  return {grown, total};
}

/// This thread's running max and sum of an online softmax over its share
/// of the row: `kept`'s chunks without a loop, else a loop of
/// kOnlineSoftmaxUnroll chunks per iteration (each chunk's start clamped
/// to the row, so every load is in bounds and none is branched around;
/// a chunk past the row leaves the running values as they were).
std::pair<Value, Value> KernelMapper::emitOnlineSoftmaxShare(
    IRRewriter &rewriter, Location loc, const RowMember &max,
    const RowMember &sum, unsigned shift, ArrayRef<Value> ivs, Value tid,
    int64_t threads, int64_t width, bool vectors, KeptRowValues *kept) {
  width = std::max<int64_t>(width, 1);
  auto index = [&](int64_t value) -> Value {
    return arith::ConstantIndexOp::create(rewriter, loc, value);
  };
  Value m = arith::ConstantOp::create(rewriter, loc, max.form->identity);
  Value s = arith::ConstantOp::create(rewriter, loc, sum.form->identity);
  auto pointAt = [&](Value chunk) {
    SmallVector<Value> point(ivs);
    point.push_back(chunk);
    return point;
  };
  if (kept) {
    for (auto [chunk, lanes] : llvm::zip(kept->chunks, kept->lanes)) {
      SmallVector<Value> point = pointAt(chunk), xs;
      emitRowPoint(rewriter, loc, max, point, lanes, vectors, kept, nullptr, {},
                   &xs);
      std::tie(m, s) = foldOnlineChunk(rewriter, loc, max, sum, shift, point,
                                       lanes, vectors, kept, xs, m, s);
    }
    return {m, s};
  }
  int64_t length = max.op.getStaticLoopRanges().back();
  int64_t stride = threads * width;
  Value begin = arith::MulIOp::create(rewriter, loc, tid, index(width));
  auto loop = scf::ForOp::create(rewriter, loc, begin, index(length),
                                 index(stride * kOnlineSoftmaxUnroll),
                                 ValueRange{m, s});
  OpBuilder::InsertionGuard inLoop(rewriter);
  rewriter.setInsertionPointToStart(loop.getBody());
  Value start = loop.getInductionVar();
  m = loop.getRegionIterArg(0);
  s = loop.getRegionIterArg(1);
  // Loads of this iteration's chunks first (through `cache`, which the
  // sums read again), then the math.
  KeptRowValues cache;
  SmallVector<SmallVector<Value>> points, lanes, xs;
  SmallVector<Value> inRange;
  for (int64_t u = 0; u < kOnlineSoftmaxUnroll; ++u) {
    Value chunk = start;
    Value valid;
    if (u > 0) {
      Value unclamped =
          arith::AddIOp::create(rewriter, loc, start, index(u * stride));
      valid = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::ult,
                                    unclamped, index(length));
      chunk = arith::MinUIOp::create(rewriter, loc, unclamped,
                                     index(length - width));
    }
    inRange.push_back(valid);
    points.push_back(pointAt(chunk));
    lanes.push_back(getChunkLanes(rewriter, loc, chunk, width));
    emitRowPoint(rewriter, loc, max, points.back(), lanes.back(), vectors,
                 &cache, nullptr, {}, &xs.emplace_back());
  }
  for (int64_t u = 0; u < kOnlineSoftmaxUnroll; ++u) {
    auto [grown, total] =
        foldOnlineChunk(rewriter, loc, max, sum, shift, points[u], lanes[u],
                        vectors, &cache, xs[u], m, s);
    if (inRange[u]) {
      grown = arith::SelectOp::create(rewriter, loc, inRange[u], grown, m);
      total = arith::SelectOp::create(rewriter, loc, inRange[u], total, s);
    }
    m = grown;
    s = total;
  }
  scf::YieldOp::create(rewriter, loc, ValueRange{m, s});
  return {loop.getResult(0), loop.getResult(1)};
}

} // namespace dc::map_to_gpu
