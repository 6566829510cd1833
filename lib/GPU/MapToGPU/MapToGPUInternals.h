//===- MapToGPUInternals.h - the rooms of dc-map-to-gpu ------- -*- C++ -*-===//
//
// dc-map-to-gpu makes a bufferized step's compute GPU kernels. Its parts
// live in files by concern, all declared here: the dispatch classes
// (Classify.cpp), row groups (RowGroups.cpp, RowKernels.cpp,
// OnlineSoftmax.cpp), block and warp reductions (BlockReductions.cpp),
// column reductions (ColumnReductions.cpp, FinishingPasses.cpp),
// elementwise kernels (Elementwise.cpp), scatters (Scatter.cpp), and the
// builders and buffer queries they share (KernelIR.cpp, BufferAccess.cpp).
// MapToGPU.cpp is the pass.
//
//===----------------------------------------------------------------------===//
#ifndef DC_LIB_CONVERSION_MAPTOGPU_MAPTOGPUINTERNALS_H
#define DC_LIB_CONVERSION_MAPTOGPU_MAPTOGPUINTERNALS_H

#include "../ColumnReductionShape.h"
#include "dc/Dialect/DC/IR/DCDialect.h"
#include "dc/GPU/Passes.h"
#include "dc/Lowering/GemmForm.h"

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

