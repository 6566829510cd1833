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

/// Each thread's `chunks` chunks of a row, of `width` points each (at
/// least 1), `threads * width` points apart from `tid * width` on: the
/// fixed columns of every row it keeps in registers (KeptRowValues).
static KeptRowValues assignKeptChunks(OpBuilder &builder, Location loc,
                                      Value tid, int64_t threads, int64_t width,
                                      int64_t chunks) {
  auto index = [&](int64_t value) -> Value {
    return arith::ConstantIndexOp::create(builder, loc, value);
  };
  KeptRowValues kept;
  int64_t step = threads * std::max<int64_t>(width, 1);
  Value base = arith::MulIOp::create(builder, loc, tid,
                                     index(std::max<int64_t>(width, 1)));
  for (int64_t c = 0; c < chunks; ++c) {
    Value chunk =
        c == 0 ? base
               : arith::AddIOp::create(builder, loc, base, index(c * step))
                     .getResult();
    kept.chunks.push_back(chunk);
    kept.lanes.push_back(
        getChunkLanes(builder, loc, chunk, std::max<int64_t>(width, 1)));
  }
  return kept;
}

/// The barrier between two members of a row group: the warp's for a warp
/// per row, else the block's. A kept group's block barriers go into
/// `keptBarriers`, for dropUnneededMemberBarriers to remove those that
/// order nothing.
static void emitMemberBarrier(OpBuilder &builder, Location loc, bool perWarp,
                              bool kept,
                              SmallVectorImpl<gpu::BarrierOp> &keptBarriers) {
  if (perWarp)
    NVVM::SyncWarpOp::create(
        builder, loc, arith::ConstantIntOp::create(builder, loc, -1, 32));
  else if (kept)
    keptBarriers.push_back(gpu::BarrierOp::create(builder, loc));
  else
    gpu::BarrierOp::create(builder, loc);
}

/// Adds each thread's sums of a folded row group (`sums`, one per point of
/// its chunks, in order) into its own columns of the block's chunk
/// (`chunk`) of the column partial's output, or stores them over it when
/// an identity fill cleared it (`identity` then stands for what it held):
/// no other thread writes those columns.
static void storeColumnPartials(OpBuilder &builder, Location loc,
                                const ColumnPartial &partial, Value chunk,
                                const KeptRowValues &kept, Value identity,
                                ValueRange sums) {
  linalg::GenericOp op = partial.op;
  OpOperand *init = op.getDpsInitOperand(0);
  unsigned n = 0;
  for (const SmallVector<Value> &lanes : kept.lanes)
    for (Value column : lanes) {
      SmallVector<Value> indices = {chunk, column};
      Value old =
          partial.overwrites
              ? identity
              : memref::LoadOp::create(builder, loc, init->get(), indices)
                    .getResult();
      memref::StoreOp::create(builder, loc,
                              combine(builder, partial.form, old, sums[n++]),
                              init->get(), indices);
    }
}

