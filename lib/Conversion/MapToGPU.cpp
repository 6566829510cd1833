//===- MapToGPU.cpp - a bufferized step's compute as GPU kernels ----------===//
//
// Dispatch formation for the GPU target (see Passes.td): library matrix
// products stay for dc-to-dcrt; every other linalg op becomes one parallel
// kernel (a thread per point of its parallel iteration space); any other op
// that touches memory becomes a one-thread kernel. The host keeps only
// what enqueues work.
//
//===----------------------------------------------------------------------===//
#include "dc/Conversion/Passes.h"

#include "GemmForm.h"
#include "dc/Dialect/DC/IR/DCDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace dc {
#define GEN_PASS_DEF_DCMAPTOGPU
#include "dc/Conversion/Passes.h.inc"
} // namespace dc

using namespace mlir;
using namespace dc;

namespace {

/// Threads per block of the generic parallel kernels.
constexpr int64_t kBlockSize = 256;

/// True for an op the host runs: it computes no tensor data and touches no
/// device memory (constants, index arithmetic, views, runtime calls).
bool isHostOp(Operation *op) {
  if (isa<DCDialect>(op->getDialect()) ||
      isa<LLVM::LLVMDialect>(op->getDialect()))
    return true;
  if (isa<func::ReturnOp, UnrealizedConversionCastOp, ViewLikeOpInterface,
          memref::ExtractStridedMetadataOp, memref::DimOp,
          memref::ExtractAlignedPointerAsIndexOp, gpu::LaunchOp>(op))
    return true;
  // Pure scalar arithmetic (arith, index, affine.apply, ub.poison).
  return isPure(op) && op->getNumRegions() == 0 &&
         llvm::none_of(op->getResultTypes(), llvm::IsaPred<ShapedType>);
}

/// A zero `linalg.fill` of exactly `gemm`'s output right before it: the
/// product can overwrite instead of accumulate.
linalg::FillOp getZeroFillBefore(Operation *gemm) {
  auto fill = dyn_cast_or_null<linalg::FillOp>(gemm->getPrevNode());
  if (!fill || !fill.hasPureBufferSemantics())
    return {};
  Value output = cast<linalg::LinalgOp>(gemm).getDpsInits()[0];
  if (fill.getOutputs()[0] != output)
    return {};
  Attribute value;
  if (!matchPattern(fill.getInputs()[0], m_Constant(&value)))
    return {};
  auto zero = dyn_cast<FloatAttr>(value);
  if (!zero || !zero.getValue().isZero())
    return {};
  return fill;
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

class MapToGPUPass : public dc::impl::DCMapToGPUBase<MapToGPUPass> {
public:
  using DCMapToGPUBase::DCMapToGPUBase;

  void runOnOperation() override {
    if (cudaToolkit.empty()) {
      getOperation().emitError()
          << "the GPU target (h200) compiles kernels with the CUDA toolkit's "
             "ptxas, and this dc was configured without a CUDA toolkit "
             "(reconfigure with CUDAToolkit_ROOT set)";
      return signalPassFailure();
    }
    for (auto fn : getOperation().getOps<func::FuncOp>())
      if (!fn.isExternal() && failed(mapFunction(fn)))
        return signalPassFailure();
  }

private:
  LogicalResult mapFunction(func::FuncOp fn) {
    if (!fn.getBody().hasOneBlock())
      return fn.emitError() << "dc-map-to-gpu: a step with several blocks; "
                               "the GPU target takes structured control "
                               "flow only";
    IRRewriter rewriter(fn.getContext());
    Block &body = fn.getBody().front();
    // Zero fills that only clear a matrix product's output first (before
    // the fills become kernels).
    for (Operation &op : body)
      if (getGemmForm(&op))
        if (linalg::FillOp fill = getZeroFillBefore(&op)) {
          op.setAttr(kGemmOverwriteAttr, rewriter.getUnitAttr());
          rewriter.eraseOp(fill);
        }
    for (Operation &op : llvm::make_early_inc_range(body)) {
      if (auto alloc = dyn_cast<memref::AllocOp>(op))
        return alloc.emitError()
               << "dc-map-to-gpu: a device allocation in the step ("
               << alloc.getType()
               << "): dc-assign-step-arena places only statically shaped "
                  "buffers that do not escape the step";
      if (auto global = dyn_cast<memref::GetGlobalOp>(op))
        return global.emitError()
               << "dc-map-to-gpu: a constant tensor (" << global.getName()
               << ") lives in host memory; the GPU target does not place "
                  "constants in device memory yet";
      if (isa<memref::DeallocOp>(op))
        return op.emitError() << "dc-map-to-gpu: a device deallocation in "
                                 "the step";
      if (isHostOp(&op))
        continue;
      if (getGemmForm(&op))
        continue;
      if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op)) {
        if (failed(mapLinalg(rewriter, linalgOp)))
          return failure();
        continue;
      }
      if (failed(mapSerial(rewriter, &op)))
        return failure();
    }
    // The host only enqueues: anything else left would touch device memory
    // from the CPU.
    for (Operation &op : body)
      if (!isHostOp(&op) && !getGemmForm(&op))
        return op.emitError()
               << "dc-map-to-gpu: left on the host, where it would touch "
                  "device memory";
    return success();
  }

