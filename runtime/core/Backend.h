//===- Backend.h - the one seam between the C ABI and a backend -----------===//
//
// dcrt.h's calls land in core/Runtime.cpp, which checks what every backend
// would check and forwards to the Backend chosen at dcrt_init: host (CPU
// memory, MPI) or cuda (streams, events, NCCL). A backend owns its futures,
// pools and streams; the job (ranks, the MPI communicator for the host
// program's blocking collectives, the tracer) is shared and lives in Job.
//
//===----------------------------------------------------------------------===//
#ifndef DCRT_CORE_BACKEND_H
#define DCRT_CORE_BACKEND_H

#include "AdamW.h"

#include "dcrt/core.hpp"
#include "dcrt/dcrt.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

/// An operation in flight (the C ABI's dcrt_future); each backend derives
/// its own. Pooled: a step's futures are reused by the next step.
struct dcrt_future_impl {
  enum class Kind {
    Gather,
    ReduceScatter,
    AllReduce,
    AllToAll,
    Offload,
    Reload,
    Upload
  };
  virtual ~dcrt_future_impl() = default;

  Kind kind = Kind::Gather;
  bool inUse = false;
  uint64_t sequence = 0; // nth start of this process, for messages

  const char *what() const;
  const char *waitSpanName() const;
};

namespace dcrt::detail {

class Job;

/// dcrt_init_options with every field present (defaults filled in) and the
/// backend resolved.
struct RuntimeConfig {
  std::string backend; // "host" or "cuda"
  int32_t device = -1;
  std::vector<int64_t> gridShape; // product = world size
  int64_t gatherArenaBytes = 0;
  int64_t hostPoolBytes = 0;
  int64_t stepArenaBytes = 0;
  int64_t stepBufferBytes = 0;
  int64_t stagingBytes = 0;
  bool deterministic = false; // DCRT_INIT_DETERMINISTIC
  bool checkFinite = false;   // DCRT_INIT_CHECK_FINITE
};

/// The byte geometry of an all-to-all over `world` ranks, the same on every
/// backend. Packing: the input is `splitOuter` rows of `world` chunks of
/// `chunkBytes` (a row is `splitRowBytes`); chunk i of every row goes, in
/// order, to piece i (`pieceBytes`) of the send buffer. Unpacking: piece j
/// of the receive buffer is `concatOuter` rows of `rowBytes`, which land in
/// block j of each output row (an output row is `world * rowBytes`).
struct AllToAllLayout {
  AllToAllLayout(const std::vector<int64_t> &shape, int64_t splitDim,
                 int64_t concatDim, int64_t elementSize, int64_t world);

  int64_t world;
  int64_t pieceBytes;
  int64_t splitOuter, splitRowBytes, chunkBytes;
  int64_t concatOuter, rowBytes;
};

/// What a backend implements. Arguments arrive checked (counts, dtypes,
/// shard sizes, axes): see core/Runtime.cpp.
class Backend {
public:
  virtual ~Backend() = default;
  virtual const char *name() const = 0;

  /// dcrt calls that reached this backend (counted by the C API): a device
  /// backend's profile tells an op that enqueued nothing (fused into a
  /// neighbour's kernel) from one that did.
  int64_t apiCalls = 0;

