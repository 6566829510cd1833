//===- Params.h - parameters, their shards and AdamW ------------*- C++ -*-===//
//
// The host program owns the parameters: each rank holds its slice of every
// sharded parameter (ceil(numel / world) elements, the last slot padded) in
// the parameter's dtype for the artifact, plus an fp32 master copy, the
// gradient the artifact writes and the AdamW moments.
//
//===----------------------------------------------------------------------===//
#ifndef DC_RUN_PARAMS_H
#define DC_RUN_PARAMS_H

#include "dcrt/core.hpp"
#include "dcrt/dcrt.h"

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace dcrun {

struct AdamWConfig {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weightDecay = 0.0;
  /// Gradients are scaled by min(1, maxGradNorm / global norm) before the
  /// update, the global L2 norm over every rank's shards (one all-reduce),
  /// as torch.nn.utils.clip_grad_norm_; 0: no clipping.
  double maxGradNorm = 0.0;
  /// The dtypes of the optimizer's state (as the seeds' bf16 master-weight
  /// option): f32 or bf16 for both moments, and f32 or bf16 for the master
  /// weights, where bf16 means the bf16 parameter itself is the master (no
  /// copy). All f32: 12 bytes of state per element; all bf16: 4.
  dcrt_dtype masterDtype = DCRT_F32;
  dcrt_dtype momentDtype = DCRT_F32;
};

/// Bytes of optimizer state per parameter element beside the parameter
/// itself: what `--optimizer-state-bytes` of dc-compile should budget.
int64_t stateBytesPerElement(const AdamWConfig &config);

/// `value` as the state dtype `dtype` stores it (rounded to nearest even
/// for bf16): the host AdamW keeps its state in fp32 vectors but on the
/// device's grid, so both backends agree.
float roundToStateDtype(float value, dcrt_dtype dtype);

/// The scale clipping applies: min(1, maxNorm / (norm + 1e-6)), 1 when
/// clipping is off.
double clipScale(double globalNorm, double maxNorm);

/// One AdamW step (PyTorch's: decoupled weight decay, bias-corrected
/// moments) over `numel` elements; `step` counts from 1. The new master and
/// moments are rounded to the config's state dtypes.
void adamwUpdate(float *master, const float *grad, float *expAvg,
                 float *expAvgSq, int64_t numel, const AdamWConfig &config,
                 int64_t step);

struct ParamSpec {
  int32_t id = 0;
  std::string name;
  std::vector<int64_t> shape;
  dcrt_dtype dtype = DCRT_F32;
  dcrt_dtype gradDtype = DCRT_F32;
  /// Sharded (ZeRO-3), or replicated on every rank.
  bool sharded = true;
  /// The grid axes a sharded parameter is split over, increasing; empty:
  /// every axis (the whole world). Ranks that differ only on the other
  /// axes hold the same slot (replicas).
  std::vector<int64_t> shardAxes;
  /// Whether the step produces a gradient for it (else it is frozen).
  bool hasGrad = true;
  /// Kept in host memory by the step (dc-offload-params), which uploads it
  /// with dcrt_upload_into. Otherwise treated like any parameter.
  bool onHost = false;
  /// The compiled step accumulates this parameter's full gradient itself
  /// over the micro-batches (dc-accumulate-gradients): only the last
  /// micro-batch's entry writes `grad`, and it holds the sum of all of them.
  bool stepAccumulates = false;
  /// The compiled step updates this parameter itself (its optimizer
  /// inside): it returns no gradient, so `grad` stays empty.
  bool updatedByStep = false;
};

struct Param {
  ParamSpec spec;
  int64_t fullNumel = 0;
  /// Elements in `data` and `grad`: the padded slot, or the full tensor.
  int64_t localNumel = 0;
  /// The full tensor's index of this rank's first element.
  int64_t offset = 0;
  /// Elements of the slot that are real (the rest is padding).
  int64_t validNumel = 0;
  /// This rank's slot among the shard group's `shardRanks` slots (0 of 1
  /// when replicated).
  int64_t shardIndex = 0, shardRanks = 1;
  /// Whether this rank is the one of the slot's replicas that counts it
  /// (coordinate 0 on every axis the parameter is not split over): the
  /// gradient norm and checkpoints take each slot once.
  bool owner = true;
  /// The artifact's buffers: device memory, or (spec.onHost) host memory
  /// the device copies from at full speed.
  dcrt::Buffer data; // spec.dtype: what the artifact reads
  dcrt::Buffer grad; // spec.gradDtype: what the artifact writes
  /// The optimizer's fp32 state in host memory, validNumel each.
  std::vector<float> master, expAvg, expAvgSq;

  /// Writes `data` from `master`, rounded to the parameter's dtype.
  void refreshData();
};

struct InitOptions {
  uint64_t seed = 0;
  /// Weights are N(0, std); "*bias" parameters start at 0 and 1-D
  /// "*norm*" parameters at 1.
  double std = 0.02;
};

/// The initial value of element `index` of the full tensor: a function of
/// (seed, id, index) only.
float initialValue(const InitOptions &options, const ParamSpec &spec,
                   int64_t index);

/// ceil(numel / ranks): the padded slot every rank of a shard group holds.
int64_t shardNumel(int64_t fullNumel, int64_t ranks);

class ParamRegistry {
public:
  /// `gridShape`: the sizes of the grid's axes (product = worldSize; empty:
  /// one axis), ranks numbered row-major over it as the runtime does.
  ParamRegistry(int32_t rank, int32_t worldSize,
                std::vector<int64_t> gridShape = {});

  /// Fatal on a duplicate id or name.
  Param &add(ParamSpec spec);
  Param *find(int32_t id);
  std::deque<Param> &params() { return params_; }
  const std::deque<Param> &params() const { return params_; }
  int32_t rank() const { return rank_; }
  int32_t worldSize() const { return worldSize_; }
  const std::vector<int64_t> &gridShape() const { return gridShape_; }
  /// The rank (world numbering) that owns slot `index` of `param`: its
  /// coordinates on the shard axes spell `index`, the others are 0.
  int32_t ownerOfSlot(const Param &param, int64_t index) const;

  /// Fills every master copy (and `data`) from initialValue.
  void initialize(const InitOptions &options);
  /// Writes every `data` (the artifact's view) from the fp32 master copies.
  void refreshData();

private:
  int32_t rank_, worldSize_;
  std::vector<int64_t> gridShape_;
  std::deque<Param> params_; // stable addresses: dc-run keeps pointers
};

/// Updates the parameters from the gradients the step wrote.
class Optimizer {
public:
  virtual ~Optimizer() = default;
  /// This rank's share of the squared global norm of the step's gradients
  /// (the ranks' shares add up to it): dc-run all-reduces it with the loss,
  /// stops at a non-finite norm before any update, and clips with it.
  virtual double gradientSquares(ParamRegistry &registry) = 0;
  /// One update of every parameter that has a gradient, the gradients
  /// scaled by `gradScale` (clipping; 1 otherwise); `step` counts from 1.
  /// Reads each `grad`, writes each `data`.
  virtual void step(ParamRegistry &registry, const AdamWConfig &config,
                    int64_t step, double gradScale) = 0;
  /// Gradient accumulation (dc-run --micro-batches N, N > 1): adds the
  /// gradient shards the entry just wrote into fp32 sums, micro-batch
  /// `index` of `count` (index 0 overwrites them; a parameter the step
  /// accumulates itself, ParamSpec::stepAccumulates, is taken from the last
  /// micro-batch only, where its shard is already the sum). After the last
  /// one, gradientSquares and step read the mean, sum / count, instead of
  /// `grad` (each micro-batch's loss is a mean over the same number of
  /// terms, so that mean is the gradient of the whole step's mean loss).
  /// Never called for one micro-batch: `grad` is read directly.
  virtual void accumulate(ParamRegistry &registry, int64_t index,
                          int64_t count) = 0;
  /// The registry's fp32 masters and moments (initialized or loaded from a
  /// checkpoint) become the optimizer's state. Before the first step.
  virtual void loadState(ParamRegistry &registry) {}
  /// The optimizer's state is written back to the registry's masters and
  /// moments (before a checkpoint is saved).
  virtual void storeState(ParamRegistry &registry) {}
};

/// Each rank's share of the global squared gradient norm: the sum of
/// squares of the slots it owns (Param::owner), 0 for a replica (NaN if
/// the replica is not finite), so that the ranks' shares add up to the
/// norm with each slot counted once.
double shareOfSquaredNorm(const Param &param, double sumOfSquares);

/// AdamW on the host (ZeRO-Offload style on a device backend): copies each
/// gradient shard to host memory, updates the fp32 master and moments there
/// and writes the shard back in its dtype.
class HostAdamW : public Optimizer {
public:
  double gradientSquares(ParamRegistry &registry) override;
  void step(ParamRegistry &registry, const AdamWConfig &config, int64_t step,
            double gradScale) override;
  void accumulate(ParamRegistry &registry, int64_t index,
                  int64_t count) override;

private:
  /// Reads every gradient shard into `gradients`, converted to fp32.
  void readGradients(ParamRegistry &registry);

  /// The gradients in fp32, read by gradientSquares for the step after it;
  /// with micro-batches, their fp32 sums.
  std::vector<std::vector<float>> gradients;
  /// 1 / micro-batches once `gradients` holds sums, else 0 (not summed).
  double meanScale = 0;
};

/// The AdamW for this backend: on a device backend the fused AdamW kernel
/// over device-resident state where dc-run was built with it, else
/// HostAdamW.
std::unique_ptr<Optimizer> createAdamW(const AdamWConfig &config);

/// The device AdamW (master and moments in device memory, one fused kernel
/// per parameter on the compute stream), or null where dc-run was built
/// without CUDA.
std::unique_ptr<Optimizer> createDeviceAdamW(const AdamWConfig &config);

} // namespace dcrun

#endif // DC_RUN_PARAMS_H
