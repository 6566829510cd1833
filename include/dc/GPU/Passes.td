//===- Passes.td - dc gpu passes ---------------------------*- tablegen -*-===//
#ifndef DC_GPU_PASSES_TD
#define DC_GPU_PASSES_TD

include "mlir/Pass/PassBase.td"

def DCSplitColumnReductions : Pass<"dc-split-column-reductions"> {
  let summary = "Split a long reduction over rows into chunks that fill the "
                "GPU, then a short one over the chunks";
  let description = [{
    For the cuda_sm90 lowering, on tensors before bufferization. A column
    reduction (one reduction loop that some input reads across its rows,
    such as a norm's weight gradient: 8192 tokens x 2048 columns -> 2048)
    becomes, in `dc-map-to-gpu`, one block per 64 columns: 32 blocks for
    2048 columns, each walking all 8192 rows, far too few to fill an H100's
    or H200's 132 multiprocessors with loads in flight (docs/lowering.md,
    "Why the GPU kernels' constants"). This pass splits such a reduction with upstream `linalg::splitReduction`:
    the rows fall into `chunks` contiguous groups, a first op folds each
    group into a `chunks x columns` partial of the output's type (a parallel
    dim more: `chunks` times the blocks), a second folds the partials. The
    partial tensor is an ordinary temporary, so `dc-assign-step-arena`
    plans its bytes like any other; the order of the sums is fixed, so the
    result is the same every run.

    A reduction is split when it reads across rows and its parallel points
    would give fewer than `min-blocks` blocks of 64 columns; it is split
    into the most chunks, a power of two up to `max-chunks`, that divide
    its rows and leave each chunk at least `rows-per-chunk` rows (none: it
    stays whole).

    A [rows, columns] reduction with a row reduction of the same nest
    before it that reads one of its inputs at the same points (a norm
    backward's row sum and its weight gradient), where all its inputs are
    already defined, is split instead into chunks of 32 rows, and the
    partial sums (with their expanded inputs and their fill) move right
    before that row reduction (before its fill, past views and
    `--profile-ops` hooks): `dc-map-to-gpu` then computes them in the row
    group's kernel, and `dc-assign-step-arena`, seeing them live across
    the row group, keeps their buffer apart from the group's. The
    reduction of those partial sums (a row per chunk: 512 for 8192 rows)
    stays one op: `dc-map-to-gpu` gives a short column reduction narrower
    blocks, so that it too fills the GPU in one launch.
  }];
  let options = [
    Option<"minBlocks", "min-blocks", "int64_t", "0",
           "Blocks (64 columns each) below which a column reduction is "
           "split (0: two per multiprocessor of the module's target, 264 "
           "on an H100 or H200)">,
    Option<"rowsPerChunk", "rows-per-chunk", "int64_t", "256",
           "Fewest rows of a chunk (8 rows for each of a block's 32 row "
           "lanes when it reads 16-byte vectors of bf16 columns)">,
    Option<"maxChunks", "max-chunks", "int64_t", "64",
           "Most chunks a reduction is split into">,
    Option<"foldedChunkRows", "folded-chunk-rows", "int64_t", "32",
           "Rows of a chunk that dc-map-to-gpu folds into a row group's "
           "kernel (a norm's weight gradient into its backward: one block a "
           "chunk; at least 1, at most 64)">,
  ];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::arith::ArithDialect"];
}