/// Fuses `reduction` (a row reduction) with its neighbours that work on
/// the same rows into one kernel of a block per row, each member in
/// order with a barrier between: the fill of its output before it, then
/// ops over the rows (a norm's rsqrt), over each row's points (the scale
/// that reads the row again, now from cache) and further row reductions
/// (softmax's sum after its max). The row's data is read from device
/// memory once instead of once per kernel, and one launch replaces
/// several. Members go into `fused`.
///
/// The steps: collect the members, shape the blocks, look for what the
/// kernel can compute besides (a column reduction's partials, online
/// softmax pairs, the partials' second pass), then emit the launch and the
/// members into it, and erase what it replaced.
void KernelMapper::fuseRowGroup(IRRewriter &rewriter,
                                linalg::GenericOp reduction,
                                DenseSet<Operation *> &fused) {
  SmallVector<int64_t> trips = reduction.getStaticLoopRanges();
  if (ShapedType::isDynamicShape(trips))
    return;
  RowGroupPlan plan;
  plan.rowTrips.assign(trips.begin(), std::prev(trips.end()));
  plan.rows = plan.rowTrips.size();
  if (!collectRowMembers(rewriter, reduction, plan))
    return;
  Location loc = reduction.getLoc();
  sizeRowGroup(plan);
  // A column reduction's partial sums over chunks of these rows: a block
  // per chunk then runs its rows one after another, its threads adding
  // up their columns in registers (only where each thread keeps fixed
  // columns of every row).
  if (!plan.perWarp && plan.chunks > 0)
    plan.partial =
        matchColumnPartial(rewriter, plan.members, plan.rowTrips, plan.length,
                           plan.width, plan.partialFill);
  // Only the reduction and its fill: no kernel to save, it is mapped on
  // its own.
  if (!plan.hasNeighbours && !plan.partial)
    return;
  pairOnlineSoftmaxes(plan);
  countRowGroupBlocks(plan);
  // The second pass over the partial sums at the kernel's end.
  if (plan.partial && finishingPasses)
    plan.finishing = matchFinishingPass(rewriter, *plan.partial, plan.last,
                                        plan.blocks, plan.threads);
  rewriter.setInsertionPoint(plan.last);
  gpu::LaunchOp launch = createLaunch(rewriter, loc, plan.blocks,
                                      plan.threads * plan.rowsPerBlock);
  OpBuilder::InsertionGuard guard(rewriter);
  RowGroupKernel kernel = beginRowGroupKernel(rewriter, loc, plan, launch);
  // The members: looping along the row, or with each thread's fixed chunks
  // kept in registers from one member to the next.
  if (plan.chunks == 0)
    emitRowMembers(rewriter, plan, kernel, kernel.ivs, /*vectors=*/false,
                   /*kept=*/nullptr);
  else
    emitKeptRowGroup(rewriter, plan, kernel);
  if (plan.finishing) {
    rewriter.setInsertionPoint(launch.getBody().front().getTerminator());
    emitFinishingPass(rewriter, launch, *plan.finishing, plan.blocks,
                      plan.threads, launch.getThreadIds().x);
    rewriter.eraseOp(plan.finishing->op);
  }
  eraseFusedOps(rewriter, plan, fused);
}

/// Collects the members of `reduction`'s row group into `plan`, in order:
/// the fill that clears its output just before it, the reduction, then
/// each next op on the device (past host ops that touch none of the
/// members' buffers) while it works on the same rows and can share their
/// blocks (joinsRowGroup). False when the reduction itself cannot be a
/// member.
bool KernelMapper::collectRowMembers(IRRewriter &rewriter,
                                     linalg::GenericOp reduction,
                                     RowGroupPlan &plan) {
  std::optional<RowMember> first =
      classifyRowMember(rewriter, reduction, plan.rowTrips);
  if (!first)
    return false;
  plan.members = {*first};
  // The fill that clears the reduction's output.
  if (Operation *previous = nextDeviceOp(reduction, plan.members, false))
    if (auto linalgOp = dyn_cast<linalg::LinalgOp>(previous))
      if (isa<linalg::FillOp>(previous) &&
          linalgOp.getDpsInits()[0] == reduction.getDpsInits()[0])
        if (std::optional<RowMember> fill =
                classifyRowMember(rewriter, linalgOp, plan.rowTrips))
          if (fill->kind == RowMember::PerRow)
            plan.members.insert(plan.members.begin(), *fill);
  size_t withoutNeighbours = plan.members.size();
  plan.last = reduction;
  while (Operation *next = nextDeviceOp(plan.last, plan.members, true)) {
    auto linalgOp = dyn_cast<linalg::LinalgOp>(next);
    if (!linalgOp)
      break;
    std::optional<RowMember> member =
        classifyRowMember(rewriter, linalgOp, plan.rowTrips);
    if (!member || !joinsRowGroup(plan.members, *member, plan.rows))
      break;
    plan.members.push_back(*member);
    plan.last = member->op;
  }
  plan.hasNeighbours = plan.members.size() > withoutNeighbours;
  return true;
}

