//===- DCOps.td - dc operations --------------------------------*- tablegen -*-===//
#ifndef DC_OPS_TD
#define DC_OPS_TD

include "dc/Dialect/DC/IR/DCBase.td"
include "dc/Dialect/DC/IR/DCTypes.td"
include "dc/Dialect/DC/IR/DCAttrs.td"
include "dc/Dialect/DC/IR/DCInterfaces.td"
include "mlir/Dialect/Shard/IR/ShardBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

// Buffer forms, after bufferization: statically shaped memrefs with the
// identity layout (the dense row-major storage the runtime exchanges), on the
// device (default memory space) or in the host pool (#dc.host_memory).
def DC_DeviceBuffer : Type<CPred<"::dc::isDeviceBuffer($_self)">,
    "statically shaped identity-layout memref (device)", "::mlir::MemRefType">;
def DC_HostBuffer : Type<CPred<"::dc::isHostBuffer($_self)">,
    "statically shaped identity-layout memref in #dc.host_memory",
    "::mlir::MemRefType">;

// Static shapes only: a future or host value of a dynamic tensor is invalid.
def DC_AnyValueOnDevice
    : AnyTypeOf<[AnyStaticShapeTensor, DC_AnyShard, DC_DeviceBuffer]>;
def DC_ShardOrBuffer : AnyTypeOf<[DC_AnyShard, DC_DeviceBuffer]>;
def DC_TensorOrBuffer : AnyTypeOf<[AnyRankedTensor, DC_DeviceBuffer]>;
def DC_ReleasedValue
    : AnyTypeOf<[AnyRankedTensor, DC_AnyShard, DC_DeviceBuffer]>;

// Arguments several ops share.
// How a reduction combines the ranks' values: upstream's
// mlir::shard::ReductionKind, of which dc (and the runtime) take `sum` and
// `average`.
defvar DC_ReductionArgs = (ins Shard_ReductionKindAttr:$kind);
// The communicator: axis `axis` of the shard.grid `grid`.
defvar DC_GridAxisArgs = (ins FlatSymbolRefAttr:$grid, I64Attr:$axis);

//===----------------------------------------------------------------------===//
// Parameter gathers (ZeRO-3)
//===----------------------------------------------------------------------===//

def DC_GatherStartOp : DC_Op<"gather_start", [
    DC_AsyncStartOpInterface,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    MemoryEffects<[MemAlloc<DC_GatherArena>, MemWrite<DC_Communicator>]>]> {
  let summary = "start all-gathering one or more parameter shards (one group)";
  let description = [{
    Starts an all-gather of each shard over its grid axis into a full tensor
    in the gather arena and returns a future per shard. With several shards
    the gathers form one communication group (one NCCL group call): this is
    how `dc-prefetch` fuses neighbouring gathers. A group runs on one
    communicator, so all its shards must be split over the same grid axis,
    and it gathers each shard value once.

    A result element type narrower than the shard's (e.g. `f32` shard,
    `bf16` result) means the shard is cast before it is sent, so half the
    bytes move; `dc-zero3` does this when a parameter's only use is such a
    cast.

    `persistent` marks a gather whose full tensor stays live until the end of
    the step (no `dc.release`); `dc-selective-gather` sets it.

    After bufferization each shard is its local buffer `memref<local x T>`
    and each future holds the full buffer, which the runtime allocates in its
    gather arena (no copy). A memref does not say which grid axes it is
    split over, so bufferization records the shards' group in `axis`, which
    the lowering passes to the runtime: their axis, or -1 (DCRT_ALL_AXES)
    for shards over every axis of the grid (absent: axis 0). On shards,
    `axis` may be given only if it is theirs:

    ```mlir
    %f = dc.gather_start %w {axis = 1 : i64}
        : memref<32xf32> -> !dc.future<memref<8x8xf32>>
    ```

    ```mlir
    %f0, %f1 = dc.gather_start %w0, %w1
        : !dc.shard<tensor<8x8xf32>, @world[0], local = 32>,
          !dc.shard<tensor<8xf32>, @world[0], local = 4>
       -> !dc.future<tensor<8x8xf32>>, !dc.future<tensor<8xf32>>
    ```
  }];
  let arguments = (ins Variadic<DC_ShardOrBuffer>:$shards,
                       UnitAttr:$persistent, OptionalAttr<I64Attr>:$axis);
  let results = (outs Variadic<DC_AnyFuture>:$futures);
  // The passes build shard forms, whose type says the axis.
  let builders = [
    OpBuilder<(ins "::mlir::TypeRange":$futures, "::mlir::ValueRange":$shards,
                   "bool":$persistent), [{
      build($_builder, $_state, futures, shards, persistent,
            ::mlir::IntegerAttr());
    }]>
  ];
  let assemblyFormat = [{
    $shards attr-dict `:` qualified(type($shards)) `->` qualified(type($futures))
  }];
  let hasVerifier = 1;
}

