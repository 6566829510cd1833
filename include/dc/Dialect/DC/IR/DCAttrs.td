//===- DCAttrs.td - dc attributes -----------------------------*- tablegen -*-===//
#ifndef DC_ATTRS_TD
#define DC_ATTRS_TD

include "dc/Dialect/DC/IR/DCBase.td"

class DC_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<DC_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def DC_ParamAttr : DC_Attr<"Param", "param"> {
  let summary = "marks a function argument as a trainable parameter";
  let description = [{
    Placed on a step function's argument as `{dc.param = #dc.param<id = 3>}`
    (optionally with a name). The id is stable across the forward and
    backward graphs and across runs: checkpoints and the runtime's parameter
    registry are keyed by it.

    ```mlir
    func.func @step(%w: tensor<8x8xf32> {dc.param = #dc.param<id = 0, name = "fc1.weight">})
    ```
  }];
  let parameters = (ins "int64_t":$id,
                        OptionalParameter<"::mlir::StringAttr">:$name);
  let assemblyFormat = "`<` `id` `=` $id (`,` `name` `=` $name^)? `>`";
  let genVerifyDecl = 1;
}

def DC_GradAttr : DC_Attr<"Grad", "grad"> {
  let summary = "marks a function result as the gradient of a parameter";
  let description = [{
    Placed on a step function's result: `{dc.grad = #dc.grad<param = 3>}`
    names the `#dc.param` id whose gradient the result is.
  }];
  let parameters = (ins "int64_t":$param);
  let assemblyFormat = "`<` `param` `=` $param `>`";
  let genVerifyDecl = 1;
}

def DC_HostMemoryAttr : DC_Attr<"HostMemory", "host_memory"> {
  let summary = "memory space of buffers in the runtime's host pool";
  let description = [{
    After bufferization a `!dc.host<T>` value is a memref in this memory
    space: the buffer of an offload, which only `dc.reload_start` reads. Device
    buffers use the default memory space.

    ```mlir
    memref<4x16xf32, #dc.host_memory>
    ```
  }];
}

// Seconds as a plain float: `stall_seconds = 1.250000e-03`.
def DC_SecondsParameter : APFloatParameter<"seconds"> {
  let parser = [{ [&]() -> ::mlir::FailureOr<::llvm::APFloat> {
    double seconds;
    if ($_parser.parseFloat(seconds))
      return ::mlir::failure();
    return ::llvm::APFloat(seconds);
  }() }];
  let printer = [{ $_printer.printFloat($_self) }];
}

def DC_OffloadFloorAttr : DC_Attr<"OffloadFloor", "offload_floor"> {
  let summary = "the copy stall no offload placement can avoid";
  let description = [{
    Set by `dc-offload-activations` on a step it offloads from, under
    `dc.offload_floor`: the bytes over budget at the memory peak
    (`excess_bytes`), which must leave the device before the peak op and
    come back after it at the host link's bandwidth, and the compute stall
    that costs at best (`stall_seconds`). `dc-report` prints it next to the
    predicted stall.

    ```mlir
    func.func @step(...) attributes {dc.offload_floor =
        #dc.offload_floor<excess_bytes = 33280, stall_seconds = 1.250000e-03>}
    ```
  }];
  let parameters = (ins "int64_t":$excess_bytes,
                        DC_SecondsParameter:$stall_seconds);
  let assemblyFormat = "`<` struct(params) `>`";
}

// A lowering kind as a bare keyword: `host`, `cuda_sm90`.
def DC_LoweringParameter : AttrParameter<"::dc::Lowering",
                                         "what the step's compute becomes"> {
  let parser = [{ [&]() -> ::mlir::FailureOr<::dc::Lowering> {
    ::llvm::SMLoc loc = $_parser.getCurrentLocation();
    ::llvm::StringRef keyword;
    if ($_parser.parseKeyword(&keyword))
      return ::mlir::failure();
    if (std::optional<::dc::Lowering> lowering = ::dc::symbolizeLowering(keyword))
      return *lowering;
    return $_parser.emitError(loc, "unknown lowering '")
           << keyword << "' (host, cuda_sm90)";
  }() }];
  let printer = [{ $_printer << ::dc::stringifyLowering($_self) }];
}

def DC_TargetAttr : DC_Attr<"Target", "target"> {
  let summary = "the machine a module is planned and lowered for";
  let description = [{
    Attached to the module under `dc.target` by `dc-attach-target`, once,
    before anything that plans or lowers: every planning pass, `dc-report`,
    `dc-verify-schedule`, the lowering and the artifact's manifest read it
    from here. `name` is the preset or description it came from;
    `lowering` what the compute becomes (`host`: loops on the host,
    `cuda_sm90`: CUDA kernels, cuBLASLt and cuDNN on sm_90);
    `memory_budget` the device-memory budget in bytes, resolved from the
    budget the user gave (bytes or a share of the device's memory);
    `numbers` the cost model's machine numbers, in the fields of the
    target's JSON form (docs/cost-model.md).

    A module without `dc.target` is planned and lowered for the `h200`
    preset with all of its memory.

    ```mlir
    module attributes {dc.target = #dc.target<name = "cpu", lowering = host,
        memory_budget = 65536, numbers = {deviceMemoryBytes = 17179869184 : i64,
        matmulFlops16 = 1.000000e+11 : f64, ...}>}
    ```
  }];
  let parameters = (ins StringRefParameter<"preset or file">:$name,
                        DC_LoweringParameter:$lowering,
                        "int64_t":$memory_budget,
                        "::mlir::DictionaryAttr":$numbers);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The attribute of `description` with `memoryBudget` bytes.
    static TargetAttr get(::mlir::MLIRContext *context,
                          const ::dc::TargetDescription &description,
                          int64_t memoryBudget);
    /// The description the attribute holds (its name, lowering and
    /// numbers; the verifier made sure they load).
    ::dc::TargetDescription getDescription() const;
  }];
}

#endif // DC_ATTRS_TD
