//===- CostModel.h - time of each op on a target ----------------*- C++ -*-===//
//
// Compute ops: roofline of FLOPs (exact for linalg named ops and
// linalg.generic, from indexing maps and iterator types, and for the fused
// attention ops) against bytes moved; an scf.for is one kernel of its trip
// count times its body.
// Collectives: alpha-beta per kind. Host copies: link bandwidth. A measured
// profile (per-op times written by dc-run) overrides the estimates.
// docs/cost-model.md has the formulas and where the preset numbers come from.
//
//===----------------------------------------------------------------------===//
#ifndef DC_ANALYSIS_COSTMODEL_H
#define DC_ANALYSIS_COSTMODEL_H

#include "dc/Target/TargetDescription.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/StringMap.h"

#include <string>
#include <vector>

namespace dc {

/// Which simulated stream an op runs on.
enum class StreamKind { Compute, Collective, HostToDevice, DeviceToHost, None };

enum class CollectiveKind { AllGather, ReduceScatter, AllToAll, AllReduce };

struct OpCost {
  StreamKind stream = StreamKind::None;
  double flops = 0;
  int64_t bytes = 0; // bytes read + written (compute) or moved (transfer)
  double seconds = 0;
};

/// Measured per-op times (s) keyed by getProfileKey. JSON form:
/// {"ops": {"step:0": 1.5e-05, "step:1": 3.2e-04}}; any other field, a
/// malformed key or a negative time is an error.
struct Profile {
  llvm::StringMap<double> secondsByOpId;
  static llvm::Expected<Profile> fromJSON(llvm::StringRef text);
  static llvm::Expected<Profile> load(llvm::StringRef path);
};

/// "<function name>:<ordinal>", the ordinal counting the ops of the function
/// body except the dc ops a schedule adds (transfers, waits, releases; the
/// compute ops dc.attention and dc.attention_grad count): inserting or moving
/// those keeps the keys of a profile taken earlier valid. Empty for such ops
/// and ops not directly in a function body. Scans the block: use
/// CostModel::estimateFunction for a whole body.
std::string getProfileKey(mlir::Operation *op);

class CostModel {
public:
  explicit CostModel(TargetDescription target, const Profile *profile = nullptr)
      : target(std::move(target)), profile(profile) {}

  const TargetDescription &getTarget() const { return target; }

  /// Cost of one op. Start ops cost their transfer on their stream; wait,
  /// release and other bookkeeping ops cost nothing (StreamKind::None).
  OpCost estimate(mlir::Operation *op) const;
  /// The costs of the top-level ops of `fn`'s body, in order (the index
  /// space of MemoryTimeline::getOps). Linear in the body: grid sizes and
  /// profile keys are computed once per body, not per op.
  std::vector<OpCost> estimateFunction(mlir::func::FuncOp fn) const;

  /// FLOPs of a compute op (0 if unknown): exact for linalg ops; the matmul
  /// FLOPs of a flash-attention kernel for dc.attention(_grad); for an
  /// scf.for, its trip count times the FLOPs of its body's ops.
  static double countFlops(mlir::Operation *op);
  /// Bytes a compute op reads and writes: its tensor operands and results,
  /// except a linalg init operand its payload never reads (a tensor.empty
  /// output is only written). Element and slice ops count what they touch:
  /// tensor.extract / insert one element, tensor.insert_slice its source
  /// read and written; an scf.for its trip count times its body's bytes.
  static int64_t countBytes(mlir::Operation *op);

  /// Time of one collective over `groupSize` ranks moving a full tensor of
  /// `bytes` (all-gather result / reduce-scatter input), consecutive
  /// members `rankStride` world ranks apart. A group that spans nodes
  /// costs the slower of its two levels: the node's links, and the network
  /// (ring, or for an all-reduce the faster of ring and tree).
  double collectiveSeconds(CollectiveKind kind, int64_t bytes,
                           int64_t groupSize, int64_t rankStride = 1) const;
  /// Time of one host<->device copy of `bytes`; `duplex`: while the other
  /// direction copies too (hostLinkDuplexBandwidth).
  double copySeconds(int64_t bytes, bool duplex = false) const;

  /// Time of a compute op's FLOPs at the rate of its kind (matrix rate of
  /// its element type for contractions and attention, else the vector
  /// rate); for an scf.for, its trip count times that of its body's ops.
  double flopSeconds(mlir::Operation *op) const;

private:
  /// One collective over the links inside a node: the measured curve, or
  /// alpha-beta without one.
  double nodeLinkSeconds(CollectiveKind kind, int64_t bytes,
                         int64_t groupSize) const;
  class GridSizes;
  OpCost estimate(mlir::Operation *op, GridSizes &grids,
                  llvm::StringRef profileKey) const;

  TargetDescription target;
  const Profile *profile;
};

} // namespace dc

#endif // DC_ANALYSIS_COSTMODEL_H