  /// One thread per point of the op's parallel iteration space.
  LogicalResult mapLinalg(IRRewriter &rewriter, linalg::LinalgOp op) {
    if (!op.hasPureBufferSemantics())
      return op.emitError() << "dc-map-to-gpu: a linalg op on tensors after "
                               "bufferization";
    // No loops (a 0-d op, such as the loss's scalar): one thread.
    if (op.getNumLoops() == 0)
      return mapSerial(rewriter, op);
    // Parallel dims outermost: a reduction over rows (a norm's weight
    // gradient) is then parallel over its columns.
    if (auto generic = dyn_cast<linalg::GenericOp>(op.getOperation())) {
      SmallVector<unsigned> order;
      for (auto [i, type] : llvm::enumerate(generic.getIteratorTypesArray()))
        if (type == utils::IteratorType::parallel)
          order.push_back(i);
      for (auto [i, type] : llvm::enumerate(generic.getIteratorTypesArray()))
        if (type != utils::IteratorType::parallel)
          order.push_back(i);
      if (!llvm::equal(order, llvm::seq<unsigned>(0, order.size()))) {
        rewriter.setInsertionPoint(generic);
        FailureOr<linalg::GenericOp> interchanged =
            linalg::interchangeGenericOp(rewriter, generic, order);
        if (failed(interchanged))
          return generic.emitError() << "dc-map-to-gpu: cannot put the "
                                        "parallel dims first";
        op = *interchanged;
      }
    }
    Operation *anchor = op;
    rewriter.setInsertionPoint(anchor);
    FailureOr<linalg::LinalgLoops> loops =
        linalg::linalgOpToParallelLoops(rewriter, op);
    if (failed(loops))
      return op.emitError() << "dc-map-to-gpu: cannot lower to loops";
    rewriter.eraseOp(op);
    if (loops->empty())
      return success();
    auto parallel = dyn_cast<scf::ParallelOp>(loops->front());
    if (!parallel)
      return mapSerial(rewriter, loops->front());
    return mapParallel(rewriter, parallel);
  }

  /// A top-level scf.parallel of static bounds as a 1-D grid of threads.
  LogicalResult mapParallel(IRRewriter &rewriter, scf::ParallelOp loop) {
    SmallVector<int64_t> lower, upper, step, trips;
    for (auto [lb, ub, st] : llvm::zip(loop.getLowerBound(),
                                       loop.getUpperBound(), loop.getStep())) {
      std::optional<int64_t> l = getConstantIntValue(lb),
                             u = getConstantIntValue(ub),
                             s = getConstantIntValue(st);
      if (!l || !u || !s || *s <= 0)
        return mapSerial(rewriter, loop);
      lower.push_back(*l);
      step.push_back(*s);
      trips.push_back(std::max<int64_t>(0, llvm::divideCeil(*u - *l, *s)));
    }
    int64_t total = 1;
    for (int64_t trip : trips)
      total *= trip;
    Location loc = loop.getLoc();
    if (total == 0) {
      rewriter.eraseOp(loop);
      return success();
    }
    int64_t threads = std::min(total, kBlockSize);
    rewriter.setInsertionPoint(loop);
    gpu::LaunchOp launch =
        createLaunch(rewriter, loc, llvm::divideCeil(total, threads), threads);
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPoint(launch.getBody().front().getTerminator());
    Value id = arith::AddIOp::create(
        rewriter, loc,
        arith::MulIOp::create(rewriter, loc, launch.getBlockIds().x,
                              launch.getBlockSize().x),
        launch.getThreadIds().x);
    Value inRange = arith::CmpIOp::create(
        rewriter, loc, arith::CmpIPredicate::ult, id,
        arith::ConstantIndexOp::create(rewriter, loc, total));
    auto guardIf = scf::IfOp::create(rewriter, loc, inRange,
                                     /*withElseRegion=*/false);
    rewriter.setInsertionPointToStart(guardIf.thenBlock());
    // Innermost dim fastest: neighbouring threads, neighbouring elements.
    IRMapping mapping;
    int64_t inner = 1;
    for (int64_t d = trips.size() - 1; d >= 0; --d) {
      Value index = arith::DivUIOp::create(
          rewriter, loc, id,
          arith::ConstantIndexOp::create(rewriter, loc, inner));
      index = arith::RemUIOp::create(
          rewriter, loc, index,
          arith::ConstantIndexOp::create(rewriter, loc, trips[d]));
      Value iv = arith::AddIOp::create(
          rewriter, loc,
          arith::MulIOp::create(
              rewriter, loc, index,
              arith::ConstantIndexOp::create(rewriter, loc, step[d])),
          arith::ConstantIndexOp::create(rewriter, loc, lower[d]));
      mapping.map(loop.getInductionVars()[d], iv);
      inner *= trips[d];
    }
    for (Operation &inside : loop.getBody()->without_terminator())
      rewriter.clone(inside, mapping);
    rewriter.eraseOp(loop);
    return success();
  }

  /// `op` (and the linalg ops in it, as sequential loops) in one thread.
  LogicalResult mapSerial(IRRewriter &rewriter, Operation *op) {
    for (Value result : op->getResults())
      if (!result.use_empty())
        return op->emitError()
               << "dc-map-to-gpu: runs on the GPU but its result is used "
                  "by the host";
    rewriter.setInsertionPoint(op);
    gpu::LaunchOp launch = createLaunch(rewriter, op->getLoc(), 1, 1);
    rewriter.moveOpBefore(op, launch.getBody().front().getTerminator());
    SmallVector<linalg::LinalgOp> nested;
    launch.getBody().walk(
        [&](linalg::LinalgOp linalgOp) { nested.push_back(linalgOp); });
    for (linalg::LinalgOp linalgOp : nested) {
      rewriter.setInsertionPoint(linalgOp);
      if (failed(linalg::linalgOpToLoops(rewriter, linalgOp)))
        return linalgOp.emitError() << "dc-map-to-gpu: cannot lower to loops";
      rewriter.eraseOp(linalgOp);
    }
    return success();
  }
};

} // namespace
