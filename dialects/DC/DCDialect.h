//===- DCDialect.h - the dc dialect -----------------------------*- C++ -*-===//
//
// Include this one header to use the dc dialect: dialect, types, attributes
// and ops.
//
//===----------------------------------------------------------------------===//
#ifndef DC_DIALECT_DC_DCDIALECT_H
#define DC_DIALECT_DC_DCDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace dc {
using namespace mlir;

/// Memory resources the dc ops allocate, free, read and write.
struct GatherArenaResource
    : public SideEffects::Resource::Base<GatherArenaResource> {
  StringRef getName() final { return "dc.gather_arena"; }
};
struct CommunicatorResource
    : public SideEffects::Resource::Base<CommunicatorResource> {
  StringRef getName() final { return "dc.communicator"; }
};
struct HostPoolResource : public SideEffects::Resource::Base<HostPoolResource> {
  StringRef getName() final { return "dc.host_pool"; }
};

/// Names of the discardable attributes of the input contract.
constexpr llvm::StringLiteral kParamAttrName = "dc.param";
constexpr llvm::StringLiteral kGradAttrName = "dc.grad";
constexpr llvm::StringLiteral kLossAttrName = "dc.loss";
/// On an integer data argument (token ids): its values lie in [0, vocab).
/// The artifact manifest passes it to dc-run, which draws or checks data in
/// that range.
constexpr llvm::StringLiteral kVocabAttrName = "dc.vocab";
/// Set by dc-offload-activations on a step it offloads from:
/// {excess_bytes, stall_seconds}, the copy stall no placement can avoid.
constexpr llvm::StringLiteral kOffloadFloorAttrName = "dc.offload_floor";

/// Checks that `type`'s grid exists, is a static `shard.grid` with the axis,
/// and that its local size is ceil(numel / axis size). Emits on `op`.
LogicalResult verifyShardAgainstGrid(Operation *op, Type type,
                                     SymbolTableCollection &symbols);

/// The size of axis `axis` of grid `grid` seen from `from`, or failure (with
/// a diagnostic on `from`) if the grid or axis is missing or dynamic.
FailureOr<int64_t> getGridAxisSize(Operation *from, FlatSymbolRefAttr grid,
                                   int64_t axis,
                                   SymbolTableCollection &symbols);

/// Buffer forms of dc values: statically shaped memrefs with the identity
/// layout, in the default memory space (device) or in #dc.host_memory.
bool isDeviceBuffer(Type type);
bool isHostBuffer(Type type);

/// The type of `device` once offloaded: !dc.host of a tensor or shard, the
/// same memref in #dc.host_memory for a device buffer. getDeviceValueType is
/// the inverse.
Type getHostValueType(Type device);
Type getDeviceValueType(Type host);

/// ceil(numel / parts): the local element count of a shard.
inline int64_t shardLocalSize(int64_t numel, int64_t parts) {
  return (numel + parts - 1) / parts;
}

} // namespace dc

#include "DC/DCDialect.h.inc"
#include "DC/DCEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "DC/DCAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "DC/DCTypes.h.inc"

#define GET_OP_CLASSES
#include "DC/DCOps.h.inc"

#endif // DC_DIALECT_DC_DCDIALECT_H