/// The shape of a row group's blocks: the longest row of the members that
/// go along it, the elements of a vector access, and threads per row. A
/// warp per row when its lanes cover the row in a few whole steps: several
/// rows per block, shuffles instead of the block's shared memory, warp
/// barriers instead of the block's. Else a block per row, whose threads
/// keep fixed chunks of every row when they cover it in a few whole steps
/// (getKeptChunks; 0: they loop along it).
void KernelMapper::sizeRowGroup(RowGroupPlan &plan) {
  plan.length = 0;
  for (const RowMember &member : plan.members)
    if (member.kind != RowMember::PerRow)
      plan.length =
          std::max(plan.length, member.op.getStaticLoopRanges().back());
  plan.width = getRowGroupVectorWidth(plan.members, plan.rows);
  plan.rowCount = computeProduct(plan.rowTrips);
  plan.chunks = getWarpRowChunks(plan.members, plan.width);
  plan.perWarp = plan.chunks > 0;
  plan.threads =
      plan.perWarp ? kWarpSize
                   : getRowGroupThreads(plan.members, plan.length, plan.width);
  if (!plan.perWarp)
    plan.chunks =
        getKeptChunks(plan.members, plan.threads, plan.width, kMaxKeptChunks);
}

/// The group's online softmax pairs (matchOnlineSoftmax), by their max's
/// and by their sum's member. A block that loops along the row for one
/// takes at most kOnlineSoftmaxThreads threads: shorter blocks leave room
/// for several per SM.
void KernelMapper::pairOnlineSoftmaxes(RowGroupPlan &plan) {
  for (size_t i = 0; i < plan.members.size(); ++i)
    if (std::optional<OnlineSoftmax> online =
            matchOnlineSoftmax(plan.members, i, plan.rows)) {
      plan.onlineByMax[online->max] = *online;
      plan.onlineBySum[online->sum] = *online;
    }
  if (plan.chunks == 0 && !plan.onlineByMax.empty())
    plan.threads = std::min(plan.threads, kOnlineSoftmaxThreads);
}

/// The kernel's blocks: one per chunk of rows with a column partial, else
/// one per row, or per kBlockSize / kWarpSize rows with a warp per row.
void KernelMapper::countRowGroupBlocks(RowGroupPlan &plan) {
  plan.rowsPerBlock =
      plan.perWarp ? std::min(kBlockSize / kWarpSize, plan.rowCount) : 1;
  plan.blocks = plan.partial
                    ? plan.rowCount / plan.partial->rowsPerChunk
                    : llvm::divideCeil(plan.rowCount, plan.rowsPerBlock);
}

/// Opens the body of `launch` (the builder stays inside it) and gives
/// each thread what every member's code uses: its row (with a warp per
/// row, its block's rows one per warp, the last block's spare warps
/// skipping everything, as no block barrier follows), its thread within
/// the row, whether it is the row's first, the row's point of the row
/// loops, and whether the rows are aligned for vectors.
KernelMapper::RowGroupKernel
KernelMapper::beginRowGroupKernel(IRRewriter &rewriter, Location loc,
                                  const RowGroupPlan &plan,
                                  gpu::LaunchOp launch) {
  rewriter.setInsertionPoint(launch.getBody().front().getTerminator());
  auto index = [&](int64_t value) -> Value {
    return arith::ConstantIndexOp::create(rewriter, loc, value);
  };
  Value tid = launch.getThreadIds().x;
  Value row = launch.getBlockIds().x;
  if (plan.rowsPerBlock > 1) {
    row = arith::AddIOp::create(
        rewriter, loc,
        arith::MulIOp::create(rewriter, loc, row, index(plan.rowsPerBlock)),
        arith::DivUIOp::create(rewriter, loc, tid, index(kWarpSize)));
    tid = arith::RemUIOp::create(rewriter, loc, tid, index(kWarpSize));
    // The last block's spare warps (no block barrier follows).
    if (plan.rowCount % plan.rowsPerBlock != 0) {
      auto inRange = scf::IfOp::create(
          rewriter, loc,
          arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::ult, row,
                                index(plan.rowCount)),
          /*withElseRegion=*/false);
      rewriter.setInsertionPointToStart(inRange.thenBlock());
    }
  }
  Value isFirst = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq,
                                        tid, index(0));
  SmallVector<Value> ivs = delinearize(rewriter, loc, row, plan.rowTrips);
  Value aligned = rowGroupAligned(rewriter, loc, plan);
  return RowGroupKernel{launch, loc, tid, row, isFirst, aligned, ivs};
}