namespace dc::map_to_gpu {

using namespace mlir;

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

/// What `value` can reach: the buffer it views (through view-like ops) and,
/// when it goes through one `memref.view` of static shape and constant
/// shift (the step arena's buffers), that byte range of it.
struct Extent {
  Value root;
  int64_t begin = 0, end = std::numeric_limits<int64_t>::max();
};

// BufferAccess.cpp

Extent getExtent(Value value);

/// True unless `a` and `b` provably reach disjoint memory: different
/// buffers, or disjoint ranges of one (dc-assign-step-arena gives buffers
/// that are live at the same time disjoint ranges of the arena).
bool mayAlias(Value a, Value b);

/// True when `a` and `b` are provably the same memory laid out the same
/// way: row r of one is row r of the other. Two buffers of the step arena
/// that overlap at different offsets (a dead buffer's bytes reused for
/// another) are not: row r of one lands on another row of the other.
bool sameLayout(Value a, Value b);

/// True when `op` may read or write `buffer` or memory it overlaps.
bool mayTouch(Operation *op, Value buffer);

/// True when `op` or any op nested in it (a linalg body reading a buffer
/// it captures) may read or write `buffer` or memory it overlaps.
bool mayTouchNested(Operation *op, Value buffer);

/// True for what a step's host code holds between two kernels without
/// touching memory itself: --profile-ops' hooks, views, constants (each may
/// still name a buffer: callers check what it touches).
bool isHookOrView(Operation *op);

/// Marks a reduction whose output an identity fill cleared just before
/// (the fill is gone): its kernel folds the total into the identity, not
/// into a value loaded from the output.
constexpr llvm::StringLiteral kOverwritesOutputAttr = "dc.overwrites_output";

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

/// Rows at most of a short column reduction (one that may take narrower
/// blocks): longer ones are dc-split-column-reductions' to split.
constexpr int64_t kMaxShortColumnRows = 1024;

/// Rows each row lane of a short column reduction loads before it adds
/// them, at most.
constexpr int64_t kShortColumnUnroll = 8;

/// Bytes of one 16-byte vector access, the widest a thread loads at once.
constexpr int64_t kVectorBytes = 16;

/// 16-byte loads an elementwise kernel's thread issues before its math (it
/// takes that many groups of one vector operand, fewer of several): one
/// load per thread leaves one-input kernels (cross-entropy's backward)
/// short of the copy bandwidth. More groups per thread make fewer, longer
/// blocks: 4 is slower than 2 for SwiGLU's forward (two inputs, two groups a
/// thread; with 2, one group: as many blocks as the work has 256 x 16-byte
/// groups), and 8 slower again (docs/lowering.md, "Why the GPU kernels'
/// constants").
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
/// one row at a time leaves the folded kernel latency bound, each row's
/// loads waiting behind the row before's reductions and barriers
/// (docs/lowering.md, "Why the GPU kernels' constants").
constexpr int64_t kFoldedRowsInFlight = 2;

/// Bytes of a block's static shared memory (the target's
/// sharedMemoryPerBlock) that a folded row group's copies ahead (2 stages)
/// leave to its reductions: A's norm backward takes 34 KiB of 48 (x and dy,
/// 2 stages of 2 rows of 2 chunks of 128 threads: 32 KiB; rstd 2 KiB).
constexpr int64_t kReductionSharedBytes = 8 * 1024;

/// Threads of a warp (CUDA's, on every GPU it runs); a row group whose rows a
/// warp covers in at most kMaxWarpRowChunks chunks per lane (1024 bf16s) runs a
/// warp per row, kBlockSize / kWarpSize rows per block. Not A's 2048-wide bf16
/// norms (8 chunks): every lane keeps its chunks as f32, 80 registers for the
/// forward and 160 for the backward (ptxas), so one block per SM: no faster
/// forward and slower backward than a block per row (docs/lowering.md, "Why
/// the GPU kernels' constants").
constexpr int32_t kWarpSize = 32;

constexpr int64_t kMaxWarpRowChunks = 4;

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
/// column blocks (emitColumnBlock). As a kernel of its own the pass costs a
/// launch and its ramp for little data read; finishing in the row group's
/// kernel saves part of that (the waiting and the partials' read from L2
/// cost the rest; docs/lowering.md, "Why the GPU kernels' constants").
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

/// A memory access in a row group's kernel: what it reads or writes, where,
/// and whether only thread 0 runs it (under `if (tid == 0)`).
struct RowGroupAccess {
  Value buffer;
  SmallVector<Value> indices;
  bool write;
  bool firstOnly;
};

// Classify.cpp

bool hasUnitInnerStride(Type type);

std::optional<ReductionForm> matchReduction(linalg::GenericOp op);

/// True for an op the host runs: it computes no tensor data and touches no
/// device memory (constants, index arithmetic, views, runtime calls).
bool isHostOp(Operation *op);

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
std::pair<linalg::FillOp, Attribute> getFillBefore(Operation *op, Value output);

/// A zero fill of exactly `gemm`'s output before it (getFillBefore): the
/// product can overwrite instead of accumulate.
linalg::FillOp getZeroFillBefore(Operation *gemm);

/// The one linalg op of a sequential loop that a kernel can run with a
/// thread per point of the op and the loop inside each thread: an
/// embedding gradient's `for t: out[idx[t], :] += g[t, :]`. The loop holds
/// only index arithmetic, loads (the indices), subviews and that op; the op
/// is all-parallel, and every output is a subview whose offsets move with
/// the loop only in dims of size 1. Then each thread owns the same
/// coordinates of every output in every iteration: no two threads write one
/// address, and repeated indices add up in loop order, as on the host.
linalg::LinalgOp getColumnParallelLoopOp(scf::ForOp loop);

// RowGroups.cpp

/// True if a member of a row group may write `buffer` or memory it
/// overlaps: what it reads cannot be loaded ahead of the members.
bool isWrittenByMember(ArrayRef<RowMember> members, Value buffer);

/// True if `map` reads or writes row `ivs[0..rows)` at the same row:
/// its first `rows` results are the first `rows` loops, in order.
bool isRowLocal(AffineMap map, unsigned rows);

/// Stores what `op`'s body yields (its clone in `mapping`) into its outputs
/// at loop point `ivs`.
void storeYields(OpBuilder &builder, Location loc, linalg::GenericOp op,
                 ArrayRef<Value> ivs, IRMapping &mapping);

/// The accesses of the ops in [`begin`, `end`) and nested in them; false
/// when one of them touches memory in a way not followed here.
bool collectRowGroupAccesses(Block::iterator begin, Block::iterator end,
                             Value isFirst,
                             SmallVectorImpl<RowGroupAccess> &accesses);

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
                                const DenseSet<Value> &owned, Value isFirst);

