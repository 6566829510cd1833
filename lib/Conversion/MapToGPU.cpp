//===- MapToGPU.cpp - a bufferized step's compute as GPU kernels ----------===//
//
// Dispatch formation for the GPU target (see Passes.td): library matrix
// products stay for dc-to-dcrt; a reduction over rows (norms, softmax,
// cross-entropy) becomes one block per row whose threads stride the row and
// combine through gpu.all_reduce, fused with the ops beside it that work on
// the same rows (a norm's scale) into one kernel, or a warp per row (xor
// shuffles, 8 rows per block) when 32 lanes cover the row in a few 16-byte
// steps; a reduction over columns (a norm's weight gradient) one block per
// 64 columns whose row lanes combine in shared memory in a fixed order;
// every other linalg op one parallel kernel (a thread per point of its
// parallel iteration space); any other op that touches memory a one-thread
// kernel. The host keeps only what enqueues work.
//
//===----------------------------------------------------------------------===//
#include "dc/Conversion/Passes.h"

#include "ColumnReductionShape.h"
#include "GemmForm.h"
#include "dc/Dialect/DC/IR/DCDialect.h"

#include "mlir/Dialect/Affine/Utils.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/IndexingUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#include <limits>
#include <map>

namespace dc {
#define GEN_PASS_DEF_DCMAPTOGPU
#include "dc/Conversion/Passes.h.inc"
} // namespace dc

using namespace mlir;
using namespace dc;

