//===- Passes.td - dc schedule passes ----------------------*- tablegen -*-===//
#ifndef DC_SCHEDULE_PASSES_TD
#define DC_SCHEDULE_PASSES_TD

include "mlir/Pass/PassBase.td"

def DCZero3 : Pass<"dc-zero3", "::mlir::ModuleOp"> {
  let summary = "Shard parameters ZeRO-3 style: gather before each interval "
                "of uses, release after it, reduce-scatter gradients";
  let description = [{
    Every `#dc.param` argument (at least `replicate-below` bytes) becomes a
    `!dc.shard` over axis `grid-axis` of the grid `grid` (created with
    `world-size` ranks when the module has none). Its uses are split into
    intervals: uses the loss depends on (forward) and the others (backward);
    when the two interleave they form one interval. Each interval gets a
    `dc.gather_start` + `dc.wait` right before its first use and a
    `dc.release` right after its last use. When every use of a parameter is
    an `arith.truncf` to one narrower float type, the gather is done in that
    type and the casts disappear.

    Each `#dc.grad` result is reduce-scattered into its parameter's shard as
    soon as it is computed, packed into buckets of at most `bucket-bytes`;
    one `dc.end_backward` before the return waits for all of them. Gradients
    of replicated parameters are all-reduced instead.

    Hierarchical sharding (`hierarchical=G`, HSDP / MiCS): the grid is
    `(world-size / G) x G` (nodes x GPUs per node; an existing grid must have
    that form). Parameters are sharded over axis 1, the ranks of one node,
    and replicated over axis 0: gathers stay inside the node. Each bucket is
    reduce-scattered over axis 1, waited when the next bucket starts (the
    last before the return) and its shards all-reduced over axis 0, across
    the nodes; the return waits for those. Replicated parameters'
    gradients are all-reduced over axis 1, then over axis 0.

    Sharding over every grid axis (`shard-all-axes`, ZeRO over data x
    sequence for a `dc-ulysses` step): parameters are `!dc.shard`s over all
    axes of the grid at once, so shards are `1 / (all ranks)` of a tensor and
    each gather and reduce-scatter runs on the whole grid. Gradients are
    partial sums over the sequence axes (those the step's `dc.seq_axis`
    arguments name) and reduced with `reduce` over the others: with `avg`
    and both kinds of axes, each gradient is scaled by `1 / (data-parallel
    ranks)` before a `sum` reduce-scatter (the runtime reduces a group by
    sum or mean only). Replicated parameters' gradients are all-reduced
    axis by axis (sum over the sequence axes, `reduce` over the others).

    On a grid of one rank there is nothing to shard: parameters stay
    replicated (the step reads them and writes their gradients in place,
    no gathers, no reductions) unless `shard-one-rank` is set, which
    `dc-offload-params` needs (it keeps shards in host memory).

    Prefetching, fusion and persistence are left to later passes: this pass
    places every gather just in time.
  }];
  let dependentDialects = ["::dc::DCDialect", "::mlir::shard::ShardDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::arith::ArithDialect"];
  let options = [
    Option<"worldSize", "world-size", "int64_t", "::dc::kDefaultWorldSize",
           "Ranks on the grid axis (with hierarchical or shard-all-axes: in "
           "all); 0 takes it from an existing grid">,
    Option<"gridName", "grid", "std::string", "::dc::kDefaultGrid",
           "Name of the shard.grid to shard over (created if missing)">,
    Option<"gridAxis", "grid-axis", "int64_t", "0",
           "Grid axis the parameters are sharded over">,
    Option<"bucketBytes", "bucket-bytes", "int64_t", "::dc::kDefaultBucketBytes",
           "Largest gradient bucket of one reduce-scatter (bytes)">,
    Option<"replicateBelow", "replicate-below", "int64_t",
           "::dc::kDefaultReplicateBelow",
           "Parameters smaller than this (bytes) stay replicated">,
    Option<"reduceKind", "reduce", "::mlir::shard::ReductionKind",
           "::mlir::shard::ReductionKind::Average",
           "Gradient reduction over ranks: avg or sum", [{::llvm::cl::values(
             clEnumValN(::mlir::shard::ReductionKind::Average, "avg",
                        "the mean of the ranks' gradients"),
             clEnumValN(::mlir::shard::ReductionKind::Sum, "sum",
                        "the sum of the ranks' gradients"))}]>,
    Option<"castGather", "cast-gather", "bool", "true",
           "Gather in the narrower type when a parameter is only cast">,
    Option<"hierarchical", "hierarchical", "int64_t", "0",
           "GPUs per node: shard inside each node (grid axis 1 of a nodes x "
           "GPUs grid) and replicate across nodes (axis 0); 0: shard over "
           "grid-axis">,
    Option<"shardOneRank", "shard-one-rank", "bool", "false",
           "Shard (gather, reduce-scatter) even on a grid of one rank, "
           "where parameters otherwise stay in place">,
    Option<"shardAllAxes", "shard-all-axes", "bool", "false",
           "Shard parameters over every axis of the grid at once (ZeRO over "
           "data x sequence ranks); gradients are summed over the sequence "
           "axes and reduced with `reduce` over the others">,
  ];
}

