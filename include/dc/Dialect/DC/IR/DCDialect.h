//===- DCDialect.h - the dc dialect -----------------------------*- C++ -*-===//
//
// Include this one header to use the dc dialect: dialect, types, attributes
// and ops.
//
//===----------------------------------------------------------------------===//
#ifndef DC_DIALECT_DC_IR_DCDIALECT_H
#define DC_DIALECT_DC_IR_DCDIALECT_H

#include "dc/Target/TargetDescription.h"

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

class ShardType;

/// Memory resources the dc ops allocate, free, read and write.
struct GatherArenaResource
    : public mlir::SideEffects::Resource::Base<GatherArenaResource> {
  llvm::StringRef getName() final { return "dc.gather_arena"; }
};
struct CommunicatorResource
    : public mlir::SideEffects::Resource::Base<CommunicatorResource> {
  llvm::StringRef getName() final { return "dc.communicator"; }
};
struct HostPoolResource
    : public mlir::SideEffects::Resource::Base<HostPoolResource> {
  llvm::StringRef getName() final { return "dc.host_pool"; }
};

/// The process group of a collective over every axis of a grid at once
/// (the runtime's DCRT_ALL_AXES): a shard split over all axes of a grid of
/// several, and the `axis` its buffer-form gather or reduce-scatter keeps.
constexpr int64_t kAllGridAxes = -1;

/// Names of the discardable attributes of the input contract.
constexpr llvm::StringLiteral kParamAttrName = "dc.param";
constexpr llvm::StringLiteral kGradAttrName = "dc.grad";
constexpr llvm::StringLiteral kLossAttrName = "dc.loss";
/// On a step argument that is no parameter (the data): its name, a
/// non-empty string, unique among the function's arguments. The artifact
/// manifest names the argument by it (else "arg<N>"); a parameter is named
/// by its #dc.param instead, and carries no dc.name. The dialect verifies
/// it (DCDialect::verifyRegionArgAttribute).
constexpr llvm::StringLiteral kNameAttrName = "dc.name";
/// On an integer data argument (token ids): its values lie in [0, vocab).
/// The artifact manifest passes it to dc-run, which draws or checks data in
/// that range.
constexpr llvm::StringLiteral kVocabAttrName = "dc.vocab";
/// Set by dc-offload-activations on a step it offloads from: an
/// #dc.offload_floor, the copy stall no placement can avoid.
constexpr llvm::StringLiteral kOffloadFloorAttrName = "dc.offload_floor";
/// Set by dc-rematerialize on each op it cloned to recompute a dropped
/// activation: an i64 naming that activation (the ops of one recomputation
/// share it; the last of them in block order makes the tensor).
constexpr llvm::StringLiteral kRecomputeAttrName = "dc.recompute";
/// Beside dc.recompute on an op that computes a recomputed tensor as more
/// results of an op of the backward reading the same inputs (a SwiGLU's
/// product merged into its backward): an i64, the first result that is
/// recomputed; the results before it are the backward op's own.
constexpr llvm::StringLiteral kRecomputedResultsAttrName =
    "dc.recomputed_results";
/// Set by dc-rematerialize on a step whose activations it planned: the
/// #dc.offload_floor offload alone would have faced, for dc-report.
constexpr llvm::StringLiteral kOffloadAloneFloorAttrName =
    "dc.offload_alone_floor";
/// On a step argument that carries the sequence (tokens, targets): the dim
/// dc-ulysses splits (set by the generator or a frontend, or by
/// dc-ulysses' options), and the grid axis it splits it over (set by
/// dc-ulysses), along which gradients are partial sums. The manifest passes
/// both to dc-run, which gives each rank its part of the sequence.
constexpr llvm::StringLiteral kSeqDimAttrName = "dc.seq_dim";
constexpr llvm::StringLiteral kSeqAxisAttrName = "dc.seq_axis";
/// On a stacked expert parameter argument (`[E/W, ...]`, set by
/// dc-expert-parallel): the grid axis its experts are divided over. The
/// argument is the block of experts of the rank's coordinate on that axis;
/// dc-zero3 shards it over the other axes only, and the manifest gives
/// dc-run the full tensor's shape and the block.
constexpr llvm::StringLiteral kExpertAxisAttrName = "dc.expert_axis";
/// On the module: the #dc.target every pass that plans or lowers reads.
constexpr llvm::StringLiteral kTargetAttrName = "dc.target";

/// Checks that `type`'s grid exists, is a static `shard.grid` with the axes,
/// that the axes are one or all of the grid's (the runtime's groups), and
/// that its local size is ceil(numel / their ranks). Emits on `op`.
mlir::LogicalResult
verifyShardAgainstGrid(mlir::Operation *op, mlir::Type type,
                       mlir::SymbolTableCollection &symbols);