namespace {

/// Threads per block of the generic parallel kernels.
constexpr int64_t kBlockSize = 256;
/// Row lanes of a column-reduction block (ColumnReductionShape.h).
constexpr int64_t kRowLanes = kBlockSize / kColumnsPerBlock;

/// A linalg.generic whose last loop is its one reduction, folding a value
/// of each point into one output: `out = combiner(out, element)`.
struct ReductionForm {
  Operation *combiner = nullptr;
  BlockArgument output;
  Value element;
  gpu::AllReduceOperation kind;
  TypedAttr identity;
  /// Every input that the reduction dim indexes reads along its innermost,
  /// unit-stride dim: a row reduction.
  bool rowContiguous = false;
};

bool hasUnitInnerStride(Type type) {
  auto memref = dyn_cast<MemRefType>(type);
  if (!memref)
    return false;
  SmallVector<int64_t> strides;
  int64_t offset;
  return succeeded(memref.getStridesAndOffset(strides, offset)) &&
         !strides.empty() && strides.back() == 1;
}

std::optional<ReductionForm> matchReduction(linalg::GenericOp op) {
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  unsigned loops = iterators.size();
  if (loops == 0 || iterators.back() != utils::IteratorType::reduction ||
      llvm::count(iterators, utils::IteratorType::reduction) != 1 ||
      op.getNumDpsInits() != 1 || !op.hasPureBufferSemantics())
    return std::nullopt;
  for (AffineMap map : op.getIndexingMapsArray())
    if (!map.isProjectedPermutation())
      return std::nullopt;
  unsigned reductionDim = loops - 1;
  OpOperand *init = op.getDpsInitOperand(0);
  if (op.getMatchingIndexingMap(init).isFunctionOfDim(reductionDim))
    return std::nullopt;
  Block &body = op.getRegion().front();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  ReductionForm form;
  form.output = op.getMatchingBlockArgument(init);
  if (yield.getNumOperands() != 1 || !form.output.hasOneUse())
    return std::nullopt;
  form.combiner = yield.getOperand(0).getDefiningOp();
  if (!form.combiner || form.combiner->getNumOperands() != 2 ||
      *form.output.getUsers().begin() != form.combiner)
    return std::nullopt;
  form.element = form.combiner->getOperand(0) == form.output
                     ? form.combiner->getOperand(1)
                     : form.combiner->getOperand(0);
  auto type = dyn_cast<FloatType>(form.output.getType());
  if (!type || form.element == form.output)
    return std::nullopt;
  const llvm::fltSemantics &semantics = type.getFloatSemantics();
  auto infinity = [&](bool negative) {
    return FloatAttr::get(type, APFloat::getInf(semantics, negative));
  };
  if (isa<arith::AddFOp>(form.combiner)) {
    form.kind = gpu::AllReduceOperation::ADD;
    form.identity = FloatAttr::get(type, APFloat::getZero(semantics));
  } else if (isa<arith::MaximumFOp>(form.combiner)) {
    form.kind = gpu::AllReduceOperation::MAXIMUMF;
    form.identity = infinity(true);
  } else if (isa<arith::MaxNumFOp>(form.combiner)) {
    form.kind = gpu::AllReduceOperation::MAXNUMF;
    form.identity = infinity(true);
  } else if (isa<arith::MinimumFOp>(form.combiner)) {
    form.kind = gpu::AllReduceOperation::MINIMUMF;
    form.identity = infinity(false);
  } else if (isa<arith::MinNumFOp>(form.combiner)) {
    form.kind = gpu::AllReduceOperation::MINNUMF;
    form.identity = infinity(false);
  } else {
    return std::nullopt;
  }
  form.rowContiguous = true;
  for (OpOperand *input : op.getDpsInputOperands()) {
    AffineMap map = op.getMatchingIndexingMap(input);
    if (!map.isFunctionOfDim(reductionDim))
      continue;
    if (map.getResults().back() !=
            getAffineDimExpr(reductionDim, op.getContext()) ||
        !hasUnitInnerStride(input->get().getType()))
      form.rowContiguous = false;
  }
  return form;
}

/// The indices `map` gives at the loop point `ivs` (one per loop): a loop
/// dim is its value; any other affine result (a rotary embedding's partner
/// half, `1 - d3`) is computed in index arithmetic.
SmallVector<Value> applyMap(OpBuilder &builder, Location loc, AffineMap map,
                            ArrayRef<Value> ivs) {
  SmallVector<Value> indices;
  for (AffineExpr result : map.getResults()) {
    if (auto dim = dyn_cast<AffineDimExpr>(result))
      indices.push_back(ivs[dim.getPosition()]);
    else
      indices.push_back(
          affine::expandAffineExpr(builder, loc, result, ivs, ValueRange()));
  }
  return indices;
}

/// `operand`'s element at loop point `ivs` (a scalar operand is itself).
Value loadAt(OpBuilder &builder, Location loc, linalg::LinalgOp op,
             OpOperand &operand, ArrayRef<Value> ivs) {
  if (!isa<MemRefType>(operand.get().getType()))
    return operand.get();
  return memref::LoadOp::create(
      builder, loc, operand.get(),
      applyMap(builder, loc, op.getMatchingIndexingMap(&operand), ivs));
}

/// Clones `op`'s body into `builder` with its block arguments bound to
/// `args` (null: unbound) and linalg.index to `ivs`; leaves out the yield
/// and `skip`. `mapping` maps the body's values to their clones.
void cloneBody(OpBuilder &builder, linalg::GenericOp op, ArrayRef<Value> args,
               ArrayRef<Value> ivs, Operation *skip, IRMapping &mapping) {
  Block &body = op.getRegion().front();
  for (auto [arg, value] : llvm::zip(body.getArguments(), args))
    if (value)
      mapping.map(arg, value);
  for (Operation &inside : body.without_terminator()) {
    if (&inside == skip)
      continue;
    if (auto index = dyn_cast<linalg::IndexOp>(inside)) {
      mapping.map(index.getResult(), ivs[index.getDim()]);
      continue;
    }
    builder.clone(inside, mapping);
  }
}

/// cloneBody at the loop point `ivs`, reading each used operand through its
/// indexing map (but not the output that `skip`, a reduction's combiner,
/// folds into: it is only the combiner's accumulator).
void cloneBodyAt(OpBuilder &builder, Location loc, linalg::GenericOp op,
                 ArrayRef<Value> ivs, Operation *skip, IRMapping &mapping) {
  SmallVector<Value> args(op->getNumOperands());
  for (OpOperand &operand : op->getOpOperands())
    if (!op.getMatchingBlockArgument(&operand).use_empty() &&
        !(skip && op.isDpsInit(&operand)))
      args[operand.getOperandNumber()] = loadAt(builder, loc, op, operand, ivs);
  cloneBody(builder, op, args, ivs, skip, mapping);
}

/// `form`'s combiner applied to `accumulator` and `value`.
Value combine(OpBuilder &builder, const ReductionForm &form, Value accumulator,
              Value value) {
  IRMapping mapping;
  mapping.map(form.output, accumulator);
  mapping.map(form.element, value);
  return builder.clone(*form.combiner, mapping)->getResult(0);
}

/// True when `x` (of `a`'s body) and `y` (of `b`'s body, `a` and `b` over
/// the same loops) are the same value at every loop point: the same pure
/// ops with the same attributes over such values, block arguments reading
/// one buffer through one indexing map, or one value from outside.
bool computeSameValue(linalg::GenericOp a, Value x, linalg::GenericOp b,
                      Value y, unsigned depth = 0) {
  auto inside = [](linalg::GenericOp op, Value value) {
    if (auto arg = dyn_cast<BlockArgument>(value))
      return arg.getOwner() == &op.getRegion().front();
    return op->isProperAncestor(value.getDefiningOp());
  };
  bool insideX = inside(a, x), insideY = inside(b, y);
  if (!insideX || !insideY)
    return !insideX && !insideY && x == y;
  if (depth > 16)
    return false;
  auto argX = dyn_cast<BlockArgument>(x), argY = dyn_cast<BlockArgument>(y);
  if (argX || argY) {
    if (!argX || !argY)
      return false;
    OpOperand &operandX = a->getOpOperand(argX.getArgNumber());
    OpOperand &operandY = b->getOpOperand(argY.getArgNumber());
    return a.isDpsInput(&operandX) && b.isDpsInput(&operandY) &&
           operandX.get() == operandY.get() &&
           a.getMatchingIndexingMap(&operandX) ==
               b.getMatchingIndexingMap(&operandY);
  }
  Operation *opX = x.getDefiningOp(), *opY = y.getDefiningOp();
  if (opX->getName() != opY->getName() ||
      opX->getAttrDictionary() != opY->getAttrDictionary() ||
      cast<OpResult>(x).getResultNumber() !=
          cast<OpResult>(y).getResultNumber() ||
      opX->getNumOperands() != opY->getNumOperands() ||
      opX->getNumRegions() != 0 || !isPure(opX))
    return false;
  for (auto [u, v] : llvm::zip(opX->getOperands(), opY->getOperands()))
    if (!computeSameValue(a, u, b, v, depth + 1))
      return false;
  return true;
}

/// The `width` (at least 1) neighbouring points of a thread's chunk that
/// starts at `chunk`: chunk, chunk + 1, ..., each lane's index along the row.
SmallVector<Value> getChunkLanes(OpBuilder &builder, Location loc, Value chunk,
                                 int64_t width) {
  SmallVector<Value> lanes{chunk};
  for (int64_t lane = 1; lane < width; ++lane)
    lanes.push_back(arith::AddIOp::create(
        builder, loc, chunk,
        arith::ConstantIndexOp::create(builder, loc, lane)));
  return lanes;
}

/// exp(from - to), and exactly 1 when they are equal (also both -inf,
/// where the difference is NaN): the factor that moves a sum of
/// exponentials taken against the max `from` to the max `to`.
Value rescale(OpBuilder &builder, Location loc, Value from, Value to) {
  auto type = cast<FloatType>(from.getType());
  Value same =
      arith::CmpFOp::create(builder, loc, arith::CmpFPredicate::OEQ, from, to);
  Value factor = math::ExpOp::create(
      builder, loc, arith::SubFOp::create(builder, loc, from, to));
  Value one =
      arith::ConstantOp::create(builder, loc, FloatAttr::get(type, 1.0));
  return arith::SelectOp::create(builder, loc, same, one, factor);
}

/// The coordinates of `linear` (less than the product of `trips`) over
/// `trips`, innermost fastest.
SmallVector<Value> delinearize(OpBuilder &builder, Location loc, Value linear,
                               ArrayRef<int64_t> trips) {
  SmallVector<Value> ivs(trips.size());
  int64_t inner = 1;
  for (int64_t d = trips.size() - 1; d >= 0; --d) {
    Value index = linear;
    if (inner != 1)
      index = arith::DivUIOp::create(
          builder, loc, index,
          arith::ConstantIndexOp::create(builder, loc, inner));
    if (d != 0)
      index = arith::RemUIOp::create(
          builder, loc, index,
          arith::ConstantIndexOp::create(builder, loc, trips[d]));
    ivs[d] = index;
    inner *= trips[d];
  }
  return ivs;
}

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

/// What `value` can reach: the buffer it views (through view-like ops) and,
/// when it goes through one `memref.view` of static shape and constant
/// shift (the step arena's buffers), that byte range of it.
struct Extent {
  Value root;
  int64_t begin = 0, end = std::numeric_limits<int64_t>::max();
};

Extent getExtent(Value value) {
  Extent extent;
  int byteViews = 0;
  while (auto view = value.getDefiningOp<ViewLikeOpInterface>()) {
    if (auto byteView = dyn_cast<memref::ViewOp>(view.getOperation())) {
      ++byteViews;
      MemRefType type = byteView.getType();
      std::optional<int64_t> shift =
          getConstantIntValue(byteView.getByteShift());
      if (shift && type.hasStaticShape() &&
          type.getElementType().isIntOrFloat()) {
        extent.begin = *shift;
        extent.end =
            *shift + type.getNumElements() *
                         llvm::divideCeil(type.getElementTypeBitWidth(), 8);
      }
    }
    value = view.getViewSource();
  }
  if (byteViews > 1)
    extent = Extent();
  extent.root = value;
  return extent;
}

/// True unless `a` and `b` provably reach disjoint memory: different
/// buffers, or disjoint ranges of one (dc-assign-step-arena gives buffers
/// that are live at the same time disjoint ranges of the arena).
bool mayAlias(Value a, Value b) {
  Extent x = getExtent(a), y = getExtent(b);
  return x.root == y.root && x.begin < y.end && y.begin < x.end;
}

/// True when `a` and `b` are provably the same memory laid out the same
/// way: row r of one is row r of the other. Two buffers of the step arena
/// that overlap at different offsets (a dead buffer's bytes reused for
/// another) are not: row r of one lands on another row of the other.
bool sameLayout(Value a, Value b) {
  if (a == b)
    return true;
  Extent x = getExtent(a), y = getExtent(b);
  bool known = x.end != std::numeric_limits<int64_t>::max() &&
               y.end != std::numeric_limits<int64_t>::max();
  return known && x.root == y.root && x.begin == y.begin && x.end == y.end &&
         a.getType() == b.getType();
}

/// True when `op` may read or write `buffer` or memory it overlaps.
bool mayTouch(Operation *op, Value buffer) {
  return llvm::any_of(op->getOperands(), [&](Value operand) {
    return isa<BaseMemRefType>(operand.getType()) && mayAlias(operand, buffer);
  });
}

/// True when `op` or any op nested in it (a linalg body reading a buffer
/// it captures) may read or write `buffer` or memory it overlaps.
bool mayTouchNested(Operation *op, Value buffer) {
  bool touches = false;
  op->walk([&](Operation *nested) {
    touches = touches || mayTouch(nested, buffer);
    return touches ? WalkResult::interrupt() : WalkResult::advance();
  });
  return touches;
}

/// True for what a step's host code holds between two kernels without
/// touching memory itself: --profile-ops' hooks, views, constants (each may
/// still name a buffer: callers check what it touches).
bool isHookOrView(Operation *op) {
  return isa<LLVM::CallOp, LLVM::AddressOfOp, LLVM::GEPOp, ViewLikeOpInterface,
             arith::ConstantOp>(op);
}

/// The `linalg.fill` of exactly `output` (with a constant) before `op`, with
/// nothing in between that can read or write that output: `op` can
/// overwrite the output instead of folding into what the fill wrote.
/// Between them may lie --profile-ops' hooks (a profiled step runs the same
/// kernels), views, dc's schedule ops (a gather's start and wait, a
/// release), which only touch the runtime's buffers and the operands they
/// name, and other linalg ops on buffers (or kernels made of them) that do
/// not touch the output (dc-rematerialize puts a recomputed operand between
/// the fill and its product; dc-split-column-reductions' partial sums lie
/// between a weight gradient's fill and its second pass).
std::pair<linalg::FillOp, Attribute> getFillBefore(Operation *op,
                                                   Value output) {
  Operation *previous = op->getPrevNode();
  auto skippable = [&](Operation *op) {
    // A view of the step arena names all of it, but reads and writes
    // nothing (the views before a split reduction's passes).
    if (isa<ViewLikeOpInterface>(op) && isMemoryEffectFree(op))
      return true;
    if (isHookOrView(op) || isa_and_nonnull<DCDialect>(op->getDialect()))
      return !mayTouch(op, output);
    // A kernel this pass already made of such an op reads and writes only
    // the buffers its body names.
    if (isa<gpu::LaunchOp>(op))
      return !mayTouchNested(op, output);
    auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
    return linalgOp && linalgOp.hasPureBufferSemantics() &&
           !mayTouchNested(op, output);
  };
  while (previous && skippable(previous))
    previous = previous->getPrevNode();
  auto fill = dyn_cast_or_null<linalg::FillOp>(previous);
  if (!fill || !fill.hasPureBufferSemantics() || fill.getOutputs()[0] != output)
    return {};
  Attribute value;
  if (!matchPattern(fill.getInputs()[0], m_Constant(&value)))
    return {};
  return {fill, value};
}

/// A zero fill of exactly `gemm`'s output before it (getFillBefore): the
/// product can overwrite instead of accumulate.
linalg::FillOp getZeroFillBefore(Operation *gemm) {
  auto [fill, value] =
      getFillBefore(gemm, cast<linalg::LinalgOp>(gemm).getDpsInits()[0]);
  auto zero = dyn_cast_or_null<FloatAttr>(value);
  if (!fill || !zero || !zero.getValue().isZero())
    return {};
  return fill;
}

/// Marks a reduction whose output an identity fill cleared just before
/// (the fill is gone): its kernel folds the total into the identity, not
/// into a value loaded from the output.
constexpr llvm::StringLiteral kOverwritesOutputAttr = "dc.overwrites_output";

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

/// A thread per point of `points` (> 0), in blocks of up to kBlockSize:
/// leaves `builder` inside the launch's guard against the last block's
/// spare threads and returns the thread's point (its linear id).
Value createThreadPerPointLaunch(OpBuilder &builder, Location loc,
                                 int64_t points) {
  int64_t threads = std::min(points, kBlockSize);
  gpu::LaunchOp launch =
      createLaunch(builder, loc, llvm::divideCeil(points, threads), threads);
  builder.setInsertionPoint(launch.getBody().front().getTerminator());
  Value id = arith::AddIOp::create(
      builder, loc,
      arith::MulIOp::create(builder, loc, launch.getBlockIds().x,
                            launch.getBlockSize().x),
      launch.getThreadIds().x);
  Value inRange = arith::CmpIOp::create(
      builder, loc, arith::CmpIPredicate::ult, id,
      arith::ConstantIndexOp::create(builder, loc, points));
  auto guard = scf::IfOp::create(builder, loc, inRange,
                                 /*withElseRegion=*/false);
  builder.setInsertionPointToStart(guard.thenBlock());
  return id;
}

/// A column-parallel loop that writes one row per iteration runs a block
/// per bin of rows (see mapBinnedColumnParallelLoop). Every block scans
/// every iteration's row, so the bins are at most kMaxRowBins (A's 32000
/// embedding rows: a block for 31 or 32 of them, 1024 blocks that are all
/// resident at once) and bins x iterations at most kMaxBinScans. Each
/// thread tests kBinScanPerThread iterations per window, and runs a kept
/// iteration over up to kBinPointsInFlight of its points at once (all their
/// loads before any store).
constexpr int64_t kMaxRowBins = 1024;
constexpr int64_t kMaxBinScans = int64_t(1) << 26;
constexpr int64_t kBinScanPerThread = 4;
constexpr int64_t kBinPointsInFlight = 8;

/// Rows each row lane of a column reduction loads before it adds them
/// (mapColumnReductionVectorized).
constexpr int64_t kColumnUnroll = 4;

/// A short column reduction (the second pass over a split's partial sums:
/// 256 rows for config A's norm weight gradients) whose 64-column blocks
/// would leave SMs idle takes narrower blocks, down to 4 vector lanes (64
/// bytes of a row per warp access), while there are fewer than this many:
/// one per SM of an H200. Its rows are few, so its time is a load latency
/// or two and a launch, not bandwidth; 32 blocks of 64 columns walking 512
/// rows took 6.7 us, and splitting the rows again into a second launch was
/// no faster (7.5 us for both, measured on config A).
constexpr int64_t kMinColumnBlocks = 132;
/// Rows at most of a short column reduction (one that may take narrower
/// blocks): longer ones are dc-split-column-reductions' to split.
constexpr int64_t kMaxShortColumnRows = 1024;
/// Rows each row lane of a short column reduction loads before it adds
/// them, at most.
constexpr int64_t kShortColumnUnroll = 8;

/// Bytes of one 16-byte vector access, the widest a thread loads at once.
constexpr int64_t kVectorBytes = 16;

/// The `width` elements of `buffer` from `indices` on, as one aligned
/// 16-byte load.
Value loadVector(OpBuilder &builder, Location loc, Value buffer,
                 ValueRange indices, int64_t width) {
  return vector::LoadOp::create(
      builder, loc, VectorType::get({width}, getElementTypeOrSelf(buffer)),
      buffer, indices, /*nontemporal=*/false, llvm::Align(kVectorBytes));
}

/// 16-byte loads an elementwise kernel's thread issues before its math (it
/// takes that many groups of one vector operand, fewer of several): one
/// load per thread left the step's one-input kernels (cross-entropy's
/// backward) at 79% of the copy bandwidth. More groups per thread make
/// fewer, longer blocks: with 4, SwiGLU's forward (two inputs, two groups a
/// thread) ran 2% slower than with 2 (one group: as many blocks as the
/// work has 256 x 16-byte groups), the rest the same (Nsight Compute, 1 x
/// H100, 2026-12-05); 8 was slower again.
constexpr int64_t kLoadsInFlight = 2;

/// The most chunks of a row each thread of a row group keeps in registers
/// (see KeptRowValues); longer rows loop.
constexpr int64_t kMaxKeptChunks = 4;

/// Chunks (16 bytes of the narrowest row operand, or elements) each thread
/// of a block-per-row group takes of a row at least, as far as blocks of
/// 32 threads allow: a row group's loads are in flight only before its
/// first reduction, so bytes per thread set the memory parallelism (A's
/// 2048-wide bf16 norms: 128 threads of 2 chunks, not 256 of 1).
constexpr int64_t kRowChunksPerThread = 2;

/// Rows a block of a row group with a folded column partial (a norm's
/// backward with its weight gradient) takes per iteration of its chunk's
/// loop, the loads of all of them issued before the first one's reduction:
/// one row at a time left the folded kernel latency bound (44% of DRAM
/// bandwidth, Nsight Compute), each row's loads waiting behind the row
/// before's reductions and barriers.
constexpr int64_t kFoldedRowsInFlight = 2;

/// Bytes of workgroup memory a folded row group's copies ahead may take (2
/// stages), leaving room for its reductions' in a block's 48 KiB of static
/// shared memory: A's norm backward takes 34 KiB (x and dy, 2 stages of 2
/// rows of 2 chunks of 128 threads: 32 KiB; rstd 2 KiB).
constexpr int64_t kMaxRowCopyBytes = 40 * 1024;

/// Threads of a warp; a row group whose rows a warp covers in at most
/// kMaxWarpRowChunks chunks per lane (1024 bf16s) runs a warp per row,
/// kBlockSize / kWarpSize rows per block. Not A's 2048-wide bf16 norms (8
/// chunks): every lane keeps its chunks as f32, 80 registers for the
/// forward and 160 for the backward (ptxas), so one block per SM; measured
/// no faster forward and slower backward than a block per row.
constexpr int32_t kWarpSize = 32;
constexpr int64_t kMaxWarpRowChunks = 4;

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

/// cloneBody with `args`; returns the yielded values.
SmallVector<Value> cloneBodyWith(OpBuilder &builder, linalg::GenericOp op,
                                 ArrayRef<Value> args, ArrayRef<Value> ivs) {
  IRMapping mapping;
  cloneBody(builder, op, args, ivs, /*skip=*/nullptr, mapping);
  return llvm::map_to_vector(
      op.getRegion().front().getTerminator()->getOperands(),
      [&](Value value) { return mapping.lookupOrDefault(value); });
}

/// The one linalg op of a sequential loop that a kernel can run with a
/// thread per point of the op and the loop inside each thread: an
/// embedding gradient's `for t: out[idx[t], :] += g[t, :]`. The loop holds
/// only index arithmetic, loads (the indices), subviews and that op; the op
/// is all-parallel, and every output is a subview whose offsets move with
/// the loop only in dims of size 1. Then each thread owns the same
/// coordinates of every output in every iteration: no two threads write one
/// address, and repeated indices add up in loop order, as on the host.
linalg::LinalgOp getColumnParallelLoopOp(scf::ForOp loop) {
  linalg::LinalgOp found;
  for (Operation &op : loop.getBody()->without_terminator()) {
    if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op)) {
      if (found || !linalgOp.hasPureBufferSemantics() ||
          linalgOp.getNumParallelLoops() != linalgOp.getNumLoops() ||
          ShapedType::isDynamicShape(linalgOp.getStaticLoopRanges()) ||
          !llvm::all_of(linalgOp.getIndexingMapsArray(), [](AffineMap map) {
            return map.isProjectedPermutation();
          }))
        return {};
      found = linalgOp;
      continue;
    }
    if (isa<memref::LoadOp, memref::SubViewOp>(op))
      continue;
    if (isPure(&op) && op.getNumRegions() == 0 &&
        llvm::none_of(op.getResultTypes(), llvm::IsaPred<ShapedType>))
      continue;
    return {};
  }
  if (!found || !isa<linalg::GenericOp>(found.getOperation()))
    return {};
  for (Value output : found.getDpsInits()) {
    auto subview = output.getDefiningOp<memref::SubViewOp>();
    if (!subview || subview->getBlock() != loop.getBody())
      return {};
    for (auto [offset, size] :
         llvm::zip(subview.getStaticOffsets(), subview.getStaticSizes()))
      if (size != 1 && ShapedType::isDynamic(offset))
        return {};
    if (llvm::any_of(subview.getStaticStrides(),
                     [](int64_t stride) { return stride != 1; }))
      return {};
  }
  return found;
}