/// Whether the members' row operands (rowsAligned) and the column
/// partial's operands read along the row are 16-byte aligned (i1), the
/// condition of the vectorized code; null when the group has none.
Value KernelMapper::rowGroupAligned(IRRewriter &rewriter, Location loc,
                                    const RowGroupPlan &plan) {
  Value aligned =
      rowsAligned(rewriter, loc, plan.members, plan.rows, plan.width);
  if (aligned && plan.partial)
    for (const ColumnPartial::Read &read : plan.partial->reads)
      if (read.kind == ColumnPartial::Read::RowColumn ||
          read.kind == ColumnPartial::Read::Column)
        aligned =
            arith::AndIOp::create(rewriter, loc, aligned,
                                  isVectorAligned(rewriter, loc, read.buffer));
  return aligned;
}

/// The members in order at the row point `ivs`, a barrier between each
/// (the block's, or the warp's for a warp per row). With `kept`:
/// straight-line chunks with values kept between members (see
/// KeptRowValues); then every thread computes the per-row values itself
/// (thread 0 stores them), so no thread waits on memory another wrote,
/// and the barriers that order nothing go.
void KernelMapper::emitRowMembers(IRRewriter &rewriter,
                                  const RowGroupPlan &plan,
                                  const RowGroupKernel &kernel,
                                  ArrayRef<Value> ivs, bool vectors,
                                  KeptRowValues *kept) {
  Location loc = kernel.loc;
  // The block barriers between kept members, for
  // dropUnneededMemberBarriers.
  SmallVector<gpu::BarrierOp> keptBarriers;
  // An online softmax's totals, from its max's member to its sum's.
  DenseMap<size_t, std::pair<Value, Value>> onlineTotals;
  for (auto [i, member] : llvm::enumerate(plan.members)) {
    if (i > 0)
      emitMemberBarrier(rewriter, loc, plan.perWarp, kept != nullptr,
                        keptBarriers);
    if (member.kind == RowMember::PerRow) {
      emitPerRowMember(rewriter, loc, member.op, ivs, kernel.isFirst, kept);
      continue;
    }
    if (auto online = plan.onlineByMax.find(i);
        online != plan.onlineByMax.end()) {
      onlineTotals[online->second.sum] = reduceOnlineSoftmax(
          rewriter, plan, kernel, member, online->second, ivs, vectors, kept);
      continue;
    }
    if (auto online = plan.onlineBySum.find(i);
        online != plan.onlineBySum.end()) {
      storeOnlineSoftmaxSum(rewriter, kernel, member, online->second.shift,
                            onlineTotals.lookup(i), ivs, kept);
      continue;
    }
    // A row reduction, or an op over every point of the row.
    Value partial =
        kept ? emitRowLoop(rewriter, loc, member, ivs, kernel.tid, plan.threads,
                           plan.width, vectors, kept)
             : emitRowLoops(rewriter, loc, member, ivs, kernel.tid,
                            plan.threads, plan.width, kernel.aligned);
    if (!member.form)
      continue;
    storeRowTotal(
        rewriter, kernel, member.op, *member.form, ivs,
        reduceRowAcross(rewriter, plan, kernel, *member.form, partial), kept);
  }
  if (kept)
    dropUnneededMemberBarriers(keptBarriers, kept->ownedColumns(),
                               kernel.isFirst);
}

/// A member over the rows (its loops are the row loops) at `ivs`: from
/// `kept` when each thread keeps its chunks (emitKeptPerRow), else
/// computed and stored by thread 0 alone.
void KernelMapper::emitPerRowMember(IRRewriter &rewriter, Location loc,
                                    linalg::GenericOp op, ArrayRef<Value> ivs,
                                    Value isFirst, KeptRowValues *kept) {
  if (kept)
    emitKeptPerRow(rewriter, loc, op, ivs, isFirst, *kept);
  else
    emitOnFirstThread(rewriter, loc, op, ivs, isFirst);
}