/// The size of axis `axis` of grid `grid` seen from `from`, or failure (with
/// a diagnostic on `from`) if the grid or axis is missing or dynamic.
mlir::FailureOr<int64_t> getGridAxisSize(mlir::Operation *from,
                                         mlir::FlatSymbolRefAttr grid,
                                         int64_t axis,
                                         mlir::SymbolTableCollection &symbols);

/// The ranks `shard` is split over (the product of its axes' sizes), or
/// failure (with a diagnostic on `from`) as getGridAxisSize.
mlir::FailureOr<int64_t>
getShardGroupSize(mlir::Operation *from, ShardType shard,
                  mlir::SymbolTableCollection &symbols);

/// Buffer forms of dc values: statically shaped memrefs with the identity
/// layout, in the default memory space (device) or in #dc.host_memory.
bool isDeviceBuffer(mlir::Type type);
bool isHostBuffer(mlir::Type type);

/// The type of `device` once offloaded: !dc.host of a tensor or shard, the
/// same memref in #dc.host_memory for a device buffer. getDeviceValueType is
/// the inverse.
mlir::Type getHostValueType(mlir::Type device);
mlir::Type getDeviceValueType(mlir::Type host);

/// A statically shaped memref in device memory (no memory space) with a
/// strided layout: the operands of dc.attention_into's `bshd` form.
bool isStridedDeviceBuffer(mlir::Type type);

/// A statically shaped device memref (no memory space) whose dims after the
/// first are dense (row-major, static strides) and whose first dim has a
/// static stride of at least a row's length; any offset: the rows of the
/// mixture-of-experts ops' buffer forms, which the runtime reads with a row
/// stride (a column slice of a wider tensor, an expert slice of a stacked
/// weight). Its row stride, in elements, is getRowStride's.
bool hasStridedRows(mlir::Type type);
int64_t getRowStride(mlir::MemRefType type);

/// The sequence dim of a rank-`rank` operand of a dc.attention-family op:
/// [batch..., seq, head_dim], or [B, seq, H, head_dim] with `bshd`.
inline int64_t getAttentionSeqDim(int64_t rank, bool bshd) {
  return bshd ? 1 : rank - 2;
}
/// Its heads dim (the innermost batch dim): [B, S, heads, D] with `bshd`.
inline int64_t getAttentionHeadsDim(int64_t rank, bool bshd) {
  return bshd ? 2 : rank - 3;
}

/// The permutation between the two layouts of a dc.attention-family
/// operand, [B, S, H, D] (`bshd`) and [B, H, S, D]: its own inverse.
inline constexpr int64_t kSwapSeqAndHeads[] = {0, 2, 1, 3};
/// The tensor `x` in the other layout: linalg.transpose by
/// kSwapSeqAndHeads into a fresh tensor.
mlir::Value swapSeqAndHeads(mlir::OpBuilder &builder, mlir::Location loc,
                            mlir::Value x);

/// Grouped-query attention: how many query batch entries share one k/v
/// batch entry of a dc.attention-family op whose q is `q` and k is `k`
/// ([batch..., seq, head_dim] each, or [B, seq, heads, head_dim] with
/// `bshd`; the heads dim of q is that many times k's, every other batch dim
/// equal). Query batch entry b, in row-major order over the batch dims,
/// reads k/v batch entry b / group. 1 without grouping; only meaningful on
/// operands that verify.
int64_t getAttentionKVGroup(mlir::ShapedType q, mlir::ShapedType k,
                            bool bshd = false);

/// True for a dc.attention-family op of 16-bit floats (bf16, f16): the GPU
/// lowering keeps it fused and the runtime's flash attention runs it; any
/// other is expanded to linalg.
bool isLibraryAttention(mlir::Operation *op);

/// ceil(numel / parts): the local element count of a shard.
inline int64_t shardLocalSize(int64_t numel, int64_t parts) {
  return (numel + parts - 1) / parts;
}

} // namespace dc

#include "dc/Dialect/DC/IR/DCDialect.h.inc"
#include "dc/Dialect/DC/IR/DCInterfaces.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dc/Dialect/DC/IR/DCAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "dc/Dialect/DC/IR/DCTypes.h.inc"

#define GET_OP_CLASSES
#include "dc/Dialect/DC/IR/DCOps.h.inc"

namespace dc {

/// What a module is planned and lowered for: its #dc.target's description
/// and budget, or, without one, the default preset with all its memory.
struct ModuleTarget {
  TargetDescription description;
  int64_t memoryBudget = 0;
};
/// The #dc.target on `module` (the nearest module around `op`), or null.
TargetAttr findTargetAttr(mlir::Operation *op);
/// The target of the module around `op` (see ModuleTarget).
ModuleTarget getModuleTarget(mlir::Operation *op);

} // namespace dc

#endif // DC_DIALECT_DC_IR_DCDIALECT_H