// Elementwise.cpp

/// Bytes of one element of `type` when `map` (a function of loop `dim`)
/// reads it contiguously along `dim`: `dim` is its last index, the stride
/// there is 1 and every other stride a multiple of 16 bytes, so each
/// 16-byte step stays aligned. 0: not so.
int64_t getContiguousElementBytes(MemRefType type, AffineMap map, unsigned dim);

/// True if no index of `map` but its last uses loop `last`, and its last
/// is `last` itself or does not use it.
bool isInnerDimOnlyLast(AffineMap map, unsigned last);

/// Elements per thread of an elementwise op's vectorized kernel: 16 bytes
/// of its narrowest operand (8 for bf16, 4 for f32), when every operand
/// that the innermost loop indexes reads it contiguously (its last index,
/// unit stride, other strides keeping 16-byte rows) and the innermost trip
/// divides evenly. An input's other indices may be any affine function of
/// the outer loops (a rotary embedding reads its partner half at `1 - j`);
/// outputs are projected permutations. 0: not vectorizable.
int64_t getVectorWidth(linalg::GenericOp op, ArrayRef<int64_t> trips);

/// A loop of two (not the innermost) that an input reads at `1 - d`: a
/// rotary embedding's partner half. A vectorized thread then takes both of
/// its points, so that the element and its partner, and the tables both
/// points read, are loaded once (mapVectorized).
std::optional<unsigned> getPairedDim(linalg::GenericOp op,
                                     ArrayRef<int64_t> trips);

/// `map` at `dim` = `value`: the same loops, that one no longer read.
AffineMap fixDim(AffineMap map, unsigned dim, int64_t value);

/// True (i1) if `buffer`'s first element is 16-byte aligned.
Value isVectorAligned(OpBuilder &builder, Location loc, Value buffer);

// KernelIR.cpp

/// The indices `map` gives at the loop point `ivs` (one per loop): a loop
/// dim is its value; any other affine result (a rotary embedding's partner
/// half, `1 - d3`) is computed in index arithmetic.
SmallVector<Value> applyMap(OpBuilder &builder, Location loc, AffineMap map,
                            ArrayRef<Value> ivs);

/// `operand`'s element at loop point `ivs` (a scalar operand is itself).
Value loadAt(OpBuilder &builder, Location loc, linalg::LinalgOp op,
             OpOperand &operand, ArrayRef<Value> ivs);

/// Clones `op`'s body into `builder` with its block arguments bound to
/// `args` (null: unbound) and linalg.index to `ivs`; leaves out the yield
/// and `skip`. `mapping` maps the body's values to their clones.
void cloneBody(OpBuilder &builder, linalg::GenericOp op, ArrayRef<Value> args,
               ArrayRef<Value> ivs, Operation *skip, IRMapping &mapping);

/// cloneBody at the loop point `ivs`, reading each used operand through its
/// indexing map (but not the output that `skip`, a reduction's combiner,
/// folds into: it is only the combiner's accumulator).
void cloneBodyAt(OpBuilder &builder, Location loc, linalg::GenericOp op,
                 ArrayRef<Value> ivs, Operation *skip, IRMapping &mapping);

/// `form`'s combiner applied to `accumulator` and `value`.
Value combine(OpBuilder &builder, const ReductionForm &form, Value accumulator,
              Value value);

/// True when `x` (of `a`'s body) and `y` (of `b`'s body, `a` and `b` over
/// the same loops) are the same value at every loop point: the same pure
/// ops with the same attributes over such values, block arguments reading
/// one buffer through one indexing map, or one value from outside.
bool computeSameValue(linalg::GenericOp a, Value x, linalg::GenericOp b,
                      Value y, unsigned depth = 0);