/// One op of a row group (see MapToGPUPass::fuseRowGroup), as the block of a
/// row runs it: a point of the row (`PerRow`: the op's loops are the rows),
/// a reduction along the row (`Reduce`), or every point of the row
/// (`Broadcast`: the rows, then one inner loop).
struct RowMember {
  enum Kind { PerRow, Reduce, Broadcast };
  // Op handles are values; their accessors are not const.
  mutable linalg::GenericOp op;
  Kind kind;
  std::optional<ReductionForm> form;
};

/// A column reduction's partial sums over chunks of a row group's rows,
/// computed by the group's blocks (see MapToGPUPass::matchColumnPartial):
/// `op` has its loops as (chunk, column, row of the chunk) and folds into
/// `out[chunk, column]`; each block runs the `rowsPerChunk` rows of one
/// chunk, each thread keeping its columns' partials in registers.
struct ColumnPartial {
  /// How the partial op reads one of its operands at a row group's point.
  struct Read {
    enum Kind { Unused, Scalar, RowColumn, Row, Column };
    Kind kind = Unused;
    /// What it reads (the buffer its expanded view views).
    Value buffer;
  };
  linalg::GenericOp op;
  ReductionForm form;
  int64_t rowsPerChunk;
  /// The identity fill of the output, folded into the final store.
  bool overwrites;
  SmallVector<Read> reads;
};

