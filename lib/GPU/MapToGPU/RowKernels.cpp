//===- RowKernels.cpp -----------------------------------------------------===//
//
// The loops of a row group's kernel: its threads, row copies, kept values,
// points.
//
//===----------------------------------------------------------------------===//
#include "MapToGPUInternals.h"

namespace dc::map_to_gpu {

/// The operands the folded loop would load: those of `members` that move
/// with the row (and the column: 16 bytes per chunk; or not: a 4-byte
/// per-row value) and the partial's per-row reads, each with its slots in
/// `launch`'s workgroup memory. None when the slots would not fit beside
/// the group's reductions.
SmallVector<KernelMapper::RowCopy> KernelMapper::planRowCopies(
    IRRewriter &rewriter, Location loc, gpu::LaunchOp launch,
    ArrayRef<RowMember> members, const ColumnPartial &partial, int64_t width,
    int64_t inFlight, int64_t chunks, int64_t threads) const {
  MLIRContext *context = rewriter.getContext();
  SmallVector<RowCopy> copies;
  int64_t bytes = 0;
  auto add = [&](Value buffer, AffineMap map) {
    auto type = dyn_cast<MemRefType>(buffer.getType());
    if (!type || map.getNumDims() != 2 || !map.isFunctionOfDim(0) ||
        isWrittenByMember(members, buffer) ||
        llvm::any_of(copies, [&](const RowCopy &copy) {
          return copy.buffer == buffer && copy.map == map;
        }))
      return;
    bool perRow = !map.isFunctionOfDim(1);
    int64_t copyBytes = type.getElementTypeBitWidth() / 8;
    if (!perRow)
      copyBytes *= width;
    // cp.async moves 4, 8 or 16 bytes.
    if (perRow ? copyBytes != 4 : copyBytes != kVectorBytes)
      return;
    copies.push_back({buffer, map, Value(), perRow});
    bytes += 2 * inFlight * (perRow ? 1 : chunks) * threads * copyBytes;
  };
  for (const RowMember &member : members) {
    if (member.kind == RowMember::PerRow)
      continue;
    linalg::GenericOp op = member.op;
    Block &body = op.getRegion().front();
    for (OpOperand *input : op.getDpsInputOperands())
      if (!body.getArgument(input->getOperandNumber()).use_empty())
        add(input->get(), op.getMatchingIndexingMap(input));
  }
  for (const ColumnPartial::Read &read : partial.reads)
    if (read.kind == ColumnPartial::Read::Row)
      add(read.buffer, AffineMap::get(2, 0, getAffineDimExpr(0, context)));
  if (copies.empty() ||
      bytes > gpuShape.sharedMemoryPerBlock - kReductionSharedBytes)
    return {};
  // As NVVM numbers it: convert-nvgpu-to-nvvm does not map the GPU
  // dialect's address spaces.
  Attribute workgroup = rewriter.getI64IntegerAttr(
      static_cast<int64_t>(NVVM::NVVMMemorySpace::Shared));
  for (RowCopy &copy : copies)
    copy.slots = launch.addWorkgroupAttribution(
        MemRefType::get({2, inFlight, copy.perRow ? 1 : chunks, threads,
                         copy.perRow ? 1 : width},
                        getElementTypeOrSelf(copy.buffer),
                        MemRefLayoutAttrInterface{}, workgroup),
        loc);
  return copies;
}

/// Issues the copies of rows `first`, `first` + 1, ... (one per row in
/// flight) of every RowCopy into `stage`'s slots of this thread, as one
/// group; returns its token. Where `more` (i1) is false the copies move
/// no bytes (the slots are zeroed); null: always all.
Value KernelMapper::issueRowCopies(IRRewriter &rewriter, Location loc,
                                   ArrayRef<RowCopy> copies, Value first,
                                   Value stage, ArrayRef<Value> chunks,
                                   Value tid, Value more) {
  auto index = [&](int64_t value) -> Value {
    return arith::ConstantIndexOp::create(rewriter, loc, value);
  };
  auto tokenType = nvgpu::DeviceAsyncTokenType::get(rewriter.getContext());
  SmallVector<Value> tokens;
  for (const RowCopy &copy : copies) {
    // A per-row value has one slot of one element (planRowCopies).
    auto slots = cast<MemRefType>(copy.slots.getType());
    int64_t inFlight = slots.getDimSize(1), slotChunks = slots.getDimSize(2),
            width = slots.getDimSize(4);
    Value elements = more ? arith::SelectOp::create(rewriter, loc, more,
                                                    index(width), index(0))
                                .getResult()
                          : Value();
    // Only 16-byte copies may bypass L1.
    bool bypassL1 = width * slots.getElementTypeBitWidth() == kVectorBytes * 8;
    for (int64_t r = 0; r < inFlight; ++r) {
      Value row = r == 0 ? first
                         : arith::AddIOp::create(rewriter, loc, first, index(r))
                               .getResult();
      for (int64_t c = 0; c < slotChunks; ++c)
        tokens.push_back(nvgpu::DeviceAsyncCopyOp::create(
            rewriter, loc, tokenType, copy.slots,
            ValueRange{stage, index(r), index(c), tid, index(0)}, copy.buffer,
            applyMap(rewriter, loc, copy.map, {row, chunks[c]}),
            rewriter.getIndexAttr(width), elements,
            bypassL1 ? rewriter.getUnitAttr() : UnitAttr()));
    }
  }
  return nvgpu::DeviceAsyncCreateGroupOp::create(rewriter, loc, tokenType,
                                                 tokens);
}

/// Issues, before the group's first member, the 16-byte loads of every
/// row operand that no member writes (a norm's weight, read by its scale
/// after the row's sum): `kept` holds them for the members that read
/// them. Otherwise such a load waits behind the reduction's barriers,
/// its latency exposed once per row.
void KernelMapper::prefetchReadOnlyRows(IRRewriter &rewriter, Location loc,
                                        ArrayRef<RowMember> members,
                                        ArrayRef<Value> ivs, int64_t width,
                                        KeptRowValues &kept) {
  unsigned rows = ivs.size();
  for (const RowMember &member : members) {
    if (member.kind == RowMember::PerRow)
      continue;
    linalg::GenericOp op = member.op;
    Block &body = op.getRegion().front();
    for (OpOperand *input : op.getDpsInputOperands()) {
      Value buffer = input->get();
      AffineMap map = op.getMatchingIndexingMap(input);
      if (!isa<MemRefType>(buffer.getType()) ||
          body.getArgument(input->getOperandNumber()).use_empty() ||
          !map.isFunctionOfDim(rows) || isWrittenByMember(members, buffer))
        continue;
      for (Value chunk : kept.chunks) {
        SmallVector<Value> point(ivs);
        point.push_back(chunk);
        SmallVector<Value> indices = applyMap(rewriter, loc, map, point);
        if (kept.lookup(buffer, indices))
          continue;
        Value value = loadVector(rewriter, loc, buffer, indices, width);
        kept.keep(buffer, indices, value, /*stored=*/false);
      }
    }
  }
}

/// Threads of a block per row: kRowChunksPerThread chunks each when the
/// group then keeps its chunks in registers (getKeptChunks), else one
/// chunk each (a loop's threads), at most kBlockSize.
int64_t KernelMapper::getRowGroupThreads(ArrayRef<RowMember> members,
                                         int64_t length, int64_t width) {
  int64_t rowChunks = length / std::max<int64_t>(width, 1);
  auto threadsFor = [&](int64_t chunksEach) {
    return std::min<int64_t>(
        kBlockSize,
        llvm::alignTo(llvm::divideCeil(rowChunks, chunksEach), kWarpSize));
  };
  int64_t fewer = threadsFor(kRowChunksPerThread);
  if (getKeptChunks(members, fewer, width, kMaxKeptChunks) > 0)
    return fewer;
  return threadsFor(1);
}

/// Chunks of `width` (at least 1) points each thread takes of every row
/// when the members that loop along the row all have one length that
/// `threads` threads cover in a few whole steps (at most `maxChunks`):
/// then the group is code without loops and keeps values in registers
/// between members. 0: loops.
int64_t KernelMapper::getKeptChunks(ArrayRef<RowMember> members,
                                    int64_t threads, int64_t width,
                                    int64_t maxChunks) {
  int64_t step = threads * std::max<int64_t>(width, 1);
  int64_t length = -1;
  for (const RowMember &member : members) {
    if (member.kind == RowMember::PerRow)
      continue;
    int64_t inner = member.op.getStaticLoopRanges().back();
    if (length >= 0 && inner != length)
      return 0;
    length = inner;
  }
  if (length <= 0 || length % step != 0 || length / step > maxChunks)
    return 0;
  return length / step;
}

/// The chunks each lane of a warp per row keeps (getKeptChunks over 32
/// threads, at most kMaxWarpRowChunks), when every reduction of the
/// group folds f32 (a 32-bit shuffle carries it); 0: a block per row.
int64_t KernelMapper::getWarpRowChunks(ArrayRef<RowMember> members,
                                       int64_t width) {
  for (const RowMember &member : members)
    if (member.form && !member.form->output.getType().isF32())
      return 0;
  return getKeptChunks(members, kWarpSize, width, kMaxWarpRowChunks);
}

/// `op` at `ivs` computed and stored by the thread where `isFirst` holds
/// alone (a per-row member, whose one point per row needs one thread).
void KernelMapper::emitOnFirstThread(IRRewriter &rewriter, Location loc,
                                     linalg::GenericOp op, ArrayRef<Value> ivs,
                                     Value isFirst) {
  OpBuilder::InsertionGuard inIf(rewriter);
  auto ifFirst = scf::IfOp::create(rewriter, loc, isFirst,
                                   /*withElseRegion=*/false);
  rewriter.setInsertionPointToStart(ifFirst.thenBlock());
  IRMapping mapping;
  cloneBodyAt(rewriter, loc, op, ivs, nullptr, mapping);
  storeYields(rewriter, loc, op, ivs, mapping);
}

/// A per-row member (a norm's rsqrt, a fill) in a group that keeps
/// values: every thread computes it from kept values (or loads), thread
/// 0 alone stores it, and every thread keeps the result for the members
/// after it.
void KernelMapper::emitKeptPerRow(IRRewriter &rewriter, Location loc,
                                  linalg::GenericOp op, ArrayRef<Value> ivs,
                                  Value isFirst, KeptRowValues &kept) {
  Block &body = op.getRegion().front();
  // An input it would read from memory that its output may overwrite (in
  // place): thread 0's store could land before another thread's load.
  // Then thread 0 alone runs it, as without kept values.
  bool inPlace = false;
  for (OpOperand &operand : op->getOpOperands())
    if (isa<MemRefType>(operand.get().getType()) &&
        !body.getArgument(operand.getOperandNumber()).use_empty() &&
        !kept.lookup(
            operand.get(),
            applyMap(rewriter, loc, op.getMatchingIndexingMap(&operand), ivs)))
      for (Value output : op.getDpsInits())
        inPlace = inPlace || mayAlias(operand.get(), output);
  if (inPlace) {
    emitOnFirstThread(rewriter, loc, op, ivs, isFirst);
    for (Value output : op.getDpsInits())
      kept.forget(output);
    return;
  }
  SmallVector<Value> args(op->getNumOperands());
  for (OpOperand &operand : op->getOpOperands()) {
    if (body.getArgument(operand.getOperandNumber()).use_empty())
      continue;
    if (!isa<MemRefType>(operand.get().getType())) {
      args[operand.getOperandNumber()] = operand.get();
      continue;
    }
    SmallVector<Value> indices =
        applyMap(rewriter, loc, op.getMatchingIndexingMap(&operand), ivs);
    Value value = kept.lookup(operand.get(), indices);
    if (!value) {
      value = memref::LoadOp::create(rewriter, loc, operand.get(), indices);
      kept.keep(operand.get(), indices, value, /*stored=*/false);
    }
    args[operand.getOperandNumber()] = value;
  }
  SmallVector<Value> results = cloneBodyWith(rewriter, op, args, ivs);
  {
    OpBuilder::InsertionGuard inIf(rewriter);
    auto ifFirst = scf::IfOp::create(rewriter, loc, isFirst,
                                     /*withElseRegion=*/false);
    rewriter.setInsertionPointToStart(ifFirst.thenBlock());
    for (auto [value, init] : llvm::zip(results, op.getDpsInitsMutable()))
      memref::StoreOp::create(
          rewriter, loc, value, init.get(),
          applyMap(rewriter, loc, op.getMatchingIndexingMap(&init), ivs));
  }
  for (auto [value, init] : llvm::zip(results, op.getDpsInitsMutable()))
    kept.keep(init.get(),
              applyMap(rewriter, loc, op.getMatchingIndexingMap(&init), ivs),
              value, /*stored=*/true);
}

/// storeFolded for a group that keeps values: every thread folds the
/// (uniform) total into the output's old value (kept, or loaded), thread
/// 0 stores it, every thread keeps it.
void KernelMapper::storeKeptFolded(IRRewriter &rewriter, Location loc,
                                   linalg::GenericOp op,
                                   const ReductionForm &form,
                                   ArrayRef<Value> ivs, Value isFirst,
                                   Value total, KeptRowValues &kept) {
  OpOperand *init = op.getDpsInitOperand(0);
  SmallVector<Value> indices =
      applyMap(rewriter, loc, op.getMatchingIndexingMap(init), ivs);
  Value old = kept.lookup(init->get(), indices);
  if (!old) {
    // Not kept (no fill in the group): thread 0 alone reads and writes
    // it, so no thread reads it after thread 0 stored; later members
    // read it from memory, past the barrier.
    storeFolded(rewriter, loc, op, form, ivs, isFirst, total);
    kept.forget(init->get());
    return;
  }
  Value folded = combine(rewriter, form, old, total);
  {
    OpBuilder::InsertionGuard inIf(rewriter);
    auto ifFirst = scf::IfOp::create(rewriter, loc, isFirst,
                                     /*withElseRegion=*/false);
    rewriter.setInsertionPointToStart(ifFirst.thenBlock());
    memref::StoreOp::create(rewriter, loc, folded, init->get(), indices);
  }
  kept.keep(init->get(), indices, folded, /*stored=*/true);
}

/// Elements per 16-byte access for a row group's loops along the row:
/// 16 bytes of the narrowest operand the row dim indexes, when each such
/// operand of a member that loops along the row reads it contiguously
/// (last index, unit stride, other strides in 16-byte multiples), each
/// such member's row length divides evenly and each output it writes
/// moves along the row. 0: element by element.
int64_t KernelMapper::getRowGroupVectorWidth(ArrayRef<RowMember> members,
                                             unsigned rows) {
  int64_t narrowest = kVectorBytes;
  SmallVector<int64_t> lengths;
  for (const RowMember &member : members) {
    if (member.kind == RowMember::PerRow)
      continue;
    linalg::GenericOp op = member.op;
    lengths.push_back(op.getStaticLoopRanges().back());
    Block &body = op.getRegion().front();
    for (OpOperand &operand : op->getOpOperands()) {
      bool isOutput = op.isDpsInit(&operand);
      // A reduction's output is its accumulator, folded once per row.
      if (isOutput && member.kind == RowMember::Reduce)
        continue;
      if (!isOutput && body.getArgument(operand.getOperandNumber()).use_empty())
        continue;
      auto type = dyn_cast<MemRefType>(operand.get().getType());
      if (!type) {
        if (isa<ShapedType>(operand.get().getType()))
          return 0;
        continue; // a scalar
      }
      AffineMap map = op.getMatchingIndexingMap(&operand);
      if (!map.isFunctionOfDim(rows)) {
        if (isOutput) // every lane would write the same element
          return 0;
        continue; // one value per row
      }
      int64_t bytes = getContiguousElementBytes(type, map, rows);
      if (bytes == 0)
        return 0;
      narrowest = std::min(narrowest, bytes);
    }
  }
  int64_t width = kVectorBytes / narrowest;
  if (width < 2 || lengths.empty() ||
      llvm::any_of(lengths, [&](int64_t n) { return n % width != 0; }))
    return 0;
  return width;
}

/// Whether every operand the row dim indexes in `members` is 16-byte
/// aligned (i1), or null when `width` asks for no vectors. Row strides
/// are 16-byte multiples (getRowGroupVectorWidth): every row is aligned
/// when the first is.
Value KernelMapper::rowsAligned(OpBuilder &builder, Location loc,
                                ArrayRef<RowMember> members, unsigned rows,
                                int64_t width) {
  Value aligned;
  if (width < 2)
    return aligned;
  llvm::SmallPtrSet<void *, 8> checked;
  for (const RowMember &member : members)
    for (OpOperand &operand : member.op->getOpOperands())
      if (member.kind != RowMember::PerRow &&
          isa<MemRefType>(operand.get().getType()) &&
          member.op.getMatchingIndexingMap(&operand).isFunctionOfDim(rows) &&
          checked.insert(operand.get().getAsOpaquePointer()).second) {
        Value check = isVectorAligned(builder, loc, operand.get());
        aligned = aligned ? arith::AndIOp::create(builder, loc, aligned, check)
                          : check;
      }
  return aligned;
}

/// emitRowLoop with 16-byte accesses when `aligned` (i1) holds at run
/// time, else element accesses (`aligned` null: always the latter).
Value KernelMapper::emitRowLoops(IRRewriter &rewriter, Location loc,
                                 const RowMember &member, ArrayRef<Value> ivs,
                                 Value tid, int64_t threads, int64_t width,
                                 Value aligned) {
  if (!aligned)
    return emitRowLoop(rewriter, loc, member, ivs, tid, threads, width,
                       /*vectors=*/false);
  const ReductionForm *form = member.form ? &*member.form : nullptr;
  auto ifAligned = scf::IfOp::create(
      rewriter, loc, form ? TypeRange{form->output.getType()} : TypeRange{},
      aligned, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard inIf(rewriter);
  for (auto [block, vectors] : {std::pair{ifAligned.thenBlock(), true},
                                std::pair{ifAligned.elseBlock(), false}}) {
    // Before the yield the op adds when it has no results.
    rewriter.setInsertionPointToStart(block);
    Value value =
        emitRowLoop(rewriter, loc, member, ivs, tid, threads, width, vectors);
    if (form)
      scf::YieldOp::create(rewriter, loc, value);
  }
  return form ? ifAligned.getResult(0) : Value();
}

/// One member's work at one point `point` (its last index the first of
/// `width` neighbours along the row, `lanePoints` each neighbour's
/// index): loads its operands (with `vectors`, one 16-byte access per
/// operand that moves along the row; else `width` element accesses; what
/// `kept` holds is reused and what is loaded or stored kept), folds the
/// neighbours in order into `accumulator` (a reduction; returned) or
/// stores them. `bound` gives operands (by number) a value instead of a
/// load; with `elements`, a reduction's per-lane elements go there,
/// unfolded.
Value KernelMapper::emitRowPoint(IRRewriter &rewriter, Location loc,
                                 const RowMember &member, ArrayRef<Value> point,
                                 ArrayRef<Value> lanePoints, bool vectors,
                                 KeptRowValues *kept, Value accumulator,
                                 ArrayRef<std::pair<unsigned, Value>> bound,
                                 SmallVectorImpl<Value> *elements) {
  linalg::GenericOp op = member.op;
  const ReductionForm *form = member.form ? &*member.form : nullptr;
  unsigned rows = point.size() - 1;
  int64_t width = lanePoints.size();
  Operation *skip = form ? form->combiner : nullptr;
  Block &body = op.getRegion().front();
  auto movesAlongRow = [&](OpOperand &operand) {
    return isa<MemRefType>(operand.get().getType()) &&
           op.getMatchingIndexingMap(&operand).isFunctionOfDim(rows);
  };
  auto isRead = [&](OpOperand &operand) {
    return !body.getArgument(operand.getOperandNumber()).use_empty() &&
           !(skip && op.isDpsInit(&operand));
  };
  auto atLane = [&](int64_t lane) {
    SmallVector<Value> lanePoint(point);
    lanePoint.back() = lanePoints[lane];
    return lanePoint;
  };
  // Loads through `kept`.
  auto load = [&](OpOperand &operand, ArrayRef<Value> at,
                  bool asVector) -> Value {
    SmallVector<Value> indices =
        applyMap(rewriter, loc, op.getMatchingIndexingMap(&operand), at);
    if (kept)
      if (Value value = kept->lookup(operand.get(), indices))
        return value;
    Value value =
        asVector ? loadVector(rewriter, loc, operand.get(), indices, width)
                 : memref::LoadOp::create(rewriter, loc, operand.get(), indices)
                       .getResult();
    if (kept)
      kept->keep(operand.get(), indices, value, /*stored=*/false);
    return value;
  };
  SmallVector<Value> vectorOf(op->getNumOperands()), once(op->getNumOperands());
  for (auto [i, value] : bound)
    once[i] = value;
  for (OpOperand &operand : op->getOpOperands()) {
    if (!isRead(operand))
      continue;
    unsigned i = operand.getOperandNumber();
    if (once[i])
      continue;
    if (!movesAlongRow(operand)) // per row, kept like the rest
      once[i] = isa<MemRefType>(operand.get().getType())
                    ? load(operand, point, /*asVector=*/false)
                    : operand.get();
    else if (vectors)
      vectorOf[i] = load(operand, point, /*asVector=*/true);
  }
  SmallVector<SmallVector<Value>> yields;
  for (int64_t lane = 0; lane < width; ++lane) {
    SmallVector<Value> lanePoint = atLane(lane);
    SmallVector<Value> args(op->getNumOperands());
    for (OpOperand &operand : op->getOpOperands()) {
      unsigned i = operand.getOperandNumber();
      if (!isRead(operand))
        continue;
      if (once[i])
        args[i] = once[i];
      else if (vectorOf[i])
        args[i] = vector::ExtractOp::create(rewriter, loc, vectorOf[i], lane);
      else
        args[i] = load(operand, lanePoint, /*asVector=*/false);
    }
    IRMapping mapping;
    cloneBody(rewriter, op, args, lanePoint, skip, mapping);
    if (form) {
      Value element = mapping.lookupOrDefault(form->element);
      if (elements)
        elements->push_back(element);
      else
        accumulator = combine(rewriter, *form, accumulator, element);
      continue;
    }
    auto yield = cast<linalg::YieldOp>(body.getTerminator());
    yields.push_back(llvm::map_to_vector(yield.getOperands(), [&](Value value) {
      return mapping.lookupOrDefault(value);
    }));
  }
  if (form)
    return accumulator;
  for (auto [k, output] : llvm::enumerate(op.getDpsInitsMutable())) {
    AffineMap map = op.getMatchingIndexingMap(&output);
    Type element = getElementTypeOrSelf(output.get());
    if (vectors) {
      SmallVector<Value> elements;
      for (SmallVector<Value> &values : yields)
        elements.push_back(values[k]);
      Value vector = vector::FromElementsOp::create(
          rewriter, loc, VectorType::get({width}, element), elements);
      SmallVector<Value> indices = applyMap(rewriter, loc, map, point);
      vector::StoreOp::create(rewriter, loc, vector, output.get(), indices,
                              /*nontemporal=*/false, llvm::Align(kVectorBytes));
      if (kept)
        kept->keep(output.get(), indices, vector, /*stored=*/true);
      continue;
    }
    for (int64_t lane = 0; lane < width; ++lane) {
      SmallVector<Value> indices = applyMap(rewriter, loc, map, atLane(lane));
      memref::StoreOp::create(rewriter, loc, yields[lane][k], output.get(),
                              indices);
      if (kept)
        kept->keep(output.get(), indices, yields[lane][k], /*stored=*/true);
    }
  }
  return nullptr;
}

/// The loop of one row-group member along its row in the block of row
/// `ivs`: each thread takes `width` neighbouring points at a time, every
/// `threads * width`, and folds or stores them in order (emitRowPoint).
/// With `vectors` or not, the same points in the same order, so the
/// result does not depend on alignment (an arena offset). With `kept`,
/// no loop: the thread's chunks `kept->chunks`, values kept between
/// members. Returns the thread's partial result of a reduction (null
/// otherwise).
Value KernelMapper::emitRowLoop(IRRewriter &rewriter, Location loc,
                                const RowMember &member, ArrayRef<Value> ivs,
                                Value tid, int64_t threads, int64_t width,
                                bool vectors, KeptRowValues *kept) {
  linalg::GenericOp op = member.op;
  const ReductionForm *form = member.form ? &*member.form : nullptr;
  width = std::max<int64_t>(width, 1);
  auto index = [&](int64_t value) -> Value {
    return arith::ConstantIndexOp::create(rewriter, loc, value);
  };
  Value identity =
      form
          ? arith::ConstantOp::create(rewriter, loc, form->identity).getResult()
          : Value();
  if (kept) {
    Value accumulator = identity;
    for (auto [chunk, lanes] : llvm::zip(kept->chunks, kept->lanes)) {
      SmallVector<Value> point(ivs);
      point.push_back(chunk);
      accumulator = emitRowPoint(rewriter, loc, member, point, lanes, vectors,
                                 kept, accumulator);
    }
    return accumulator;
  }
  Value begin =
      width == 1
          ? tid
          : arith::MulIOp::create(rewriter, loc, tid, index(width)).getResult();
  auto loop = scf::ForOp::create(
      rewriter, loc, begin, index(op.getStaticLoopRanges().back()),
      index(threads * width), identity ? ValueRange{identity} : ValueRange{});
  OpBuilder::InsertionGuard inLoop(rewriter);
  rewriter.setInsertionPointToStart(loop.getBody());
  SmallVector<Value> point(ivs);
  point.push_back(loop.getInductionVar());
  SmallVector<Value> lanes = getChunkLanes(rewriter, loc, point.back(), width);
  Value partial =
      emitRowPoint(rewriter, loc, member, point, lanes, vectors, nullptr,
                   form ? loop.getRegionIterArg(0) : Value());
  if (!form)
    return nullptr;
  scf::YieldOp::create(rewriter, loc, partial);
  return loop.getResult(0);
}

/// One block per row (point of the parallel dims): each thread folds a
/// strided share of the row, gpu.all_reduce combines the shares, thread 0
/// folds the total into the output.
void KernelMapper::mapRowReduction(IRRewriter &rewriter, linalg::GenericOp op,
                                   const ReductionForm &form,
                                   ArrayRef<int64_t> trips) {
  Location loc = op.getLoc();
  ArrayRef<int64_t> rowTrips = trips.drop_back();
  int64_t rows = computeProduct(rowTrips);
  RowMember member{op, RowMember::Reduce, form};
  int64_t width = getRowGroupVectorWidth(member, rowTrips.size());
  int64_t threads = std::min<int64_t>(
      kBlockSize,
      llvm::alignTo(trips.back() / std::max<int64_t>(width, 1), 32));
  rewriter.setInsertionPoint(op);
  if (rows == 0)
    return;
  gpu::LaunchOp launch = createLaunch(rewriter, loc, rows, threads);
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(launch.getBody().front().getTerminator());
  Value tid = launch.getThreadIds().x;
  SmallVector<Value> ivs =
      delinearize(rewriter, loc, launch.getBlockIds().x, rowTrips);
  Value aligned = rowsAligned(rewriter, loc, member, rowTrips.size(), width);
  Value partial =
      emitRowLoops(rewriter, loc, member, ivs, tid, threads, width, aligned);
  // Run once per block (see reduceOverBlock).
  Value total =
      reduceOverBlock(rewriter, loc, launch, form, partial, tid, threads);
  storeFolded(
      rewriter, loc, op, form, ivs,
      arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq, tid,
                            arith::ConstantIndexOp::create(rewriter, loc, 0)),
      total);
}

} // namespace dc::map_to_gpu