/// The `width` (at least 1) neighbouring points of a thread's chunk that
/// starts at `chunk`: chunk, chunk + 1, ..., each lane's index along the row.
SmallVector<Value> getChunkLanes(OpBuilder &builder, Location loc, Value chunk,
                                 int64_t width);

/// exp(from - to), and exactly 1 when they are equal (also both -inf,
/// where the difference is NaN): the factor that moves a sum of
/// exponentials taken against the max `from` to the max `to`.
Value rescale(OpBuilder &builder, Location loc, Value from, Value to);

/// The coordinates of `linear` (less than the product of `trips`) over
/// `trips`, innermost fastest.
SmallVector<Value> delinearize(OpBuilder &builder, Location loc, Value linear,
                               ArrayRef<int64_t> trips);

/// `gpu.launch` of `blocks` blocks of `threads` threads; returns the builder
/// inside its body (before the terminator) and the launch.
gpu::LaunchOp createLaunch(OpBuilder &builder, Location loc, int64_t blocks,
                           int64_t threads);

/// A thread per point of `points` (> 0), in blocks of up to kBlockSize:
/// leaves `builder` inside the launch's guard against the last block's
/// spare threads and returns the thread's point (its linear id).
Value createThreadPerPointLaunch(OpBuilder &builder, Location loc,
                                 int64_t points);

/// The `width` elements of `buffer` from `indices` on, as one aligned
/// 16-byte load.
Value loadVector(OpBuilder &builder, Location loc, Value buffer,
                 ValueRange indices, int64_t width);

/// cloneBody with `args`; returns the yielded values.
SmallVector<Value> cloneBodyWith(OpBuilder &builder, linalg::GenericOp op,
                                 ArrayRef<Value> args, ArrayRef<Value> ivs);

/// The GPU the kernels are sized for: the numbers of the module's target
/// description (TargetDescription) that dc-map-to-gpu reads.
struct GPUShape {
  /// Blocks that fill the GPU, one per multiprocessor.
  int64_t multiprocessors;
  /// Static shared memory a block may use (bytes).
  int64_t sharedMemoryPerBlock;
};

/// One run of the pass over a module: the state its rooms share.
class KernelMapper {
public:
  KernelMapper(const GPUShape &gpuShape, bool finishingPasses,
               int64_t finishingBlocks, bool singleBarrierReductions,
               int64_t foldedBlocksPerSM)
      : gpuShape(gpuShape), finishingPasses(finishingPasses),
        finishingBlocks(finishingBlocks),
        singleBarrierReductions(singleBarrierReductions),
        foldedBlocksPerSM(foldedBlocksPerSM) {}

  /// Makes the compute of one function kernels; the host keeps only what
  /// enqueues work.
  LogicalResult mapFunction(func::FuncOp fn);

private:
  /// The target's GPU (the module's #dc.target).
  const GPUShape gpuShape;
  // The pass's options (Passes.td).
  const bool finishingPasses;
  /// The most blocks of a kernel that wait for the rest before a finishing
  /// pass: the pass option finishing-blocks, 64 by default. A block waits only
  /// once at most this many of the kernel's blocks are unfinished, itself
  /// included, and 64 always fit on an H100 or H200 at once (half its SMs at
  /// one block each, leaving room for NCCL's kernels beside): no block waits
  /// for one that cannot start. A MIG slice of 16 SMs may hold fewer: the
  /// kernel's launches carry the count (dc.coresident_blocks) and the runtime
  /// refuses to launch it there.
  const int64_t finishingBlocks;
  const bool singleBarrierReductions;
  const int64_t foldedBlocksPerSM;

  /// Elementwise ops that their reduction's kernel may compute as it
  /// stores (foldIntoReductionStores), by reduction; those it did.
  DenseMap<Operation *, linalg::GenericOp> convertingConsumers;
  DenseSet<Operation *> computedConsumers;
  /// Finishing passes' ticket counters made so far (their names).
  unsigned finishingCounters = 0;

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

  /// The shared memory of emitColumnBlock's row lanes' partials.
  struct ColumnBlockMemory {
    /// [row lane][column of the block], then [group][column of the block].
    Value partials, groupPartials;
  };

