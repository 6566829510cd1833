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
  let summary = "one rank's slice of a tensor split over a grid axis";
  let description = [{
    The local piece of a tensor whose logical (full) type is `logical`, split
    evenly over axis `axis` of the grid `grid`. The tensor is flattened in
    row-major order and each rank of the axis holds `local` consecutive
    elements, `local = ceil(numel / axis size)`; the last rank's slot is padded
    when the sizes do not divide. Ops that use a shard type check `local`
    against the grid (`verifySymbolUses`).

    ```mlir
    !dc.shard<tensor<1000x3xf32>, @world[0], local = 1500>
    ```
  }];
  let parameters = (ins "::mlir::RankedTensorType":$logical,
                        "::mlir::FlatSymbolRefAttr":$grid,
                        "int64_t":$axis,
                        "int64_t":$local);
  let assemblyFormat = "`<` $logical `,` $grid `[` $axis `]` `,` `local` `=` $local `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The element type of the logical tensor (and of the local slice).
    ::mlir::Type getElementType() const { return getLogical().getElementType(); }
    /// The local slice as a flat tensor type: tensor<local x elt>.
    ::mlir::RankedTensorType getLocalTensorType() const;
    /// Bytes of the local slice.
    int64_t getLocalBytes() const;
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
