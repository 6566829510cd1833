//===- FinishingPasses.cpp ------------------------------------------------===//
//
// A split reduction's second pass at the end of its first pass's kernel.
//
//===----------------------------------------------------------------------===//
#include "MapToGPUInternals.h"

namespace dc::map_to_gpu {

/// The second pass over `partial`'s sums that a row group's kernel of
/// `blocks` blocks of `threads` threads, placed before `last`, can run at
/// its end (FinishingPass): the first linalg op after `last`, past views
/// and hooks, a column reduction reading the partials that
/// mapColumnReductionVectorized would take, with only views and hooks
/// that touch none of its buffers (nor its converting consumer's) between
/// once the identity fill of its output is folded in, and the views it
/// needs hoisted before `last`. Folds the fill and the consumer into its
/// store as foldIntoReductionStores does.
std::optional<FinishingPass>
KernelMapper::matchFinishingPass(IRRewriter &rewriter,
                                 const ColumnPartial &partial, Operation *last,
                                 int64_t blocks, int64_t threads) {
  Value partials = partial.op->getOperands().back();
  Operation *next = last->getNextNode();
  while (next &&
         (isPure(next) || (isHookOrView(next) && !mayTouch(next, partials)) ||
          isa<linalg::FillOp>(next)))
    next = next->getNextNode();
  auto generic = dyn_cast_or_null<linalg::GenericOp>(next);
  if (!generic || !llvm::is_contained(generic.getDpsInputs(), partials))
    return std::nullopt;
  std::optional<ReductionForm> form = orderReduction(rewriter, generic);
  SmallVector<int64_t> trips = generic.getStaticLoopRanges();
  if (!form || form->rowContiguous || trips.size() < 2)
    return std::nullopt;
  int64_t width = getColumnVectorWidth(generic, *form, trips);
  if (width == 0)
    return std::nullopt;
  int64_t length = trips.back(), columns = trips[trips.size() - 2];
  int64_t outer = computeProduct(ArrayRef<int64_t>(trips).drop_back(2));
  // Blocks of up to 64 columns, narrower (down to 4 vector lanes, with
  // rows for every row lane) while the narrower ones still number no more
  // than may wait.
  int64_t maxBlocks = std::min<int64_t>(blocks, finishingBlocks);
  int64_t perBlock = std::min(kColumnsPerBlock, threads);
  auto count = [&](int64_t columnsPerBlock) -> int64_t {
    return outer * llvm::divideCeilSigned(columns, columnsPerBlock);
  };
  if (outer == 0 || perBlock % width != 0 || threads % perBlock != 0)
    return std::nullopt;
  while (count(perBlock / 2) <= maxBlocks && perBlock / 2 >= 4 * width &&
         threads / (perBlock / 2 / width) <= length)
    perBlock /= 2;
  foldIntoReductionStores(rewriter, generic);
  linalg::GenericOp consumer = convertingConsumers.lookup(generic);
  SmallVector<Value> touched(generic->getOperands());
  if (consumer)
    llvm::append_range(touched, consumer->getOperands());
  for (Operation *between = last->getNextNode(); between != generic;
       between = between->getNextNode())
    if (!isPure(between) &&
        (!isHookOrView(between) || llvm::any_of(touched, [&](Value value) {
          return isa<MemRefType>(value.getType()) && mayTouch(between, value);
        })))
      return std::nullopt;
  for (Value value : touched)
    if (!hoistPureDefsBefore(value, last))
      return std::nullopt;
  int64_t columnBlocks = count(perBlock);
  return FinishingPass{generic,
                       *form,
                       trips,
                       width,
                       perBlock,
                       columnBlocks,
                       std::min(columnBlocks, maxBlocks)};
}

/// `finishing` at the end of `launch` (a row group's kernel of `blocks`
/// blocks of `threads` threads, `tid` the thread), after the group: see
/// FinishingPass. The ticket counter is a device global that only grows:
/// a launch's tickets are `blocks` consecutive numbers from a multiple of
/// `blocks`, so nothing resets it between launches.
void KernelMapper::emitFinishingPass(IRRewriter &rewriter, gpu::LaunchOp launch,
                                     const FinishingPass &finishing,
                                     int64_t blocks, int64_t threads,
                                     Value tid) {
  Location loc = finishing.op.getLoc();
  MLIRContext *context = rewriter.getContext();
  auto module = launch->getParentOfType<ModuleOp>();
  Type i64 = rewriter.getI64Type();
  auto counterType = MemRefType::get({1}, i64);
  std::string name;
  do
    name = "dc_finishing_tickets_" + std::to_string(finishingCounters++);
  while (SymbolTable::lookupSymbolIn(module, name));
  {
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPointToStart(module.getBody());
    auto global = memref::GlobalOp::create(
        rewriter, loc, name, rewriter.getStringAttr("private"), counterType,
        DenseElementsAttr::get(RankedTensorType::get({1}, i64),
                               ArrayRef<int64_t>{0}),
        /*constant=*/false, /*alignment=*/IntegerAttr());
    // The blocks that wait must all be resident: the runtime checks it
    // (dc-mark-coresident-launches carries the count to the launch).
    global->setAttr(dc::kCoresidentBlocksAttr,
                    rewriter.getI64IntegerAttr(finishing.blocks));
  }
  auto index = [&](int64_t value) -> Value {
    return arith::ConstantIndexOp::create(rewriter, loc, value);
  };
  auto constant = [&](int64_t value) -> Value {
    return arith::ConstantIntOp::create(rewriter, loc, i64, value);
  };
  auto workgroup = gpu::AddressSpaceAttr::get(
      context, gpu::GPUDialect::getWorkgroupAddressSpace());
  Value ticketSlot = launch.addWorkgroupAttribution(
      MemRefType::get({1}, i64, MemRefLayoutAttrInterface{}, workgroup), loc);
  ColumnBlockMemory memory = addColumnBlockMemory(
      rewriter, loc, launch, finishing.form, threads, finishing.width);
  Value counter = memref::GetGlobalOp::create(rewriter, loc, counterType, name);
  Value isFirst = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq,
                                        tid, index(0));
  // As cooperative groups' grid barrier: the block's threads done, then
  // one thread orders the block's stores before its ticket (a fence at
  // GPU scope), and after seeing the last ticket, the other blocks'
  // stores before the block's loads.
  gpu::BarrierOp::create(rewriter, loc);
  {
    OpBuilder::InsertionGuard guard(rewriter);
    auto ifFirst = scf::IfOp::create(rewriter, loc, isFirst,
                                     /*withElseRegion=*/false);
    rewriter.setInsertionPointToStart(ifFirst.thenBlock());
    NVVM::MembarOp::create(rewriter, loc, NVVM::MemScopeKind::GPU);
    Value ticket =
        memref::AtomicRMWOp::create(rewriter, loc, arith::AtomicRMWKind::addi,
                                    constant(1), counter, ValueRange{index(0)});
    memref::StoreOp::create(rewriter, loc, ticket, ticketSlot, index(0));
  }
  gpu::BarrierOp::create(rewriter, loc);
  Value ticket = memref::LoadOp::create(rewriter, loc, ticketSlot, index(0));
  Value position =
      arith::RemUIOp::create(rewriter, loc, ticket, constant(blocks));
  Value waits =
      arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::uge, position,
                            constant(blocks - finishing.blocks));
  auto ifWaits = scf::IfOp::create(rewriter, loc, waits,
                                   /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPointToStart(ifWaits.thenBlock());
  {
    OpBuilder::InsertionGuard inIf(rewriter);
    auto ifFirst = scf::IfOp::create(rewriter, loc, isFirst,
                                     /*withElseRegion=*/false);
    rewriter.setInsertionPointToStart(ifFirst.thenBlock());
    // Every ticket of this launch taken: the counter at the next
    // multiple of `blocks`.
    Value done = arith::AddIOp::create(
        rewriter, loc, arith::SubIOp::create(rewriter, loc, ticket, position),
        constant(blocks));
    scf::WhileOp::create(
        rewriter, loc, TypeRange{}, ValueRange{},
        [&](OpBuilder &builder, Location loc, ValueRange) {
          Value seen = memref::AtomicRMWOp::create(
              builder, loc, arith::AtomicRMWKind::addi,
              arith::ConstantIntOp::create(builder, loc, i64, 0), counter,
              ValueRange{arith::ConstantIndexOp::create(builder, loc, 0)});
          scf::ConditionOp::create(
              builder, loc,
              arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::ult,
                                    seen, done),
              ValueRange{});
        },
        [&](OpBuilder &builder, Location loc, ValueRange) {
          scf::YieldOp::create(builder, loc);
        });
    NVVM::MembarOp::create(rewriter, loc, NVVM::MemScopeKind::GPU);
  }
  // The waiting blocks share the column blocks, each a barrier apart
  // (the shared memory of the one before, or of the group, is free).
  Value slice = arith::IndexCastUIOp::create(
      rewriter, loc, rewriter.getIndexType(),
      arith::SubIOp::create(rewriter, loc, position,
                            constant(blocks - finishing.blocks)));
  auto loop =
      scf::ForOp::create(rewriter, loc, slice, index(finishing.columnBlocks),
                         index(finishing.blocks));
  rewriter.setInsertionPointToStart(loop.getBody());
  gpu::BarrierOp::create(rewriter, loc);
  emitColumnBlock(rewriter, loc, finishing.op, finishing.form, finishing.trips,
                  finishing.width, finishing.columnsPerBlock, threads, tid,
                  loop.getInductionVar(), memory);
}

} // namespace dc::map_to_gpu