/// Each thread's running max and sum of an online softmax pair (`max` and
/// the pair's sum) over its share of the row. A group that loops along
/// the row without keeping chunks takes the vectorized loop or the scalar
/// one as the rows are aligned or not (one scf.if for all threads).
std::pair<Value, Value> KernelMapper::emitOnlineSoftmaxPartial(
    IRRewriter &rewriter, const RowGroupPlan &plan,
    const RowGroupKernel &kernel, const RowMember &max,
    const OnlineSoftmax &online, ArrayRef<Value> ivs, bool vectors,
    KeptRowValues *kept) {
  Location loc = kernel.loc;
  const RowMember &sum = plan.members[online.sum];
  auto share = [&](bool withVectors) {
    return emitOnlineSoftmaxShare(rewriter, loc, max, sum, online.shift, ivs,
                                  kernel.tid, plan.threads, plan.width,
                                  withVectors, kept);
  };
  if (kept || !kernel.aligned)
    return share(vectors);
  Type type = max.form->output.getType();
  auto ifAligned =
      scf::IfOp::create(rewriter, loc, TypeRange{type, type}, kernel.aligned,
                        /*withElseRegion=*/true);
  OpBuilder::InsertionGuard inIf(rewriter);
  for (auto [block, withVectors] : {std::pair{ifAligned.thenBlock(), true},
                                    std::pair{ifAligned.elseBlock(), false}}) {
    rewriter.setInsertionPointToStart(block);
    auto [m, s] = share(withVectors);
    scf::YieldOp::create(rewriter, loc, ValueRange{m, s});
  }
  return {ifAligned.getResult(0), ifAligned.getResult(1)};
}

/// The max member `max` of an online softmax pair, with its sum: the
/// block's max (stored as the member's total) and the threads' sums
/// rescaled to it and combined. Returns the row's max and sum, for the
/// sum's member (storeOnlineSoftmaxSum).
std::pair<Value, Value> KernelMapper::reduceOnlineSoftmax(
    IRRewriter &rewriter, const RowGroupPlan &plan,
    const RowGroupKernel &kernel, const RowMember &max,
    const OnlineSoftmax &online, ArrayRef<Value> ivs, bool vectors,
    KeptRowValues *kept) {
  Location loc = kernel.loc;
  const RowMember &sum = plan.members[online.sum];
  std::pair<Value, Value> partial = emitOnlineSoftmaxPartial(
      rewriter, plan, kernel, max, online, ivs, vectors, kept);
  // The block's max, and the threads' sums moved to it.
  Value totalMax =
      reduceRowAcross(rewriter, plan, kernel, *max.form, partial.first);
  Value moved =
      arith::MulFOp::create(rewriter, loc, partial.second,
                            rescale(rewriter, loc, partial.first, totalMax));
  Value totalSum = reduceRowAcross(rewriter, plan, kernel, *sum.form, moved);
  storeRowTotal(rewriter, kernel, max.op, *max.form, ivs, totalMax, kept);
  return {totalMax, totalSum};
}

/// The sum member `sum` of an online softmax pair, from the row's
/// `totals` (max, sum): its total is the sum against the max's final
/// value, the value of `shift`, its operand that reads the max's output
/// (which folded the row's max into what it held).
void KernelMapper::storeOnlineSoftmaxSum(IRRewriter &rewriter,
                                         const RowGroupKernel &kernel,
                                         const RowMember &sum, unsigned shift,
                                         std::pair<Value, Value> totals,
                                         ArrayRef<Value> ivs,
                                         KeptRowValues *kept) {
  Location loc = kernel.loc;
  auto [totalMax, totalSum] = totals;
  linalg::GenericOp op = sum.op;
  OpOperand &shifted = op->getOpOperand(shift);
  SmallVector<Value> at =
      applyMap(rewriter, loc, op.getMatchingIndexingMap(&shifted), ivs);
  Value finalMax = kept ? kept->lookup(shifted.get(), at) : Value();
  if (!finalMax)
    finalMax = memref::LoadOp::create(rewriter, loc, shifted.get(), at);
  storeRowTotal(
      rewriter, kernel, op, *sum.form, ivs,
      arith::MulFOp::create(rewriter, loc, totalSum,
                            rescale(rewriter, loc, totalMax, finalMax)),
      kept);
}

/// The row's total of the threads' partials `value`: over the warp for a
/// warp per row, else over the block.
Value KernelMapper::reduceRowAcross(IRRewriter &rewriter,
                                    const RowGroupPlan &plan,
                                    const RowGroupKernel &kernel,
                                    const ReductionForm &form, Value value) {
  return plan.perWarp ? warpReduce(rewriter, kernel.loc, form, value)
                      : reduceOverBlock(rewriter, kernel.loc, kernel.launch,
                                        form, value, kernel.tid, plan.threads);
}