def DCUlysses : Pass<"dc-ulysses", "::mlir::ModuleOp"> {
  let summary = "Shard the sequence dimension over a grid axis (Ulysses "
                "sequence parallelism), all-to-all around attention";
  let description = [{
    The sequence arguments of each step function -- those with a
    `dc.seq_dim = D` attribute, those listed in `seq-args`, or, when there
    are neither, the integer data arguments with `dc.vocab` (token and
    target ids `[B, S]`) -- are sharded `S -> S/P` on axis `grid-axis` of
    the grid `grid` (P ranks; created with `sequence-parallel` ranks, or
    `world-size / sequence-parallel` x `sequence-parallel` with the sequence
    on axis 1, when the module has none). Each becomes the rank's local slice and carries
    `dc.seq_dim` and `dc.seq_axis` (the manifest passes both to dc-run,
    which feeds each rank its part of the sequence).

    The sharded dim then propagates forward through the step, every type
    rewritten to its local size: linalg ops (elementwise, broadcasts,
    transposes, matmuls and reductions over other dims; a fresh
    `tensor.empty`/`linalg.fill` init is made local), `tensor.expand_shape`
    and `tensor.collapse_shape` (the sequence may be merged with outer and
    inner dims, and split out again), full-length `tensor.extract_slice` /
    `tensor.insert_slice`, and the embedding gradient's scatter loop (an
    `scf.for` over the tokens whose trip count becomes the local count).

    A reduction over the sequence dim (a parameter's gradient, the sum of
    the token losses) gives a partial sum over the SP group; it must be a
    sum (`addf` into a zero-filled init), and a partial sum may only be
    scaled, cast, added to other partial sums and returned. The loss is
    all-reduced (sum) over the SP axis before it is returned; with
    `reduce-grads` every gradient is too (leave it off when dc-zero3 then
    reduce-scatters the gradients over the same axis with `reduce=sum`).

    Each `dc.attention` gets its q, k and v through an all-to-all from
    sequence-sharded `[B*H, S/P, D]` to head-sharded `[B*H/P, S, D]` and its
    output back; each `dc.attention_grad` reuses the forward's head-sharded
    operands and log-sum-exp, sends `do` the same way and brings dq, dk, dv
    back. The exchanges are asynchronous (`dc.all_to_all_start`, then
    `dc.wait`): each starts right after its input is produced and is waited
    right before its first use, so the exchanges of q, k and v overlap each
    other and the projections computed after them. Heads are read from the operand shapes (the batch dims of q and of
    k/v divided by the batch of the sequence arguments); P must divide the
    query heads and the key/value heads.

    Anything else that touches the sequence (a reduction over it that is
    not a sum, a reshape that splits it, a slice of part of it, a
    `linalg.index` of it, an op the pass does not know) is a located error.
  }];
  let dependentDialects = ["::dc::DCDialect", "::mlir::shard::ShardDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::arith::ArithDialect"];
  let options = [
    Option<"gridName", "grid", "std::string", "::dc::kDefaultGrid",
           "Name of the shard.grid (created if missing)">,
    Option<"gridAxis", "grid-axis", "int64_t", "0",
           "Grid axis the sequence is sharded over">,
    Option<"sequenceParallel", "sequence-parallel", "int64_t", "0",
           "Ranks on the sequence axis; 0 takes it from an existing grid">,
    Option<"worldSize", "world-size", "int64_t", "0",
           "All ranks; a new grid is (world-size / sequence-parallel) x "
           "sequence-parallel with the sequence on axis 1 when that is more "
           "than one data-parallel rank (0: sequence-parallel ranks)">,
    ListOption<"seqArgs", "seq-args", "int64_t",
               "Arguments that carry the sequence (dim: their dc.seq_dim, "
               "else 1, else 0)">,
    Option<"reduceGrads", "reduce-grads", "bool", "true",
           "All-reduce (sum) every gradient over the sequence axis">,
  ];
}

