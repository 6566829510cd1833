//===- Passes.td - dc lowering passes ----------------------*- tablegen -*-===//
#ifndef DC_LOWERING_PASSES_TD
#define DC_LOWERING_PASSES_TD

include "mlir/Pass/PassBase.td"

def DCArtifactManifest : Pass<"dc-artifact-manifest", "::mlir::ModuleOp"> {
  let summary = "Describe the step functions for the runtime: manifest, ABI "
                "version and entry names";
  let description = [{
    Runs on the tensor-level module (scheduled or not), where parameters,
    shards and gradients are still visible, and adds what the artifact
    exports besides its entries:

    - `dc_artifact_abi_version()`, returning `DCRT_ABI_VERSION`;
    - `dc_artifact_manifest()`, returning the JSON that `dcrt.h` describes:
      the lowering of the module's `#dc.target` (`target`: host or
      cuda_sm90, which picks the runtime's backend), world size and grid,
      per step its entry and its arguments (parameters
      with id, name, shape, dtype and, when sharded, `local`; data) and
      results (loss, gradients), and the plan. The plan's
      `gather_arena_bytes` is the peak bytes of gathered tensors live at once
      and `host_pool_bytes` the peak bytes held in host memory, both by the
      memory timeline, the largest over the steps.

    Every public function with a body is a step. Each gets
    `dc.entry = "dc_entry_<name>"` (read by `dc-artifact-entries`) and its
    arguments `bufferization.writable = false`: they are the caller's
    buffers, which bufferization must never write.

    Fails, naming the value, on what the runtime ABI cannot express: a
    dynamic shape, an element type without a `dcrt_dtype`, a result that is
    neither `dc.loss` nor `dc.grad`, a grid with more than one axis of
    several ranks (the runtime has one communicator, the world), or a world
    size other than `world-size` when that is given; and, naming the op, on
    what the lowering cannot take: ops outside the func, linalg, tensor,
    arith, math, scf, affine, cf, memref, bufferization, ub and dc dialects,
    calls of functions without a body.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
  let options = [
    Option<"worldSize", "world-size", "int64_t", "0",
           "Expected world size; 0 takes it from the grid (1 without one)">,
    Option<"checkFinite", "check-finite", "bool", "false",
           "The step checks its ops' outputs (dc-check-finite): the manifest "
           "says \"check_finite\": true, which dc-run --check-finite needs">,
  ];
}

def DCProfileOps : Pass<"dc-profile-ops", "::mlir::ModuleOp"> {
  let summary = "Bracket each compute op of the steps with the runtime's "
                "profiling hooks";
  let description = [{
    For a profiling run: on the tensor-level module, every op of a step's
    body that the cost model times (one `dc::getProfileKey` names,
    `"<function>:<ordinal>"`; constants excepted) gets
    `t = dcrt_op_begin()` before it and `dcrt_op_end("<key>", t)` after it.
    The ops keep their order through the lowering, so each pair brackets
    the loops the op becomes. dc-run averages the times into
    `--profile-out`, the profile the planning passes read (`profile=`).
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def DCExpandStridedCopies : Pass<"dc-expand-strided-copies"> {
  let options = [
    Option<"all", "all", "bool", "false",
           "Rewrite every copy, contiguous ones too (the GPU target: no "
           "host memcpy on device memory)">,
  ];
  let summary = "Turn copies between non-contiguous buffers into linalg.copy";
  let description = [{
    `finalize-memref-to-llvm` lowers a `memref.copy` of contiguous buffers to
    `llvm.memcpy`, but any other copy (into a slice, as a
    `tensor.insert_slice` bufferizes) to a call of `memrefCopy` from MLIR's
    runner utilities, which an artifact does not link. This pass rewrites
    exactly those copies into `linalg.copy`, which lowers to loops with the
    rest of the compute.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def DCToDCRT : Pass<"dc-to-dcrt", "::mlir::ModuleOp"> {
  let summary = "Lower bufferized dc ops to calls of the dcrt C runtime";
  let description = [{
    Rewrites every dc op in buffer form into LLVM dialect calls of the
    `dcrt_*` functions of `runtime/include/dcrt/dcrt.h`, declared in the
    module and resolved when the artifact is loaded. The async structure
    stays: a start op becomes one `dcrt_*_start` call, its futures the
    returned `dcrt_future` handle plus the stack slot the runtime writes the
    buffer address to; the first `dc.wait` (or `dc.end_backward`) of a start
    op in block order calls `dcrt_wait` on the handle (one group or bucket is
    one handle, waited exactly once), every wait then loads its buffer's
    address from the slot. Operand lists are arrays built on the stack.

    A persistent gather is released (`dcrt_release`) before the function
    returns, so the gather arena holds one step's tensors. The `shard.grid`
    ops are erased: the runtime's communicator is the whole world.

    Memref values stay memrefs outside dc ops (unrealized casts join them),
    so this pass runs before `finalize-memref-to-llvm` and
    `convert-func-to-llvm`, which resolve the casts.

    The GPU target's work is enqueued the same way: each `gpu.launch_func`
    of a kernel compiled into a `gpu.binary` becomes `dcrt_launch_kernel`
    (the binary a constant global, each parameter a stack slot, a buffer
    passing its descriptor's fields), and with `matmul-calls` each library
    matrix product (`linalg.matmul` / `batch_matmul` in a form cuBLASLt
    takes) becomes `dcrt_matmul` with its descriptor.

    On every target the mixture-of-experts buffer ops (`dc.topk_into`,
    `dc.group_by_expert_into`, `dc.gather_rows_into`,
    `dc.scatter_add_rows_into`, `dc.grouped_matmul_into`,
    `dc.grouped_weight_grad_into`) become one call each (`dcrt_topk`, ...)
    with a descriptor of compile-time fields: shapes, dtypes and the row
    strides of their views, whose offsets go into the operand addresses.
  }];
  let options = [
    Option<"matmulCalls", "matmul-calls", "bool", "false",
           "Lower linalg.matmul / batch_matmul to dcrt_matmul (the GPU "
           "target) instead of leaving them for loops">,
  ];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def DCArtifactEntries : Pass<"dc-artifact-entries", "::mlir::ModuleOp"> {
  let summary = "Export dc_entry_<step>(void **buffers) for each step";
  let description = [{
    Runs on the LLVM dialect module, after `convert-func-to-llvm` with the
    bare-pointer calling convention, when a step takes one pointer per
    argument and per result (out-parameter). For each function marked
    `dc.entry` it adds that exported entry: it loads the pointers from the
    `buffers` array (arguments, then results, in order), calls the step,
    then `dcrt_end_step()`. The step itself gets internal linkage, so the
    artifact exports only its entries, `dc_artifact_abi_version` and
    `dc_artifact_manifest`.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def DCAssignStepArena : Pass<"dc-assign-step-arena", "::mlir::ModuleOp"> {
  let summary = "Place every temporary buffer of a step at a planned offset "
                "in one step arena";
  let description = [{
    Static buffer assignment, on the bufferized module: every statically
    shaped `memref.alloc` in a step's body (not inside a loop or another
    region) becomes a `memref.view` of the step arena (`dc.step_arena`) at
    an offset planned here, and its `memref.dealloc`s go. Two buffers share
    bytes only if their lifetimes do not overlap. A buffer lives from its
    alloc to the last top-level op that uses it or a buffer derived from it
    (a view, a loop result carrying it: any buffer an op taking it returns);
    a use by an async start op lasts until the last
    op that uses the start's futures (its `dc.wait` or `dc.end_backward`),
    since the transfer reads the buffer until then. The destination of a
    `dc.reload_start` is such a temporary too: what its wait yields names
    the same bytes, so the reloaded value's uses extend it (a reload needs
    no device memory of the runtime's own). Buffers are placed
    largest first, each at the lowest offset (a multiple of `alignment`)
    free for its whole lifetime.

    Buffers that escape the step (a view returned) and allocs inside
    regions stay allocations. The arena's size goes into the manifest
    (`plan.step_arena_bytes`, the largest over the steps) and the runtime
    allocates it once at `dcrt_init`: a step allocates no device memory.
  }];
  let options = [
    Option<"alignment", "alignment", "int64_t", "256",
           "Offset alignment of every buffer (bytes, a power of two)">,
  ];
  let dependentDialects = ["::dc::DCDialect", "::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect"];
}

def DCCheckFinite : Pass<"dc-check-finite", "::mlir::ModuleOp"> {
  let summary = "Check each compute op's outputs for NaN and infinity "
                "(dc-compile --check-finite)";
  let description = [{
    For a model that diverges: after every op of a public step that
    computes into memory (a `gpu.launch`, a linalg op other than fills and
    copies, `dc.attention_into`, `dc.attention_grad_into`), a
    `dc.check_finite` of each float buffer it writes (for a launch: the
    buffers its body stores into, through its views), named by the op's
    location (`"<function>: <op> of <names> at <file>:<line>"`: the PyTorch
    frontend's FX node and model source line). An op that uses an infinite
    constant (a mask's -inf, a maximum's identity) may write infinities on
    purpose: its checks are `allow_inf`, NaN only. Strided (non-contiguous)
    outputs are not checked. Runs on the buffer form, after the GPU
    target's kernels are formed (`dc-map-to-gpu`), so the checked program
    has the unchecked one's kernels; `dc-to-dcrt` lowers the checks to
    `dcrt_check_finite` and the runtime reports the first failing one of a
    step, in program order (`dc-run --check-finite`).
  }];
  let dependentDialects = ["::dc::DCDialect"];
}

#endif // DC_LOWERING_PASSES_TD