/// Folds a reduction member's row total into its output at `ivs`
/// (thread 0 stores it), keeping the stored value in `kept` if any.
void KernelMapper::storeRowTotal(IRRewriter &rewriter,
                                 const RowGroupKernel &kernel,
                                 linalg::GenericOp op,
                                 const ReductionForm &form, ArrayRef<Value> ivs,
                                 Value total, KeptRowValues *kept) {
  if (kept)
    storeKeptFolded(rewriter, kernel.loc, op, form, ivs, kernel.isFirst, total,
                    *kept);
  else
    storeFolded(rewriter, kernel.loc, op, form, ivs, kernel.isFirst, total);
}

/// The members of a group whose threads keep fixed chunks of the row: the
/// whole group in each branch of `aligned`, vectorized and not (`aligned`
/// is the same for every thread, so the barriers inside are reached by
/// all): values kept across members must dominate their later uses.
void KernelMapper::emitKeptRowGroup(IRRewriter &rewriter,
                                    const RowGroupPlan &plan,
                                    const RowGroupKernel &kernel) {
  if (!kernel.aligned) {
    emitKeptRowShare(rewriter, plan, kernel, /*vectors=*/false);
    return;
  }
  auto ifAligned = scf::IfOp::create(rewriter, kernel.loc, kernel.aligned,
                                     /*withElseRegion=*/true);
  OpBuilder::InsertionGuard inIf(rewriter);
  rewriter.setInsertionPointToStart(ifAligned.thenBlock());
  emitKeptRowShare(rewriter, plan, kernel, /*vectors=*/true);
  rewriter.setInsertionPointToStart(ifAligned.elseBlock());
  emitKeptRowShare(rewriter, plan, kernel, /*vectors=*/false);
}

/// One branch of emitKeptRowGroup: the thread's chunks, then the members
/// over the block's row (the read-only rows loaded first, with vectors),
/// or over its chunk of rows with a column partial (emitFoldedRows).
void KernelMapper::emitKeptRowShare(IRRewriter &rewriter,
                                    const RowGroupPlan &plan,
                                    const RowGroupKernel &kernel,
                                    bool vectors) {
  KeptRowValues kept = assignKeptChunks(rewriter, kernel.loc, kernel.tid,
                                        plan.threads, plan.width, plan.chunks);
  if (plan.partial) {
    emitFoldedRows(rewriter, plan, kernel, vectors, kept);
    return;
  }
  if (vectors)
    prefetchReadOnlyRows(rewriter, kernel.loc, plan.members, kernel.ivs,
                         plan.width, kept);
  emitRowMembers(rewriter, plan, kernel, kernel.ivs, vectors, &kept);
}

/// The block's chunk of rows (`kernel.row` is the chunk) of a group with a
/// column partial: a loop over the chunk's rows that carries each
/// thread's partial sums of its columns from row to row, then the sums
/// added into the chunk's partial (storeColumnPartials).
/// kFoldedRowsInFlight rows per iteration, every one's loads issued
/// before the first row's reduction. With vectors, the row operands' next
/// rows are copied ahead into shared memory: an iteration's loads wait on
/// copies the one before issued, not on a round trip of their own.
void KernelMapper::emitFoldedRows(IRRewriter &rewriter,
                                  const RowGroupPlan &plan,
                                  const RowGroupKernel &kernel, bool vectors,
                                  const KeptRowValues &kept) {
  Location loc = kernel.loc;
  const ColumnPartial &partial = *plan.partial;
  auto index = [&](int64_t value) -> Value {
    return arith::ConstantIndexOp::create(rewriter, loc, value);
  };
  Value identity =
      arith::ConstantOp::create(rewriter, loc, partial.form.identity);
  int64_t sumCount = 0;
  for (const SmallVector<Value> &lanes : kept.lanes)
    sumCount += lanes.size();
  int64_t inFlight =
      partial.rowsPerChunk % kFoldedRowsInFlight == 0 ? kFoldedRowsInFlight : 1;
  Value first = arith::MulIOp::create(rewriter, loc, kernel.row,
                                      index(partial.rowsPerChunk));
  SmallVector<RowCopy> copies;
  if (vectors)
    copies =
        planRowCopies(rewriter, loc, kernel.launch, plan.members, partial,
                      plan.width, inFlight, kept.chunks.size(), plan.threads);
  if (!copies.empty())
    issueRowCopies(rewriter, loc, copies, first, index(0), kept.chunks,
                   kernel.tid, /*more=*/nullptr);
  auto loop = scf::ForOp::create(rewriter, loc, index(0),
                                 index(partial.rowsPerChunk), index(inFlight),
                                 SmallVector<Value>(sumCount, identity));
  if (foldedBlocksPerSM > 0)
    loop->setAttr(dc::kMinBlocksPerSMAttr,
                  rewriter.getI64IntegerAttr(foldedBlocksPerSM));
  emitFoldedIteration(rewriter, plan, kernel, loop, first, copies, inFlight,
                      vectors, kept);
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
  storeColumnPartials(rewriter, loc, partial, kernel.row, kept, identity,
                      loop.getResults());
}

