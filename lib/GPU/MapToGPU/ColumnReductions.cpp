//===- ColumnReductions.cpp -----------------------------------------------===//
//
// Column reductions: row chunks combined per column block in a fixed order.
//
//===----------------------------------------------------------------------===//
#include "MapToGPUInternals.h"

namespace dc::map_to_gpu {

/// The partial sums of a column reduction split over chunks of the rows
/// of `members`, right before the group (dc-split-column-reductions puts
/// them there; ColumnReductionShape.h), when the group's blocks can
/// compute them as they run the rows: one row dim, chunks of at most
/// kMaxFoldedChunkRows rows, the group's row `length` as the columns,
/// every input read at (row, column), (row) or (column) of a buffer
/// (through the split's expanded views; contiguous along the row when
/// the group reads 16-byte vectors), and nothing it reads or writes
/// written, or read, by a member (other blocks run the members on other
/// rows meanwhile). `fill`: the identity fill of its output, to fold.
std::optional<ColumnPartial>
KernelMapper::matchColumnPartial(IRRewriter &rewriter,
                                 ArrayRef<RowMember> members,
                                 ArrayRef<int64_t> rowTrips, int64_t length,
                                 int64_t width, linalg::FillOp &fill) {
  if (rowTrips.size() != 1)
    return std::nullopt;
  auto generic = dyn_cast_or_null<linalg::GenericOp>(
      nextDeviceOp(members.front().op, members, /*forward=*/false));
  if (!generic || generic.getNumLoops() != 3)
    return std::nullopt;
  std::optional<ReductionForm> form = orderReduction(rewriter, generic);
  SmallVector<int64_t> trips = generic.getStaticLoopRanges();
  if (!form || trips[0] * trips[2] != rowTrips[0] ||
      trips[2] > kMaxFoldedChunkRows || trips[1] != length)
    return std::nullopt;
  MLIRContext *context = generic.getContext();
  auto dims = [&](ArrayRef<unsigned> positions) {
    return AffineMap::getMultiDimMapWithTargets(3, positions, context);
  };
  OpOperand *init = generic.getDpsInitOperand(0);
  if (generic.getMatchingIndexingMap(init) != dims({0, 1}))
    return std::nullopt;
  ColumnPartial partial{generic, *form, trips[2], false, {}};
  Block &body = generic.getRegion().front();
  // The buffer an expanded view of (chunk, row of the chunk[, column])
  // views, read at (row[, column]).
  auto expandedRows = [&](Value view, int64_t rank) -> Value {
    auto expand = view.getDefiningOp<memref::ExpandShapeOp>();
    if (!expand || expand.getSrcType().getRank() != rank)
      return nullptr;
    SmallVector<ReassociationIndices> groups = expand.getReassociationIndices();
    if (groups.front() != ReassociationIndices{0, 1})
      return nullptr;
    for (size_t g = 1; g < groups.size(); ++g)
      if (groups[g].size() != 1)
        return nullptr;
    return expand.getSrc();
  };
  for (OpOperand &operand : generic->getOpOperands()) {
    ColumnPartial::Read read;
    if (generic.isDpsInit(&operand) ||
        body.getArgument(operand.getOperandNumber()).use_empty()) {
      partial.reads.push_back(read);
      continue;
    }
    Value value = operand.get();
    AffineMap map = generic.getMatchingIndexingMap(&operand);
    if (!isa<MemRefType>(value.getType())) {
      if (isa<ShapedType>(value.getType()))
        return std::nullopt;
      read.kind = ColumnPartial::Read::Scalar;
    } else if (map == dims({0, 2, 1})) {
      read = {ColumnPartial::Read::RowColumn, expandedRows(value, 2)};
    } else if (map == dims({0, 2})) {
      read = {ColumnPartial::Read::Row, expandedRows(value, 1)};
    } else if (map == dims({1})) {
      read = {ColumnPartial::Read::Column, value};
    } else {
      return std::nullopt;
    }
    if (read.kind != ColumnPartial::Read::Scalar && !read.buffer)
      return std::nullopt;
    if (width >= 2 && (read.kind == ColumnPartial::Read::RowColumn ||
                       read.kind == ColumnPartial::Read::Column)) {
      auto type = cast<MemRefType>(read.buffer.getType());
      if (getContiguousElementBytes(
              type, AffineMap::getMultiDimIdentityMap(type.getRank(), context),
              type.getRank() - 1) == 0)
        return std::nullopt;
    }
    partial.reads.push_back(read);
  }
  Value output = init->get();
  for (const RowMember &member : members)
    for (OpOperand &operand : member.op->getOpOperands()) {
      Value value = operand.get();
      if (!isa<MemRefType>(value.getType()))
        continue;
      if (mayAlias(value, output))
        return std::nullopt;
      if (member.op.isDpsInit(&operand))
        for (const ColumnPartial::Read &read : partial.reads)
          if (read.buffer && mayAlias(value, read.buffer))
            return std::nullopt;
    }
  for (const ColumnPartial::Read &read : partial.reads)
    if (read.buffer && mayAlias(read.buffer, output))
      return std::nullopt;
  auto [identityFill, value] = getFillBefore(generic, output);
  auto fillValue = dyn_cast_or_null<FloatAttr>(value);
  auto identity = cast<FloatAttr>(form->identity);
  if (identityFill && fillValue && fillValue.getType() == identity.getType() &&
      fillValue.getValue().bitwiseIsEqual(identity.getValue())) {
    partial.overwrites = true;
    fill = identityFill;
  }
  return partial;
}

/// One row of `partial`'s chunk in a row group that keeps values: the
/// element at (chunk `chunk`, each of the thread's columns, row `iv` of
/// the chunk, which is the group's row `row`) folded into `sums` (the
/// thread's chunks x lanes, in that order), reading through `kept` what
/// the group's members read too. Returns the new sums.
SmallVector<Value>
KernelMapper::emitColumnPartialRow(IRRewriter &rewriter, Location loc,
                                   const ColumnPartial &partial, Value chunk,
                                   Value iv, Value row, bool vectors,
                                   KeptRowValues &kept, ArrayRef<Value> sums) {
  linalg::GenericOp op = partial.op;
  auto read = [&](Value buffer, SmallVector<Value> indices,
                  int64_t vectorWidth) -> Value {
    if (Value value = kept.lookup(buffer, indices))
      return value;
    Value value = vectorWidth
                      ? loadVector(rewriter, loc, buffer, indices, vectorWidth)
                      : memref::LoadOp::create(rewriter, loc, buffer, indices)
                            .getResult();
    kept.keep(buffer, indices, value, /*stored=*/false);
    return value;
  };
  SmallVector<Value> result;
  for (auto [start, lanes] : llvm::zip(kept.chunks, kept.lanes)) {
    int64_t width = lanes.size();
    auto at = [&](const ColumnPartial::Read &how, Value column) {
      SmallVector<Value> indices;
      if (how.kind != ColumnPartial::Read::Column)
        indices.push_back(row);
      if (how.kind != ColumnPartial::Read::Row)
        indices.push_back(column);
      return indices;
    };
    SmallVector<Value> vectorOf(partial.reads.size());
    if (vectors)
      for (auto [i, how] : llvm::enumerate(partial.reads))
        if (how.kind == ColumnPartial::Read::RowColumn ||
            how.kind == ColumnPartial::Read::Column)
          vectorOf[i] = read(how.buffer, at(how, start), width);
    for (int64_t lane = 0; lane < width; ++lane) {
      SmallVector<Value> args(op->getNumOperands());
      for (auto [i, how] : llvm::enumerate(partial.reads)) {
        switch (how.kind) {
        case ColumnPartial::Read::Unused:
          break;
        case ColumnPartial::Read::Scalar:
          args[i] = op->getOperand(i);
          break;
        case ColumnPartial::Read::Row:
          args[i] = read(how.buffer, at(how, nullptr), 0);
          break;
        case ColumnPartial::Read::RowColumn:
        case ColumnPartial::Read::Column:
          args[i] = vectorOf[i] ? vector::ExtractOp::create(rewriter, loc,
                                                            vectorOf[i], lane)
                                      .getResult()
                                : read(how.buffer, at(how, lanes[lane]), 0);
          break;
        }
      }
      IRMapping mapping;
      cloneBody(rewriter, op, args, {chunk, lanes[lane], iv},
                partial.form.combiner, mapping);
      result.push_back(combine(rewriter, partial.form, sums[result.size()],
                               mapping.lookupOrDefault(partial.form.element)));
    }
  }
  return result;
}

/// One block per kColumnsPerBlock columns (the innermost parallel dim) of
/// a reduction over a non-contiguous dim: each row lane reads those
/// neighbouring columns of every kRowLanes-th row, and the first lane
/// combines the partial results in shared memory, in a fixed order
/// (bitwise the same every run).
/// Columns per 16-byte access for a column reduction (loops: the
/// parallel dims, the columns innermost of them, then the rows): 16
/// bytes of the narrowest input that moves along the columns, when each
/// such input reads them contiguously (getContiguousElementBytes), the
/// vector divides a block's columns and the column count, and every
/// other input reads one value per row. 0: a column per thread.
int64_t KernelMapper::getColumnVectorWidth(linalg::GenericOp op,
                                           const ReductionForm &form,
                                           ArrayRef<int64_t> trips) {
  unsigned columnDim = trips.size() - 2;
  int64_t narrowest = 0;
  Block &body = op.getRegion().front();
  for (OpOperand *input : op.getDpsInputOperands()) {
    if (body.getArgument(input->getOperandNumber()).use_empty())
      continue;
    auto type = dyn_cast<MemRefType>(input->get().getType());
    if (!type) {
      if (isa<ShapedType>(input->get().getType()))
        return 0;
      continue;
    }
    AffineMap map = op.getMatchingIndexingMap(input);
    if (!map.isFunctionOfDim(columnDim))
      continue;
    int64_t bytes = getContiguousElementBytes(type, map, columnDim);
    if (bytes == 0)
      return 0;
    narrowest = narrowest == 0 ? bytes : std::min(narrowest, bytes);
  }
  if (narrowest == 0 || !form.output.getType().isF32())
    return 0;
  int64_t width = kVectorBytes / narrowest;
  if (width < 2 || kColumnsPerBlock % width != 0 ||
      trips[columnDim] % width != 0)
    return 0;
  return width;
}

/// Columns per block of a vectorized column reduction: kColumnsPerBlock,
/// or half as many while a short one (kMaxShortColumnRows: the second pass
/// over a split's partial sums, 256 rows for a norm weight gradient's 8192
/// rows in chunks of 32) has fewer blocks than the GPU has
/// multiprocessors, at least 4 vector lanes (64 bytes of a row per warp
/// access), and rows for every row lane. Its rows are few, so its time is a
/// load latency or two and a launch, not bandwidth, and splitting the rows
/// again into a second launch is no faster (docs/lowering.md, "Why the GPU
/// kernels' constants").
int64_t KernelMapper::getColumnsPerBlock(int64_t outer, int64_t columns,
                                         int64_t length, int64_t width) const {
  int64_t perBlock = kColumnsPerBlock;
  if (length > kMaxShortColumnRows)
    return perBlock;
  while (outer * llvm::divideCeilSigned(columns, perBlock) <
             gpuShape.multiprocessors &&
         perBlock / 2 >= 4 * width &&
         kBlockSize / (perBlock / 2 / width) <= length)
    perBlock /= 2;
  return perBlock;
}

/// mapColumnReduction with `width` neighbouring columns per thread: a
/// block's columns (getColumnsPerBlock) are columns / width vector
/// lanes, its 256 threads as many times fewer column lanes and more row
/// lanes, each row lane one 16-byte load per input per row (a warp
/// reads 16 rows of 32 bytes per load, not 2). The row lanes' partials
/// meet in shared memory and fold in two fixed-order steps (groups of
/// row lanes, then the groups). A buffer not 16-byte aligned at run time
/// takes the same points one element at a time: the same sums, bitwise.
void KernelMapper::mapColumnReductionVectorized(IRRewriter &rewriter,
                                                linalg::GenericOp op,
                                                const ReductionForm &form,
                                                ArrayRef<int64_t> trips,
                                                int64_t width) {
  Location loc = op.getLoc();
  int64_t length = trips.back();
  int64_t columns = trips[trips.size() - 2];
  int64_t outer = computeProduct(trips.drop_back(2));
  int64_t columnsPerBlock = getColumnsPerBlock(outer, columns, length, width);
  int64_t columnBlocks = llvm::divideCeil(columns, columnsPerBlock);
  rewriter.setInsertionPoint(op);
  if (outer == 0 || columns == 0)
    return;
  gpu::LaunchOp launch =
      createLaunch(rewriter, loc, outer * columnBlocks, kBlockSize);
  ColumnBlockMemory memory =
      addColumnBlockMemory(rewriter, loc, launch, form, kBlockSize, width);
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(launch.getBody().front().getTerminator());
  emitColumnBlock(rewriter, loc, op, form, trips, width, columnsPerBlock,
                  kBlockSize, launch.getThreadIds().x, launch.getBlockIds().x,
                  memory);
}

KernelMapper::ColumnBlockMemory KernelMapper::addColumnBlockMemory(
    IRRewriter &rewriter, Location loc, gpu::LaunchOp launch,
    const ReductionForm &form, int64_t threads, int64_t width) {
  Type type = form.output.getType();
  auto workgroup = gpu::AddressSpaceAttr::get(
      rewriter.getContext(), gpu::GPUDialect::getWorkgroupAddressSpace());
  // Row lanes x columns per block = threads x width, whatever the columns.
  return {launch.addWorkgroupAttribution(
              MemRefType::get({threads * width}, type,
                              MemRefLayoutAttrInterface{}, workgroup),
              loc),
          launch.addWorkgroupAttribution(
              MemRefType::get({threads}, type, MemRefLayoutAttrInterface{},
                              workgroup),
              loc)};
}

/// Column block `block` (of columns / `columnsPerBlock`, times the outer
/// points) of a column reduction `op` with `width` neighbouring columns
/// per thread, run by the `threads` threads of a block (`tid`): see
/// mapColumnReductionVectorized. Every thread reaches its barriers.
void KernelMapper::emitColumnBlock(IRRewriter &rewriter, Location loc,
                                   linalg::GenericOp op,
                                   const ReductionForm &form,
                                   ArrayRef<int64_t> trips, int64_t width,
                                   int64_t columnsPerBlock, int64_t threads,
                                   Value tid, Value block,
                                   const ColumnBlockMemory &memory) {
  int64_t length = trips.back();
  int64_t columns = trips[trips.size() - 2];
  unsigned columnDim = trips.size() - 2;
  ArrayRef<int64_t> outerTrips = trips.drop_back(2);
  int64_t columnBlocks = llvm::divideCeil(columns, columnsPerBlock);
  int64_t vectorLanes = columnsPerBlock / width;
  int64_t rowLanes = threads / vectorLanes;
  // Rows each row lane loads before it adds them.
  int64_t unroll = columnsPerBlock == kColumnsPerBlock
                       ? kColumnUnroll
                       : std::min<int64_t>(kShortColumnUnroll,
                                           llvm::divideCeil(length, rowLanes));
  // Row lanes folded per group in the first step (threads / columns
  // groups).
  int64_t groups = threads / columnsPerBlock;
  int64_t perGroup = rowLanes / groups;
  Type type = form.output.getType();
  Value partials = memory.partials, groupPartials = memory.groupPartials;
  auto index = [&](int64_t value) -> Value {
    return arith::ConstantIndexOp::create(rewriter, loc, value);
  };
  Value lane = arith::RemUIOp::create(rewriter, loc, tid, index(vectorLanes));
  Value rowLane =
      arith::DivUIOp::create(rewriter, loc, tid, index(vectorLanes));
  Value blockColumn = arith::MulIOp::create(
      rewriter, loc,
      arith::RemUIOp::create(rewriter, loc, block, index(columnBlocks)),
      index(columnsPerBlock));
  Value column = arith::AddIOp::create(
      rewriter, loc, blockColumn,
      arith::MulIOp::create(rewriter, loc, lane, index(width)));
  SmallVector<Value> outerIvs = delinearize(
      rewriter, loc,
      arith::DivUIOp::create(rewriter, loc, block, index(columnBlocks)),
      outerTrips);
  Value valid = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::ult,
                                      column, index(columns));
  Value identity = arith::ConstantOp::create(rewriter, loc, form.identity);
  SmallVector<Value> identities(width, identity);
  Block &body = op.getRegion().front();
  Value aligned;
  for (OpOperand *input : op.getDpsInputOperands())
    if (isa<MemRefType>(input->get().getType()) &&
        !body.getArgument(input->getOperandNumber()).use_empty() &&
        op.getMatchingIndexingMap(input).isFunctionOfDim(columnDim)) {
      Value check = isVectorAligned(rewriter, loc, input->get());
      aligned = aligned ? arith::AndIOp::create(rewriter, loc, aligned, check)
                        : check;
    }
  // The thread's `width` sums over its rows, with 16-byte loads or not.
  auto emitSums = [&](bool vectors) -> SmallVector<Value> {
    // `unroll` rows per iteration, all their loads issued before the
    // sums (a row past the end loads the iteration's first row again and
    // adds nothing): a 256-row second pass otherwise waits for each load
    // in turn.
    auto loop = scf::ForOp::create(rewriter, loc, rowLane, index(length),
                                   index(rowLanes * unroll), identities);
    OpBuilder::InsertionGuard inLoop(rewriter);
    rewriter.setInsertionPointToStart(loop.getBody());
    struct Row {
      SmallVector<Value> point, vectorOf, once;
      Value valid;
    };
    SmallVector<Row> unrolled;
    for (int64_t u = 0; u < unroll; ++u) {
      Row r;
      Value at = loop.getInductionVar();
      if (u > 0) {
        Value next =
            arith::AddIOp::create(rewriter, loc, at, index(u * rowLanes));
        r.valid = arith::CmpIOp::create(
            rewriter, loc, arith::CmpIPredicate::ult, next, index(length));
        at = arith::SelectOp::create(rewriter, loc, r.valid, next, at);
      }
      r.point.assign(outerIvs.begin(), outerIvs.end());
      r.point.push_back(column);
      r.point.push_back(at);
      r.vectorOf.resize(op->getNumOperands());
      r.once.resize(op->getNumOperands());
      for (OpOperand *input : op.getDpsInputOperands()) {
        unsigned i = input->getOperandNumber();
        if (body.getArgument(i).use_empty())
          continue;
        if (!isa<MemRefType>(input->get().getType())) {
          r.once[i] = input->get();
          continue;
        }
        AffineMap map = op.getMatchingIndexingMap(input);
        if (!map.isFunctionOfDim(columnDim))
          r.once[i] = loadAt(rewriter, loc, op, *input, r.point);
        else if (vectors)
          r.vectorOf[i] =
              loadVector(rewriter, loc, input->get(),
                         applyMap(rewriter, loc, map, r.point), width);
      }
      unrolled.push_back(std::move(r));
    }
    SmallVector<Value> sums(loop.getRegionIterArgs());
    for (Row &r : unrolled) {
      for (int64_t j = 0; j < width; ++j) {
        SmallVector<Value> lanePoint(r.point);
        if (j != 0)
          lanePoint[columnDim] =
              arith::AddIOp::create(rewriter, loc, column, index(j));
        SmallVector<Value> args(op->getNumOperands());
        for (OpOperand *input : op.getDpsInputOperands()) {
          unsigned i = input->getOperandNumber();
          if (r.once[i])
            args[i] = r.once[i];
          else if (r.vectorOf[i])
            args[i] =
                vector::ExtractOp::create(rewriter, loc, r.vectorOf[i], j);
          else if (!body.getArgument(i).use_empty())
            args[i] = loadAt(rewriter, loc, op, *input, lanePoint);
        }
        IRMapping mapping;
        cloneBody(rewriter, op, args, lanePoint, form.combiner, mapping);
        Value sum = combine(rewriter, form, sums[j],
                            mapping.lookupOrDefault(form.element));
        sums[j] = r.valid ? arith::SelectOp::create(rewriter, loc, r.valid, sum,
                                                    sums[j])
                                .getResult()
                          : sum;
      }
    }
    scf::YieldOp::create(rewriter, loc, sums);
    return SmallVector<Value>(loop.getResults());
  };
  SmallVector<Type> types(width, type);
  auto ifValid = scf::IfOp::create(rewriter, loc, types, valid,
                                   /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard inIf(rewriter);
    rewriter.setInsertionPointToStart(ifValid.thenBlock());
    if (!aligned) {
      scf::YieldOp::create(rewriter, loc, emitSums(/*vectors=*/false));
    } else {
      auto ifAligned = scf::IfOp::create(rewriter, loc, types, aligned,
                                         /*withElseRegion=*/true);
      for (auto [branch, vectors] : {std::pair{ifAligned.thenBlock(), true},
                                     std::pair{ifAligned.elseBlock(), false}}) {
        rewriter.setInsertionPointToStart(branch);
        scf::YieldOp::create(rewriter, loc, emitSums(vectors));
      }
      rewriter.setInsertionPointAfter(ifAligned);
      scf::YieldOp::create(rewriter, loc, ifAligned.getResults());
    }
    rewriter.setInsertionPointToStart(ifValid.elseBlock());
    scf::YieldOp::create(rewriter, loc, identities);
  }
  // partials[rowLane][lane * width + j].
  Value slot0 = arith::AddIOp::create(
      rewriter, loc,
      arith::MulIOp::create(rewriter, loc, rowLane, index(columnsPerBlock)),
      arith::MulIOp::create(rewriter, loc, lane, index(width)));
  for (int64_t j = 0; j < width; ++j)
    memref::StoreOp::create(
        rewriter, loc, ifValid.getResult(j), partials,
        ValueRange{j == 0
                       ? slot0
                       : arith::AddIOp::create(rewriter, loc, slot0, index(j))
                             .getResult()});
  gpu::BarrierOp::create(rewriter, loc);
  // Step 1: thread (group g, block column c) folds row lanes
  // g * perGroup .. (g + 1) * perGroup - 1 of column c, in order.
  Value blockOffset =
      arith::RemUIOp::create(rewriter, loc, tid, index(columnsPerBlock));
  Value group =
      arith::DivUIOp::create(rewriter, loc, tid, index(columnsPerBlock));
  Value first = arith::AddIOp::create(
      rewriter, loc,
      arith::MulIOp::create(rewriter, loc, group,
                            index(perGroup * columnsPerBlock)),
      blockOffset);
  Value groupTotal = memref::LoadOp::create(rewriter, loc, partials, first);
  for (int64_t k = 1; k < perGroup; ++k)
    groupTotal =
        combine(rewriter, form, groupTotal,
                memref::LoadOp::create(
                    rewriter, loc, partials,
                    ValueRange{arith::AddIOp::create(
                        rewriter, loc, first, index(k * columnsPerBlock))}));
  memref::StoreOp::create(rewriter, loc, groupTotal, groupPartials, tid);
  gpu::BarrierOp::create(rewriter, loc);
  // Step 2: the first group folds the groups, in order, and stores.
  Value outColumn =
      arith::AddIOp::create(rewriter, loc, blockColumn, blockOffset);
  Value storing = arith::AndIOp::create(
      rewriter, loc,
      arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq, group,
                            index(0)),
      arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::ult, outColumn,
                            index(columns)));
  auto ifStoring = scf::IfOp::create(rewriter, loc, storing,
                                     /*withElseRegion=*/false);
  rewriter.setInsertionPointToStart(ifStoring.thenBlock());
  Value total =
      memref::LoadOp::create(rewriter, loc, groupPartials, blockOffset);
  for (int64_t g = 1; g < groups; ++g)
    total = combine(rewriter, form, total,
                    memref::LoadOp::create(rewriter, loc, groupPartials,
                                           ValueRange{arith::AddIOp::create(
                                               rewriter, loc, blockOffset,
                                               index(g * columnsPerBlock))}));
  SmallVector<Value> ivs(outerIvs);
  ivs.push_back(outColumn);
  storeFolded(rewriter, loc, op, form, ivs, /*when=*/nullptr, total);
}