def DC_WaitOp : DC_Op<"wait", [
    TypesMatchWith<"result type is the future's value type", "future", "result",
                   "::llvm::cast<::dc::FutureType>($_self).getValue()">,
    MemoryEffects<[MemRead<DC_Communicator>, MemWrite<DC_Communicator>]>]> {
  let summary = "wait for an asynchronous op and take its value";
  let description = [{
    Blocks the compute stream until the transfer behind `future` completes
    and yields its value: a gathered tensor, a reduced gradient shard, a
    host copy, a reloaded tensor or an exchanged activation
    (`dc.all_to_all_start`). Each future must be waited exactly once.
    After bufferization the value is a memref: the runtime's buffer, or for
    a `dc.reload_start` (`dc.all_to_all_start`) the destination it copied
    (exchanged) into.

    ```mlir
    %w = dc.wait %f : !dc.future<tensor<8x8xf32>>
    ```
  }];
  let arguments = (ins DC_AnyFuture:$future);
  let results = (outs AnyType:$result);
  let assemblyFormat = "$future attr-dict `:` qualified(type($future))";
}

def DC_ReleaseOp : DC_Op<"release", [MemoryEffects<[MemFree<DC_GatherArena>]>]> {
  let summary = "free a gathered parameter or a reloaded value";
  let description = [{
    Frees the device buffer a transfer handed out, once it is no longer
    used:

    - a gathered parameter (the result of `dc.wait` on a `dc.gather_start`
      future, not persistent) goes back to the gather arena;
    - a reloaded value (the result of `dc.wait` on a `dc.reload_start`
      future: an activation reloaded by `dc-offload-activations`, or a
      parameter shard uploaded by `dc-offload-params`) is dead from here.

    The value must not be used after it (nor its views); `dc-verify-schedule`
    proves that. `dc-zero3` releases every gather after its interval's last
    use, and the offload passes release every reloaded value after its last
    use (an uploaded shard: after its gather's wait), which is where the
    memory timeline frees it. A reloaded value without a release (hand-written
    IR) lives until the end of the step. The buffer form releases a gathered
    buffer (`dcrt_release`); a reloaded value has none there, since it is
    the reload's destination, an ordinary temporary whose lifetime is its
    uses (bufferization drops its release).

    ```mlir
    dc.release %w : tensor<8x8xf32>
    dc.release %s : !dc.shard<tensor<16x16xf32>, @world[0], local = 128>
    ```
  }];
  let arguments = (ins DC_ReleasedValue:$value);
  let assemblyFormat = "$value attr-dict `:` qualified(type($value))";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Gradient reduction
//===----------------------------------------------------------------------===//

def DC_ReduceScatterStartOp : DC_Op<"reduce_scatter_start", [
    DC_AsyncStartOpInterface,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    MemoryEffects<[MemAlloc<DC_GatherArena>, MemWrite<DC_Communicator>]>]> {
  let summary = "start reduce-scattering gradients into shards (one bucket)";
  let description = [{
    Starts a reduce-scatter (`sum` or `average` over the grid axis) of each full
    gradient into the shard layout of its parameter. The gradients of one op
    form one bucket: they are packed into one padded buffer and reduced in
    one group call, so all their shards must be split over the same grid
    axis. The futures are taken by `dc.wait` or, at the end of
    backward, `dc.end_backward`. After bufferization the gradients are
    buffers the runtime reads until the wait, and the futures hold the
    runtime's buffers of the reduced slices, `memref<local x T>`; `axis`
    keeps the shards' grid axis there, as on `dc.gather_start`.

    ```mlir
    %f = dc.reduce_scatter_start average %g : tensor<8x8xf32>
        -> !dc.future<!dc.shard<tensor<8x8xf32>, @world[0], local = 32>>
    ```
  }];
  let arguments = !con(DC_ReductionArgs,
                       (ins Variadic<DC_TensorOrBuffer>:$gradients,
                            OptionalAttr<I64Attr>:$axis));
  let results = (outs Variadic<DC_AnyFuture>:$futures);
  let builders = [
    OpBuilder<(ins "::mlir::TypeRange":$futures,
                   "::mlir::shard::ReductionKind":$kind,
                   "::mlir::ValueRange":$gradients), [{
      build($_builder, $_state, futures, kind, gradients,
            ::mlir::IntegerAttr());
    }]>
  ];
  let assemblyFormat = [{
    $kind $gradients attr-dict `:` type($gradients) `->` qualified(type($futures))
  }];
  let hasVerifier = 1;
}

def DC_EndBackwardOp : DC_Op<"end_backward", [
    DeclareOpInterfaceMethods<InferTypeOpInterface>,
    MemoryEffects<[MemRead<DC_Communicator>, MemWrite<DC_Communicator>]>]> {
  let summary = "flush: wait for every outstanding gradient reduction";
  let description = [{
    The end-of-backward barrier: waits for the reduce-scatters behind all
    `futures` (each from `dc.reduce_scatter_start`, each listed once) and
    yields the reduced gradient shards, in order. Equivalent to one `dc.wait`
    per future, but lets the runtime flush partially filled buckets in one go.

    ```mlir
    %g0, %g1 = dc.end_backward %f0, %f1
        : !dc.future<!dc.shard<tensor<8x8xf32>, @world[0], local = 32>>,
          !dc.future<!dc.shard<tensor<8xf32>, @world[0], local = 4>>
    ```
  }];
  let arguments = (ins Variadic<DC_AnyFuture>:$futures);
  let results = (outs Variadic<DC_ShardOrBuffer>:$shards);
  let assemblyFormat = "$futures attr-dict `:` qualified(type($futures))";
  let hasVerifier = 1;
}

def DC_AllReduceStartOp : DC_Op<"all_reduce_start", [
    DC_AsyncStartOpInterface,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    TypesMatchWith<"result is a future of the reduced tensor", "input",
                   "future", "::dc::FutureType::get($_self)">,
    MemoryEffects<[MemAlloc<DC_GatherArena>, MemWrite<DC_Communicator>]>]> {
  let summary = "start all-reducing a replicated gradient (or the loss)";
  let description = [{
    Starts a `sum` or `average` all-reduce of `input` over axis `axis` of `grid`
    and returns a future of the reduced tensor. `dc-zero3` uses it for the
    gradients of parameters small enough to stay replicated. After
    bufferization the input is a buffer the runtime reads until the wait and
    the future holds the runtime's buffer of the result.

    The input may be a shard split over another axis of the same grid: its
    local slice is all-reduced over `axis` (hierarchical sharding: a
    gradient reduce-scattered inside a node, then all-reduced across the
    nodes that hold the same shard).

    ```mlir
    %f = dc.all_reduce_start average %g on @world[0] : tensor<16xf32>
    %r = dc.wait %f : !dc.future<tensor<16xf32>>
    %h = dc.all_reduce_start average %s on @nodes[0]
        : !dc.shard<tensor<16xf32>, @nodes[1], local = 2>
    ```
  }];
  let arguments = !con(DC_ReductionArgs,
      (ins AnyTypeOf<[AnyStaticShapeTensor, DC_AnyShard, DC_DeviceBuffer]>:$input),
      DC_GridAxisArgs);
  let results = (outs DC_AnyFuture:$future);
  let assemblyFormat = [{
    $kind $input `on` $grid `[` $axis `]` attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Host offload (activations and parameter shards)
//===----------------------------------------------------------------------===//

def DC_OffloadStartOp : DC_Op<"offload_start", [
    DC_AsyncStartOpInterface,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    TypesMatchWith<"result is a future of the value in host memory", "value",
                   "future",
                   "::dc::FutureType::get(::dc::getHostValueType($_self))">,
    MemoryEffects<[MemAlloc<DC_HostPool>, MemWrite<DC_HostPool>]>]> {
  let summary = "start copying a device value to host memory";
  let description = [{
    Starts copying an activation (a tensor) or a parameter shard (ZeRO-
    Offload) to the runtime's host pool on the device-to-host copy stream.
    The device buffer stays live until the future is waited; after the wait
    only the `!dc.host` value remains. After bufferization the host value is
    a memref in `#dc.host_memory`:

    ```mlir
    %f = dc.offload_start %act : memref<4x16xf32>
    %h = dc.wait %f : !dc.future<memref<4x16xf32, #dc.host_memory>>
    ```

    ```mlir
    %f = dc.offload_start %act : tensor<4x16xf32>
    %h = dc.wait %f : !dc.future<!dc.host<tensor<4x16xf32>>>
    ```

    With `into` the copy goes to `destination` instead, a step argument the
    caller keeps in host memory (optimizer state kept on the host by
    `dc-offload-optimizer-state`), which it overwrites: the step writes the
    updated value back into the caller's buffer (`dcrt_download_into`), and
    the future's value is that buffer.

    ```mlir
    %f = dc.offload_start %m1 into %m : tensor<16xf32> into !dc.host<tensor<16xf32>>
    %h = dc.wait %f : !dc.future<!dc.host<tensor<16xf32>>>
    ```
  }];
  let arguments = (ins DC_AnyValueOnDevice:$value,
                       Arg<Optional<AnyTypeOf<[DC_AnyHost, DC_HostBuffer]>>,
                           "the caller's host buffer the copy writes",
                           [MemWrite]>:$destination);
  let results = (outs DC_AnyFuture:$future);
  let assemblyFormat = [{
    $value (`into` $destination^)? attr-dict `:` type($value)
    (`into` type($destination)^)?
  }];
  // The passes build the pool form.
  let builders = [
    OpBuilder<(ins "::mlir::Value":$value), [{
      build($_builder, $_state, value, ::mlir::Value());
    }]>
  ];
  let hasVerifier = 1;
}

def DC_ReloadStartOp : DC_Op<"reload_start", [
    DC_AsyncStartOpInterface,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    TypesMatchWith<"result is a future of the device value", "host", "future",
                   "::dc::FutureType::get(::dc::getDeviceValueType($_self))">,
    MemoryEffects<[MemRead<DC_HostPool>, MemFree<DC_HostPool>]>]> {
  let summary = "start copying a host value back to the device";
  let description = [{
    Starts the host-to-device copy of an offloaded value on the reload copy
    stream and returns a future of the device value; the host buffer goes
    back to the pool once the copy completes. A step argument (a parameter
    shard kept in host memory by `dc-offload-params`) is the caller's buffer
    instead: it is copied and left as it is.

    In buffer form it reads a `#dc.host_memory` memref and copies into
    `destination`, a device buffer of the value's type that bufferization
    allocates (a `memref.alloc`, which `dc-assign-step-arena` places in the
    step arena like every other temporary); the future's value, after its
    wait, is that destination. The tensor form has no destination.

    ```mlir
    %f = dc.reload_start %h : !dc.host<tensor<4x16xf32>>
    %act = dc.wait %f : !dc.future<tensor<4x16xf32>>
    ```

    ```mlir
    %d = memref.alloc() : memref<4x16xf32>
    %f = dc.reload_start %h into %d
        : memref<4x16xf32, #dc.host_memory> into memref<4x16xf32>
    %act = dc.wait %f : !dc.future<memref<4x16xf32>>
    ```
  }];
  let arguments = (ins AnyTypeOf<[DC_AnyHost, DC_HostBuffer]>:$host,
                       Arg<Optional<DC_DeviceBuffer>,
                           "the device buffer the copy writes (buffer form)",
                           [MemWrite]>:$destination);
  let results = (outs DC_AnyFuture:$future);
  // The passes build the tensor form.
  let builders = [
    OpBuilder<(ins "::mlir::Value":$host), [{
      build($_builder, $_state, host, ::mlir::Value());
    }]>
  ];
  let assemblyFormat = [{
    $host (`into` $destination^)? attr-dict `:` qualified(type($host))
    (`into` type($destination)^)?
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Sequence parallelism (Ulysses)
//===----------------------------------------------------------------------===//

def DC_AllToAllOp : DC_Op<"all_to_all", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    MemoryEffects<[MemWrite<DC_Communicator>]>]> {
  let summary = "all-to-all over a grid axis: split one dim, concat another";
  let description = [{
    Each rank of axis `axis` of `grid` splits `input` into equal pieces along
    `split_dim`, sends piece i to rank i, and concatenates what it receives
    along `concat_dim`. Ulysses sequence parallelism uses it to turn a
    sequence-sharded activation into a head-sharded one before attention and
    back after it. The result type must be the input type with `split_dim`
    divided and `concat_dim` multiplied by the axis size. `split_dim` may
    equal `concat_dim`, as in a general all-to-all: the shape is then
    unchanged and the op exchanges blocks of that dim between the ranks.

    The op is synchronous (the runtime's start, then its wait at once);
    `dc.all_to_all_start` is the asynchronous form, which `dc-ulysses`
    emits. Its buffer form writes into `output` and has no result:

    ```mlir
    dc.all_to_all %x on @world[0] split 2 concat 1 into %y
        : memref<1x512x32x64xbf16> into memref<1x1024x16x64xbf16>
    ```

    ```mlir
    %h = dc.all_to_all %x on @world[0] split 2 concat 1
        : tensor<1x512x32x64xbf16> -> tensor<1x1024x16x64xbf16>
    ```
  }];
  let arguments = !con((ins DC_TensorOrBuffer:$input), DC_GridAxisArgs,
                       (ins I64Attr:$split_dim, I64Attr:$concat_dim,
                            Optional<DC_DeviceBuffer>:$output));
  let results = (outs Optional<AnyRankedTensor>:$result);
  let assemblyFormat = [{
    $input `on` $grid `[` $axis `]` `split` $split_dim `concat` $concat_dim
    (`into` $output^)? attr-dict `:` type($input) (`into` type($output)^)?
    (`->` type($result)^)?
  }];
  let extraClassDeclaration = [{
    /// The shape the op produces: its result (tensors) or output (buffers).
    ::mlir::ShapedType getOutputType();
  }];
  let hasVerifier = 1;
}

def DC_AllToAllStartOp : DC_Op<"all_to_all_start", [
    DC_AsyncStartOpInterface,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    MemoryEffects<[MemWrite<DC_Communicator>]>]> {
  let summary = "start an all-to-all over a grid axis (split one dim, concat "
                "another)";
  let description = [{
    The asynchronous form of `dc.all_to_all` (same exchange, same shape
    rule): starts the exchange on the collective stream and returns a future
    of the exchanged tensor, which one `dc.wait` takes. The op reads `input`
    until that wait, and compute between the start and the wait (other
    projections, other exchanges) overlaps the transfer. `dc-ulysses`
    starts each exchange right after its input is produced and waits right
    before its first use.

    In buffer form it writes `output`, a device buffer of the exchanged type
    that bufferization allocates (a `memref.alloc`, which
    `dc-assign-step-arena` places in the step arena); the future's value,
    after its wait, is that buffer, as on `dc.reload_start`. The tensor form
    has no output.

    ```mlir
    %f = dc.all_to_all_start %x on @world[0] split 1 concat 2
        : tensor<1x32x512x64xbf16> -> !dc.future<tensor<1x16x1024x64xbf16>>
    %h = dc.wait %f : !dc.future<tensor<1x16x1024x64xbf16>>
    ```

    ```mlir
    %y = memref.alloc() : memref<1x16x1024x64xbf16>
    %f = dc.all_to_all_start %x on @world[0] split 1 concat 2 into %y
        : memref<1x32x512x64xbf16> into memref<1x16x1024x64xbf16>
       -> !dc.future<memref<1x16x1024x64xbf16>>
    ```
  }];
  let arguments = !con(
      (ins Arg<DC_TensorOrBuffer, "read until the wait", [MemRead]>:$input),
      DC_GridAxisArgs,
      (ins I64Attr:$split_dim, I64Attr:$concat_dim,
           Arg<Optional<DC_DeviceBuffer>,
               "the device buffer the exchange writes (buffer form)",
               [MemWrite]>:$output));
  let results = (outs DC_AnyFuture:$future);
  // The passes build the tensor form.
  let builders = [
    OpBuilder<(ins "::mlir::Type":$future, "::mlir::Value":$input,
                   "::llvm::StringRef":$grid, "int64_t":$axis,
                   "int64_t":$split_dim, "int64_t":$concat_dim), [{
      build($_builder, $_state, future, input, grid, axis, split_dim,
            concat_dim, ::mlir::Value());
    }]>
  ];
  let assemblyFormat = [{
    $input `on` $grid `[` $axis `]` `split` $split_dim `concat` $concat_dim
    (`into` $output^)? attr-dict `:` type($input) (`into` type($output)^)?
    `->` qualified(type($future))
  }];
  let extraClassDeclaration = [{
    /// The exchanged type: the future's value.
    ::mlir::ShapedType getOutputType();
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Finite-value checks (dc-compile --check-finite)
//===----------------------------------------------------------------------===//

def DC_CheckFiniteOp : DC_Op<"check_finite"> {
  let summary = "check that an op's output holds no NaN or infinity";
  let description = [{
    Reads `buffer`, a contiguous float buffer in device memory that the op
    before it wrote, and tells the runtime when it holds a NaN or (unless
    `allow_inf`: the op writes infinities on purpose, as a mask does) an
    infinity; `site` names the op (its location: the PyTorch frontend's FX
    node and model source line). `dc-check-finite` adds these after each
    compute op and `dc-to-dcrt` lowers them to `dcrt_check_finite`: the
    runtime reports the first one of a step that failed, in program order.

    ```mlir
    dc.check_finite %t, "mul_3 at model.py:41" : memref<2x7x16xf32>
    dc.check_finite %scores, "masked_fill at model.py:52" allow_inf
        : memref<2x4x7x7xf32>
    ```
  }];
  let arguments = (ins Arg<AnyMemRef, "", [MemRead]>:$buffer, StrAttr:$site,
                       UnitAttr:$allow_inf);
  let assemblyFormat = [{
    $buffer `,` $site (`allow_inf` $allow_inf^)? attr-dict `:` type($buffer)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Runtime-only ops for profiling runs
//===----------------------------------------------------------------------===//

def DC_InvalidateGatheredOp : DC_Op<"invalidate_gathered", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    MemoryEffects<[MemFree<DC_GatherArena>]>]> {
  let summary = "drop any gathered copy the runtime holds for a parameter";
  let description = [{
    Profiling runs measure each gather by forcing it: this drops a cached
    (persistent) full copy of the parameter behind `shard` so that the next
    gather really communicates.

    ```mlir
    dc.invalidate_gathered %w : !dc.shard<tensor<8x8xf32>, @world[0], local = 32>
    ```
  }];
  let arguments = (ins DC_ShardOrBuffer:$shard);
  let assemblyFormat = "$shard attr-dict `:` qualified(type($shard))";
}

def DC_ClearGatheredOp : DC_Op<"clear_gathered", [
    MemoryEffects<[MemFree<DC_GatherArena>]>]> {
  let summary = "free every gathered parameter the runtime holds";
  let description = [{
    Returns the whole gather arena, persistent gathers included: used between
    profiling runs and before a checkpoint restore.

    ```mlir
    dc.clear_gathered
    ```
  }];
  let assemblyFormat = "attr-dict";
}

//===----------------------------------------------------------------------===//
// Planned memory (buffer form)
//===----------------------------------------------------------------------===//

def DC_StepArenaOp : DC_Op<"step_arena", [Pure]> {
  let summary = "the step arena: the device memory of a step's temporaries";
  let description = [{
    The base of the step arena, `step_arena_bytes` of device memory the
    runtime allocates once at `dcrt_init` (256-byte aligned) and that holds
    every temporary buffer of a step at an offset planned at compile time.
    `dc-assign-step-arena` makes it: each `memref.alloc` of a step becomes a
    `memref.view` of this buffer, and buffers whose lifetimes do not overlap
    share bytes. The result is a 1-D `i8` buffer of the arena's size; the
    op lowers to `dcrt_step_arena()`.

    ```mlir
    %arena = dc.step_arena : memref<4096xi8>
    %t = memref.view %arena[%c1024][] : memref<4096xi8> to memref<16x16xf32>
    ```
  }];
  let results = (outs AnyMemRef:$arena);
  let assemblyFormat = "attr-dict `:` qualified(type($arena))";
  let hasVerifier = 1;
}

#endif // DC_OPS_TD