/// The body of emitFoldedRows' loop: once every thread is done with the
/// previous iteration's shared memory, the next rows' copies issued, this
/// iteration's rows loaded (loadFoldedRows), then for each row the
/// partial's sums (emitColumnPartialRow) and the members.
void KernelMapper::emitFoldedIteration(IRRewriter &rewriter,
                                       const RowGroupPlan &plan,
                                       const RowGroupKernel &kernel,
                                       scf::ForOp loop, Value first,
                                       ArrayRef<RowCopy> copies,
                                       int64_t inFlight, bool vectors,
                                       const KeptRowValues &kept) {
  Location loc = kernel.loc;
  OpBuilder::InsertionGuard inLoop(rewriter);
  rewriter.setInsertionPointToStart(loop.getBody());
  // Every thread is done with the previous row's shared memory (its
  // reductions, its per-row values).
  gpu::BarrierOp::create(rewriter, loc);
  Value iv = loop.getInductionVar();
  Value stage;
  if (!copies.empty())
    stage =
        issueNextRowCopies(rewriter, loc, copies, plan.partial->rowsPerChunk,
                           first, iv, inFlight, kept.chunks, kernel.tid);
  SmallVector<FoldedRow> rows =
      loadFoldedRows(rewriter, plan, kernel, copies, first, iv, stage, inFlight,
                     vectors, kept);
  SmallVector<Value> sums(loop.getRegionIterArgs());
  for (auto [r, folded] : llvm::enumerate(rows)) {
    // The row before is done with the shared memory.
    if (r > 0)
      gpu::BarrierOp::create(rewriter, loc);
    SmallVector<Value> ivs = {folded.row};
    sums =
        emitColumnPartialRow(rewriter, loc, *plan.partial, kernel.row,
                             folded.iv, folded.row, vectors, folded.kept, sums);
    emitRowMembers(rewriter, plan, kernel, ivs, vectors, &folded.kept);
  }
  scf::YieldOp::create(rewriter, loc, sums);
}

/// At the start of the folded loop's iteration `iv`: this iteration's
/// rows are in the returned stage of the copies' slots; the next
/// iteration's are copied to the other (past the last, copies of no
/// bytes), then the thread waits for all but those.
Value KernelMapper::issueNextRowCopies(IRRewriter &rewriter, Location loc,
                                       ArrayRef<RowCopy> copies,
                                       int64_t rowsPerChunk, Value first,
                                       Value iv, int64_t inFlight,
                                       ArrayRef<Value> chunks, Value tid) {
  auto index = [&](int64_t value) -> Value {
    return arith::ConstantIndexOp::create(rewriter, loc, value);
  };
  // This iteration's rows are in `stage`; the next iteration's go
  // to the other (past the last, copies of no bytes).
  Value stage = arith::RemUIOp::create(
      rewriter, loc, arith::DivUIOp::create(rewriter, loc, iv, index(inFlight)),
      index(2));
  Value next = arith::AddIOp::create(rewriter, loc, iv, index(inFlight));
  Value more = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::ult,
                                     next, index(rowsPerChunk));
  Value group = issueRowCopies(
      rewriter, loc, copies,
      arith::AddIOp::create(
          rewriter, loc, first,
          arith::SelectOp::create(rewriter, loc, more, next, iv)),
      arith::SubIOp::create(rewriter, loc, index(1), stage), chunks, tid, more);
  // All but the copies just issued are done: this thread's own
  // slots of `stage` (no other thread reads them).
  nvgpu::DeviceAsyncWaitOp::create(rewriter, loc, group,
                                   rewriter.getI32IntegerAttr(1));
  return stage;
}