  // The artifact's calls (dcrt.h).
  virtual dcrt_future gatherStart(int32_t axis, int32_t n, void *const *shards,
                                  const int64_t *localNumel,
                                  const int64_t *fullNumel,
                                  const int32_t *srcDtype,
                                  const int32_t *dstDtype, void **outFull) = 0;
  virtual dcrt_future
  reduceScatterStart(int32_t axis, int32_t n, int32_t op, void *const *grads,
                     const int64_t *fullNumel, const int32_t *gradDtype,
                     const int64_t *localNumel, const int32_t *shardDtype,
                     void **outShards) = 0;
  virtual dcrt_future allReduceStart(int32_t axis, int32_t op,
                                     const void *input, int64_t numel,
                                     int32_t dtype, void **out) = 0;
  virtual dcrt_future allToAllStart(int32_t axis, const void *input,
                                    void *output,
                                    const AllToAllLayout &layout) = 0;
  virtual dcrt_future offloadStart(const void *device, int64_t bytes,
                                   void **outHost) = 0;
  /// Copy host bytes into the caller's device buffer `device` (a
  /// step-arena temporary); a reload returns its host-pool source.
  virtual dcrt_future reloadInto(void *host, int64_t bytes, void *device) = 0;
  virtual dcrt_future uploadInto(const void *host, int64_t bytes,
                                 void *device) = 0;
  /// Copy device bytes into the caller's host buffer `host`.
  virtual dcrt_future downloadInto(const void *device, int64_t bytes,
                                   void *host) = 0;
  virtual void wait(dcrt_future future) = 0;
  virtual void release(void *buffer) = 0;
  virtual void invalidateGathered(const void *shard) = 0;
  virtual void clearGathered() = 0;
  virtual void endStep() = 0;
  virtual void *computeStream() = 0;
  virtual void *stepArena() = 0;
  virtual int64_t opBegin() = 0;
  virtual void opEnd(const char *key, int64_t begin) = 0;
  /// dcrt_matmul: `desc` was checked by checkMatmul (core/Matmul.h).
  virtual void matmul(const dcrt_matmul_desc &desc, const void *a,
                      const void *b, void *c) = 0;
  /// dcrt_attention_fwd and dcrt_attention_bwd: `desc` and the buffers
  /// were checked (core/Attention.h).
  virtual void attentionForward(const dcrt_attention_desc &desc, const void *q,
                                const void *k, const void *v, void *o,
                                float *lse) = 0;
  virtual void attentionBackward(const dcrt_attention_desc &desc, const void *q,
                                 const void *k, const void *v, const void *o,
                                 const float *lse, const void *dO, void *dq,
                                 void *dk, void *dv) = 0;
  /// The mixture-of-experts calls: descriptors and buffers were checked
  /// (core/Moe.h), the descriptors returned by the checks.
  virtual void topk(const dcrt_topk_desc &desc, const void *scores,
                    void *values, void *indices) = 0;
  virtual void groupByExpert(const dcrt_group_by_expert_desc &desc,
                             const void *ids, void *order, void *ends) = 0;
  virtual void gatherRows(const dcrt_row_map_desc &desc, const void *source,
                          const void *index, void *result) = 0;
  virtual void scatterAddRows(const dcrt_row_map_desc &desc, const void *source,
                              const void *index, void *result) = 0;
  virtual void groupedMatmul(const dcrt_grouped_matmul_desc &desc,
                             const void *lhs, const void *rhs, const void *ends,
                             void *out) = 0;
  virtual void groupedWeightGrad(const dcrt_grouped_matmul_desc &desc,
                                 const void *lhs, const void *rhs,
                                 const void *ends, void *out) = 0;
  /// dcrt_grad_squares and dcrt_adamw: `desc` was checked and `slot`
  /// computed by checkAdamW (core/AdamW.h); lr, step and squares are
  /// scalars in the backend's memory.
  virtual void gradSquares(const dcrt_adamw_desc &desc, const AdamWSlot &slot,
                           const void *grad, const double *squaresIn,
                           double *squaresOut) = 0;
  /// dcrt_grad_accumulate (`desc` checked by checkAdamW).
  virtual void gradAccumulate(const dcrt_adamw_desc &desc, const void *grad,
                              const float *sumIn, float *sumOut) = 0;
  virtual void adamw(const dcrt_adamw_desc &desc, const AdamWSlot &slot,
                     const void *param, const void *grad, const void *master,
                     const void *expAvg, const void *expAvgSq, const double *lr,
                     const int64_t *step, const double *squares, void *paramOut,
                     void *masterOut, void *expAvgOut, void *expAvgSqOut) = 0;
  /// dcrt_launch_kernel and dcrt_launch_kernel_coresident: binary, kernel
  /// and dims checked (non-null, positive sizes); `coresidentBlocks` is 0
  /// for a kernel whose blocks never wait for each other, else at least 1
  /// and at most the grid's blocks.
  virtual void launchKernel(const void *binary, int64_t binaryBytes,
                            const char *kernel, const int64_t *dims,
                            int32_t sharedBytes, void **args,
                            int64_t coresidentBlocks) = 0;
  /// dcrt_check_finite, called only with DCRT_INIT_CHECK_FINITE: `dtype`
  /// is f32, bf16 or f16, `numel` >= 0 (`data` non-null when positive),
  /// `flags` known bits, `site` non-null. Records the step's first check
  /// that finds a non-finite value (the calls' order is program order).
  virtual void checkFinite(const void *data, int64_t numel, int32_t dtype,
                           int32_t flags, const char *site) = 0;
  /// dcrt_first_nonfinite, only with DCRT_INIT_CHECK_FINITE: the site of
  /// that check, its kind ("NaN" or "infinity") and count, or null (then
  /// `what` and `count` are left alone); starts over for the next step.
  virtual const char *firstNonFinite(const char *&what, int64_t &count) = 0;

  // The host program's calls (dcrt/core.hpp).
  /// Step capture (CUDA graphs); a backend without it returns false and is
  /// never asked for the others.
  virtual bool canCaptureSteps() const { return false; }
  virtual void beginCapture() {}
  virtual void *endCapture() { return nullptr; }
  virtual void replay(void *graph) {}
  virtual void destroyGraph(void *graph) {}

  virtual void *allocate(int64_t bytes, MemoryKind kind, const char *what) = 0;
  virtual void deallocate(void *pointer) = 0;
  virtual void copy(void *dst, const void *src, int64_t bytes) = 0;
  virtual void synchronize() = 0;
  virtual bool deviceIsHost() const = 0;
  virtual MemoryStats memoryStats() = 0;
  virtual void resetPeakMemory() = 0;
  /// True once `future`'s operation finished (it must still be waited).
  virtual bool isComplete(dcrt_future future) = 0;
  /// Futures started and not yet waited.
  virtual int outstanding() const = 0;
};

using BackendFactory =
    std::function<std::unique_ptr<Backend>(Job &, const RuntimeConfig &)>;

/// Backends register themselves by name from a static initializer of their
/// own library (the cuda one only exists when CUDA was found at build time).
void registerBackend(const char *name, BackendFactory factory);

/// The shared shape checks of a sharded collective: local == ceil(full /
/// size) for a group of `groupSize` ranks.
void checkShard(int64_t localNumel, int64_t fullNumel, int32_t groupSize,
                const char *caller, int index);
void checkDType(int32_t dtype, const char *caller, int index);
void checkReduceOp(int32_t op, const char *caller);

/// Elements of rank `r`'s slot that are real, not padding.
int64_t validInSlot(int64_t fullNumel, int64_t localNumel, int64_t r);

} // namespace dcrt::detail

#endif // DCRT_CORE_BACKEND_H