  /// The row a column-parallel loop's op writes in each iteration: the one
  /// loop-dependent offset of its one output, in a dim of `rows` (static).
  /// `slice`: the loop's ops that compute it, in order (the index loads).
  struct BinnedRow {
    Value row;
    int64_t rows;
    SmallVector<Operation *> slice;
    int64_t lower, step, iterations;
  };

  /// What fuseRowGroup decides before it emits a row group's kernel.
  struct RowGroupPlan {
    /// The row loops' trips (the reduction's loops but its last), and
    /// their number.
    SmallVector<int64_t> rowTrips;
    unsigned rows = 0;
    /// The members in order, the last of them, and whether any op after
    /// the reduction joined it.
    SmallVector<RowMember> members;
    Operation *last = nullptr;
    bool hasNeighbours = false;
    /// The longest row of the members that go along it, the elements of a
    /// vector access (0: element by element), and the rows.
    int64_t length = 0, width = 0, rowCount = 0;
    /// A warp per row, else a block per row; threads per row; the chunks
    /// of every row each thread keeps in registers (0: the threads loop
    /// along the row).
    bool perWarp = false;
    int64_t threads = 0, chunks = 0;
    /// Rows per block (more than 1 only with a warp per row) and blocks.
    int64_t rowsPerBlock = 1, blocks = 0;
    /// A column reduction's partial sums the kernel computes, and the fill
    /// of their output, folded in.
    std::optional<ColumnPartial> partial;
    linalg::FillOp partialFill;
    /// Online softmax pairs, by their max's and by their sum's member.
    DenseMap<size_t, OnlineSoftmax> onlineByMax, onlineBySum;
    /// The second pass over the partial sums at the kernel's end.
    std::optional<FinishingPass> finishing;
  };

  /// A row group's launch and what every member's code in it uses: the
  /// thread's row, its thread within the row (`tid`) and whether it is the
  /// first, the row's point of the row loops (`ivs`), and whether the
  /// rows are aligned for vectors (i1; null: no vectors).
  struct RowGroupKernel {
    gpu::LaunchOp launch;
    Location loc;
    Value tid, row, isFirst, aligned;
    SmallVector<Value> ivs;
  };

  /// One of the rows of an iteration of a folded row group's loop over
  /// its chunk of rows: its offset in the chunk (`iv`), the row, and what
  /// the thread keeps of it.
  struct FoldedRow {
    Value iv, row;
    KeptRowValues kept;
  };

  // Classify.cpp
  static FailureOr<linalg::GenericOp>
  putParallelDimsFirst(IRRewriter &rewriter, linalg::GenericOp op);
  void foldIntoReductionStores(IRRewriter &rewriter, linalg::GenericOp op);
  static linalg::GenericOp getConvertingConsumer(linalg::GenericOp reduction);
  LogicalResult mapLinalg(IRRewriter &rewriter, linalg::LinalgOp op);
  LogicalResult mapParallel(IRRewriter &rewriter, scf::ParallelOp loop);
  LogicalResult mapSerial(IRRewriter &rewriter, Operation *op);

