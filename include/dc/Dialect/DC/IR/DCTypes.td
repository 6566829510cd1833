//===- DCTypes.td - dc types ----------------------------------*- tablegen -*-===//
#ifndef DC_TYPES_TD
#define DC_TYPES_TD

include "dc/Dialect/DC/IR/DCBase.td"
include "mlir/IR/BuiltinTypeInterfaces.td"

class DC_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<DC_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

def DC_ShardType : DC_Type<"Shard", "shard"> {
  let summary = "one rank's slice of a tensor split over grid axes";
  let description = [{
    The local piece of a tensor whose logical (full) type is `logical`, split
    evenly over the axes `axes` of the grid `grid` (one axis, or every axis
    of the grid: the runtime has a communicator for each axis and one for
    the whole grid). The ranks of those axes, numbered row-major in the
    grid's order, each hold `local` consecutive elements of the tensor
    flattened in row-major order, `local = ceil(numel / ranks)`; the last
    slot is padded when the sizes do not divide. Ranks that differ only on
    the other axes hold the same slot. Ops that use a shard type check
    `local` and the axes against the grid (`verifySymbolUses`).

    ```mlir
    !dc.shard<tensor<1000x3xf32>, @world[0], local = 1500>
    !dc.shard<tensor<1000x3xf32>, @dpsp[0, 1], local = 750>
    ```
  }];
  let parameters = (ins "::mlir::RankedTensorType":$logical,
                        "::mlir::FlatSymbolRefAttr":$grid,
                        ArrayRefParameter<"int64_t", "grid axes">:$axes,
                        "int64_t":$local);
  let assemblyFormat = "`<` $logical `,` $grid `[` $axes `]` `,` `local` `=` $local `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The element type of the logical tensor (and of the local slice).
    ::mlir::Type getElementType() const { return getLogical().getElementType(); }
    /// The local slice as a flat tensor type: tensor<local x elt>.
    ::mlir::RankedTensorType getLocalTensorType() const;
    /// Bytes of the local slice.
    int64_t getLocalBytes() const;
    /// True if the tensor is split over grid axis `axis`.
    bool isSplitOver(int64_t axis) const {
      return ::llvm::is_contained(getAxes(), axis);
    }
    /// The runtime's process group of the shards: their one axis, or
    /// kAllGridAxes (DCRT_ALL_AXES) for several (verified IR: every axis
    /// of the grid).
    int64_t getGroupAxis() const;
  }];
}

def DC_HostType : DC_Type<"Host", "host"> {
  let summary = "a value that lives in host (CPU) memory";
  let description = [{
    A tensor or a parameter shard held in the runtime's host pool, the result
    of an offload. Only `dc.reload_start` can bring it back to the device.

    ```mlir
    !dc.host<tensor<4x2048x2048xbf16>>
    ```
  }];
  let parameters = (ins "::mlir::Type":$value);
  let builders = [
    TypeBuilderWithInferredContext<(ins "::mlir::Type":$value), [{
      return $_get(value.getContext(), value);
    }]>
  ];
  let skipDefaultBuilders = 1;
  let assemblyFormat = "`<` $value `>`";
  let genVerifyDecl = 1;
}

def DC_FutureType : DC_Type<"Future", "future"> {
  let summary = "the pending result of an asynchronous dc op";
  let description = [{
    Returned by every `*_start` op. Exactly one `dc.wait` (or
    `dc.end_backward` for gradient reductions) turns it into its value;
    `dc-verify-schedule` checks that each future is waited exactly once.

    ```mlir
    !dc.future<tensor<4096x4096xbf16>>
    ```
  }];
  let parameters = (ins "::mlir::Type":$value);
  let builders = [
    TypeBuilderWithInferredContext<(ins "::mlir::Type":$value), [{
      return $_get(value.getContext(), value);
    }]>
  ];
  let skipDefaultBuilders = 1;
  let assemblyFormat = "`<` $value `>`";
  let genVerifyDecl = 1;
}

def DC_AnyShard : Type<CPred<"::llvm::isa<::dc::ShardType>($_self)">,
                       "dc shard", "::dc::ShardType">;
def DC_AnyHost : Type<CPred<"::llvm::isa<::dc::HostType>($_self)">,
                      "dc host value", "::dc::HostType">;
def DC_AnyFuture : Type<CPred<"::llvm::isa<::dc::FutureType>($_self)">,
                        "dc future", "::dc::FutureType">;

#endif // DC_TYPES_TD