/// The second pass of a split column reduction (the sum over a norm's
/// weight-gradient partials) run at the end of the row group's kernel that
/// computed the partials, instead of a launch of its own: each block, once
/// done, takes a ticket from a counter of the kernel's; the last `blocks`
/// blocks to take one wait until every block has, then share the pass's
/// column blocks (emitColumnBlock). As a kernel of its own the pass cost
/// config A's norm backwards 3.9 us of launch and ramp for 2 MiB read
/// (Nsight Compute, 1 x H100), 7% of the layers' norm backward; finishing
/// in the row group's kernel saves 1.0-1.5 us of it (41.1 -> 39.6 us, 54.2
/// -> 53.2 us; the waiting and the partials' read from L2 cost the rest).
/// Still deterministic: each column block adds its rows in a fixed order,
/// whichever block runs it. The counter is the kernel's own, so two
/// launches of one kernel must not overlap: the artifact launches every
/// kernel on the one compute stream.
struct FinishingPass {
  // Op handles are values; their accessors are not const.
  mutable linalg::GenericOp op;
  ReductionForm form;
  SmallVector<int64_t> trips;
  int64_t width, columnsPerBlock, columnBlocks, blocks;
};

/// The most blocks of a kernel that wait for the rest before a finishing
/// pass: the pass option finishing-blocks, 64 by default. A block waits only
/// once at most this many of the kernel's blocks are unfinished, itself
/// included, and 64 always fit on an H100 or H200 at once (half its SMs at
/// one block each, leaving room for NCCL's kernels beside): no block waits
/// for one that cannot start. A MIG slice of 16 SMs may hold fewer: the
/// kernel's launches carry the count (dc.coresident_blocks) and the runtime
/// refuses to launch it there. 64 blocks
/// of 32 columns read config A's 256 x 2048 partials 16 rows per thread.

/// A row max of x and, later in the same row group, a row sum of
/// exp(x - max) that reads the max's output per row (softmax's and
/// cross-entropy's statistics): one pass over the row computes both
/// (online softmax), each thread carrying its running max and its sum
/// against it. `shift` is the sum's operand that reads the max.
struct OnlineSoftmax {
  size_t max, sum;
  unsigned shift;
};

/// Unrolled chunks per iteration of an online softmax's loop along the row
/// (all their loads issued before the math), and the most threads per row:
/// shorter blocks that loop longer leave room for several blocks per SM,
/// one loading while another reduces.
constexpr int64_t kOnlineSoftmaxUnroll = 4;
constexpr int64_t kOnlineSoftmaxThreads = 256;

/// What each thread of a row group keeps in registers from one member to
/// the next when its share of every row is a fixed few chunks (code
/// without a loop): the values of row operands it loaded or stored at each
/// point, so that a later member reuses them instead of reading memory
/// again (a norm's scale reads the row its sum of squares read). Only
/// points along the row are kept: those each thread alone reads and
/// writes; per-row values come from thread 0 across a barrier.
struct KeptRowValues {
  /// The first point of each chunk of this thread, and each chunk's
  /// points (`lanes[c][l]` = `chunks[c] + l`), shared by all members.
  SmallVector<Value> chunks;
  SmallVector<SmallVector<Value>> lanes;

  Value lookup(Value buffer, ArrayRef<Value> indices) const {
    auto found = values.find(key(buffer, indices));
    return found == values.end() ? Value() : found->second;
  }
  /// After a store of `value` to `buffer` at `indices` (or a load): what
  /// may alias `buffer` is stale, except this.
  void keep(Value buffer, ArrayRef<Value> indices, Value value, bool stored) {
    if (stored)
      forget(buffer);
    values[key(buffer, indices)] = value;
  }
  /// This thread's columns of a row: every point of its chunks.
  DenseSet<Value> ownedColumns() const {
    DenseSet<Value> owned(chunks.begin(), chunks.end());
    for (const SmallVector<Value> &chunkLanes : lanes)
      owned.insert(chunkLanes.begin(), chunkLanes.end());
    return owned;
  }
  /// Everything kept of memory that may alias `written`.
  void forget(Value written) {
    for (auto it = values.begin(); it != values.end();)
      it = mayAlias(Value::getFromOpaquePointer(it->first.front()), written)
               ? values.erase(it)
               : std::next(it);
  }

private:
  static std::vector<const void *> key(Value buffer, ArrayRef<Value> indices) {
    std::vector<const void *> result{buffer.getAsOpaquePointer()};
    for (Value index : indices)
      result.push_back(index.getAsOpaquePointer());
    return result;
  }
  std::map<std::vector<const void *>, Value> values;
};

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

/// A memory access in a row group's kernel: what it reads or writes, where,
/// and whether only thread 0 runs it (under `if (tid == 0)`).
struct RowGroupAccess {
  Value buffer;
  SmallVector<Value> indices;
  bool write;
  bool firstOnly;
};

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

class MapToGPUPass : public dc::impl::DCMapToGPUBase<MapToGPUPass> {
public:
  using DCMapToGPUBase::DCMapToGPUBase;

private:
  /// Elementwise ops that their reduction's kernel may compute as it
  /// stores (foldIntoReductionStores), by reduction; those it did.
  DenseMap<Operation *, linalg::GenericOp> convertingConsumers;
  DenseSet<Operation *> computedConsumers;
  /// Finishing passes' ticket counters made so far (their names).
  unsigned finishingCounters = 0;

public:
  // A warp per row synchronizes with nvvm.bar.warp.sync (the GPU dialect
  // has no warp barrier).
  void getDependentDialects(DialectRegistry &registry) const override {
    DCMapToGPUBase::getDependentDialects(registry);
    registry.insert<NVVM::NVVMDialect, nvgpu::NVGPUDialect>();
  }

  void runOnOperation() override {
    if (cudaToolkit.empty()) {
      getOperation().emitError()
          << "the GPU target (h200) compiles kernels with the CUDA toolkit's "
             "ptxas, and this dc was configured without a CUDA toolkit "
             "(reconfigure with CUDAToolkit_ROOT set)";
      return signalPassFailure();
    }
    if (finishingBlocks < 1) {
      getOperation().emitError()
          << "dc-map-to-gpu: finishing-blocks must be at least 1, got "
          << finishingBlocks.getValue();
      return signalPassFailure();
    }
    if (foldedBlocksPerSM < 0) {
      getOperation().emitError()
          << "dc-map-to-gpu: folded-blocks-per-sm must be at least 0, got "
          << foldedBlocksPerSM.getValue();
      return signalPassFailure();
    }
    finishingCounters = 0;
    for (auto fn : getOperation().getOps<func::FuncOp>())
      if (!fn.isExternal() && failed(mapFunction(fn)))
        return signalPassFailure();
    if (approximateMath)
      approximateKernelMath(getOperation());
  }