  // RowGroups.cpp
  std::optional<RowMember> classifyRowMember(IRRewriter &rewriter,
                                             linalg::LinalgOp op,
                                             ArrayRef<int64_t> rowTrips);
  static bool joinsRowGroup(ArrayRef<RowMember> members,
                            const RowMember &candidate, unsigned rows);
  static Operation *nextDeviceOp(Operation *op, ArrayRef<RowMember> members,
                                 bool forward);
  static std::optional<ReductionForm> orderReduction(IRRewriter &rewriter,
                                                     linalg::GenericOp &op);
  static bool hoistPureDefsBefore(Value value, Operation *point);
  void fuseRowGroup(IRRewriter &rewriter, linalg::GenericOp reduction,
                    DenseSet<Operation *> &fused);
  bool collectRowMembers(IRRewriter &rewriter, linalg::GenericOp reduction,
                         RowGroupPlan &plan);
  static void sizeRowGroup(RowGroupPlan &plan);
  static void pairOnlineSoftmaxes(RowGroupPlan &plan);
  static void countRowGroupBlocks(RowGroupPlan &plan);
  static RowGroupKernel beginRowGroupKernel(IRRewriter &rewriter, Location loc,
                                            const RowGroupPlan &plan,
                                            gpu::LaunchOp launch);
  static Value rowGroupAligned(IRRewriter &rewriter, Location loc,
                               const RowGroupPlan &plan);
  void emitRowMembers(IRRewriter &rewriter, const RowGroupPlan &plan,
                      const RowGroupKernel &kernel, ArrayRef<Value> ivs,
                      bool vectors, KeptRowValues *kept);
  static void emitPerRowMember(IRRewriter &rewriter, Location loc,
                               linalg::GenericOp op, ArrayRef<Value> ivs,
                               Value isFirst, KeptRowValues *kept);
  std::pair<Value, Value>
  emitOnlineSoftmaxPartial(IRRewriter &rewriter, const RowGroupPlan &plan,
                           const RowGroupKernel &kernel, const RowMember &max,
                           const OnlineSoftmax &online, ArrayRef<Value> ivs,
                           bool vectors, KeptRowValues *kept);
  std::pair<Value, Value>
  reduceOnlineSoftmax(IRRewriter &rewriter, const RowGroupPlan &plan,
                      const RowGroupKernel &kernel, const RowMember &max,
                      const OnlineSoftmax &online, ArrayRef<Value> ivs,
                      bool vectors, KeptRowValues *kept);
  void storeOnlineSoftmaxSum(IRRewriter &rewriter, const RowGroupKernel &kernel,
                             const RowMember &sum, unsigned shift,
                             std::pair<Value, Value> totals,
                             ArrayRef<Value> ivs, KeptRowValues *kept);
  Value reduceRowAcross(IRRewriter &rewriter, const RowGroupPlan &plan,
                        const RowGroupKernel &kernel, const ReductionForm &form,
                        Value value);
  void storeRowTotal(IRRewriter &rewriter, const RowGroupKernel &kernel,
                     linalg::GenericOp op, const ReductionForm &form,
                     ArrayRef<Value> ivs, Value total, KeptRowValues *kept);
  void emitKeptRowGroup(IRRewriter &rewriter, const RowGroupPlan &plan,
                        const RowGroupKernel &kernel);
  void emitKeptRowShare(IRRewriter &rewriter, const RowGroupPlan &plan,
                        const RowGroupKernel &kernel, bool vectors);
  void emitFoldedRows(IRRewriter &rewriter, const RowGroupPlan &plan,
                      const RowGroupKernel &kernel, bool vectors,
                      const KeptRowValues &kept);
  void emitFoldedIteration(IRRewriter &rewriter, const RowGroupPlan &plan,
                           const RowGroupKernel &kernel, scf::ForOp loop,
                           Value first, ArrayRef<RowCopy> copies,
                           int64_t inFlight, bool vectors,
                           const KeptRowValues &kept);
  static Value issueNextRowCopies(IRRewriter &rewriter, Location loc,
                                  ArrayRef<RowCopy> copies,
                                  int64_t rowsPerChunk, Value first, Value iv,
                                  int64_t inFlight, ArrayRef<Value> chunks,
                                  Value tid);
  static SmallVector<FoldedRow>
  loadFoldedRows(IRRewriter &rewriter, const RowGroupPlan &plan,
                 const RowGroupKernel &kernel, ArrayRef<RowCopy> copies,
                 Value first, Value iv, Value stage, int64_t inFlight,
                 bool vectors, const KeptRowValues &kept);
  static void keepCopiedRow(IRRewriter &rewriter, Location loc,
                            ArrayRef<RowCopy> copies, Value stage, int64_t r,
                            Value tid, int64_t width, Value row,
                            KeptRowValues &kept);
  static void eraseFusedOps(IRRewriter &rewriter, RowGroupPlan &plan,
                            DenseSet<Operation *> &fused);