/// The `inFlight` rows of the folded loop's iteration `iv` (rows `first +
/// iv` on), each with its own kept values. With vectors, every row's loads
/// are issued here, before the first row's reduction: its row operands
/// from their copies in `stage` (keepCopiedRow), the rows no member writes
/// (prefetchReadOnlyRows) and the partial's per-row operands (a norm's
/// rstd), which would otherwise load after the rows before.
SmallVector<KernelMapper::FoldedRow>
KernelMapper::loadFoldedRows(IRRewriter &rewriter, const RowGroupPlan &plan,
                             const RowGroupKernel &kernel,
                             ArrayRef<RowCopy> copies, Value first, Value iv,
                             Value stage, int64_t inFlight, bool vectors,
                             const KeptRowValues &kept) {
  Location loc = kernel.loc;
  auto index = [&](int64_t value) -> Value {
    return arith::ConstantIndexOp::create(rewriter, loc, value);
  };
  SmallVector<FoldedRow> rows(inFlight);
  for (int64_t r = 0; r < inFlight; ++r) {
    FoldedRow &folded = rows[r];
    folded.iv = iv;
    if (r > 0)
      folded.iv = arith::AddIOp::create(rewriter, loc, iv, index(r));
    folded.row = arith::AddIOp::create(rewriter, loc, first, folded.iv);
    folded.kept.chunks = kept.chunks;
    folded.kept.lanes = kept.lanes;
    if (!vectors)
      continue;
    keepCopiedRow(rewriter, loc, copies, stage, r, kernel.tid, plan.width,
                  folded.row, folded.kept);
    prefetchReadOnlyRows(rewriter, loc, plan.members, {folded.row}, plan.width,
                         folded.kept);
    // The partial's per-row operands (a norm's rstd) too: a later
    // row's would otherwise load after the rows before it.
    for (const ColumnPartial::Read &read : plan.partial->reads)
      if (read.kind == ColumnPartial::Read::Row &&
          !folded.kept.lookup(read.buffer, {folded.row}) &&
          !isWrittenByMember(plan.members, read.buffer))
        folded.kept.keep(
            read.buffer, {folded.row},
            memref::LoadOp::create(rewriter, loc, read.buffer, folded.row),
            /*stored=*/false);
  }
  return rows;
}

/// Loads this thread's copies of the iteration's row `r` (`row`) from
/// `stage` of each row copy's slots into `kept`, as what its row operand
/// holds at the thread's chunks of the row (or, for a per-row value, at
/// the row).
void KernelMapper::keepCopiedRow(IRRewriter &rewriter, Location loc,
                                 ArrayRef<RowCopy> copies, Value stage,
                                 int64_t r, Value tid, int64_t width, Value row,
                                 KeptRowValues &kept) {
  auto index = [&](int64_t value) -> Value {
    return arith::ConstantIndexOp::create(rewriter, loc, value);
  };
  for (const RowCopy &copy : copies) {
    auto slots = cast<MemRefType>(copy.slots.getType());
    for (int64_t c = 0; c < slots.getDimSize(2); ++c) {
      SmallVector<Value> slot = {stage, index(r), index(c), tid, index(0)};
      Value value =
          copy.perRow ? memref::LoadOp::create(rewriter, loc, copy.slots, slot)
                            .getResult()
                      : vector::LoadOp::create(
                            rewriter, loc,
                            VectorType::get({width}, slots.getElementType()),
                            copy.slots, slot)
                            .getResult();
      kept.keep(copy.buffer,
                applyMap(rewriter, loc, copy.map, {row, kept.chunks[c]}), value,
                /*stored=*/false);
    }
  }
}

/// Erases the ops the kernel now computes: the members and the column
/// partial (both into `fused`) and the fill of the partial's output.
void KernelMapper::eraseFusedOps(IRRewriter &rewriter, RowGroupPlan &plan,
                                 DenseSet<Operation *> &fused) {
  for (const RowMember &member : plan.members) {
    fused.insert(member.op);
    rewriter.eraseOp(member.op);
  }
  if (plan.partial) {
    fused.insert(plan.partial->op);
    rewriter.eraseOp(plan.partial->op);
    if (plan.partialFill)
      rewriter.eraseOp(plan.partialFill);
  }
}

} // namespace dc::map_to_gpu
