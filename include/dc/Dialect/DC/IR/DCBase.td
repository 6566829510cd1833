//===- DCBase.td - the dc dialect definition ---------------*- tablegen -*-===//
#ifndef DC_BASE_TD
#define DC_BASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def DC_Dialect : Dialect {
  let name = "dc";
  let cppNamespace = "::dc";
  let summary = "Distributed training steps: sharded parameters, async "
                "collectives, host offload";
  let description = [{
    The dc dialect makes the communication and memory traffic of a ZeRO-3 /
    Ulysses training step explicit. Every transfer is split into an
    asynchronous *start* op that returns a `!dc.future` and a `dc.wait` that
    yields the transferred value, so a schedule is simply the order of ops in
    a block: it can be printed, verified (`dc-verify-schedule`) and diffed.

    Ordering between transfers and compute comes from SSA use-def chains and
    the memory effects each op declares on the resources below, never from
    dummy tensors.

    Process groups are axes of an upstream `shard.grid`; a `!dc.shard` names
    the grid and the axis its tensor is split over.

    Every op has a tensor form, which the scheduling passes build and read,
    and a buffer form, which One-Shot Bufferize produces through the ops'
    `BufferizableOpInterface` models and `dc-to-dcrt` lowers to runtime
    calls: a `!dc.shard` becomes its local buffer `memref<local x T>`, a
    `!dc.host` value a memref in `#dc.host_memory`, and a future holds the
    buffer the runtime hands out.
  }];
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
  // dc.target: a #dc.target, on a module.
  let hasOperationAttrVerify = 1;
  // dc.name on a step's arguments (see kNameAttrName).
  let hasRegionArgAttrVerify = 1;
  let dependentDialects = ["::mlir::shard::ShardDialect"];
}

// Resources the dc ops read, allocate and free. They let generic MLIR
// transformations see that a gather allocates device memory that a release
// frees, and that no two collectives on one communicator may be reordered.
def DC_GatherArena : Resource<"::dc::GatherArenaResource">;
def DC_Communicator : Resource<"::dc::CommunicatorResource">;
def DC_HostPool : Resource<"::dc::HostPoolResource">;

class DC_Op<string mnemonic, list<Trait> traits = []>
    : Op<DC_Dialect, mnemonic, traits>;

#endif // DC_BASE_TD
