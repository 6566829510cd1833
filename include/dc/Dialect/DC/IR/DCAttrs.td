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

#endif // DC_ATTRS_TD
