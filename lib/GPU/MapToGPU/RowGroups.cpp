//===- RowGroups.cpp ------------------------------------------------------===//
//
// Row groups: a row reduction and the ops beside it on the same rows, one
// kernel.
//
//===----------------------------------------------------------------------===//
#include "MapToGPUInternals.h"

namespace dc::map_to_gpu {

/// True if a member of a row group may write `buffer` or memory it
/// overlaps: what it reads cannot be loaded ahead of the members.
bool isWrittenByMember(ArrayRef<RowMember> members, Value buffer) {
  return llvm::any_of(members, [&](const RowMember &member) {
    return llvm::any_of(member.op.getDpsInits(),
                        [&](Value output) { return mayAlias(output, buffer); });
  });
}

/// True if `map` reads or writes row `ivs[0..rows)` at the same row:
/// its first `rows` results are the first `rows` loops, in order.
bool isRowLocal(AffineMap map, unsigned rows) {
  if (map.getNumResults() < rows)
    return false;
  for (unsigned d = 0; d < rows; ++d)
    if (map.getResult(d) != getAffineDimExpr(d, map.getContext()))
      return false;
  return true;
}

/// Stores what `op`'s body yields (its clone in `mapping`) into its outputs
/// at loop point `ivs`.
void storeYields(OpBuilder &builder, Location loc, linalg::GenericOp op,
                 ArrayRef<Value> ivs, IRMapping &mapping) {
  auto yield = cast<linalg::YieldOp>(op.getRegion().front().getTerminator());
  for (OpOperand &init : op.getDpsInitsMutable())
    memref::StoreOp::create(
        builder, loc,
        mapping.lookupOrDefault(
            yield.getOperand(init.getOperandNumber() - op.getNumDpsInputs())),
        init.get(),
        applyMap(builder, loc, op.getMatchingIndexingMap(&init), ivs));
}

/// The accesses of the ops in [`begin`, `end`) and nested in them; false
/// when one of them touches memory in a way not followed here.
bool collectRowGroupAccesses(Block::iterator begin, Block::iterator end,
                             Value isFirst,
                             SmallVectorImpl<RowGroupAccess> &accesses) {
  auto underFirst = [&](Operation *op) {
    for (Operation *parent = op->getParentOp(); parent;
         parent = parent->getParentOp())
      if (auto ifOp = dyn_cast<scf::IfOp>(parent);
          ifOp && ifOp.getCondition() == isFirst &&
          ifOp.getThenRegion().isAncestor(op->getParentRegion()))
        return true;
    return false;
  };
  for (Operation &top : llvm::make_range(begin, end)) {
    WalkResult walk = top.walk([&](Operation *op) {
      auto add = [&](Value buffer, ValueRange indices, bool write) {
        accesses.push_back(
            {buffer, SmallVector<Value>(indices), write, underFirst(op)});
        return WalkResult::advance();
      };
      if (auto load = dyn_cast<memref::LoadOp>(op))
        return add(load.getMemRef(), load.getIndices(), false);
      if (auto store = dyn_cast<memref::StoreOp>(op))
        return add(store.getMemRef(), store.getIndices(), true);
      if (auto load = dyn_cast<vector::LoadOp>(op))
        return add(load.getBase(), load.getIndices(), false);
      if (auto store = dyn_cast<vector::StoreOp>(op))
        return add(store.getBase(), store.getIndices(), true);
      // Its barriers only separate more.
      if (isa<gpu::AllReduceOp, gpu::BarrierOp>(op))
        return WalkResult::advance();
      // A copy ahead reads its source; it writes only the thread's own
      // slots (see planRowCopies), which no other thread touches, and its
      // group and wait order only the thread's own copies.
      if (auto copy = dyn_cast<nvgpu::DeviceAsyncCopyOp>(op))
        return add(copy.getSrc(), copy.getSrcIndices(), false);
      if (isa<nvgpu::DeviceAsyncCreateGroupOp, nvgpu::DeviceAsyncWaitOp>(op))
        return WalkResult::advance();
      if (op->hasTrait<OpTrait::HasRecursiveMemoryEffects>() ||
          isMemoryEffectFree(op))
        return WalkResult::advance();
      return WalkResult::interrupt();
    });
    if (walk.wasInterrupted())
      return false;
  }
  return true;
}

/// Removes the barriers between a kept row group's members (see
/// KeptRowValues) that order no two accesses of different threads: every
/// thread computes the per-row values itself and works on fixed columns
/// of each row, so a member mostly reads what the same thread wrote. A
/// barrier stays when, across it, a write and another access may touch the
/// same memory and are not provably the same thread's: both thread 0's, or
/// the same buffer at the same row and one of this thread's columns
/// (`owned`). A block barrier or a block reduction (which has two) bounds
/// what each barrier orders.
void dropUnneededMemberBarriers(ArrayRef<gpu::BarrierOp> barriers,
                                const DenseSet<Value> &owned, Value isFirst) {
  auto separates = [](Operation &op) {
    return isa<gpu::BarrierOp, gpu::AllReduceOp>(op);
  };
  auto sameThread = [&](const RowGroupAccess &a, const RowGroupAccess &b) {
    if (a.firstOnly && b.firstOnly)
      return true;
    if (a.buffer != b.buffer || a.indices.empty() ||
        a.indices.size() != b.indices.size())
      return false;
    size_t last = a.indices.size() - 1;
    return owned.contains(a.indices[last]) && owned.contains(b.indices[last]) &&
           ArrayRef<Value>(a.indices).drop_back() ==
               ArrayRef<Value>(b.indices).drop_back();
  };
  for (gpu::BarrierOp barrier : barriers) {
    Block *block = barrier->getBlock();
    Block::iterator at = barrier->getIterator();
    Block::iterator begin = at;
    while (begin != block->begin() && !separates(*std::prev(begin)))
      --begin;
    Block::iterator end = std::next(at);
    while (end != block->end() && !separates(*end))
      ++end;
    SmallVector<RowGroupAccess> before, after;
    if (!collectRowGroupAccesses(begin, at, isFirst, before) ||
        !collectRowGroupAccesses(std::next(at), end, isFirst, after))
      continue;
    bool ordersSomething = llvm::any_of(before, [&](const RowGroupAccess &a) {
      return llvm::any_of(after, [&](const RowGroupAccess &b) {
        return (a.write || b.write) && mayAlias(a.buffer, b.buffer) &&
               !sameThread(a, b);
      });
    });
    if (!ordersSomething)
      barrier->erase();
  }
}

/// `op` as a member of a row group over `rowTrips`, or nothing.
std::optional<RowMember>
KernelMapper::classifyRowMember(IRRewriter &rewriter, linalg::LinalgOp op,
                                ArrayRef<int64_t> rowTrips) {
  if (!op.hasPureBufferSemantics() || getGemmForm(op))
    return std::nullopt;
  auto generic = dyn_cast<linalg::GenericOp>(op.getOperation());
  if (!generic && isa<linalg::FillOp>(op)) {
    // Generalized only once it would join: a fill left as it is can still
    // fold into the reduction after it (foldIntoReductionStores).
    auto type = dyn_cast<MemRefType>(op.getDpsInits()[0].getType());
    if (!type || !type.hasStaticShape() ||
        type.getRank() > int64_t(rowTrips.size()) + 1 ||
        !type.getShape().take_front(rowTrips.size()).equals(rowTrips))
      return std::nullopt;
    rewriter.setInsertionPoint(op);
    FailureOr<linalg::GenericOp> general =
        linalg::generalizeNamedOp(rewriter, op);
    if (failed(general))
      return std::nullopt;
    generic = *general;
  }
  if (!generic)
    return std::nullopt;
  SmallVector<int64_t> trips = generic.getStaticLoopRanges();
  if (ShapedType::isDynamicShape(trips) ||
      !ArrayRef<int64_t>(trips).take_front(rowTrips.size()).equals(rowTrips) ||
      trips.size() > rowTrips.size() + 1)
    return std::nullopt;
  unsigned rows = rowTrips.size();
  for (AffineMap map : generic.getIndexingMapsArray())
    if (!map.isProjectedPermutation())
      return std::nullopt;
  for (OpOperand &init : generic.getDpsInitsMutable())
    if (!isRowLocal(generic.getMatchingIndexingMap(&init), rows))
      return std::nullopt;
  if (generic.getNumParallelLoops() == generic.getNumLoops())
    return RowMember{generic,
                     trips.size() == rows ? RowMember::PerRow
                                          : RowMember::Broadcast,
                     std::nullopt};
  std::optional<ReductionForm> form = matchReduction(generic);
  if (form && form->rowContiguous && trips.size() == rows + 1)
    return RowMember{generic, RowMember::Reduce, form};
  return std::nullopt;
}

/// True if `candidate` can join `members` in one block per row: every
/// operand of it that may overlap what another member writes (or that
/// it writes and another member touches) is the same memory in the same
/// layout, read and written at the same row on both sides, so no block
/// needs (or overwrites) another block's rows.
bool KernelMapper::joinsRowGroup(ArrayRef<RowMember> members,
                                 const RowMember &candidate, unsigned rows) {
  linalg::GenericOp joining = candidate.op;
  for (const RowMember &member : members)
    for (OpOperand &a : member.op->getOpOperands())
      for (OpOperand &b : joining->getOpOperands()) {
        linalg::GenericOp existing = member.op;
        if (!isa<MemRefType>(a.get().getType()) ||
            !isa<MemRefType>(b.get().getType()))
          continue;
        bool writes = existing.isDpsInit(&a) || joining.isDpsInit(&b);
        if (writes && mayAlias(a.get(), b.get()) &&
            (!sameLayout(a.get(), b.get()) ||
             !isRowLocal(existing.getMatchingIndexingMap(&a), rows) ||
             !isRowLocal(joining.getMatchingIndexingMap(&b), rows)))
          return false;
      }
  return true;
}

/// The next op after `op` that runs on the device, past host ops that
/// cannot touch any buffer of `members` (views, scalars, the profile's
/// hooks); null if such a host op is in the way or the block ends.
Operation *KernelMapper::nextDeviceOp(Operation *op,
                                      ArrayRef<RowMember> members,
                                      bool forward) {
  for (Operation *next = forward ? op->getNextNode() : op->getPrevNode(); next;
       next = forward ? next->getNextNode() : next->getPrevNode()) {
    if (!isHostOp(next))
      return next;
    if (isPure(next) || isa<ViewLikeOpInterface>(next))
      continue;
    for (const RowMember &member : members)
      for (Value operand : member.op->getOperands())
        if (isa<MemRefType>(operand.getType()) && mayTouch(next, operand))
          return nullptr;
  }
  return nullptr;
}

/// The reduction form of `op` (updated to have its parallel loops first)
/// when it is a statically shaped linalg.generic on buffers with one
/// reduction loop and not a matrix product: the ops a row group's kernel
/// may take a column reduction's partials or second pass from.
std::optional<ReductionForm>
KernelMapper::orderReduction(IRRewriter &rewriter, linalg::GenericOp &op) {
  if (!op.hasPureBufferSemantics() || op.getNumReductionLoops() != 1 ||
      getGemmForm(op) || ShapedType::isDynamicShape(op.getStaticLoopRanges()))
    return std::nullopt;
  FailureOr<linalg::GenericOp> ordered = putParallelDimsFirst(rewriter, op);
  if (failed(ordered))
    return std::nullopt;
  op = *ordered;
  return matchReduction(op);
}

/// Moves the pure ops (views, constants) that define `value` after
/// `point` in its block before it, their operands first; false if
/// another kind of op defines it there.
bool KernelMapper::hoistPureDefsBefore(Value value, Operation *point) {
  Operation *def = value.getDefiningOp();
  if (!def || def->getBlock() != point->getBlock() ||
      def->isBeforeInBlock(point))
    return true;
  if (def == point || !isPure(def))
    return false;
  for (Value operand : def->getOperands())
    if (!hoistPureDefsBefore(operand, point))
      return false;
  def->moveBefore(point);
  return true;
}

/// Fuses `reduction` (a row reduction) with its neighbours that work on
/// the same rows into one kernel of a block per row, each member in
/// order with a barrier between: the fill of its output before it, then
/// ops over the rows (a norm's rsqrt), over each row's points (the scale
/// that reads the row again, now from cache) and further row reductions
/// (softmax's sum after its max). The row's data is read from device
/// memory once instead of once per kernel, and one launch replaces
/// several. Members go into `fused`.
void KernelMapper::fuseRowGroup(IRRewriter &rewriter,
                                linalg::GenericOp reduction,
                                DenseSet<Operation *> &fused) {
  SmallVector<int64_t> trips = reduction.getStaticLoopRanges();
  if (ShapedType::isDynamicShape(trips))
    return;
  ArrayRef<int64_t> rowTrips = ArrayRef<int64_t>(trips).drop_back();
  unsigned rows = rowTrips.size();
  std::optional<RowMember> first =
      classifyRowMember(rewriter, reduction, rowTrips);
  if (!first)
    return;
  SmallVector<RowMember> members = {*first};
  // The fill that clears the reduction's output.
  if (Operation *previous = nextDeviceOp(reduction, members, false))
    if (auto linalgOp = dyn_cast<linalg::LinalgOp>(previous))
      if (isa<linalg::FillOp>(previous) &&
          linalgOp.getDpsInits()[0] == reduction.getDpsInits()[0])
        if (std::optional<RowMember> fill =
                classifyRowMember(rewriter, linalgOp, rowTrips))
          if (fill->kind == RowMember::PerRow)
            members.insert(members.begin(), *fill);
  size_t withoutNeighbours = members.size();
  Operation *last = reduction;
  while (Operation *next = nextDeviceOp(last, members, true)) {
    auto linalgOp = dyn_cast<linalg::LinalgOp>(next);
    if (!linalgOp)
      break;
    std::optional<RowMember> member =
        classifyRowMember(rewriter, linalgOp, rowTrips);
    if (!member || !joinsRowGroup(members, *member, rows))
      break;
    members.push_back(*member);
    last = member->op;
  }
  Location loc = reduction.getLoc();
  int64_t length = 0;
  for (const RowMember &member : members)
    if (member.kind != RowMember::PerRow)
      length = std::max(length, member.op.getStaticLoopRanges().back());
  int64_t width = getRowGroupVectorWidth(members, rows);
  int64_t rowCount = computeProduct(rowTrips);
  // A warp per row when its lanes cover the row in a few whole steps:
  // several rows per block, shuffles instead of the block's shared
  // memory, warp barriers instead of the block's.
  int64_t chunks = getWarpRowChunks(members, width);
  bool perWarp = chunks > 0;
  int64_t threads =
      perWarp ? kWarpSize : getRowGroupThreads(members, length, width);
  if (!perWarp)
    chunks = getKeptChunks(members, threads, width, kMaxKeptChunks);
  // A column reduction's partial sums over chunks of these rows: a block
  // per chunk then runs its rows one after another, its threads adding
  // up their columns in registers (only where each thread keeps fixed
  // columns of every row).
  linalg::FillOp partialFill;
  std::optional<ColumnPartial> partial;
  if (!perWarp && chunks > 0)
    partial = matchColumnPartial(rewriter, members, rowTrips, length, width,
                                 partialFill);
  if (members.size() == withoutNeighbours && !partial)
    return;
  // Online softmax pairs, by their max's and by their sum's member.
  DenseMap<size_t, OnlineSoftmax> onlineByMax, onlineBySum;
  for (size_t i = 0; i < members.size(); ++i)
    if (std::optional<OnlineSoftmax> online =
            matchOnlineSoftmax(members, i, rows)) {
      onlineByMax[online->max] = *online;
      onlineBySum[online->sum] = *online;
    }
  if (chunks == 0 && !onlineByMax.empty())
    threads = std::min(threads, kOnlineSoftmaxThreads);
  int64_t rowsPerBlock =
      perWarp ? std::min(kBlockSize / kWarpSize, rowCount) : 1;
  int64_t blocks = partial ? rowCount / partial->rowsPerChunk
                           : llvm::divideCeil(rowCount, rowsPerBlock);
  // The second pass over the partial sums at the kernel's end.
  std::optional<FinishingPass> finishing;
  if (partial && finishingPasses)
    finishing = matchFinishingPass(rewriter, *partial, last, blocks, threads);
  rewriter.setInsertionPoint(last);
  gpu::LaunchOp launch =
      createLaunch(rewriter, loc, blocks, threads * rowsPerBlock);
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(launch.getBody().front().getTerminator());
  auto index = [&](int64_t value) -> Value {
    return arith::ConstantIndexOp::create(rewriter, loc, value);
  };
  Value tid = launch.getThreadIds().x;
  Value row = launch.getBlockIds().x;
  if (rowsPerBlock > 1) {
    row = arith::AddIOp::create(
        rewriter, loc,
        arith::MulIOp::create(rewriter, loc, row, index(rowsPerBlock)),
        arith::DivUIOp::create(rewriter, loc, tid, index(kWarpSize)));
    tid = arith::RemUIOp::create(rewriter, loc, tid, index(kWarpSize));
    // The last block's spare warps (no block barrier follows).
    if (rowCount % rowsPerBlock != 0) {
      auto inRange = scf::IfOp::create(
          rewriter, loc,
          arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::ult, row,
                                index(rowCount)),
          /*withElseRegion=*/false);
      rewriter.setInsertionPointToStart(inRange.thenBlock());
    }
  }
  Value isFirst = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq,
                                        tid, index(0));
  SmallVector<Value> ivs = delinearize(rewriter, loc, row, rowTrips);
  Value aligned = rowsAligned(rewriter, loc, members, rows, width);
  if (aligned && partial)
    for (const ColumnPartial::Read &read : partial->reads)
      if (read.kind == ColumnPartial::Read::RowColumn ||
          read.kind == ColumnPartial::Read::Column)
        aligned =
            arith::AndIOp::create(rewriter, loc, aligned,
                                  isVectorAligned(rewriter, loc, read.buffer));
  // Members in order, a barrier between each (the block's, or the warp's
  // for a warp per row). `kept`: straight-line chunks with values kept
  // between members (see KeptRowValues); then every thread computes the
  // per-row values itself (thread 0 stores them), so no thread waits on
  // memory another wrote.
  auto reduceAcross = [&](const ReductionForm &form, Value value) {
    return perWarp ? warpReduce(rewriter, loc, form, value)
                   : reduceOverBlock(rewriter, loc, launch, form, value, tid,
                                     threads);
  };
  auto emitMembers = [&](bool vectors, KeptRowValues *kept) {
    // The block barriers between kept members, for
    // dropUnneededMemberBarriers.
    SmallVector<gpu::BarrierOp> keptBarriers;
    // An online softmax's totals, from its max's member to its sum's.
    DenseMap<size_t, std::pair<Value, Value>> onlineTotals;
    auto storeTotal = [&](linalg::GenericOp op, const ReductionForm &form,
                          Value total) {
      if (kept)
        storeKeptFolded(rewriter, loc, op, form, ivs, isFirst, total, *kept);
      else
        storeFolded(rewriter, loc, op, form, ivs, isFirst, total);
    };
    for (auto [i, member] : llvm::enumerate(members)) {
      if (i > 0) {
        if (perWarp)
          NVVM::SyncWarpOp::create(
              rewriter, loc,
              arith::ConstantIntOp::create(rewriter, loc, -1, 32));
        else if (kept)
          keptBarriers.push_back(gpu::BarrierOp::create(rewriter, loc));
        else
          gpu::BarrierOp::create(rewriter, loc);
      }
      linalg::GenericOp op = member.op;
      if (member.kind == RowMember::PerRow) {
        if (kept) {
          emitKeptPerRow(rewriter, loc, op, ivs, isFirst, *kept);
          continue;
        }
        OpBuilder::InsertionGuard inIf(rewriter);
        auto ifFirst = scf::IfOp::create(rewriter, loc, isFirst,
                                         /*withElseRegion=*/false);
        rewriter.setInsertionPointToStart(ifFirst.thenBlock());
        IRMapping mapping;
        cloneBodyAt(rewriter, loc, op, ivs, nullptr, mapping);
        storeYields(rewriter, loc, op, ivs, mapping);
        continue;
      }
      if (auto online = onlineByMax.find(i); online != onlineByMax.end()) {
        const RowMember &sum = members[online->second.sum];
        unsigned shift = online->second.shift;
        auto share = [&](bool withVectors) {
          return emitOnlineSoftmaxShare(rewriter, loc, member, sum, shift, ivs,
                                        tid, threads, width, withVectors, kept);
        };
        std::pair<Value, Value> partial;
        if (kept || !aligned) {
          partial = share(vectors);
        } else {
          Type type = member.form->output.getType();
          auto ifAligned =
              scf::IfOp::create(rewriter, loc, TypeRange{type, type}, aligned,
                                /*withElseRegion=*/true);
          OpBuilder::InsertionGuard inIf(rewriter);
          for (auto [block, withVectors] :
               {std::pair{ifAligned.thenBlock(), true},
                std::pair{ifAligned.elseBlock(), false}}) {
            rewriter.setInsertionPointToStart(block);
            auto [m, s] = share(withVectors);
            scf::YieldOp::create(rewriter, loc, ValueRange{m, s});
          }
          partial = {ifAligned.getResult(0), ifAligned.getResult(1)};
        }
        // The block's max, and the threads' sums moved to it.
        Value totalMax = reduceAcross(*member.form, partial.first);
        Value moved = arith::MulFOp::create(
            rewriter, loc, partial.second,
            rescale(rewriter, loc, partial.first, totalMax));
        onlineTotals[online->second.sum] = {totalMax,
                                            reduceAcross(*sum.form, moved)};
        storeTotal(op, *member.form, totalMax);
        continue;
      }
      if (auto online = onlineBySum.find(i); online != onlineBySum.end()) {
        // The sum against the max's final value (its output folded the
        // row's max into what it held).
        auto [totalMax, totalSum] = onlineTotals.lookup(i);
        OpOperand &shift = op->getOpOperand(online->second.shift);
        SmallVector<Value> at =
            applyMap(rewriter, loc, op.getMatchingIndexingMap(&shift), ivs);
        Value finalMax = kept ? kept->lookup(shift.get(), at) : Value();
        if (!finalMax)
          finalMax = memref::LoadOp::create(rewriter, loc, shift.get(), at);
        storeTotal(
            op, *member.form,
            arith::MulFOp::create(rewriter, loc, totalSum,
                                  rescale(rewriter, loc, totalMax, finalMax)));
        continue;
      }
      const ReductionForm *form = member.form ? &*member.form : nullptr;
      Value partial = kept ? emitRowLoop(rewriter, loc, member, ivs, tid,
                                         threads, width, vectors, kept)
                           : emitRowLoops(rewriter, loc, member, ivs, tid,
                                          threads, width, aligned);
      if (!form)
        continue;
      storeTotal(op, *form, reduceAcross(*form, partial));
    }
    if (kept)
      dropUnneededMemberBarriers(keptBarriers, kept->ownedColumns(), isFirst);
  };
  if (chunks == 0) {
    emitMembers(/*vectors=*/false, nullptr);
  } else {
    // The whole group in each branch (`aligned` is the same for every
    // thread, so the barriers inside are reached by all): values kept
    // across members must dominate their later uses.
    auto emitKept = [&](bool vectors) {
      KeptRowValues kept;
      int64_t step = threads * std::max<int64_t>(width, 1);
      Value base = arith::MulIOp::create(rewriter, loc, tid,
                                         index(std::max<int64_t>(width, 1)));
      for (int64_t c = 0; c < chunks; ++c) {
        Value chunk =
            c == 0 ? base
                   : arith::AddIOp::create(rewriter, loc, base, index(c * step))
                         .getResult();
        kept.chunks.push_back(chunk);
        kept.lanes.push_back(
            getChunkLanes(rewriter, loc, chunk, std::max<int64_t>(width, 1)));
      }
      if (!partial) {
        if (vectors)
          prefetchReadOnlyRows(rewriter, loc, members, ivs, width, kept);
        emitMembers(vectors, &kept);
        return;
      }
      // The block's chunk of rows (`row` is the chunk), the partial sums
      // carried from row to row.
      Value identity =
          arith::ConstantOp::create(rewriter, loc, partial->form.identity);
      int64_t sumCount = 0;
      for (const SmallVector<Value> &lanes : kept.lanes)
        sumCount += lanes.size();
      // kFoldedRowsInFlight rows per iteration, every one's loads issued
      // before the first row's reduction.
      int64_t inFlight = partial->rowsPerChunk % kFoldedRowsInFlight == 0
                             ? kFoldedRowsInFlight
                             : 1;
      Value first = arith::MulIOp::create(rewriter, loc, row,
                                          index(partial->rowsPerChunk));
      // The row operands' next rows copied ahead into shared memory
      // (vectors only): an iteration's loads wait on copies the one
      // before issued, not on a round trip of their own.
      SmallVector<RowCopy> copies;
      if (vectors)
        copies = planRowCopies(rewriter, loc, launch, members, *partial, width,
                               inFlight, kept.chunks.size(), threads);
      if (!copies.empty())
        issueRowCopies(rewriter, loc, copies, first, index(0), kept.chunks, tid,
                       /*more=*/nullptr);
      auto loop = scf::ForOp::create(
          rewriter, loc, index(0), index(partial->rowsPerChunk),
          index(inFlight), SmallVector<Value>(sumCount, identity));
      if (foldedBlocksPerSM > 0)
        loop->setAttr(dc::kMinBlocksPerSMAttr,
                      rewriter.getI64IntegerAttr(foldedBlocksPerSM));
      {
        OpBuilder::InsertionGuard inLoop(rewriter);
        rewriter.setInsertionPointToStart(loop.getBody());
        // Every thread is done with the previous row's shared memory (its
        // reductions, its per-row values).
        gpu::BarrierOp::create(rewriter, loc);
        Value iv = loop.getInductionVar();
        Value stage;
        if (!copies.empty()) {
          // This iteration's rows are in `stage`; the next iteration's go
          // to the other (past the last, copies of no bytes).
          stage = arith::RemUIOp::create(
              rewriter, loc,
              arith::DivUIOp::create(rewriter, loc, iv, index(inFlight)),
              index(2));
          Value next =
              arith::AddIOp::create(rewriter, loc, iv, index(inFlight));
          Value more =
              arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::ult,
                                    next, index(partial->rowsPerChunk));
          Value group = issueRowCopies(
              rewriter, loc, copies,
              arith::AddIOp::create(
                  rewriter, loc, first,
                  arith::SelectOp::create(rewriter, loc, more, next, iv)),
              arith::SubIOp::create(rewriter, loc, index(1), stage),
              kept.chunks, tid, more);
          // All but the copies just issued are done: this thread's own
          // slots of `stage` (no other thread reads them).
          nvgpu::DeviceAsyncWaitOp::create(rewriter, loc, group,
                                           rewriter.getI32IntegerAttr(1));
        }
        SmallVector<Value> ivOfRow, rowOf;
        SmallVector<KeptRowValues> rowKept(inFlight);
        for (int64_t r = 0; r < inFlight; ++r) {
          Value rowIv = iv;
          if (r > 0)
            rowIv = arith::AddIOp::create(rewriter, loc, iv, index(r));
          ivOfRow.push_back(rowIv);
          rowOf.push_back(arith::AddIOp::create(rewriter, loc, first, rowIv));
          rowKept[r].chunks = kept.chunks;
          rowKept[r].lanes = kept.lanes;
          if (!vectors)
            continue;
          for (const RowCopy &copy : copies) {
            auto slots = cast<MemRefType>(copy.slots.getType());
            for (int64_t c = 0; c < slots.getDimSize(2); ++c) {
              SmallVector<Value> slot = {stage, index(r), index(c), tid,
                                         index(0)};
              Value value =
                  copy.perRow
                      ? memref::LoadOp::create(rewriter, loc, copy.slots, slot)
                            .getResult()
                      : vector::LoadOp::create(
                            rewriter, loc,
                            VectorType::get({width}, slots.getElementType()),
                            copy.slots, slot)
                            .getResult();
              rowKept[r].keep(
                  copy.buffer,
                  applyMap(rewriter, loc, copy.map, {rowOf[r], kept.chunks[c]}),
                  value, /*stored=*/false);
            }
          }
          prefetchReadOnlyRows(rewriter, loc, members, {rowOf[r]}, width,
                               rowKept[r]);
          // The partial's per-row operands (a norm's rstd) too: a later
          // row's would otherwise load after the rows before it.
          for (const ColumnPartial::Read &read : partial->reads)
            if (read.kind == ColumnPartial::Read::Row &&
                !rowKept[r].lookup(read.buffer, {rowOf[r]}) &&
                !isWrittenByMember(members, read.buffer))
              rowKept[r].keep(
                  read.buffer, {rowOf[r]},
                  memref::LoadOp::create(rewriter, loc, read.buffer, rowOf[r]),
                  /*stored=*/false);
        }
        SmallVector<Value> sums(loop.getRegionIterArgs());
        for (int64_t r = 0; r < inFlight; ++r) {
          // The row before is done with the shared memory.
          if (r > 0)
            gpu::BarrierOp::create(rewriter, loc);
          ivs = {rowOf[r]};
          sums = emitColumnPartialRow(rewriter, loc, *partial, row, ivOfRow[r],
                                      rowOf[r], vectors, rowKept[r], sums);
          emitMembers(vectors, &rowKept[r]);
        }
        scf::YieldOp::create(rewriter, loc, sums);
      }
      // The last iteration's copies (of no bytes) done before the block
      // exits.
      if (!copies.empty())
        nvgpu::DeviceAsyncWaitOp::create(
            rewriter, loc,
            nvgpu::DeviceAsyncCreateGroupOp::create(
                rewriter, loc,
                nvgpu::DeviceAsyncTokenType::get(rewriter.getContext()),
                ValueRange{}),
            rewriter.getI32IntegerAttr(0));
      // Each thread's own columns of the chunk's partial: no other
      // thread writes them.
      OpOperand *init = partial->op.getDpsInitOperand(0);
      unsigned n = 0;
      for (const SmallVector<Value> &lanes : kept.lanes)
        for (Value column : lanes) {
          SmallVector<Value> indices = {row, column};
          Value old =
              partial->overwrites
                  ? identity
                  : memref::LoadOp::create(rewriter, loc, init->get(), indices)
                        .getResult();
          memref::StoreOp::create(
              rewriter, loc,
              combine(rewriter, partial->form, old, loop.getResult(n++)),
              init->get(), indices);
        }
    };
    if (!aligned) {
      emitKept(/*vectors=*/false);
    } else {
      auto ifAligned = scf::IfOp::create(rewriter, loc, aligned,
                                         /*withElseRegion=*/true);
      OpBuilder::InsertionGuard inIf(rewriter);
      rewriter.setInsertionPointToStart(ifAligned.thenBlock());
      emitKept(/*vectors=*/true);
      rewriter.setInsertionPointToStart(ifAligned.elseBlock());
      emitKept(/*vectors=*/false);
    }
  }
  if (finishing) {
    rewriter.setInsertionPoint(launch.getBody().front().getTerminator());
    emitFinishingPass(rewriter, launch, *finishing, blocks, threads,
                      launch.getThreadIds().x);
    rewriter.eraseOp(finishing->op);
  }
  for (const RowMember &member : members) {
    fused.insert(member.op);
    rewriter.eraseOp(member.op);
  }
  if (partial) {
    fused.insert(partial->op);
    rewriter.eraseOp(partial->op);
    if (partialFill)
      rewriter.eraseOp(partialFill);
  }
}

} // namespace dc::map_to_gpu
