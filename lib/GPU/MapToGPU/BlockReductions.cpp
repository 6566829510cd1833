//===- BlockReductions.cpp ------------------------------------------------===//
//
// Combining a value over a warp and over a block.
//
//===----------------------------------------------------------------------===//
#include "MapToGPUInternals.h"

namespace dc::map_to_gpu {

/// `partial` folded across the warp by `form`'s combiner: a butterfly of
/// xor shuffles (16, 8, 4, 2, 1). Each pair of lanes combines the same
/// two values, so every lane ends with the same total, in an order
/// fixed by the lane numbers alone.
Value KernelMapper::warpReduce(OpBuilder &builder, Location loc,
                               const ReductionForm &form, Value partial) {
  Value value = partial;
  for (int32_t offset = kWarpSize / 2; offset >= 1; offset /= 2) {
    auto shuffle = gpu::ShuffleOp::create(builder, loc, value, offset,
                                          kWarpSize, gpu::ShuffleMode::XOR);
    value = combine(builder, form, value, shuffle.getShuffleResult());
  }
  return value;
}

/// `value` (f32) folded across the block of `threads` threads (a
/// multiple of 32) by `form`'s combiner with one barrier
/// (single-barrier-reductions): each warp's butterfly (warpReduce), lane
/// 0 of each warp stores its total into slots of this reduction's own,
/// a barrier, then every thread combines the slots in warp order, so all
/// end with the same total. The slots are written once per execution;
/// the caller keeps a barrier between two executions of one reduction
/// (a block per row runs it once; a folded group's rows are barriers
/// apart).
Value KernelMapper::blockReduce(IRRewriter &rewriter, Location loc,
                                gpu::LaunchOp launch, const ReductionForm &form,
                                Value value, Value tid, int64_t threads) {
  int64_t warps = threads / kWarpSize;
  auto workgroup = gpu::AddressSpaceAttr::get(
      rewriter.getContext(), gpu::GPUDialect::getWorkgroupAddressSpace());
  Value slots = launch.addWorkgroupAttribution(
      MemRefType::get({warps}, value.getType(), MemRefLayoutAttrInterface{},
                      workgroup),
      loc);
  auto index = [&](int64_t n) -> Value {
    return arith::ConstantIndexOp::create(rewriter, loc, n);
  };
  Value warpTotal = warpReduce(rewriter, loc, form, value);
  Value lane = arith::RemUIOp::create(rewriter, loc, tid, index(kWarpSize));
  Value warp = arith::DivUIOp::create(rewriter, loc, tid, index(kWarpSize));
  Value isLeader = arith::CmpIOp::create(
      rewriter, loc, arith::CmpIPredicate::eq, lane, index(0));
  {
    OpBuilder::InsertionGuard guard(rewriter);
    auto ifLeader = scf::IfOp::create(rewriter, loc, isLeader,
                                      /*withElseRegion=*/false);
    rewriter.setInsertionPointToStart(ifLeader.thenBlock());
    memref::StoreOp::create(rewriter, loc, warpTotal, slots, warp);
  }
  gpu::BarrierOp::create(rewriter, loc);
  Value total = memref::LoadOp::create(rewriter, loc, slots, index(0));
  for (int64_t w = 1; w < warps; ++w)
    total = combine(rewriter, form, total,
                    memref::LoadOp::create(rewriter, loc, slots, index(w)));
  return total;
}

/// `value` folded across `launch`'s block of `threads` threads by
/// `form`'s combiner, every thread ending with the total: blockReduce's
/// one barrier where single-barrier-reductions allows it (f32, whole
/// warps; the caller runs it once per block, or keeps a barrier between
/// two runs), else gpu.all_reduce's two.
Value KernelMapper::reduceOverBlock(IRRewriter &rewriter, Location loc,
                                    gpu::LaunchOp launch,
                                    const ReductionForm &form, Value value,
                                    Value tid, int64_t threads) {
  if (singleBarrierReductions && value.getType().isF32() &&
      threads % kWarpSize == 0)
    return blockReduce(rewriter, loc, launch, form, value, tid, threads);
  return gpu::AllReduceOp::create(
             rewriter, loc, value,
             gpu::AllReduceOperationAttr::get(rewriter.getContext(), form.kind),
             /*uniform=*/rewriter.getUnitAttr())
      .getResult();
}

} // namespace dc::map_to_gpu