  // RowKernels.cpp
  SmallVector<RowCopy> planRowCopies(IRRewriter &rewriter, Location loc,
                                     gpu::LaunchOp launch,
                                     ArrayRef<RowMember> members,
                                     const ColumnPartial &partial,
                                     int64_t width, int64_t inFlight,
                                     int64_t chunks, int64_t threads) const;
  static Value issueRowCopies(IRRewriter &rewriter, Location loc,
                              ArrayRef<RowCopy> copies, Value first,
                              Value stage, ArrayRef<Value> chunks, Value tid,
                              Value more);
  static void prefetchReadOnlyRows(IRRewriter &rewriter, Location loc,
                                   ArrayRef<RowMember> members,
                                   ArrayRef<Value> ivs, int64_t width,
                                   KeptRowValues &kept);
  static int64_t getRowGroupThreads(ArrayRef<RowMember> members, int64_t length,
                                    int64_t width);
  static int64_t getKeptChunks(ArrayRef<RowMember> members, int64_t threads,
                               int64_t width, int64_t maxChunks);
  static int64_t getWarpRowChunks(ArrayRef<RowMember> members, int64_t width);
  static void emitOnFirstThread(IRRewriter &rewriter, Location loc,
                                linalg::GenericOp op, ArrayRef<Value> ivs,
                                Value isFirst);
  static void emitKeptPerRow(IRRewriter &rewriter, Location loc,
                             linalg::GenericOp op, ArrayRef<Value> ivs,
                             Value isFirst, KeptRowValues &kept);
  void storeKeptFolded(IRRewriter &rewriter, Location loc, linalg::GenericOp op,
                       const ReductionForm &form, ArrayRef<Value> ivs,
                       Value isFirst, Value total, KeptRowValues &kept);
  static int64_t getRowGroupVectorWidth(ArrayRef<RowMember> members,
                                        unsigned rows);
  static Value rowsAligned(OpBuilder &builder, Location loc,
                           ArrayRef<RowMember> members, unsigned rows,
                           int64_t width);
  Value emitRowLoops(IRRewriter &rewriter, Location loc,
                     const RowMember &member, ArrayRef<Value> ivs, Value tid,
                     int64_t threads, int64_t width, Value aligned);
  Value emitRowPoint(IRRewriter &rewriter, Location loc,
                     const RowMember &member, ArrayRef<Value> point,
                     ArrayRef<Value> lanePoints, bool vectors,
                     KeptRowValues *kept, Value accumulator,
                     ArrayRef<std::pair<unsigned, Value>> bound = {},
                     SmallVectorImpl<Value> *elements = nullptr);
  Value emitRowLoop(IRRewriter &rewriter, Location loc, const RowMember &member,
                    ArrayRef<Value> ivs, Value tid, int64_t threads,
                    int64_t width, bool vectors, KeptRowValues *kept = nullptr);
  void mapRowReduction(IRRewriter &rewriter, linalg::GenericOp op,
                       const ReductionForm &form, ArrayRef<int64_t> trips);

  // OnlineSoftmax.cpp
  static std::optional<OnlineSoftmax>
  matchOnlineSoftmax(ArrayRef<RowMember> members, size_t i, unsigned rows);
  std::pair<Value, Value>
  foldOnlineChunk(IRRewriter &rewriter, Location loc, const RowMember &max,
                  const RowMember &sum, unsigned shift, ArrayRef<Value> point,
                  ArrayRef<Value> lanes, bool vectors, KeptRowValues *cache,
                  ArrayRef<Value> xs, Value m, Value s);
  std::pair<Value, Value> emitOnlineSoftmaxShare(
      IRRewriter &rewriter, Location loc, const RowMember &max,
      const RowMember &sum, unsigned shift, ArrayRef<Value> ivs, Value tid,
      int64_t threads, int64_t width, bool vectors, KeptRowValues *kept);