def DCExpertParallel : Pass<"dc-expert-parallel", "::mlir::ModuleOp"> {
  let summary = "Divide the experts of each mixture-of-experts routing over a "
                "grid axis; dispatch and combine rows by all-to-all";
  let description = [{
    Expert parallelism over axis `grid-axis` of the grid `grid` (W ranks;
    created with `expert-parallel` ranks, or `world-size / expert-parallel`
    x `expert-parallel` with the experts on axis 1, when the module has
    none). Every rank keeps its own tokens (data parallelism over the whole
    grid) and holds E/W of each routing's E experts: rank c of the axis the
    experts [c E/W, (c + 1) E/W).

    For each `dc.group_by_expert` whose `ends` feed grouped products, the
    rows move in the sorted space, with static shapes: each rank's N sorted
    assignments are at most S rows for any one peer, S = N, or
    min(N, C E/W) where the grouping has a capacity C. A dispatch sends a
    `[W, S, ...]` tensor (slot s: the rows for rank s's experts, a prefix of
    the slot) by `dc.all_to_all_start` (split = concat = the slot dim) and
    receives `[W, S, ...]` (slot s: what rank s sent). The per-expert counts
    go first (a `[W, E/W]` all-to-all); the receiver re-groups the real rows
    by its local expert with a `dc.group_by_expert` over ids computed from
    them (padding rows get id E/W: they sort last and compute nothing). A
    combine is the same exchange back. The worst case (every assignment of
    every rank to one rank's experts, or every local expert at its
    capacity) is the static size, which the memory timeline charges like
    any tensor.

    The grouped products of the routing, and every row-parallel
    `linalg.generic` that reads a value they produced (the SwiGLU between
    them, the routing weights' scaling, and their backward), run on the
    experts' ranks: their row operands in the routing's sorted order are
    dispatched, their results combined where an op that is not row-parallel
    reads them. Each exchange starts right after its input is produced and
    is waited right before its first use.

    The stacked expert weights `[E, ...]` (the grouped products' right-hand
    sides, `#dc.param` arguments, possibly cast elementwise) become the
    rank's `[E/W, ...]` block and carry `dc.expert_axis`; their gradients,
    sums over every peer's rows, are the block's. dc-zero3 shards such a
    block over the other grid axes only, and the manifest tells dc-run
    which block of the full tensor the rank holds, so checkpoints stay full
    tensors.

    Located errors: W not dividing a routing's experts, grouped products
    whose right-hand side is not a stacked parameter, a row-parallel op
    that mixes the experts' rows with rows in another order or with values
    that differ between ranks, a step without routing.
  }];
  let dependentDialects = ["::dc::DCDialect", "::mlir::shard::ShardDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::arith::ArithDialect"];
  let options = [
    Option<"gridName", "grid", "std::string", "::dc::kDefaultGrid",
           "Name of the shard.grid (created if missing)">,
    Option<"gridAxis", "grid-axis", "int64_t", "-1",
           "Grid axis the experts are divided over (-1: the last)">,
    Option<"expertParallel", "expert-parallel", "int64_t", "0",
           "Ranks on the expert axis; 0 takes it from an existing grid">,
    Option<"worldSize", "world-size", "int64_t", "0",
           "All ranks; a new grid is (world-size / expert-parallel) x "
           "expert-parallel with the experts on axis 1 when that is more "
           "than one rank on axis 0 (0: expert-parallel ranks)">,
  ];
}

def DCAttachTarget : Pass<"dc-attach-target", "::mlir::ModuleOp"> {
  let summary = "Attach the machine to plan and lower for, with its budget "
                "in bytes, as the module's #dc.target";
  let description = [{
    Loads the target once (a preset, or a JSON description: docs/cost-model.md
    lists the fields), resolves the memory budget to bytes and attaches both,
    with the lowering, under `dc.target`. Everything after it reads that
    attribute: the planning passes, `dc-verify-schedule`, `dc-report`, the
    lowering pipeline and the artifact's manifest. A module already
    targeted gets the new target (with `keep-existing`, it keeps its own).
    Errors (an unknown target, a file that
    does not parse, a budget that is neither bytes nor a share of the
    device's memory) are reported on the module.

    ```mlir
    // dc-opt --dc-attach-target="target=cpu memory-budget=50%"
    module attributes {dc.target = #dc.target<name = "cpu", lowering = host,
        memory_budget = 8589934592, numbers = {...}>} {...}
    ```
  }];
  let dependentDialects = ["::dc::DCDialect"];
  let options = [
    Option<"target", "target", "std::string", "::dc::kDefaultTarget",
           "A preset (h100, h200, h100-cluster, h200-cluster, cpu) or a "
           "target JSON file">,
    Option<"memoryBudget", "memory-budget", "std::string",
           "::dc::kDefaultMemoryBudget",
           "Device memory budget: bytes (e.g. 16GiB, 2.5e9) or a fraction of "
           "the target's memory (e.g. 0.9 or 90%); empty: all of it">,
    Option<"lowering", "lowering", "std::string", "\"\"",
           "What the compute becomes, host or cuda_sm90; empty: the "
           "target's own (host to run a GPU target's schedule on the host "
           "backend)">,
    Option<"keepExisting", "keep-existing", "bool", "false",
           "A module that has a #dc.target keeps it (a step scheduled "
           "already); only `lowering`, when given, changes">,
  ];
}

// Options every planning pass shares. They all plan against ONE budget with
// ONE cost model: the module's #dc.target (dc-attach-target).
defvar DCPlanningOptions = [
  Option<"profile", "profile", "std::string", "::dc::kDefaultProfile",
         "Measured per-op times (JSON written by dc-run) replacing the "
         "cost model's compute estimates">,
  Option<"optimizerStateBytes", "optimizer-state-bytes", "int64_t", "0",
         "Device bytes the trainer keeps per element of each parameter's "
         "local shard (its optimizer state; dc-run's AdamW: 12, an fp32 "
         "master and two fp32 moments), counted against the budget">,
];

def DCOffloadActivations : Pass<"dc-offload-activations", "::mlir::ModuleOp"> {
  let summary = "Offload long-idle activations to host memory and reload "
                "them in time, until the step fits the budget";
  let description = [{
    Candidates are tensors of at least `min-bytes` with a long idle gap
    between two uses (typically made in forward and read again in
    backward): not parameters, not step results, not views of other
    buffers. A buffer's uses include those of its views (a fused
    projection read as its slices): it is offloaded whole, from the value
    that allocates it, and the reads after its gap take the same views of
    the reloaded value. The last `keep-last` candidates (by where their gap begins) stay
    on the device.

    While the memory timeline peaks over the budget, a candidate whose gap
    spans the peak is offloaded: one whose copy, queued behind the offloads
    before it, is done before the peak (most idle bytes, bytes x idle
    seconds, first), else the one that stalls least. `dc.offload_start`
    goes right after its last use before the gap; its `dc.wait` where the
    stream simulator predicts the copy done (the device buffer is free from
    there); its `dc.wait` for the reload right before the next use, which
    then reads the reloaded tensor.

    Once the step fits, the waits and reloads are re-timed together: the
    reloads queue FIFO on one stream, so they are issued in the order of
    their uses, each at the latest start that stalls nothing (computed back
    from the last use) or, when the link is the bottleneck, as early as
    the budget allows; each offload wait moves down to where its copy is
    done, as far as the budget allows. A step that already fits gets no
    new offloads, but offloads already in it are re-timed: the pipeline
    runs this pass again after prefetch and selective gather.

    Finally every reloaded value (and every parameter shard reloaded for
    `dc-offload-params`) gets one `dc.release` right after its last use,
    where the memory timeline frees it; on a second run the releases move
    with the uses, one per value.

    The function gets `dc.offload_floor = {excess_bytes, stall_seconds}`:
    the compute stall no placement can avoid (the bytes over budget at the
    peak must leave before it and come back after it at the host link's
    bandwidth); `dc-report` prints it next to the predicted stall. When
    even every candidate cannot make the step fit, the error says how much
    is missing.
  }];
  let dependentDialects = ["::dc::DCDialect"];
  let options = !listconcat(DCPlanningOptions, [
    Option<"minBytes", "min-bytes", "int64_t", "::dc::kDefaultOffloadMinBytes",
           "Smallest tensor worth offloading (bytes)">,
    Option<"keepLast", "keep-last", "int64_t", "::dc::kDefaultOffloadKeepLast",
           "Candidates kept on the device, counted from the last">,
    Option<"checkTimelineEdits", "check-timeline-edits", "bool", "false",
           "Tests: after each placement round, compare the memory timeline "
           "the planner edited with one computed again, and fail where "
           "they differ">,
  ]);
}

def DCRematerialize : Pass<"dc-rematerialize", "::mlir::ModuleOp"> {
  let summary = "Drop activations that are cheap to compute again and "
                "recompute them before their backward use, until the step "
                "fits the budget";
  let description = [{
    While the memory timeline peaks over the budget, each tensor of at least
    `min-bytes` idle across the peak (made before it, read again after it)
    is a candidate if it can be computed again, exactly, from values still
    live where it is next read: the ops that produce it are cloned right
    before that use, recursively through inputs that are no longer live (at
    most `max-recompute-ops` ops per tensor). Only deterministic ops are
    cloned (linalg, tensor, arith and math ops without memory effects, and
    `dc.attention`), so the clone computes the same bits as the original on
    the same backend; anything else (a transfer, a call, a random op) stops
    the recursion. A buffer read through views is recomputed whole, from
    the value that allocates it (a view frees nothing while its buffer has
    other uses), and its reads after the peak take the same views of the
    clone. A recomputed value is not a candidate again: it is made
    right before its next use already, and moving it again could undo the
    recomputation that moved another value after it. An input that is a
    gathered parameter already released
    there (a norm's weight) is read from another gathered copy of it live
    there (the backward's own) if there is one, else gathered again for the
    clone (`dc.gather_start`, `dc.wait`, `dc.release` around it), and that
    gather counts in the cost.

    The candidate that saves the most bytes per second of added compute
    (the cost model's time of the cloned ops and of the new gathers) goes
    first; a clone that does not lower the peak is undone. Without
    `leave-to-offload` and without a profile, one round takes, best first,
    candidates of the same peak until they free half its excess, skipping
    any that shares a value with one taken (its chain or cost may have
    changed), and one memory timeline of the step then checks them all:
    if the peak did not fall by all their bytes, only the best is kept and
    checked alone. Half, not all: the rest is chosen again on the next
    timeline, where the best tensor of a neighbouring peak may cover this
    one too (taking all at once recomputed 8% more bytes on the 70B step). With
    `leave-to-offload` (the pipeline sets it when activation offload is on),
    the pass recomputes a tensor only if that saves more bytes per second
    than the link moves, and once the offload floor of what is still over
    budget is zero (the host link could move it without stalling compute)
    only what recomputes in less time than the tensor's two copies would
    slow the compute beside them (the target's `copyComputeSlowdown`); it
    stops when none is left and `dc-offload-activations`' own placement, tried on a copy of
    the step (`trialOffloadSeconds`), adds no time either. Where that
    placement adds time (the floor is a bound: copies queue behind each
    other before the peak), the tensors whose copies it waits for (up to 4,
    the longest wait first) and the 4 made latest before the peak, each
    cheaper than that time, are recomputed on trial, and the one whose
    recomputation plus the placement after it adds least is kept if that
    beats the placement alone (docs/cost-model.md, "The planners' numbers").
    The rest is
    `dc-offload-activations`' job. Without it, a
    step that no recomputation makes fit is an error that says how much is
    missing.

    Without `leave-to-offload`, once the step fits, each recomputation is
    tried without, the costliest first, and given back (its clones erased,
    its uses back on the original) if the step still fits: the rounds chose
    each against the step as it was then, and a later choice can make an
    earlier one unnecessary (two tensors of one chain, the cheaper taken
    first and the other anyway), as can a batch's overshoot. Undone, the
    original is live from where it is made to where its clone was; the
    bytes there plus its own must fit, or, where an input dies with the
    clones (its last read is one), the undo is tried on a copy of the step.
    With `leave-to-offload` each test would be an offload placement, much
    compile time for little step time (docs/cost-model.md, "The planners'
    numbers"), so nothing is given back.

    With `merge-siblings` (the default), a tensor made by one all-parallel
    `linalg.generic` whose inputs an all-parallel generic over the same
    loops, a few ops after the tensor's next use, reads anyway (through the
    same indexing maps) is not cloned on its own: that generic gets the
    tensor as more results (its body computes them with the same ops, so
    the same bits), and the use moves right after it, where nothing in
    between needed it. A SwiGLU's product, read by the down projection's
    weight gradient, is made by the SwiGLU's backward, which reads the
    gate and up projections already: the recomputation costs one more write
    instead of a kernel that reads both again (docs/cost-model.md, "The
    planners' numbers"). Such a merge is not given back.

    Every cloned op carries `dc.recompute = <id>` (one id per recomputed
    tensor; a merged op also `dc.recomputed_results = <first result that is
    recomputed>`) and the function `dc.offload_alone_floor`, the offload
    floor of the whole excess before anything was recomputed, for
    `dc-report`.
  }];
  let dependentDialects = ["::dc::DCDialect"];
  let options = !listconcat(DCPlanningOptions, [
    Option<"minBytes", "min-bytes", "int64_t", "::dc::kDefaultOffloadMinBytes",
           "Smallest tensor worth recomputing (bytes)">,
    Option<"maxRecomputeOps", "max-recompute-ops", "int64_t",
           "::dc::kDefaultMaxRecomputeOps",
           "Most ops cloned to recompute one tensor (the recursion's limit)">,
    Option<"leaveToOffload", "leave-to-offload", "bool", "false",
           "Leave to dc-offload-activations what the host link can move "
           "without stalling, and recompute only where that is faster "
           "than the link">,
    Option<"mergeSiblings", "merge-siblings", "bool", "true",
           "Make a recomputed elementwise tensor as more results of a "
           "later elementwise op that reads its inputs anyway">,
  ]);
}

def DCOffloadParams : Pass<"dc-offload-params", "::mlir::ModuleOp"> {
  let summary = "Keep parameter shards in host memory (ZeRO-Offload style) "
                "and reload them before their gathers";
  let description = [{
    A chosen `!dc.shard` parameter argument becomes a `!dc.host` one: the
    caller keeps the shard in host memory, and each gather of it is
    preceded by a `dc.reload_start` + `dc.wait` that brings the shard back
    just for the gather, and followed by a `dc.release` of the device copy
    right after the gather's wait (where the memory timeline frees it).
    `params=all` offloads every sharded parameter; `params=budget` offloads
    the largest ones first, only until the memory timeline fits the budget
    (nothing when it already fits; an error saying how much is missing when
    even all of them are not enough). `dc-prefetch` moves each
    reload together with its gather.
  }];
  let dependentDialects = ["::dc::DCDialect"];
  let options = !listconcat(DCPlanningOptions, [
    Option<"params", "params", "::dc::ParamsInHost",
           "::dc::ParamsInHost::Budget",
           "Which parameter shards live in host memory: all or budget",
           [{::llvm::cl::values(
             clEnumValN(::dc::ParamsInHost::All, "all", "every sharded one"),
             clEnumValN(::dc::ParamsInHost::Budget, "budget",
                        "the largest, until the step fits the budget"))}]>,
    Option<"failOverBudget", "fail-over-budget", "bool", "true",
           "With params=budget, fail when even every shard in host memory "
           "does not fit (off when a later pass may still make it fit)">,
  ]);
}

def DCPrefetch : Pass<"dc-prefetch", "::mlir::ModuleOp"> {
  let summary = "Start gathers early enough to hide them, under the budget, "
                "and fuse neighbouring gathers";
  let description = [{
    Moves each `dc.gather_start` earlier until, by the stream simulator, its
    transfer finishes before its `dc.wait` -- as long as the device memory
    the memory timeline predicts stays within the budget at every op and
    the bytes in flight stay under `max-in-flight-bytes`. Gathers keep their
    relative order (the collective stream is FIFO) and never move above the
    release of the same parameter's previous interval, nor (hoisted or
    fused) ahead of a `dc.all_to_all_start` that is waited before the
    gather is: in the FIFO stream it would delay an exchange needed sooner.

    Each round hoists a gather to its *latest start*: walking the FIFO
    collective stream backwards from the end, the latest time a collective
    may start so that it and everything queued behind it finish before
    their waits.

    Then neighbouring gathers are fused into one group start (at most
    `max-fused-bytes` per group) when the cost model predicts a gain: the
    fused transfer is cheaper than the two apart, and what the earlier
    group's wait may lose is less than what the later gather's wait gains.
    Where gathers queue behind each other (the collective stream is the
    bottleneck) that local test cannot see the gain of every transfer
    queued behind; there each fusion of two adjacent groups is applied,
    simulated, and kept only if the whole step gets shorter within the
    budget (at most 150k simulated ops in all, to bound compile time).
    A budget the just-in-time schedule already exceeds, or one below the
    step's floor, is an error that says by how much.
  }];
  let dependentDialects = ["::dc::DCDialect"];
  let options = !listconcat(DCPlanningOptions, [
    Option<"maxInFlightBytes", "max-in-flight-bytes", "int64_t",
           "::dc::kDefaultMaxInFlightBytes",
           "Most bytes of gathers started but not yet waited; 0: no limit">,
    Option<"maxFusedBytes", "max-fused-bytes", "int64_t",
           "::dc::kDefaultMaxFusedBytes",
           "Most bytes one fused gather group may move; 0: no fusion">,
  ]);
}

def DCSelectiveGather : Pass<"dc-selective-gather", "::mlir::ModuleOp"> {
  let summary = "Keep parameters gathered across intervals where the budget "
                "has room";
  let description = [{
    For each parameter gathered more than once, keeping its first gathered
    copy instead of releasing it and gathering again saves one all-gather
    and costs its bytes over the gap between the two intervals. Candidates
    are taken best saved-communication-per-byte first (then shortest gap,
    then parameter order) while the memory timeline stays within the budget
    at every op of the gap: the release is dropped and the later interval
    uses the earlier copy. First, a copy gathered and released inside
    another copy's interval of the same parameter (a recomputation's
    gather inside the backward's) is folded into the outer copy, whatever
    the budget: that frees its bytes and its gather.
  }];
  let dependentDialects = ["::dc::DCDialect"];
  let options = DCPlanningOptions;
}

def DCInPlaceAtPeak : Pass<"dc-in-place-at-peak", "::mlir::ModuleOp"> {
  let summary = "Let the op at a step's memory peak write its result over "
                "an input it reads last";
  let description = [{
    An elementwise `linalg.generic` writes a fresh buffer (a `tensor.empty`
    init) even when one of its inputs has the result's type, is read at the
    same point as the result is written, and is read by nothing after it:
    config A's first backward op, the cross-entropy gradient, reads the
    500 MiB of logits and writes 500 MiB of gradient beside them, at the
    step's memory peak. This pass computes the step's memory timeline and,
    while the op at its peak is such a generic, makes that input its init
    (the body reads the output's element instead) and looks again. One-Shot
    Bufferize then updates the input's buffer in place, and the memory
    timeline (`isLastReadBeforeInPlaceWrite`) and every planner after this
    pass count one buffer. Only ops at the peak: elsewhere a shared buffer
    would save nothing and could keep `dc-map-to-gpu` from fusing a row
    group (a member may not write what another member's partner reads).

    An input qualifies when it is a linalg op's result (not an argument:
    the caller's buffer is never written, nor a transfer's), appears once
    among the op's operands, its indexing map is the output's and a
    permutation (each point reads the element it writes), and every other
    use of it and of its views is a read by an op before this one.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def DCWaitReductionsEarly
    : Pass<"dc-wait-reductions-early", "::mlir::ModuleOp"> {
  let summary = "Retire each gradient reduction as soon as the model says "
                "it has finished, not at the end of the backward";
  let description = [{
    A gradient's full (unsharded) buffer lives until its reduction is
    waited: with every reduction waited by the one `dc.end_backward` at the
    end, all of a step's gradients are live at once at its end (B: 3.5 GiB
    per rank). For each future `dc.end_backward` takes, the stream
    simulator's completion time of its reduction says where the compute
    stream can wait for it without stalling: a `dc.wait` goes before the
    first op the compute stream reaches after that time, and the future
    leaves `dc.end_backward` (which is erased once empty). Reductions the
    model sees finishing only after the last op stay where they were. Timing
    is unchanged in the model; memory only goes down. Plans against the
    same target and profile as the other planning passes. With
    `over-budget-only`, a step whose memory timeline fits the budget is left
    alone (the pipeline runs it so before planning, where the timing is
    still the just-in-time one, and again plainly after planning).
  }];
  let dependentDialects = ["::dc::DCDialect"];
  let options = !listconcat(DCPlanningOptions, [
    Option<"overBudgetOnly", "over-budget-only", "bool", "false",
           "Only in steps whose memory timeline exceeds the budget">,
  ]);
}

def DCOptimizerInStep : Pass<"dc-optimizer-in-step", "::mlir::ModuleOp"> {
  let summary = "Run AdamW inside the step: the update of every parameter "
                "becomes ops of the step, its state arguments of it";
  let description = [{
    Turns a sharded step (after `dc-zero3`) that returns gradients into one
    that updates its parameters itself, as dc-run's trainer would after it
    (torch.optim.AdamW with clipping by the global norm):

    * each gradient's share of the squared global norm is added up in
      parameter (argument) order, `dc.grad_squares`, then summed over the
      ranks (`dc.all_reduce_start` on each axis of the grid), so that the
      norm is the trainer's;
    * each parameter gets `dc.adamw`, reading its moments (new arguments
      with `dc.optimizer_state = {param, state}`, f32 or bf16 as
      `moment-dtype` says), an f32 master (`master-dtype=f32` over a
      parameter that is not f32), the learning rate and the step count
      (scalar arguments, `dc.learning_rate`, `dc.step_count`) and the
      norm: the clipping scale needs every gradient, so every update waits
      for the norm's all-reduce;
    * the gradient results are replaced by the updated parameters
      (`dc.param_update = <id>`) and state (`dc.optimizer_state`), each
      written by the caller into its argument's buffer, and the squared
      norm (`dc.grad_squares`), which dc-run prints and checks.

    A non-finite norm skips every update (dc-run then stops, as it does
    before its own update). The step records its hyperparameters in
    `dc.optimizer` for the manifest.

    Blocks of experts (`dc-expert-parallel`) are updated like any shard;
    their norm shares carry the expert axis (`dc.grad_squares {expert_axis}`:
    every expert rank counts its own experts).

    With `micro-batches=N` > 1 (gradient accumulation) the step sums every
    gradient over the micro-batches itself: each gradient the step still
    reduces in every micro-batch is added (`dc.grad_accumulate`, fp32) into
    an accumulator argument of its reduced shape (`dc.accumulator`), in the
    accumulating form (`@<step>_accumulate`, made here where
    `dc-accumulate-gradients` made none) and in the final form, which
    returns the sum into the accumulator's buffer and updates from it;
    gradients `dc-accumulate-gradients` accumulates before their reduction
    arrive summed. The norm and the updates use the mean (the ops'
    `micro_batches`), as dc-run's trainer does.

    Refused with an error: parameters kept in host memory
    (`dc-offload-params`).
  }];
  let dependentDialects = ["::dc::DCDialect", "::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
  let options = [
    Option<"beta1", "beta1", "double", "0.9", "AdamW's beta1">,
    Option<"beta2", "beta2", "double", "0.999", "AdamW's beta2">,
    Option<"eps", "eps", "double", "1e-8", "AdamW's eps">,
    Option<"weightDecay", "weight-decay", "double", "0.0",
           "Decoupled weight decay">,
    Option<"maxGradNorm", "max-grad-norm", "double", "0.0",
           "Clip gradients to this global L2 norm (0: no clipping)">,
    Option<"masterDtype", "master-dtype", "std::string", "\"f32\"",
           "f32: an fp32 master copy of each parameter that is not f32; "
           "bf16: the bf16 parameter is its own master">,
    Option<"momentDtype", "moment-dtype", "std::string", "\"f32\"",
           "Element type of both moments: f32 or bf16">,
    Option<"microBatches", "micro-batches", "int64_t", "1",
           "Micro-batches per optimizer step: the step sums the gradients "
           "over them and updates with their mean (1: no accumulation)">,
  ];
}

def DCOffloadOptimizerState
    : Pass<"dc-offload-optimizer-state", "::mlir::ModuleOp"> {
  let summary = "Keep optimizer state in host memory (pinned) and bring it "
                "to the device for its update only";
  let description = [{
    After `dc-optimizer-in-step`: a chosen parameter's state arguments
    (moments and master) become `!dc.host` arguments the caller keeps in
    host memory. The step uploads them (`dc.reload_start` of the argument,
    on the host-to-device copy stream) for the parameter's `dc.adamw`, and
    writes the updated state back into the same host buffers
    (`dc.offload_start ... into`, on the device-to-host stream); the state
    is then no result of the step. So the state takes no device memory
    while forward and backward run.

    The copies are pipelined over the updates, one parameter ahead: the
    first offloaded parameter's upload starts with the optimizer phase
    (before the norm's first share), each next one's right after the
    previous offloaded update, and each write-back is waited before the
    next offloaded update. At most two parameters' state is on the device
    at a time, and the copies in both directions overlap the updates.

    `state=all` offloads every parameter's state; `state=budget` the
    largest first (a parameter's state together), only until the memory
    timeline fits the budget (nothing when it fits already; an error
    naming the peak when even all of it does not fit). The choice is
    recorded on the step (`dc.state_in_host`, parameter ids) for dc-report.
  }];
  let dependentDialects = ["::dc::DCDialect"];
  let options = !listconcat(DCPlanningOptions, [
    Option<"state", "state", "::dc::StateInHost", "::dc::StateInHost::Budget",
           "Which parameters' optimizer state lives in host memory: all or "
           "budget",
           [{::llvm::cl::values(
             clEnumValN(::dc::StateInHost::All, "all", "every parameter's"),
             clEnumValN(::dc::StateInHost::Budget, "budget",
                        "the largest, until the step fits the budget"))}]>,
  ]);
}

def DCAccumulateGradients
    : Pass<"dc-accumulate-gradients", "::mlir::ModuleOp"> {
  let summary = "Gradient accumulation: choose, per parameter, to sum its "
                "full gradient locally over the micro-batches and reduce it "
                "once, and make the step's accumulating and final forms";
  let description = [{
    With `micro-batches=N` > 1 the trainer (dc-run `--micro-batches N`) runs
    the step N times per optimizer step. By default every gradient is
    reduced in every micro-batch and dc-run sums the shards in fp32. For a
    parameter this pass picks, the step instead adds the full gradient into
    an fp32 accumulator of the parameter's full shape (a new argument with
    `dc.accumulator = <param id>`, held by the trainer across the optimizer
    step) and reduces it only once:

    * the step itself becomes the *final* form: before its reduction starts,
      the gradient becomes gradient + accumulator;
    * a clone, `@<step>_accumulate` (`dc.accumulates_for = @<step>`), is the
      *accumulating* form, run for micro-batches 1 .. N-1: the gradient is
      added into the accumulator, returned as a result with the same
      `dc.accumulator` attribute (the caller passes one buffer for the
      argument and the result), and neither reduced nor returned.

    The choice, per parameter whose gradient result is the wait of a
    reduce-scatter or all-reduce of a full gradient: the stream simulator's
    step time without its reduction (and with the add), against the step
    with it, saves that difference in N-1 of the N micro-batches; the final
    form's add costs once more. Parameters that save time are taken, most
    saved time per accumulator byte first, while the step's peak plus every
    accumulator (live for the whole step) fits the budget left beside the
    trainer's state. `local` names parameters to accumulate locally
    whatever the model says (tests, experiments). The decisions are recorded
    on the step (`dc.accumulation_plan`) for dc-report.
  }];
  let dependentDialects = ["::dc::DCDialect", "::mlir::linalg::LinalgDialect",
                           "::mlir::arith::ArithDialect"];
  let options = !listconcat(DCPlanningOptions, [
    Option<"microBatches", "micro-batches", "int64_t", "1",
           "Micro-batches per optimizer step (1: no accumulation, the pass "
           "does nothing)">,
    ListOption<"local", "local", "std::string",
               "Parameter names always accumulated locally">,
  ]);
}

def DCReport : Pass<"dc-report", "::mlir::ModuleOp"> {
  let summary = "Print the predicted step: time, exposed communication, "
                "peak memory, each parameter's decisions";
  let description = [{
    Runs the memory timeline and stream simulator on every step function and
    prints what they predict: step time; compute, collective and copy time
    and how much of each is exposed (not overlapped), and what host copies
    add to the compute they overlap (the target's `copyComputeSlowdown`,
    where there is any); peak device memory and
    the op where it happens; and for each parameter whether it is sharded,
    how many gathers it takes, in which dtype, in which fused groups, and
    the lead and stall of its waits. With `optimizer-state-bytes` it also
    predicts the trainer's optimizer step (dc-run's device AdamW: per
    parameter element it reads the gradient and the state and writes the
    state and the parameter, at the target's memory bandwidth) and the trainer step, the step
    then the update, which is what dc-run's `time_ms` measures. `json`
    prints the same as JSON for tools; `trace` writes the predicted streams
    as a Chrome trace (Perfetto-viewable). The IR is not changed.
  }];
  let options = !listconcat(DCPlanningOptions, [
    Option<"json", "json", "bool", "false", "Print JSON instead of text">,
    Option<"output", "output", "std::string", "\"-\"",
           "Where to write the report (- for stdout)">,
    Option<"trace", "trace", "std::string", "\"\"",
           "Write the predicted streams as a Chrome trace JSON file">,
  ]);
}

def DCVerifySchedule : Pass<"dc-verify-schedule", "::mlir::ModuleOp"> {
  let summary = "Prove a dc schedule is safe and fits its memory budget";
  let description = [{
    Checks, for every function: each future is waited exactly once; no
    gathered parameter or reloaded value (the wait of a `dc.reload_start`)
    is used after its `dc.release`, directly or through a view, read by a
    start op waited after it, or released twice; every gather is released
    or persistent (a reloaded value may go unreleased: it then lives until
    the step ends); in buffer form, nothing touches the output of a
    `dc.all_to_all_start` (or writes its input) between the start and its
    wait; and, when the module has a `#dc.target`, the memory timeline's
    peak fits its budget.
    Each error names the op.
  }];
  let dependentDialects = ["::dc::DCDialect"];
  let options = [
    Option<"optimizerStateBytes", "optimizer-state-bytes", "int64_t", "0",
           "Device bytes the trainer keeps per element of each parameter's "
           "local shard (its optimizer state; dc-run's AdamW: 12, an fp32 "
           "master and two fp32 moments), counted against the budget">,
  ];
}

#endif // DC_SCHEDULE_PASSES_TD
