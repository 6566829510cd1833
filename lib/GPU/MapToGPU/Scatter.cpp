//===- Scatter.cpp --------------------------------------------------------===//
//
// Column-parallel loops (scatters): a thread per column, or rows binned by
// destination.
//
//===----------------------------------------------------------------------===//
#include "MapToGPUInternals.h"

namespace dc::map_to_gpu {

/// A thread per point of `inner` (see getColumnParallelLoopOp), each
/// running the whole loop with `inner` reduced to that point; or, when
/// each iteration writes one row named by the loop (see getBinnedRow), a
/// block per bin of rows (mapBinnedColumnParallelLoop).
void KernelMapper::mapColumnParallelLoop(IRRewriter &rewriter, scf::ForOp loop,
                                         linalg::LinalgOp inner) {
  Location loc = loop.getLoc();
  SmallVector<int64_t> trips = inner.getStaticLoopRanges();
  int64_t total = computeProduct(trips);
  rewriter.setInsertionPoint(loop);
  if (total == 0) {
    rewriter.eraseOp(loop);
    return;
  }
  auto generic = cast<linalg::GenericOp>(inner.getOperation());
  if (std::optional<BinnedRow> binned = getBinnedRow(loop, generic)) {
    mapBinnedColumnParallelLoop(rewriter, loop, generic, *binned);
    return;
  }
  OpBuilder::InsertionGuard guard(rewriter);
  Value id = createThreadPerPointLaunch(rewriter, loc, total);
  SmallVector<Value> ivs = delinearize(rewriter, loc, id, trips);
  rewriter.moveOpBefore(loop, rewriter.getInsertionBlock()->getTerminator());
  // The op at this thread's point: its body, then a store per output.
  rewriter.setInsertionPoint(generic);
  IRMapping mapping;
  cloneBodyAt(rewriter, loc, generic, ivs, /*skip=*/nullptr, mapping);
  auto yield = cast<linalg::YieldOp>(generic.getBody()->getTerminator());
  for (auto [value, output] :
       llvm::zip(yield.getValues(), generic.getDpsInitsMutable()))
    memref::StoreOp::create(
        rewriter, loc, mapping.lookupOrDefault(value), output.get(),
        applyMap(rewriter, loc, generic.getMatchingIndexingMap(&output), ivs));
  rewriter.eraseOp(generic);
}

/// The loop's BinnedRow if its bounds are static, its op has one output
/// whose subview has one dynamic offset, and nothing the loop reads may
/// be what the op writes (another bin's rows, or an index the loop
/// changes as it runs); else none.
std::optional<KernelMapper::BinnedRow>
KernelMapper::getBinnedRow(scf::ForOp loop, linalg::GenericOp inner) {
  std::optional<int64_t> lower = getConstantIntValue(loop.getLowerBound()),
                         upper = getConstantIntValue(loop.getUpperBound()),
                         step = getConstantIntValue(loop.getStep());
  if (!lower || !upper || !step || *step <= 0 || *upper <= *lower ||
      inner.getNumDpsInits() != 1)
    return std::nullopt;
  auto subview = inner.getDpsInits()[0].getDefiningOp<memref::SubViewOp>();
  BinnedRow binned;
  binned.rows = ShapedType::kDynamic;
  for (auto [dim, offset] : llvm::enumerate(subview.getMixedOffsets())) {
    auto value = dyn_cast<Value>(offset);
    if (!value)
      continue;
    if (binned.row)
      return std::nullopt;
    binned.row = value;
    binned.rows = subview.getSourceType().getDimSize(dim);
  }
  if (!binned.row || ShapedType::isDynamic(binned.rows) || binned.rows <= 0)
    return std::nullopt;
  Value written = subview.getSource();
  for (Value input : inner.getDpsInputs())
    if (isa<BaseMemRefType>(input.getType()) && mayAlias(input, written))
      return std::nullopt;
  for (auto load : loop.getBody()->getOps<memref::LoadOp>())
    if (mayAlias(load.getMemRef(), written))
      return std::nullopt;
  // The ops of the loop that the row depends on, in loop order.
  Block *body = loop.getBody();
  DenseSet<Operation *> needed;
  SmallVector<Value> worklist = {binned.row};
  while (!worklist.empty()) {
    Operation *def = worklist.pop_back_val().getDefiningOp();
    if (!def || def->getBlock() != body || !needed.insert(def).second)
      continue;
    llvm::append_range(worklist, def->getOperands());
  }
  for (Operation &op : body->without_terminator())
    if (needed.contains(&op))
      binned.slice.push_back(&op);
  binned.lower = *lower;
  binned.step = *step;
  binned.iterations = llvm::divideCeil(*upper - *lower, *step);
  return binned;
}

/// `loop` (see getColumnParallelLoopOp, getBinnedRow) as a block per bin
/// of rows (bin = row % bins, bins a power of two). The block scans the
/// iterations in windows: each thread computes the rows of a few
/// iterations, warp ballots and the warps' counts (in workgroup memory)
/// give each iteration whose row is the block's a place in a list in
/// loop order, and the block's
/// threads then run those iterations' op over the row's points, a few
/// points per thread at once. Every (row, point) is still written by one
/// thread, in loop order, so repeated rows add up as on the host; and
/// each block runs its own iterations only, not all of them, where groups
/// that each ran every iteration were slow (docs/lowering.md, "Why the GPU
/// kernels' constants").
void KernelMapper::mapBinnedColumnParallelLoop(IRRewriter &rewriter,
                                               scf::ForOp loop,
                                               linalg::GenericOp inner,
                                               const BinnedRow &binned) {
  Location loc = loop.getLoc();
  MLIRContext *ctx = rewriter.getContext();
  SmallVector<int64_t> pointTrips = inner.getStaticLoopRanges();
  int64_t points = computeProduct(pointTrips);
  int64_t threads =
      std::min<int64_t>(kBlockSize, llvm::alignTo(points, kWarpSize));
  int64_t warps = threads / kWarpSize;
  int64_t window = threads * kBinScanPerThread;
  // A power of two: the bin is the row's low bits, one AND instead of a
  // 64-bit remainder (no faster in practice; cheaper all the same).
  int64_t bins = llvm::bit_floor(uint64_t(
      std::min({binned.rows, kMaxRowBins,
                std::max<int64_t>(1, kMaxBinScans / binned.iterations)})));
  int64_t perThread = llvm::divideCeil(points, threads);
  int64_t inFlight = std::min(perThread, kBinPointsInFlight);
  int64_t chunks = llvm::divideCeil(perThread, inFlight);
  bool everyPointValid = points % threads == 0 && perThread % inFlight == 0;

  rewriter.setInsertionPoint(loop);
  gpu::LaunchOp launch = createLaunch(rewriter, loc, bins, threads);
  auto workgroup = gpu::AddressSpaceAttr::get(
      ctx, gpu::GPUDialect::getWorkgroupAddressSpace());
  Type i32 = rewriter.getI32Type();
  auto shared = [&](int64_t size) {
    return launch.addWorkgroupAttribution(
        MemRefType::get({size}, i32, MemRefLayoutAttrInterface{}, workgroup),
        loc);
  };
  // A window's kept iterations and their rows, in loop order; the kept
  // count of each (scan step, warp), then where each starts and the
  // window's total.
  Value keptIterations = shared(window), keptRows = shared(window);
  int64_t pairs = kBinScanPerThread * warps;
  assert(pairs <= kWarpSize && "one lane per (step, warp) pair");
  Value counts = shared(pairs + 1);
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(launch.getBody().front().getTerminator());
  auto index = [&](int64_t value) -> Value {
    return arith::ConstantIndexOp::create(rewriter, loc, value);
  };
  auto constI32 = [&](int32_t value) -> Value {
    return arith::ConstantIntOp::create(rewriter, loc, value, 32);
  };
  auto toIndex = [&](Value value) -> Value {
    return arith::IndexCastOp::create(rewriter, loc, rewriter.getIndexType(),
                                      value);
  };
  auto toI32 = [&](Value value) -> Value {
    return arith::IndexCastOp::create(rewriter, loc, i32, value);
  };
  // `if (value == constant)`, its then-block to fill.
  auto ifEqual = [&](Value value, int64_t constant) {
    return scf::IfOp::create(rewriter, loc,
                             arith::CmpIOp::create(rewriter, loc,
                                                   arith::CmpIPredicate::eq,
                                                   value, index(constant)),
                             /*withElseRegion=*/false);
  };
  // Iteration `n` (0-based) as the loop's induction value.
  auto inductionAt = [&](Value n) -> Value {
    return arith::AddIOp::create(
        rewriter, loc, index(binned.lower),
        arith::MulIOp::create(rewriter, loc, n, index(binned.step)));
  };
  Value tid = launch.getThreadIds().x, bin = launch.getBlockIds().x;
  Value lane = arith::RemUIOp::create(rewriter, loc, tid, index(kWarpSize));
  Value warp = arith::DivUIOp::create(rewriter, loc, tid, index(kWarpSize));
  Value lanesBelow = arith::SubIOp::create(
      rewriter, loc,
      arith::ShLIOp::create(rewriter, loc, constI32(1), toI32(lane)),
      constI32(1));

  auto windows = scf::ForOp::create(rewriter, loc, index(0),
                                    index(binned.iterations), index(window));
  rewriter.setInsertionPoint(windows.getBody()->getTerminator());
  Value base = windows.getInductionVar();
  // Scan: this thread's iterations base + k * threads + tid.
  SmallVector<Value> iterations, rows, mine, ballots;
  for (int64_t k = 0; k < kBinScanPerThread; ++k) {
    Value n = arith::AddIOp::create(
        rewriter, loc, base,
        arith::AddIOp::create(rewriter, loc, index(k * threads), tid));
    Value valid = arith::CmpIOp::create(
        rewriter, loc, arith::CmpIPredicate::ult, n, index(binned.iterations));
    // Past the loop's end: the last iteration's row, not kept.
    Value clamped =
        arith::MinUIOp::create(rewriter, loc, n, index(binned.iterations - 1));
    IRMapping mapping;
    mapping.map(loop.getInductionVar(), inductionAt(clamped));
    for (Operation *op : binned.slice)
      rewriter.clone(*op, mapping);
    Value row = mapping.lookupOrDefault(binned.row);
    Value isMine = arith::AndIOp::create(
        rewriter, loc, valid,
        arith::CmpIOp::create(
            rewriter, loc, arith::CmpIPredicate::eq,
            arith::AndIOp::create(rewriter, loc, row, index(bins - 1)), bin));
    Value ballot = NVVM::VoteSyncOp::create(
        rewriter, loc, i32, constI32(-1), isMine,
        NVVM::VoteSyncKindAttr::get(ctx, NVVM::VoteSyncKind::ballot));
    auto firstLane = ifEqual(lane, 0);
    {
      OpBuilder::InsertionGuard inIf(rewriter);
      rewriter.setInsertionPointToStart(firstLane.thenBlock());
      memref::StoreOp::create(
          rewriter, loc, math::CtPopOp::create(rewriter, loc, ballot), counts,
          ValueRange{
              arith::AddIOp::create(rewriter, loc, index(k * warps), warp)});
    }
    iterations.push_back(n);
    rows.push_back(row);
    mine.push_back(isMine);
    ballots.push_back(ballot);
  }
  gpu::BarrierOp::create(rewriter, loc);
  // Where each (step, warp) pair's kept iterations start: warp 0 turns
  // the counts (one per lane, kBinScanPerThread * warps <= 32) into
  // their exclusive prefix in place, by shuffles, and lane 31 stores the
  // window's total after them. (Every thread summing the counts itself
  // was most of the kernel's instructions: A's took 105 us, stalled on
  // the math pipe.)
  auto firstWarp = ifEqual(warp, 0);
  {
    OpBuilder::InsertionGuard inIf(rewriter);
    rewriter.setInsertionPointToStart(firstWarp.thenBlock());
    Value isPair = arith::CmpIOp::create(
        rewriter, loc, arith::CmpIPredicate::ult, lane, index(pairs));
    // Only the lanes that own a count read it: a lane past them reading
    // one that its owner overwrites below, with no barrier between (none
    // can be inside this warp's branch), is a shared-memory hazard to
    // racecheck even where the value is discarded.
    auto ownCount = scf::IfOp::create(
        rewriter, loc, isPair,
        [&](OpBuilder &b, Location at) {
          scf::YieldOp::create(
              b, at,
              memref::LoadOp::create(b, at, counts, ValueRange{lane})
                  .getResult());
        },
        [&](OpBuilder &b, Location at) {
          scf::YieldOp::create(b, at, constI32(0));
        });
    Value count = ownCount.getResult(0);
    Value inclusive = count;
    for (int32_t offset = 1; offset < kWarpSize; offset *= 2) {
      auto up = gpu::ShuffleOp::create(rewriter, loc, inclusive, offset,
                                       kWarpSize, gpu::ShuffleMode::UP);
      inclusive = arith::AddIOp::create(
          rewriter, loc, inclusive,
          arith::SelectOp::create(rewriter, loc, up.getValid(),
                                  up.getShuffleResult(), constI32(0)));
    }
    auto ifPair = scf::IfOp::create(rewriter, loc, isPair,
                                    /*withElseRegion=*/false);
    rewriter.setInsertionPointToStart(ifPair.thenBlock());
    memref::StoreOp::create(
        rewriter, loc, arith::SubIOp::create(rewriter, loc, inclusive, count),
        counts, ValueRange{lane});
    rewriter.setInsertionPointAfter(ifPair);
    auto lastLane = ifEqual(lane, kWarpSize - 1);
    rewriter.setInsertionPointToStart(lastLane.thenBlock());
    memref::StoreOp::create(rewriter, loc, inclusive, counts,
                            ValueRange{index(pairs)});
  }
  gpu::BarrierOp::create(rewriter, loc);
  Value kept = toIndex(
      memref::LoadOp::create(rewriter, loc, counts, ValueRange{index(pairs)}));
  SmallVector<Value> starts;
  for (int64_t k = 0; k < kBinScanPerThread; ++k)
    starts.push_back(toIndex(
        memref::LoadOp::create(rewriter, loc, counts,
                               ValueRange{arith::AddIOp::create(
                                   rewriter, loc, index(k * warps), warp)})));
  for (int64_t k = 0; k < kBinScanPerThread; ++k) {
    auto ifMine = scf::IfOp::create(rewriter, loc, mine[k],
                                    /*withElseRegion=*/false);
    OpBuilder::InsertionGuard inIf(rewriter);
    rewriter.setInsertionPointToStart(ifMine.thenBlock());
    Value below = math::CtPopOp::create(
        rewriter, loc,
        arith::AndIOp::create(rewriter, loc, ballots[k], lanesBelow));
    Value at = arith::AddIOp::create(rewriter, loc, starts[k], toIndex(below));
    memref::StoreOp::create(rewriter, loc, toI32(iterations[k]), keptIterations,
                            ValueRange{at});
    memref::StoreOp::create(rewriter, loc, toI32(rows[k]), keptRows,
                            ValueRange{at});
  }
  gpu::BarrierOp::create(rewriter, loc);
  // Run the kept iterations in order: the loop's body (its row from the
  // list), `inner` at this thread's points.
  auto run = scf::ForOp::create(rewriter, loc, index(0), kept, index(1));
  {
    OpBuilder::InsertionGuard inLoop(rewriter);
    rewriter.setInsertionPoint(run.getBody()->getTerminator());
    Value j = run.getInductionVar();
    IRMapping mapping;
    mapping.map(loop.getInductionVar(),
                inductionAt(toIndex(
                    memref::LoadOp::create(rewriter, loc, keptIterations, j))));
    mapping.map(binned.row,
                toIndex(memref::LoadOp::create(rewriter, loc, keptRows, j)));
    Operation *rowDef = binned.row.getDefiningOp();
    for (Operation &op : loop.getBody()->without_terminator())
      if (&op != inner.getOperation() && &op != rowDef)
        rewriter.clone(op, mapping);
    auto op = cast<linalg::GenericOp>(rewriter.clone(*inner, mapping));
    emitBinnedPoints(rewriter, loc, op, tid, threads, points, pointTrips,
                     inFlight, chunks, everyPointValid);
    rewriter.eraseOp(op);
  }
  gpu::BarrierOp::create(rewriter, loc);
  rewriter.eraseOp(loop);
}

/// `op` (all-parallel, one output) at this thread's points `tid + c *
/// threads`, `inFlight` at a time: all their loads, then the math, then
/// the stores (a point past `points` loads the last one and stores
/// nothing).
void KernelMapper::emitBinnedPoints(IRRewriter &rewriter, Location loc,
                                    linalg::GenericOp op, Value tid,
                                    int64_t threads, int64_t points,
                                    ArrayRef<int64_t> pointTrips,
                                    int64_t inFlight, int64_t chunks,
                                    bool everyPointValid) {
  auto index = [&](int64_t value) -> Value {
    return arith::ConstantIndexOp::create(rewriter, loc, value);
  };
  auto chunkLoop =
      scf::ForOp::create(rewriter, loc, index(0), index(chunks), index(1));
  OpBuilder::InsertionGuard inLoop(rewriter);
  rewriter.setInsertionPoint(chunkLoop.getBody()->getTerminator());
  Value first = arith::AddIOp::create(
      rewriter, loc, tid,
      arith::MulIOp::create(rewriter, loc, chunkLoop.getInductionVar(),
                            index(inFlight * threads)));
  SmallVector<Value> valid;
  SmallVector<SmallVector<Value>> ivs, args;
  for (int64_t u = 0; u < inFlight; ++u) {
    Value point =
        arith::AddIOp::create(rewriter, loc, first, index(u * threads));
    valid.push_back(arith::CmpIOp::create(
        rewriter, loc, arith::CmpIPredicate::ult, point, index(points)));
    point = arith::MinUIOp::create(rewriter, loc, point, index(points - 1));
    ivs.push_back(delinearize(rewriter, loc, point, pointTrips));
    SmallVector<Value> loaded(op->getNumOperands());
    for (OpOperand &operand : op->getOpOperands())
      if (!op.getMatchingBlockArgument(&operand).use_empty())
        loaded[operand.getOperandNumber()] =
            loadAt(rewriter, loc, op, operand, ivs.back());
    args.push_back(std::move(loaded));
  }
  SmallVector<Value> results;
  for (int64_t u = 0; u < inFlight; ++u)
    results.push_back(cloneBodyWith(rewriter, op, args[u], ivs[u]).front());
  OpOperand &output = op.getDpsInitsMutable()[0];
  for (int64_t u = 0; u < inFlight; ++u) {
    OpBuilder::InsertionGuard inIf(rewriter);
    if (!everyPointValid) {
      auto ifValid = scf::IfOp::create(rewriter, loc, valid[u],
                                       /*withElseRegion=*/false);
      rewriter.setInsertionPointToStart(ifValid.thenBlock());
    }
    memref::StoreOp::create(
        rewriter, loc, results[u], output.get(),
        applyMap(rewriter, loc, op.getMatchingIndexingMap(&output), ivs[u]));
  }
}

} // namespace dc::map_to_gpu