  /// Marks the transcendental functions and f32 divisions in the kernels
  /// `afn`, which the NVVM lowering takes to the approximate hardware
  /// versions (__nv_fast_expf, div.approx.f32): the accurate ones made the
  /// step's exponential-heavy kernels (cross-entropy, SwiGLU)
  /// instruction-bound, 75-79% of issue slots busy at 41-74% of the DRAM
  /// bandwidth (Nsight Compute on config A). Deterministic all the same:
  /// every run, and a recomputed op, computes the same bits. Not sine and
  /// cosine: the hardware's are accurate only near [-pi, pi], and a rotary
  /// embedding's angles reach the sequence length (its tables are small).
  /// Not powers: the fast one is exp2(y * log2(x)), NaN for every negative
  /// base, where a power by an integer is defined (PyTorch's backward of
  /// `x.pow(2)` raises the activations to 1.0); those by constants are
  /// multiplications by now (dc-simplify-math), the rest stay accurate.
  static void approximateKernelMath(ModuleOp module) {
    module.walk([](gpu::LaunchOp launch) {
      launch.getBody().walk([](Operation *op) {
        auto fastMath = dyn_cast<arith::ArithFastMathInterface>(op);
        if (!fastMath || isa<math::SinOp, math::CosOp, math::PowFOp>(op) ||
            !(isa<math::MathDialect>(op->getDialect()) ||
              (isa<arith::DivFOp>(op) &&
               getElementTypeOrSelf(op->getResult(0)).isF32())))
          return;
        op->setAttr(
            fastMath.getFastMathAttrName(),
            arith::FastMathFlagsAttr::get(
                op->getContext(), fastMath.getFastMathFlagsAttr().getValue() |
                                      arith::FastMathFlags::afn));
      });
    });
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
    // Row reductions with the ops around them that work on the same rows
    // (a norm's scale, softmax's exponentials): one block per row for all.
    SmallVector<linalg::GenericOp> reductions;
    for (Operation &op : body)
      if (auto generic = dyn_cast<linalg::GenericOp>(op))
        if (std::optional<ReductionForm> form = matchReduction(generic))
          if (form->rowContiguous && generic.getNumLoops() >= 2)
            reductions.push_back(generic);
    convertingConsumers.clear();
    computedConsumers.clear();
    DenseSet<Operation *> fused;
    for (linalg::GenericOp reduction : reductions)
      if (!fused.contains(reduction))
        fuseRowGroup(rewriter, reduction, fused);
    for (Operation &op : llvm::make_early_inc_range(body))
      if (auto generic = dyn_cast<linalg::GenericOp>(op))
        foldIntoReductionStores(rewriter, generic);
    for (Operation &op : llvm::make_early_inc_range(body)) {
      // Already computed by its reduction's kernel, which comes first.
      if (computedConsumers.contains(&op)) {
        rewriter.eraseOp(&op);
        continue;
      }
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
      if (auto loop = dyn_cast<scf::ForOp>(op))
        if (linalg::LinalgOp inner = getColumnParallelLoopOp(loop)) {
          mapColumnParallelLoop(rewriter, loop, inner);
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

  /// `op` with its parallel loops first, the others after in their order.
  static FailureOr<linalg::GenericOp>
  putParallelDimsFirst(IRRewriter &rewriter, linalg::GenericOp op) {
    SmallVector<unsigned> order;
    for (auto [i, type] : llvm::enumerate(op.getIteratorTypesArray()))
      if (type == utils::IteratorType::parallel)
        order.push_back(i);
    for (auto [i, type] : llvm::enumerate(op.getIteratorTypesArray()))
      if (type != utils::IteratorType::parallel)
        order.push_back(i);
    if (llvm::equal(order, llvm::seq<unsigned>(0, order.size())))
      return op;
    rewriter.setInsertionPoint(op);
    return linalg::interchangeGenericOp(rewriter, op, order);
  }

  /// For a reduction that mapLinalg gives a kernel of its own (a row
  /// reduction outside any row group, a column reduction such as a norm's
  /// weight gradient and its split's partial sums; not a matrix product,
  /// which stays a library call), whose kernel stores each output element
  /// once (storeFolded): the identity fill of its output just before it
  /// becomes part of that store (one launch fewer), and so does an
  /// elementwise op right after it that reads only that output at the same
  /// point (a bf16 gradient's conversion: another launch, and a pass over
  /// the output, fewer).
  void foldIntoReductionStores(IRRewriter &rewriter, linalg::GenericOp op) {
    if (!op.hasPureBufferSemantics() || op.getNumReductionLoops() != 1 ||
        getGemmForm(op))
      return;
    SmallVector<int64_t> trips = op.getStaticLoopRanges();
    if (ShapedType::isDynamicShape(trips))
      return;
    FailureOr<linalg::GenericOp> ordered = putParallelDimsFirst(rewriter, op);
    if (failed(ordered))
      return;
    op = *ordered;
    std::optional<ReductionForm> form = matchReduction(op);
    if (!form || op.getStaticLoopRanges().back() <= 0)
      return;
    Value output = op.getDpsInits()[0];
    if (llvm::any_of(op.getDpsInputs(),
                     [&](Value input) { return mayAlias(input, output); }))
      return;
    auto [fill, value] = getFillBefore(op, output);
    auto fillValue = dyn_cast_or_null<FloatAttr>(value);
    auto identity = cast<FloatAttr>(form->identity);
    if (fill && fillValue && fillValue.getType() == identity.getType() &&
        fillValue.getValue().bitwiseIsEqual(identity.getValue())) {
      op->setAttr(kOverwritesOutputAttr, rewriter.getUnitAttr());
      rewriter.eraseOp(fill);
    }
    if (linalg::GenericOp consumer = getConvertingConsumer(op))
      convertingConsumers[op] = consumer;
  }

  /// The elementwise op after `reduction` (past views and profiling hooks
  /// that touch neither) that reads only `reduction`'s output, each point
  /// at itself, and writes a buffer that no operand of `reduction` can
  /// overlap, with operands that exist at `reduction`; or null.
  static linalg::GenericOp getConvertingConsumer(linalg::GenericOp reduction) {
    Value output = reduction.getDpsInits()[0];
    auto skippable = [&](Operation *op) {
      return isHookOrView(op) && !mayTouch(op, output);
    };
    Operation *next = reduction->getNextNode();
    while (next && skippable(next))
      next = next->getNextNode();
    auto consumer = dyn_cast_or_null<linalg::GenericOp>(next);
    if (!consumer || !consumer.hasPureBufferSemantics() ||
        consumer.getNumDpsInits() != 1 ||
        consumer.getNumParallelLoops() != consumer.getNumLoops() ||
        consumer.getNumLoops() !=
            cast<MemRefType>(output.getType()).getRank() ||
        !llvm::all_of(consumer.getIndexingMapsArray(),
                      [](AffineMap map) { return map.isIdentity(); }))
      return {};
    bool readsOutput = false;
    for (OpOperand *input : consumer.getDpsInputOperands()) {
      if (input->get() == output)
        readsOutput = true;
      else if (isa<ShapedType>(input->get().getType()))
        return {};
    }
    OpOperand *init = consumer.getDpsInitOperand(0);
    Value written = init->get();
    if (!readsOutput || !consumer.getMatchingBlockArgument(init).use_empty() ||
        llvm::any_of(reduction->getOperands(),
                     [&](Value operand) {
                       return isa<MemRefType>(operand.getType()) &&
                              mayAlias(operand, written);
                     }) ||
        !llvm::all_of(consumer.getRegion().front().without_terminator(),
                      [](Operation &inside) { return isPure(&inside); }))
      return {};
    // Nothing between them may touch what the consumer writes, and every
    // operand of the consumer must exist where the reduction's kernel is.
    for (Operation *between = reduction->getNextNode(); between != consumer;
         between = between->getNextNode())
      if (mayTouch(between, written))
        return {};
    for (Value operand : consumer->getOperands())
      if (Operation *def = operand.getDefiningOp())
        if (def->getBlock() == reduction->getBlock() &&
            !def->isBeforeInBlock(reduction))
          return {};
    return consumer;
  }

  /// One thread per point of the op's parallel iteration space.
  LogicalResult mapLinalg(IRRewriter &rewriter, linalg::LinalgOp op) {
    if (!op.hasPureBufferSemantics())
      return op.emitError() << "dc-map-to-gpu: a linalg op on tensors after "
                               "bufferization";
    // No loops (a 0-d op, such as the loss's scalar): one thread.
    if (op.getNumLoops() == 0)
      return mapSerial(rewriter, op);
    // Named ops (fill, copy, exp, ...) as generics: the dispatch classes
    // below read only a generic's maps and body.
    if (!isa<linalg::GenericOp>(op.getOperation())) {
      rewriter.setInsertionPoint(op);
      FailureOr<linalg::GenericOp> generic =
          linalg::generalizeNamedOp(rewriter, op);
      if (succeeded(generic))
        op = *generic;
    }
    // Parallel dims outermost: a reduction over rows (a norm's weight
    // gradient) is then parallel over its columns.
    if (auto generic = dyn_cast<linalg::GenericOp>(op.getOperation())) {
      FailureOr<linalg::GenericOp> ordered =
          putParallelDimsFirst(rewriter, generic);
      if (failed(ordered))
        return generic.emitError() << "dc-map-to-gpu: cannot put the "
                                      "parallel dims first";
      generic = *ordered;
      op = generic;
      if (std::optional<ReductionForm> form = matchReduction(generic)) {
        SmallVector<int64_t> trips = generic.getStaticLoopRanges();
        if (!ShapedType::isDynamicShape(trips) && trips.back() > 0) {
          if (form->rowContiguous || trips.size() < 2)
            mapRowReduction(rewriter, generic, *form, trips);
          else
            mapColumnReduction(rewriter, generic, *form, trips);
          rewriter.eraseOp(generic);
          return success();
        }
      }
      SmallVector<int64_t> trips = generic.getStaticLoopRanges();
      if (!ShapedType::isDynamicShape(trips))
        if (int64_t width = getVectorWidth(generic, trips)) {
          mapVectorized(rewriter, generic, trips, width);
          rewriter.eraseOp(generic);
          return success();
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

  /// `op` as a member of a row group over `rowTrips`, or nothing.
  std::optional<RowMember> classifyRowMember(IRRewriter &rewriter,
                                             linalg::LinalgOp op,
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
        !ArrayRef<int64_t>(trips)
             .take_front(rowTrips.size())
             .equals(rowTrips) ||
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
  static bool joinsRowGroup(ArrayRef<RowMember> members,
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
  static Operation *nextDeviceOp(Operation *op, ArrayRef<RowMember> members,
                                 bool forward) {
    for (Operation *next = forward ? op->getNextNode() : op->getPrevNode();
         next; next = forward ? next->getNextNode() : next->getPrevNode()) {
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
  static std::optional<ReductionForm> orderReduction(IRRewriter &rewriter,
                                                     linalg::GenericOp &op) {
    if (!op.hasPureBufferSemantics() || op.getNumReductionLoops() != 1 ||
        getGemmForm(op) || ShapedType::isDynamicShape(op.getStaticLoopRanges()))
      return std::nullopt;
    FailureOr<linalg::GenericOp> ordered = putParallelDimsFirst(rewriter, op);
    if (failed(ordered))
      return std::nullopt;
    op = *ordered;
    return matchReduction(op);
  }

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
  std::optional<ColumnPartial> matchColumnPartial(IRRewriter &rewriter,
                                                  ArrayRef<RowMember> members,
                                                  ArrayRef<int64_t> rowTrips,
                                                  int64_t length, int64_t width,
                                                  linalg::FillOp &fill) {
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
      SmallVector<ReassociationIndices> groups =
          expand.getReassociationIndices();
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
                type,
                AffineMap::getMultiDimIdentityMap(type.getRank(), context),
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
    if (identityFill && fillValue &&
        fillValue.getType() == identity.getType() &&
        fillValue.getValue().bitwiseIsEqual(identity.getValue())) {
      partial.overwrites = true;
      fill = identityFill;
    }
    return partial;
  }

  /// Moves the pure ops (views, constants) that define `value` after
  /// `point` in its block before it, their operands first; false if
  /// another kind of op defines it there.
  static bool hoistPureDefsBefore(Value value, Operation *point) {
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
  matchFinishingPass(IRRewriter &rewriter, const ColumnPartial &partial,
                     Operation *last, int64_t blocks, int64_t threads) {
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
  void emitFinishingPass(IRRewriter &rewriter, gpu::LaunchOp launch,
                         const FinishingPass &finishing, int64_t blocks,
                         int64_t threads, Value tid) {
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
    Value counter =
        memref::GetGlobalOp::create(rewriter, loc, counterType, name);
    Value isFirst = arith::CmpIOp::create(
        rewriter, loc, arith::CmpIPredicate::eq, tid, index(0));
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
      Value ticket = memref::AtomicRMWOp::create(
          rewriter, loc, arith::AtomicRMWKind::addi, constant(1), counter,
          ValueRange{index(0)});
      memref::StoreOp::create(rewriter, loc, ticket, ticketSlot, index(0));
    }
    gpu::BarrierOp::create(rewriter, loc);
    Value ticket = memref::LoadOp::create(rewriter, loc, ticketSlot, index(0));
    Value position =
        arith::RemUIOp::create(rewriter, loc, ticket, constant(blocks));
    Value waits =
        arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::uge,
                              position, constant(blocks - finishing.blocks));
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
    emitColumnBlock(rewriter, loc, finishing.op, finishing.form,
                    finishing.trips, finishing.width, finishing.columnsPerBlock,
                    threads, tid, loop.getInductionVar(), memory);
  }

  /// One row of `partial`'s chunk in a row group that keeps values: the
  /// element at (chunk `chunk`, each of the thread's columns, row `iv` of
  /// the chunk, which is the group's row `row`) folded into `sums` (the
  /// thread's chunks x lanes, in that order), reading through `kept` what
  /// the group's members read too. Returns the new sums.
  SmallVector<Value> emitColumnPartialRow(IRRewriter &rewriter, Location loc,
                                          const ColumnPartial &partial,
                                          Value chunk, Value iv, Value row,
                                          bool vectors, KeptRowValues &kept,
                                          ArrayRef<Value> sums) {
    linalg::GenericOp op = partial.op;
    auto read = [&](Value buffer, SmallVector<Value> indices,
                    int64_t vectorWidth) -> Value {
      if (Value value = kept.lookup(buffer, indices))
        return value;
      Value value =
          vectorWidth ? loadVector(rewriter, loc, buffer, indices, vectorWidth)
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
        result.push_back(
            combine(rewriter, partial.form, sums[result.size()],
                    mapping.lookupOrDefault(partial.form.element)));
      }
    }
    return result;
  }

  /// Fuses `reduction` (a row reduction) with its neighbours that work on
  /// the same rows into one kernel of a block per row, each member in
  /// order with a barrier between: the fill of its output before it, then
  /// ops over the rows (a norm's rsqrt), over each row's points (the scale
  /// that reads the row again, now from cache) and further row reductions
  /// (softmax's sum after its max). The row's data is read from device
  /// memory once instead of once per kernel, and one launch replaces
  /// several. Members go into `fused`.
  void fuseRowGroup(IRRewriter &rewriter, linalg::GenericOp reduction,
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
    Value isFirst = arith::CmpIOp::create(
        rewriter, loc, arith::CmpIPredicate::eq, tid, index(0));
    SmallVector<Value> ivs = delinearize(rewriter, loc, row, rowTrips);
    Value aligned = rowsAligned(rewriter, loc, members, rows, width);
    if (aligned && partial)
      for (const ColumnPartial::Read &read : partial->reads)
        if (read.kind == ColumnPartial::Read::RowColumn ||
            read.kind == ColumnPartial::Read::Column)
          aligned = arith::AndIOp::create(
              rewriter, loc, aligned,
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
            return emitOnlineSoftmaxShare(rewriter, loc, member, sum, shift,
                                          ivs, tid, threads, width, withVectors,
                                          kept);
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
          storeTotal(op, *member.form,
                     arith::MulFOp::create(
                         rewriter, loc, totalSum,
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
          Value chunk = c == 0 ? base
                               : arith::AddIOp::create(rewriter, loc, base,
                                                       index(c * step))
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
          copies = planRowCopies(rewriter, loc, launch, members, *partial,
                                 width, inFlight, kept.chunks.size(), threads);
        if (!copies.empty())
          issueRowCopies(rewriter, loc, copies, first, index(0), kept.chunks,
                         tid, /*more=*/nullptr);
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
                        ? memref::LoadOp::create(rewriter, loc, copy.slots,
                                                 slot)
                              .getResult()
                        : vector::LoadOp::create(
                              rewriter, loc,
                              VectorType::get({width}, slots.getElementType()),
                              copy.slots, slot)
                              .getResult();
                rowKept[r].keep(copy.buffer,
                                applyMap(rewriter, loc, copy.map,
                                         {rowOf[r], kept.chunks[c]}),
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
                rowKept[r].keep(read.buffer, {rowOf[r]},
                                memref::LoadOp::create(rewriter, loc,
                                                       read.buffer, rowOf[r]),
                                /*stored=*/false);
          }
          SmallVector<Value> sums(loop.getRegionIterArgs());
          for (int64_t r = 0; r < inFlight; ++r) {
            // The row before is done with the shared memory.
            if (r > 0)
              gpu::BarrierOp::create(rewriter, loc);
            ivs = {rowOf[r]};
            sums =
                emitColumnPartialRow(rewriter, loc, *partial, row, ivOfRow[r],
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
            Value old = partial->overwrites
                            ? identity
                            : memref::LoadOp::create(rewriter, loc, init->get(),
                                                     indices)
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

  /// members[i] as the max of an online softmax (see OnlineSoftmax): a
  /// later row sum of exp(x - max) over the same row length whose x is
  /// computed as the max's element is, and which reads the max's output at
  /// its row (same memory, same layout). Only per-row members lie between
  /// them, and none writes what either reads; no other operand of the sum
  /// reads the max's output.
  static std::optional<OnlineSoftmax>
  matchOnlineSoftmax(ArrayRef<RowMember> members, size_t i, unsigned rows) {
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
        max.op.getMatchingIndexingMap(max.op.getDpsInitOperand(0)) !=
            shiftMap ||
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
  std::pair<Value, Value>
  foldOnlineChunk(IRRewriter &rewriter, Location loc, const RowMember &max,
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
    Value total = arith::MulFOp::create(rewriter, loc, s,
                                        rescale(rewriter, loc, m, grown));
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
  std::pair<Value, Value> emitOnlineSoftmaxShare(
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
        emitRowPoint(rewriter, loc, max, point, lanes, vectors, kept, nullptr,
                     {}, &xs);
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

  /// A row operand of a folded row group that the block copies ahead into
  /// shared memory (cp.async): `slots` holds, per stage (2), row in flight,
  /// chunk and thread, that thread's 16 bytes of the chunk; or, for a
  /// per-row value (`perRow`: the map reads the row only), per stage and
  /// row in flight, each thread's copy of it (its own slot: a thread waits
  /// only for its own copies).
  struct RowCopy {
    Value buffer;
    AffineMap map;
    Value slots;
    bool perRow;
  };

  /// The operands the folded loop would load: those of `members` that move
  /// with the row (and the column: 16 bytes per chunk; or not: a 4-byte
  /// per-row value) and the partial's per-row reads, each with its slots in
  /// `launch`'s workgroup memory. None when the slots would not fit beside
  /// the group's reductions.
  static SmallVector<RowCopy> planRowCopies(IRRewriter &rewriter, Location loc,
                                            gpu::LaunchOp launch,
                                            ArrayRef<RowMember> members,
                                            const ColumnPartial &partial,
                                            int64_t width, int64_t inFlight,
                                            int64_t chunks, int64_t threads) {
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
    if (copies.empty() || bytes > kMaxRowCopyBytes)
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
  static Value issueRowCopies(IRRewriter &rewriter, Location loc,
                              ArrayRef<RowCopy> copies, Value first,
                              Value stage, ArrayRef<Value> chunks, Value tid,
                              Value more) {
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
      bool bypassL1 =
          width * slots.getElementTypeBitWidth() == kVectorBytes * 8;
      for (int64_t r = 0; r < inFlight; ++r) {
        Value row = r == 0
                        ? first
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
  static void prefetchReadOnlyRows(IRRewriter &rewriter, Location loc,
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
  static int64_t getRowGroupThreads(ArrayRef<RowMember> members, int64_t length,
                                    int64_t width) {
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
  static int64_t getKeptChunks(ArrayRef<RowMember> members, int64_t threads,
                               int64_t width, int64_t maxChunks) {
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
  static int64_t getWarpRowChunks(ArrayRef<RowMember> members, int64_t width) {
    for (const RowMember &member : members)
      if (member.form && !member.form->output.getType().isF32())
        return 0;
    return getKeptChunks(members, kWarpSize, width, kMaxWarpRowChunks);
  }

  /// `partial` folded across the warp by `form`'s combiner: a butterfly of
  /// xor shuffles (16, 8, 4, 2, 1). Each pair of lanes combines the same
  /// two values, so every lane ends with the same total, in an order
  /// fixed by the lane numbers alone.
  static Value warpReduce(OpBuilder &builder, Location loc,
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
  static Value blockReduce(IRRewriter &rewriter, Location loc,
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
  Value reduceOverBlock(IRRewriter &rewriter, Location loc,
                        gpu::LaunchOp launch, const ReductionForm &form,
                        Value value, Value tid, int64_t threads) {
    if (singleBarrierReductions && value.getType().isF32() &&
        threads % kWarpSize == 0)
      return blockReduce(rewriter, loc, launch, form, value, tid, threads);
    return gpu::AllReduceOp::create(rewriter, loc, value,
                                    gpu::AllReduceOperationAttr::get(
                                        rewriter.getContext(), form.kind),
                                    /*uniform=*/rewriter.getUnitAttr())
        .getResult();
  }

  /// A per-row member (a norm's rsqrt, a fill) in a group that keeps
  /// values: every thread computes it from kept values (or loads), thread
  /// 0 alone stores it, and every thread keeps the result for the members
  /// after it.
  static void emitKeptPerRow(IRRewriter &rewriter, Location loc,
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
          !kept.lookup(operand.get(),
                       applyMap(rewriter, loc,
                                op.getMatchingIndexingMap(&operand), ivs)))
        for (Value output : op.getDpsInits())
          inPlace = inPlace || mayAlias(operand.get(), output);
    if (inPlace) {
      {
        OpBuilder::InsertionGuard inIf(rewriter);
        auto ifFirst = scf::IfOp::create(rewriter, loc, isFirst,
                                         /*withElseRegion=*/false);
        rewriter.setInsertionPointToStart(ifFirst.thenBlock());
        IRMapping mapping;
        cloneBodyAt(rewriter, loc, op, ivs, nullptr, mapping);
        storeYields(rewriter, loc, op, ivs, mapping);
      }
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
  void storeKeptFolded(IRRewriter &rewriter, Location loc, linalg::GenericOp op,
                       const ReductionForm &form, ArrayRef<Value> ivs,
                       Value isFirst, Value total, KeptRowValues &kept) {
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
  static int64_t getRowGroupVectorWidth(ArrayRef<RowMember> members,
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
        if (!isOutput &&
            body.getArgument(operand.getOperandNumber()).use_empty())
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
  static Value rowsAligned(OpBuilder &builder, Location loc,
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
          aligned = aligned
                        ? arith::AndIOp::create(builder, loc, aligned, check)
                        : check;
        }
    return aligned;
  }

  /// emitRowLoop with 16-byte accesses when `aligned` (i1) holds at run
  /// time, else element accesses (`aligned` null: always the latter).
  Value emitRowLoops(IRRewriter &rewriter, Location loc,
                     const RowMember &member, ArrayRef<Value> ivs, Value tid,
                     int64_t threads, int64_t width, Value aligned) {
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
  Value emitRowPoint(IRRewriter &rewriter, Location loc,
                     const RowMember &member, ArrayRef<Value> point,
                     ArrayRef<Value> lanePoints, bool vectors,
                     KeptRowValues *kept, Value accumulator,
                     ArrayRef<std::pair<unsigned, Value>> bound = {},
                     SmallVectorImpl<Value> *elements = nullptr) {
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
          asVector
              ? loadVector(rewriter, loc, operand.get(), indices, width)
              : memref::LoadOp::create(rewriter, loc, operand.get(), indices)
                    .getResult();
      if (kept)
        kept->keep(operand.get(), indices, value, /*stored=*/false);
      return value;
    };
    SmallVector<Value> vectorOf(op->getNumOperands()),
        once(op->getNumOperands());
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
      yields.push_back(
          llvm::map_to_vector(yield.getOperands(), [&](Value value) {
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
                                /*nontemporal=*/false,
                                llvm::Align(kVectorBytes));
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
  Value emitRowLoop(IRRewriter &rewriter, Location loc, const RowMember &member,
                    ArrayRef<Value> ivs, Value tid, int64_t threads,
                    int64_t width, bool vectors,
                    KeptRowValues *kept = nullptr) {
    linalg::GenericOp op = member.op;
    const ReductionForm *form = member.form ? &*member.form : nullptr;
    width = std::max<int64_t>(width, 1);
    auto index = [&](int64_t value) -> Value {
      return arith::ConstantIndexOp::create(rewriter, loc, value);
    };
    Value identity =
        form ? arith::ConstantOp::create(rewriter, loc, form->identity)
                   .getResult()
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
    Value begin = width == 1
                      ? tid
                      : arith::MulIOp::create(rewriter, loc, tid, index(width))
                            .getResult();
    auto loop = scf::ForOp::create(
        rewriter, loc, begin, index(op.getStaticLoopRanges().back()),
        index(threads * width), identity ? ValueRange{identity} : ValueRange{});
    OpBuilder::InsertionGuard inLoop(rewriter);
    rewriter.setInsertionPointToStart(loop.getBody());
    SmallVector<Value> point(ivs);
    point.push_back(loop.getInductionVar());
    SmallVector<Value> lanes =
        getChunkLanes(rewriter, loc, point.back(), width);
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
  void mapRowReduction(IRRewriter &rewriter, linalg::GenericOp op,
                       const ReductionForm &form, ArrayRef<int64_t> trips) {
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
  static int64_t getColumnVectorWidth(linalg::GenericOp op,
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
  /// or half as many while a short one (kMaxShortColumnRows) has fewer than
  /// kMinColumnBlocks blocks, at least 4 vector lanes, and rows for every
  /// row lane.
  static int64_t getColumnsPerBlock(int64_t outer, int64_t columns,
                                    int64_t length, int64_t width) {
    int64_t perBlock = kColumnsPerBlock;
    if (length > kMaxShortColumnRows)
      return perBlock;
    while (outer * llvm::divideCeil(columns, perBlock) < kMinColumnBlocks &&
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
  void mapColumnReductionVectorized(IRRewriter &rewriter, linalg::GenericOp op,
                                    const ReductionForm &form,
                                    ArrayRef<int64_t> trips, int64_t width) {
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

  /// The shared memory of emitColumnBlock's row lanes' partials.
  struct ColumnBlockMemory {
    /// [row lane][column of the block], then [group][column of the block].
    Value partials, groupPartials;
  };

  static ColumnBlockMemory
  addColumnBlockMemory(IRRewriter &rewriter, Location loc, gpu::LaunchOp launch,
                       const ReductionForm &form, int64_t threads,
                       int64_t width) {
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
  void emitColumnBlock(IRRewriter &rewriter, Location loc, linalg::GenericOp op,
                       const ReductionForm &form, ArrayRef<int64_t> trips,
                       int64_t width, int64_t columnsPerBlock, int64_t threads,
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
    int64_t unroll =
        columnsPerBlock == kColumnsPerBlock
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
    Value valid = arith::CmpIOp::create(
        rewriter, loc, arith::CmpIPredicate::ult, column, index(columns));
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
          sums[j] = r.valid ? arith::SelectOp::create(rewriter, loc, r.valid,
                                                      sum, sums[j])
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
        for (auto [branch, vectors] :
             {std::pair{ifAligned.thenBlock(), true},
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
        arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::ult,
                              outColumn, index(columns)));
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

  void mapColumnReduction(IRRewriter &rewriter, linalg::GenericOp op,
                          const ReductionForm &form, ArrayRef<int64_t> trips) {
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
    Value valid = arith::CmpIOp::create(
        rewriter, loc, arith::CmpIPredicate::ult, column, index(columns));
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
      Value slot = arith::AddIOp::create(rewriter, loc, lane,
                                         index(l * kColumnsPerBlock));
      total = combine(rewriter, form, total,
                      memref::LoadOp::create(rewriter, loc, partials, slot));
    }
    storeFolded(rewriter, loc, op, form, ivs, /*when=*/nullptr, total);
  }

  /// out[ivs] = combiner(out[ivs], total), if `when` (or always); the
  /// identity instead of out[ivs] where the fill that cleared it was folded
  /// in, and a converting consumer's value stored beside it (see
  /// foldIntoReductionStores).
  void storeFolded(IRRewriter &rewriter, Location loc, linalg::GenericOp op,
                   const ReductionForm &form, ArrayRef<Value> ivs, Value when,
                   Value total) {
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
            ? arith::ConstantOp::create(rewriter, loc, form.identity)
                  .getResult()
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
  void mapVectorized(IRRewriter &rewriter, linalg::GenericOp op,
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
    while (perThread * 2 * std::max<int64_t>(vectorLoads, 1) <=
               kLoadsInFlight &&
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
        arith::MulIOp::create(rewriter, loc, launch.getBlockIds().x,
                              index(span)),
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
      Value group = k == 0 ? base
                           : arith::AddIOp::create(rewriter, loc, base,
                                                   index(k * threads))
                                 .getResult();
      Value inRange;
      if (groups % span != 0) {
        inRange = arith::CmpIOp::create(
            rewriter, loc, arith::CmpIPredicate::ult, group, index(groups));
        group = arith::MinUIOp::create(rewriter, loc, group, index(groups - 1));
      }
      valid.push_back(inRange);
      SmallVector<Value> ivs = delinearize(rewriter, loc, group, groupTrips);
      ivs.back() =
          arith::MulIOp::create(rewriter, loc, ivs.back(), index(width));
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
      aligned = aligned ? arith::AndIOp::create(rewriter, loc, aligned, check)
                        : check;
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
          load = movesAlong(operand)
                     ? loadVector(rewriter, loc, operand.get(), indices, width)
                     : memref::LoadOp::create(rewriter, loc, operand.get(),
                                              indices)
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
        for (auto [vector, output] :
             llvm::zip(vectors, op.getDpsInitsMutable()))
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
          for (auto [value, output] :
               llvm::zip(results, op.getDpsInitsMutable()))
            memref::StoreOp::create(rewriter, loc, value, output.get(),
                                    applyMap(rewriter, loc,
                                             op.getMatchingIndexingMap(&output),
                                             at));
        }
      });
  }

  /// A thread per point of `inner` (see getColumnParallelLoopOp), each
  /// running the whole loop with `inner` reduced to that point; or, when
  /// each iteration writes one row named by the loop (see getBinnedRow), a
  /// block per bin of rows (mapBinnedColumnParallelLoop).
  void mapColumnParallelLoop(IRRewriter &rewriter, scf::ForOp loop,
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
          applyMap(rewriter, loc, generic.getMatchingIndexingMap(&output),
                   ivs));
    rewriter.eraseOp(generic);
  }

  /// The row a column-parallel loop's op writes in each iteration: the one
  /// loop-dependent offset of its one output, in a dim of `rows` (static).
  /// `slice`: the loop's ops that compute it, in order (the index loads).
  struct BinnedRow {
    Value row;
    int64_t rows;
    SmallVector<Operation *> slice;
    int64_t lower, step, iterations;
  };

  /// The loop's BinnedRow if its bounds are static, its op has one output
  /// whose subview has one dynamic offset, and nothing the loop reads may
  /// be what the op writes (another bin's rows, or an index the loop
  /// changes as it runs); else none.
  static std::optional<BinnedRow> getBinnedRow(scf::ForOp loop,
                                               linalg::GenericOp inner) {
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
  /// each block runs its own iterations only, not all of them. (The 64
  /// groups that each ran every iteration took 0.85 ms of config A's step
  /// for its 8192 tokens.)
  void mapBinnedColumnParallelLoop(IRRewriter &rewriter, scf::ForOp loop,
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
    // 64-bit remainder (measured no faster on A; cheaper all the same).
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
      Value valid =
          arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::ult, n,
                                index(binned.iterations));
      // Past the loop's end: the last iteration's row, not kept.
      Value clamped = arith::MinUIOp::create(rewriter, loc, n,
                                             index(binned.iterations - 1));
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
      Value count = arith::SelectOp::create(
          rewriter, loc, isPair,
          memref::LoadOp::create(rewriter, loc, counts,
                                 ValueRange{arith::MinUIOp::create(
                                     rewriter, loc, lane, index(pairs - 1))}),
          constI32(0));
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
    Value kept = toIndex(memref::LoadOp::create(rewriter, loc, counts,
                                                ValueRange{index(pairs)}));
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
      Value at =
          arith::AddIOp::create(rewriter, loc, starts[k], toIndex(below));
      memref::StoreOp::create(rewriter, loc, toI32(iterations[k]),
                              keptIterations, ValueRange{at});
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
                  inductionAt(toIndex(memref::LoadOp::create(
                      rewriter, loc, keptIterations, j))));
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
  static void emitBinnedPoints(IRRewriter &rewriter, Location loc,
                               linalg::GenericOp op, Value tid, int64_t threads,
                               int64_t points, ArrayRef<int64_t> pointTrips,
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
    int64_t total = computeProduct(trips);
    Location loc = loop.getLoc();
    if (total == 0) {
      rewriter.eraseOp(loop);
      return success();
    }
    rewriter.setInsertionPoint(loop);
    OpBuilder::InsertionGuard guard(rewriter);
    Value id = createThreadPerPointLaunch(rewriter, loc, total);
    // Innermost dim fastest: neighbouring threads, neighbouring elements.
    IRMapping mapping;
    for (auto [d, index] :
         llvm::enumerate(delinearize(rewriter, loc, id, trips))) {
      Value iv = index;
      if (step[d] != 1)
        iv = arith::MulIOp::create(
            rewriter, loc, iv,
            arith::ConstantIndexOp::create(rewriter, loc, step[d]));
      if (lower[d] != 0)
        iv = arith::AddIOp::create(
            rewriter, loc, iv,
            arith::ConstantIndexOp::create(rewriter, loc, lower[d]));
      mapping.map(loop.getInductionVars()[d], iv);
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