def DCWriteOutputsInPlace : Pass<"dc-write-outputs-in-place"> {
  let summary = "Let an op write its outputs into the view they are copied "
                "to";
  let description = [{
    For `--target=h200`, on buffers after bufferization and before
    `dc-assign-step-arena`. The backward of a layer writes dq, dk and dv
    into fresh [B, S, H, D] buffers (a rotary model: the rotations'
    backward writes dq and dk), which `tensor.insert_slice` then copies
    into the fused q/k/v gradient [B*S, 3*H*D] (48 copies of 32 MiB a step
    on config A). Where an output of a `bshd` `dc.attention_into` or
    `dc.attention_grad_into`, or of an all-parallel `linalg.generic` that
    only writes its outputs, is a fresh allocation whose only other use is
    one such copy (maybe through a `collapse_shape`) into a subview of
    another allocation, the op does not read that allocation, and nothing
    between the op and the copy touches it except copies into disjoint
    subviews, the op writes the subview directly (its allocation moved
    before the op when it came later); the copy and the fresh buffer go.
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def DCMapToGPU : Pass<"dc-map-to-gpu", "::mlir::ModuleOp"> {
  let summary = "Make the compute of a bufferized step GPU kernels and "
                "library calls, leaving the host only to enqueue";
  let description = [{
    Dispatch formation for the cuda_sm90 lowering, on the bufferized module
    after `dc-assign-step-arena`. The kernels are sized for the module's
    `#dc.target` (the default preset without one): its `multiprocessors`
    (the blocks that fill the GPU) and `sharedMemoryPerBlock` (the static
    shared memory a block may take). Each top-level op of a step becomes
    one of:

    - a library call: a `linalg.matmul` / `linalg.batch_matmul`, or a
      `linalg.generic` computing `out + a * b` (inputs of one type widened
      to the output's, such as attention's batched products), in a form
      cuBLASLt takes (plain or transposed maps, at most one leading batch
      dim, contiguous rows, f32, bf16 or f16) stays for `dc-to-dcrt`, which
      calls `dcrt_matmul`; a zero `linalg.fill` of its output right before
      it (past the profiling hooks) is folded into it (`dc.gemm_overwrite`:
      C = A B instead of C += A B);
    - a row reduction (one reduction loop, last, that every input reads
      along its contiguous innermost dim, folded by addf / maximumf /
      maxnumf / minimumf / minnumf: norms, softmax, cross-entropy): one
      block per row; its threads fold a strided share of the row from the
      combiner's identity, `gpu.all_reduce` combines the shares, thread 0
      folds the total into the output;
    - a row group: a row reduction together with the ops next to it that
      work on the same rows, each reading and writing only its own row of
      what another member writes (the fill of the sums before it; after
      it, ops over the rows such as a norm's rsqrt, ops over each row's
      points such as the scale that reads the row again, further row
      reductions such as softmax's sum after its max): one kernel of a
      block per row running the members in order with a barrier between,
      so the row is read from device memory once and one launch replaces
      several. When every thread covers its share of the row in a few
      whole 16-byte steps (two each where blocks of 32 threads allow: a
      thread's loads are its bytes in flight; config A's 2048-wide bf16
      norms take 128 threads), the group has no loops and keeps the row and
      the per-row values (computed by every thread, stored by thread 0)
      in registers between members, and loads every row operand no member
      writes (a norm's weight) before the first member. Such a group
      keeps a barrier between two members only where, across it, a write
      and another access may touch the same memory and are not provably
      the same thread's (thread 0's both, or the same buffer at the same
      row and one of the thread's own columns). When 32 lanes
      cover the row in at most 4 such steps (1024 bf16s) and the
      reductions fold f32, a warp takes each row instead, 8 rows per
      block: an
      xor-shuffle butterfly in place of `gpu.all_reduce` (every lane gets
      the same total), `nvvm.bar.warp.sync` in place of the barriers. A
      row max of x followed in the group by a row sum of exp(x - max)
      (softmax's and cross-entropy's statistics) is one pass over the row
      (online softmax): each thread carries its running max and its sum
      against it, moving the sum by exp(old - new) when the max grows,
      then the block's max and the threads' moved sums; when the row
      loops, 4 chunks an iteration (their starts clamped to the row, so
      every load is in bounds) in blocks of at most 256 threads. A
      column reduction's partial sums over chunks of the group's rows
      right before the group (`dc-split-column-reductions` puts a norm's
      weight gradient there, in chunks of 32 rows) join a block-per-row
      group that keeps its values (one row dim, at most 64 rows a chunk,
      the group's row length as its columns, every input read at (row,
      column), (row) or (column) of a buffer through the split's expanded
      views, and nothing it reads or writes written, or read, by another
      member): a block per chunk runs the chunk's rows two at a time (a
      barrier first; both rows' loads issued before the first row's
      reduction, a barrier between the rows), each thread adding its own
      columns' partials in registers and storing them after the last row
      (the identity fill before them folded). The norm's backward reads x
      and dy once instead of twice. With 16-byte accesses, the rows'
      operands that move with the row (16 bytes a chunk, or a 4-byte
      per-row value such as rstd) are copied ahead into workgroup memory
      (`nvgpu.device_async_copy`, cp.async; two stages, at most 40 KiB):
      each iteration issues the next one's copies, each thread into its
      own slots, then waits for all but those and reads its slots, so a
      row's loads no longer wait a memory round trip behind the row
      before's reductions. With `finishing-passes`, when the split's second
      pass over those partials comes next (a vectorizable column reduction reading them,
      past views and hooks that touch none of its buffers; its identity
      fill and conversion folded as below), the kernel runs it at its end:
      each block, done, takes a ticket from a counter of its own (a
      zero-initialized `memref.global` that only grows, which outlining
      copies into the kernel's module) after a GPU-scope fence; the last
      blocks to take one (at most 64, so all fit on the GPU beside the
      rest) wait until every block has, fence again, and share the pass's
      column blocks, each summed in a fixed order (deterministic): one
      launch fewer;
    - an elementwise op with a loop of two that an input reads at `1 - d`
      (a rotary embedding's partner half) takes both of its points in one
      thread: each half and the tables are loaded once;
    - a column reduction (the same, reading across rows: a norm's weight
      gradient): one 256-thread block per 64 columns, 4 row lanes each
      folding every 4th row, lane 0 combining the partials from shared
      memory in a fixed order (deterministic). When every input that moves
      along the columns reads them contiguously in 16-byte vectors (and
      the sums are f32), each thread takes a vector of neighbouring
      columns (8 bf16: 8 vector lanes x 32 row lanes) and the partials
      fold in two fixed-order steps; each row lane loads 4 of its rows
      before adding them (a row past the end loads the first again and
      adds nothing); a buffer not 16-byte aligned at run
      time takes the same points one element at a time (the same sums).
      A short one (at most 1024 rows: a split's second pass) that would
      have fewer blocks than the target has multiprocessors takes narrower
      blocks, down to 4 vector lanes (16 f32 columns x 64 row lanes), each
      row lane loading up to 8 rows before adding them;
    - for a row or column reduction with a kernel of its own (not in a row
      group, not a library call): a fill of its output with the combiner's
      identity just before it (past ops that cannot touch that output, such
      as the other pass of a split reduction) is folded into the store (the
      kernel stores `identity + total`, the same bits, without reading the
      output), and an all-parallel op right after it that reads only that
      output, each point at itself, into a buffer no operand of the
      reduction overlaps (a bf16 weight gradient's conversion) is computed
      by the same store: a norm's weight gradient is two kernels, not five
      (one, when its row group's kernel runs the second pass);
    - a vectorized elementwise kernel: an all-parallel op (named ops are
      generalized first) whose operands indexed by the innermost loop read
      it contiguously, 16 bytes of the narrowest operand per thread (8 bf16,
      4 f32): vector loads and stores, scalar loads of broadcast operands,
      the body unrolled, and a scalar path where a buffer is not 16-byte
      aligned at run time; a thread takes up to 4 such groups a block
      apart (about 4 16-byte loads in flight), all loads before the math;
    - a parallel kernel: any other linalg op (parallel dims first) as
      parallel loops, one GPU thread per point of the parallel iteration
      space (linearized over a 1-D grid of 256-thread blocks, innermost dim
      fastest), reductions sequential within the thread;
    - a column-parallel loop: a sequential `scf.for` around one parallel
      linalg op whose outputs move with the loop only along unit dims (the
      embedding gradient's scatter-add). When the loop has static bounds
      and each iteration writes one row named by a loop-dependent offset
      (nothing the loop reads may be what it writes), a block per bin of
      rows (row % bins, a power of two up to 1024): the block scans the
      iterations in windows, keeps those whose row is its own in loop
      order (warp ballots, a prefix over the warps' counts in workgroup
      memory) and runs only those, each thread on a few of the row's
      points at once.
      Otherwise a thread per point of the op runs the whole loop. Either
      way one thread writes each element, in loop order, so repeated
      indices add up as on the host;
    - a serial kernel: any other op that reads or writes memory, in one GPU
      thread: correct, not fast;
    - host work: constants and index arithmetic, views, dc ops (runtime
      calls), the profiling hooks.

    `memref.copy` must have become `linalg.copy` first
    (`dc-expand-strided-copies{all}`). A `memref.alloc` left (one
    `dc-assign-step-arena` could not place) is an error: the step would
    allocate device memory. After this pass only `gpu.launch` ops touch
    device memory; `gpu-kernel-outlining` and the NVVM lowering follow.
    With `approximate-math` (the default) the kernels' exp, log, tanh and
    f32 divisions are marked `afn`, which the NVVM lowering takes to the
    hardware's approximations. Never sine, cosine (accurate only near
    [-pi, pi]) or `math.powf`: the fast power is NaN for negative bases,
    where an integer power is defined.
  }];
  let options = [
    Option<"cudaToolkit", "cuda-toolkit", "std::string", "\"\"",
           "The CUDA toolkit the kernels are compiled with (empty: this dc "
           "has none, and the pass fails saying so)">,
    Option<"approximateMath", "approximate-math", "bool", "true",
           "Kernels take the hardware's approximate exp, log, tanh and f32 "
           "division (fastmath afn: ex2.approx, div.approx; about 2 ulp), "
           "as Triton and nvcc --use_fast_math do; false: libdevice's "
           "accurate versions, several times the instructions">,
    Option<"finishingPasses", "finishing-passes", "bool", "false",
           "A split's second pass runs at the end of its row group's kernel "
           "(the last blocks to finish wait for the rest, so up to "
           "finishing-blocks blocks must fit on the GPU at once; the runtime "
           "checks it before the launch). Saves the second pass's launch "
           "(docs/lowering.md, Why the GPU kernels' constants)">,
    Option<"finishingBlocks", "finishing-blocks", "int64_t", "64",
           "With finishing-passes: the most blocks of a kernel that wait for "
           "the rest and then share its second pass (at least 1). Each must "
           "be resident at once with the others: lower it for a GPU that "
           "holds fewer (a MIG slice of 16 SMs holds 48 of config A's)">,
    Option<"singleBarrierReductions", "single-barrier-reductions", "bool",
           "false",
           "A block per row's f32 reductions (row groups, row reductions) "
           "take one barrier, not "
           "gpu.all_reduce's two: a butterfly of shuffles in each warp, the "
           "warps' totals through shared memory of their own, a barrier, "
           "then every thread adds them in warp order (deterministic). Each "
           "reduction has its own slots, and a folded group's rows are "
           "barriers apart, so no slot is written again before every thread "
           "has read it">,
    Option<"foldedBlocksPerSM", "folded-blocks-per-sm", "int64_t", "0",
           "A folded row group's kernel (a norm's backward with its weight "
           "gradient's partial sums) asks ptxas to fit this many of its "
           "blocks on an SM (nvvm.minctasm, by dc-set-kernel-occupancy after "
           "outlining), capping its registers; 0 leaves them to ptxas">,
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::vector::VectorDialect"];
}

def DCMergeKernelModules : Pass<"dc-merge-kernel-modules",
                                "::mlir::ModuleOp"> {
  let summary = "Put every outlined kernel into one gpu.module";
  let description = [{
    `gpu-kernel-outlining` makes one `gpu.module` per kernel, and
    `gpu-module-to-binary` then runs the device toolchain (ptxas) once per
    module: a step of thousands of kernels would take as many runs. This
    pass moves every kernel into the first module (`dc_kernels`), renaming
    on a clash, and points each `gpu.launch_func` at it: one fatbin per
    artifact, compiled once.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def DCMarkCoresidentLaunches : Pass<"dc-mark-coresident-launches",
                                    "::mlir::ModuleOp"> {
  let summary = "Mark each launch of a kernel whose blocks wait for each "
                "other with how many must be resident at once";
  let description = [{
    Runs after `gpu-kernel-outlining`. A finishing pass (`dc-map-to-gpu
    finishing-passes`) makes a kernel's last blocks wait until every block
    has taken a ticket, so that many blocks must fit on the GPU at once: on
    a GPU that holds fewer (a small MIG slice) the kernel never ends.
    `dc-map-to-gpu` records the count as `dc.coresident_blocks` on the
    kernel's ticket counter (a `memref.global`), which outlining copies into
    the kernel module where it drops the `gpu.launch`'s own attributes.
    This pass sets the largest count among the globals a kernel reads on
    every `gpu.launch_func` of it; `dc-to-dcrt` then calls
    `dcrt_launch_kernel_coresident`, which checks the count against the
    occupancy API times the SMs and stops with an error naming the kernel
    where it does not fit.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
                           "::mlir::memref::MemRefDialect"];
}

def DCSetKernelOccupancy : Pass<"dc-set-kernel-occupancy",
                                "::mlir::ModuleOp"> {
  let summary = "Move a kernel's blocks-per-SM request from its body onto "
                "the outlined gpu.func (nvvm.minctasm)";
  let description = [{
    Runs after `gpu-kernel-outlining`. `dc-map-to-gpu folded-blocks-per-sm`
    asks that a folded row group's kernel fit that many blocks on an SM
    (more warps to keep loads in flight). Outlining drops a `gpu.launch`'s
    own attributes, so the request is recorded as `dc.min_blocks_per_sm` on
    an op of the launch's body, which outlining keeps. This pass sets the
    largest such count on the kernel's `gpu.func` as `nvvm.minctasm` (the
    NVVM lowering makes it PTX's `.minnctapersm`; with the block size it
    already carries as `.maxntid`/`.reqntid`, ptxas caps the registers to
    fit) and removes the body's markers. An error for a count below 1.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
                           "::mlir::NVVM::NVVMDialect"];
}

def DCComputeConstants : Pass<"dc-compute-constants"> {
  let summary = "Make small constant tensors in the step (GPU target)";
  let description = [{
    A constant tensor (`arith.constant dense<...> : tensor<...>`) would
    bufferize to a global of the artifact, in host memory, which the GPU
    target's kernels cannot read. This pass makes it in the step instead: a
    splat as `linalg.fill` of its value, any other constant of up to
    `max-elements` elements as a `linalg.generic` that picks each element by
    its row-major index. A larger one is an error naming it (a table of
    weights belongs in the parameters). The PyTorch frontend's captured
    constants (a mask's `torch.tensor(0.0)`) take this path.
  }];
  let options = [
    Option<"maxElements", "max-elements", "int64_t", "16",
           "The most elements of a constant that is not a splat">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def DCExpandRoundingDivisions : Pass<"dc-expand-rounding-divisions"> {
  let summary = "Expand the arith divisions that round toward an infinity, "
                "which have no LLVM lowering; leave min/max to the target";
  let description = [{
    `arith.ceildivsi`, `arith.ceildivui` and `arith.floordivsi` have no
    LLVM instruction; this pass writes them with plain divisions, compares
    and selects, as `arith-expand` does. It is the part of `arith-expand`
    the GPU kernels need: `arith-expand` also rewrites every
    `arith.maximumf` / `minimumf` (and the `maxnumf` / `minnumf` forms) into
    two compares and two selects, where the NVVM lowering makes one
    instruction of each (`max.NaN.f32` for `maximumf`, the same NaN and
    signed-zero semantics). A softmax or cross-entropy row takes one
    maximum per element: expanded, its kernel issues about a quarter more
    instructions (docs/lowering.md, "Why the GPU kernels' constants").
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

def DCAlignWorkgroupMemory : Pass<"dc-align-workgroup-memory"> {
  let summary = "Align every shared-memory global of the lowered kernels to "
                "16 bytes";
  let description = [{
    Runs on the kernels after the NVVM lowering, which declares each
    workgroup buffer (`llvm.mlir.global` in address space 3) with its
    element's alignment. The kernels access those buffers 16 bytes at a
    time (cp.async copies; the vector stores LLVM makes of four neighbouring
    f32 partials), and ptxas places each buffer by its declared alignment:
    one after an 8-byte buffer started 8 bytes off, and the stores faulted
    as misaligned. Every shared global gets an alignment of at least 16.
  }];
}

#endif // DC_GPU_PASSES_TD