void KernelMapper::mapColumnReduction(IRRewriter &rewriter,
                                      linalg::GenericOp op,
                                      const ReductionForm &form,
                                      ArrayRef<int64_t> trips) {
  if (int64_t width = getColumnVectorWidth(op, form, trips))
    return mapColumnReductionVectorized(rewriter, op, form, trips, width);
  Location loc = op.getLoc();
  int64_t length = trips.back();
  int64_t columns = trips[trips.size() - 2];
  ArrayRef<int64_t> outerTrips = trips.drop_back(2);
  int64_t outer = computeProduct(outerTrips);
  int64_t columnBlocks = llvm::divideCeil(columns, kColumnsPerBlock);
  rewriter.setInsertionPoint(op);
  if (outer == 0 || columns == 0)
    return;
  gpu::LaunchOp launch =
      createLaunch(rewriter, loc, outer * columnBlocks, kBlockSize);
  Type type = form.output.getType();
  auto workgroup = gpu::AddressSpaceAttr::get(
      rewriter.getContext(), gpu::GPUDialect::getWorkgroupAddressSpace());
  Value partials = launch.addWorkgroupAttribution(
      MemRefType::get({kBlockSize}, type, MemRefLayoutAttrInterface{},
                      workgroup),
      loc);
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(launch.getBody().front().getTerminator());
  auto index = [&](int64_t value) -> Value {
    return arith::ConstantIndexOp::create(rewriter, loc, value);
  };
  Value tid = launch.getThreadIds().x, block = launch.getBlockIds().x;
  Value lane =
      arith::RemUIOp::create(rewriter, loc, tid, index(kColumnsPerBlock));
  Value rowLane =
      arith::DivUIOp::create(rewriter, loc, tid, index(kColumnsPerBlock));
  Value column = arith::AddIOp::create(
      rewriter, loc,
      arith::MulIOp::create(
          rewriter, loc,
          arith::RemUIOp::create(rewriter, loc, block, index(columnBlocks)),
          index(kColumnsPerBlock)),
      lane);
  SmallVector<Value> ivs = delinearize(
      rewriter, loc,
      arith::DivUIOp::create(rewriter, loc, block, index(columnBlocks)),
      outerTrips);
  ivs.push_back(column);
  Value valid = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::ult,
                                      column, index(columns));
  Value identity = arith::ConstantOp::create(rewriter, loc, form.identity);
  auto ifValid = scf::IfOp::create(rewriter, loc, TypeRange{type}, valid,
                                   /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard inIf(rewriter);
    rewriter.setInsertionPointToStart(ifValid.thenBlock());
    auto loop = scf::ForOp::create(rewriter, loc, rowLane, index(length),
                                   index(kRowLanes), ValueRange{identity});
    {
      OpBuilder::InsertionGuard inLoop(rewriter);
      rewriter.setInsertionPointToStart(loop.getBody());
      SmallVector<Value> point = ivs;
      point.push_back(loop.getInductionVar());
      IRMapping mapping;
      cloneBodyAt(rewriter, loc, op, point, form.combiner, mapping);
      scf::YieldOp::create(rewriter, loc,
                           combine(rewriter, form, loop.getRegionIterArg(0),
                                   mapping.lookupOrDefault(form.element)));
    }
    scf::YieldOp::create(rewriter, loc, loop.getResult(0));
    rewriter.setInsertionPointToStart(ifValid.elseBlock());
    scf::YieldOp::create(rewriter, loc, identity);
  }
  memref::StoreOp::create(rewriter, loc, ifValid.getResult(0), partials, tid);
  gpu::BarrierOp::create(rewriter, loc);
  Value firstLane = arith::AndIOp::create(
      rewriter, loc, valid,
      arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq, rowLane,
                            index(0)));
  auto ifFirst = scf::IfOp::create(rewriter, loc, firstLane,
                                   /*withElseRegion=*/false);
  rewriter.setInsertionPointToStart(ifFirst.thenBlock());
  Value total = memref::LoadOp::create(rewriter, loc, partials, lane);
  for (int64_t l = 1; l < kRowLanes; ++l) {
    Value slot =
        arith::AddIOp::create(rewriter, loc, lane, index(l * kColumnsPerBlock));
    total = combine(rewriter, form, total,
                    memref::LoadOp::create(rewriter, loc, partials, slot));
  }
  storeFolded(rewriter, loc, op, form, ivs, /*when=*/nullptr, total);
}

} // namespace dc::map_to_gpu