  // BlockReductions.cpp
  static Value warpReduce(OpBuilder &builder, Location loc,
                          const ReductionForm &form, Value partial);
  static Value blockReduce(IRRewriter &rewriter, Location loc,
                           gpu::LaunchOp launch, const ReductionForm &form,
                           Value value, Value tid, int64_t threads);
  Value reduceOverBlock(IRRewriter &rewriter, Location loc,
                        gpu::LaunchOp launch, const ReductionForm &form,
                        Value value, Value tid, int64_t threads);

  // ColumnReductions.cpp
  std::optional<ColumnPartial> matchColumnPartial(IRRewriter &rewriter,
                                                  ArrayRef<RowMember> members,
                                                  ArrayRef<int64_t> rowTrips,
                                                  int64_t length, int64_t width,
                                                  linalg::FillOp &fill);
  SmallVector<Value> emitColumnPartialRow(IRRewriter &rewriter, Location loc,
                                          const ColumnPartial &partial,
                                          Value chunk, Value iv, Value row,
                                          bool vectors, KeptRowValues &kept,
                                          ArrayRef<Value> sums);
  static int64_t getColumnVectorWidth(linalg::GenericOp op,
                                      const ReductionForm &form,
                                      ArrayRef<int64_t> trips);
  int64_t getColumnsPerBlock(int64_t outer, int64_t columns, int64_t length,
                             int64_t width) const;
  void mapColumnReductionVectorized(IRRewriter &rewriter, linalg::GenericOp op,
                                    const ReductionForm &form,
                                    ArrayRef<int64_t> trips, int64_t width);
  static ColumnBlockMemory addColumnBlockMemory(IRRewriter &rewriter,
                                                Location loc,
                                                gpu::LaunchOp launch,
                                                const ReductionForm &form,
                                                int64_t threads, int64_t width);
  void emitColumnBlock(IRRewriter &rewriter, Location loc, linalg::GenericOp op,
                       const ReductionForm &form, ArrayRef<int64_t> trips,
                       int64_t width, int64_t columnsPerBlock, int64_t threads,
                       Value tid, Value block, const ColumnBlockMemory &memory);
  void mapColumnReduction(IRRewriter &rewriter, linalg::GenericOp op,
                          const ReductionForm &form, ArrayRef<int64_t> trips);

  // FinishingPasses.cpp
  std::optional<FinishingPass>
  matchFinishingPass(IRRewriter &rewriter, const ColumnPartial &partial,
                     Operation *last, int64_t blocks, int64_t threads);
  void emitFinishingPass(IRRewriter &rewriter, gpu::LaunchOp launch,
                         const FinishingPass &finishing, int64_t blocks,
                         int64_t threads, Value tid);

  // Elementwise.cpp
  void storeFolded(IRRewriter &rewriter, Location loc, linalg::GenericOp op,
                   const ReductionForm &form, ArrayRef<Value> ivs, Value when,
                   Value total);
  void mapVectorized(IRRewriter &rewriter, linalg::GenericOp op,
                     ArrayRef<int64_t> trips, int64_t width);

  // Scatter.cpp
  void mapColumnParallelLoop(IRRewriter &rewriter, scf::ForOp loop,
                             linalg::LinalgOp inner);
  static std::optional<BinnedRow> getBinnedRow(scf::ForOp loop,
                                               linalg::GenericOp inner);
  void mapBinnedColumnParallelLoop(IRRewriter &rewriter, scf::ForOp loop,
                                   linalg::GenericOp inner,
                                   const BinnedRow &binned);
  static void emitBinnedPoints(IRRewriter &rewriter, Location loc,
                               linalg::GenericOp op, Value tid, int64_t threads,
                               int64_t points, ArrayRef<int64_t> pointTrips,
                               int64_t inFlight, int64_t chunks,
                               bool everyPointValid);
};

} // namespace dc::map_to_gpu

#endif // DC_LIB_CONVERSION_MAPTOGPU_MAPTOGPUINTERNALS_H
