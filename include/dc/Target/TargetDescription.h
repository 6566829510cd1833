//===- TargetDescription.h - the numbers of a machine -----------*- C++ -*-===//
//
// The numbers the cost model turns FLOPs and bytes into seconds with: compute
// rates, memory and link bandwidths, collective latency and bus bandwidth.
// Built-in presets name hardware ("h100", "h200", "h100-cluster",
// "h200-cluster", "cpu"); a JSON file gives the same fields. Two link levels:
// the collective fields describe the links inside a node (NVLink), the network
// fields those between nodes.
//
//===----------------------------------------------------------------------===//
#ifndef DC_TARGET_TARGETDESCRIPTION_H
#define DC_TARGET_TARGETDESCRIPTION_H

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dc {

/// The preset a module without a #dc.target is planned and lowered for.
constexpr const char kDefaultTargetPreset[] = "h200";

/// What dc-compile makes of a step's compute.
enum class Lowering {
  /// Loops on the host (the runtime's host backend, MPI between ranks).
  Host,
  /// CUDA kernels for sm_90 in one fatbin, cuBLASLt and cuDNN (the runtime's
  /// cuda backend).
  CudaSm90,
};
/// "host", "cuda_sm90": the spelling of the JSON form, the #dc.target
/// attribute, dc-compile's --lowering and the artifact's manifest.
llvm::StringRef stringifyLowering(Lowering lowering);
std::optional<Lowering> symbolizeLowering(llvm::StringRef text);

/// One point of a measured bandwidth curve: at `bytes` per rank-group call
/// the collective reached `busBandwidth` bytes/s (nccl-tests "busbw").
struct BandwidthPoint {
  int64_t bytes = 0;
  double busBandwidth = 0;
};

struct TargetDescription {
  std::string name;
  /// What the step's compute becomes: the GPU presets' cuda_sm90, the
  /// cpu preset's host. A JSON description inherits its base's; without a
  /// base, host.
  Lowering lowering = Lowering::Host;
  /// Dense matrix-multiply rate (FLOP/s) for 16-bit floats and for f32.
  double matmulFlops16 = 0;
  double matmulFlops32 = 0;
  /// Rate of fused attention's matrix products in 16-bit floats (FLOP/s,
  /// forward and backward alike); 0: matmulFlops16. A flash-attention
  /// kernel runs below the plain products' rate (softmax between them,
  /// the causal mask's partial tiles).
  double attentionFlops16 = 0;
  /// Rate of elementwise/reduction arithmetic (FLOP/s).
  double vectorFlops = 0;
  /// Device memory bandwidth (bytes/s, read + write counted once each).
  double memoryBandwidth = 0;
  /// Fixed cost of launching one compute op (s).
  double opLaunchLatency = 0;
  /// Collective latency alpha (s) and bus bandwidth beta (bytes/s); when a
  /// curve is given it replaces beta (interpolated in log(bytes)).
  double collectiveLatency = 0;
  double collectiveBusBandwidth = 0;
  std::vector<BandwidthPoint> allGatherCurve;
  std::vector<BandwidthPoint> reduceScatterCurve;
  /// Host <-> device copy bandwidth (bytes/s, each way) and latency (s).
  double hostLinkBandwidth = 0;
  double hostLinkLatency = 0;
  /// Copy bandwidth of each direction while the other one copies too
  /// (bytes/s); 0: the same as hostLinkBandwidth.
  double hostLinkDuplexBandwidth = 0;
  /// The rate the planners place and choose copies at (bytes/s): the
  /// usual rate less a margin, so that a plan whose copies would just hide
  /// at the usual rate still hides them on a machine start, or at a
  /// moment, where the link runs slower. Predictions
  /// (dc-report, the simulator) keep hostLinkBandwidth. 0, or not below
  /// hostLinkBandwidth: the same.
  double hostLinkPlanningBandwidth = 0;
  /// How much slower compute runs while a host copy does, per direction
  /// copying (a fraction: 0.015 is 1.5% longer with one direction busy,
  /// 3% with both). Copies read or write device memory beside the kernels
  /// (and take some of its bandwidth); 0: copies are free for compute.
  double copyComputeSlowdown = 0;
  /// The target's lowering folds a constant fill of an output into the
  /// op that overwrites it next (a matrix product that writes instead of
  /// accumulating, a reduction whose kernel stores its total into the
  /// fill's identity): such a fill launches no kernel and costs nothing.
  /// The GPU presets do (dc-map-to-gpu); the CPU backend runs every fill.
  bool foldsFills = false;
  /// The target's lowering runs fused 16-bit attention on the [B, S, H, D]
  /// tensors its operands are head transposes of, and writes its outputs in
  /// that layout (dc-fold-head-transposes), into the slice of the tensor
  /// they are copied to (dc-write-outputs-in-place): dc-zero3-pipeline
  /// folds the transposes before planning, so the planners see the step
  /// the GPU runs, and the cost model prices such a copy at zero. The GPU
  /// presets do; the CPU backend expands attention over [B, H, S, D].
  bool foldsHeadTransposes = false;
  /// Device memory capacity (bytes): the default memory budget.
  int64_t deviceMemoryBytes = 0;
  /// The GPU's streaming multiprocessors: a grid of this many blocks fills
  /// it (dc-map-to-gpu sizes its grid-stride kernels by it); 0 on the host.
  int64_t multiprocessors = 0;
  /// Static shared memory one block may use (bytes); 0 on the host.
  int64_t sharedMemoryPerBlock = 0;
  /// Ranks per node (rank r sits on node r / gpusPerNode); 0: every rank
  /// of any grid shares one node.
  int64_t gpusPerNode = 0;
  /// The network between nodes, per GPU (one NIC each, rail-optimized):
  /// bandwidth (bytes/s) and the latency of one inter-node step of a ring
  /// or tree (s). Bandwidth 0: no network; a group larger than a node is
  /// costed as if the node's links reached every rank.
  double networkBandwidth = 0;
  double networkLatency = 0;

  /// How many members of a group of `groupSize` ranks, consecutive members
  /// `rankStride` world ranks apart (a grid axis: the product of the later
  /// axes), share a node; groupSize when the group stays in one node.
  int64_t membersPerNode(int64_t groupSize, int64_t rankStride) const;

  /// Built-in presets: "h200" (one node of 8 H200s, measured numbers),
  /// "h100" (one node of 8 H100 SXMs), "h200-cluster" and "h100-cluster"
  /// (nodes of 8 GPUs, 400 Gb/s per GPU between them) and "cpu".
  static llvm::Expected<TargetDescription> getPreset(llvm::StringRef name);
  /// Parses the JSON form (the field names above); missing fields fall
  /// back to the "base" preset named in the file, or error.
  static llvm::Expected<TargetDescription> fromJSON(llvm::StringRef text);
  /// A preset name, or a path to a JSON file.
  static llvm::Expected<TargetDescription> load(llvm::StringRef presetOrPath);
  /// The JSON form (round-trips through fromJSON).
  std::string toJSON() const;
  /// Fields of the JSON form whose numbers are integers (bytes, counts); the
  /// others are real numbers.
  static bool isIntegerField(llvm::StringRef name);
  /// The description the planners cost copies with: both host-link rates
  /// scaled down to hostLinkPlanningBandwidth (itself unset in the copy);
  /// this one where that is no slower.
  TargetDescription forPlanning() const;
};

} // namespace dc

#endif // DC_TARGET_TARGETDESCRIPTION_H
