//===- HostBackend.h - the host backend: CPU memory, host collectives -----===//
//
// Same semantics as a device backend, on CPU memory: "device" memory is host
// memory, collectives are the job transport's (MPI or TCP) collectives
// progressed by the job's communication thread, copies run on two copy threads.
// Starts pack (and cast) on the caller's thread; dcrt_wait blocks until the
// operation is done, then unpacks, casts and averages. CI runs real multi-rank
// programs on it.
//
//===----------------------------------------------------------------------===//
#ifndef DCRT_HOST_HOSTBACKEND_H
#define DCRT_HOST_HOSTBACKEND_H

#include "Backend.h"
#include "Job.h"
#include "Memory.h"
#include "Streams.h"

#include <memory>
#include <optional>
#include <vector>

namespace dcrt::detail {

/// The host backend's future.
struct HostFuture : dcrt_future_impl {
  /// One tensor of a group gather or a reduce-scatter bucket.
  struct Item {
    void *out;     // the full tensor, or the reduced shard
    int32_t dtype; // of `out`
    int64_t localNumel;
    int64_t fullNumel;
    int64_t segment; // offset of its slot in a rank's packed block
  };

  CommOp comm;
  CopyJob copy;
  std::vector<Item> items;
  void *sendStaging = nullptr; // from the staging pool, or null
  void *recvStaging = nullptr;
  int64_t blockSize = 0; // gather: bytes, reduce-scatter: f32 elements
  int64_t groupSize = 1; // ranks of the axis
  bool average = false;
  // All-reduce: the caller's output (recvStaging holds f32 when converting).
  void *allReduceOut = nullptr;
  int32_t allReduceType = DCRT_F32;
  int64_t allReduceNumel = 0;
  // All-to-all: how to unpack into the caller's output.
  void *allToAllOut = nullptr;
  std::optional<AllToAllLayout> allToAll;

  const std::atomic<bool> &doneFlag() const;
};

/// A full tensor handed out by a gather, until dcrt_release.
struct GatheredTensor {
  void *full;
  const void *shard;
  HostFuture *pending; // the gather, until waited
};

class HostBackend final : public Backend {
public:
  HostBackend(Job &job, const RuntimeConfig &config);
  ~HostBackend() override;

  const char *name() const override { return "host"; }
  dcrt_future gatherStart(int32_t axis, int32_t n, void *const *shards,
                          const int64_t *localNumel, const int64_t *fullNumel,
                          const int32_t *srcDtype, const int32_t *dstDtype,
                          void **outFull) override;
  dcrt_future reduceScatterStart(int32_t axis, int32_t n, int32_t op,
                                 void *const *grads, const int64_t *fullNumel,
                                 const int32_t *gradDtype,
                                 const int64_t *localNumel,
                                 const int32_t *shardDtype,
                                 void **outShards) override;
  dcrt_future allReduceStart(int32_t axis, int32_t op, const void *input,
                             int64_t numel, int32_t dtype, void **out) override;
  dcrt_future allToAllStart(int32_t axis, const void *input, void *output,
                            const AllToAllLayout &layout) override;
  dcrt_future offloadStart(const void *device, int64_t bytes,
                           void **outHost) override;
  dcrt_future reloadInto(void *host, int64_t bytes, void *device) override;
  dcrt_future uploadInto(const void *host, int64_t bytes,
                         void *device) override;
  dcrt_future downloadInto(const void *device, int64_t bytes,
                           void *host) override;
  void wait(dcrt_future future) override;
  void release(void *buffer) override;
  void invalidateGathered(const void *shard) override;
  void clearGathered() override;
  void endStep() override;
  void *computeStream() override { return nullptr; }
  void *stepArena() override { return stepArenaMemory.data(); }
  int64_t opBegin() override { return nowNs(); }
  void opEnd(const char *key, int64_t begin) override;
  void attentionForward(const dcrt_attention_desc &desc, const void *q,
                        const void *k, const void *v, void *o,
                        float *lse) override;
  void attentionBackward(const dcrt_attention_desc &desc, const void *q,
                         const void *k, const void *v, const void *o,
                         const float *lse, const void *dO, void *dq, void *dk,
                         void *dv) override;
  void matmul(const dcrt_matmul_desc &desc, const void *a, const void *b,
              void *c) override;
  void topk(const dcrt_topk_desc &desc, const void *scores, void *values,
            void *indices) override;
  void groupByExpert(const dcrt_group_by_expert_desc &desc, const void *ids,
                     void *order, void *ends) override;
  void gatherRows(const dcrt_row_map_desc &desc, const void *source,
                  const void *index, void *result) override;
  void scatterAddRows(const dcrt_row_map_desc &desc, const void *source,
                      const void *index, void *result) override;
  void groupedMatmul(const dcrt_grouped_matmul_desc &desc, const void *lhs,
                     const void *rhs, const void *ends, void *out) override;
  void groupedWeightGrad(const dcrt_grouped_matmul_desc &desc, const void *lhs,
                         const void *rhs, const void *ends, void *out) override;
  void gradSquares(const dcrt_adamw_desc &desc, const AdamWSlot &slot,
                   const void *grad, const double *squaresIn,
                   double *squaresOut) override;
  void gradAccumulate(const dcrt_adamw_desc &desc, const void *grad,
                      const float *sumIn, float *sumOut) override;
  void adamw(const dcrt_adamw_desc &desc, const AdamWSlot &slot,
             const void *param, const void *grad, const void *master,
             const void *expAvg, const void *expAvgSq, const double *lr,
             const int64_t *step, const double *squares, void *paramOut,
             void *masterOut, void *expAvgOut, void *expAvgSqOut) override;
  void launchKernel(const void *binary, int64_t binaryBytes, const char *kernel,
                    const int64_t *dims, int32_t sharedBytes, void **args,
                    int64_t coresidentBlocks) override;
  void checkFinite(const void *data, int64_t numel, int32_t dtype,
                   int32_t flags, const char *site) override;
  const char *firstNonFinite(const char *&what, int64_t &count) override;

  void *allocate(int64_t bytes, MemoryKind kind, const char *what) override;
  void deallocate(void *pointer) override;
  void copy(void *dst, const void *src, int64_t bytes) override;
  void synchronize() override {}
  bool deviceIsHost() const override { return true; }
  MemoryStats memoryStats() override;
  void resetPeakMemory() override;
  bool isComplete(dcrt_future future) override;
  int outstanding() const override { return outstanding_; }

private:
  HostFuture *newFuture(dcrt_future_impl::Kind kind);
  void awaitCompletion(HostFuture *future);
  void finishGather(HostFuture *future);
  void finishReduceScatter(HostFuture *future);
  void finishAllReduce(HostFuture *future);
  void finishAllToAll(HostFuture *future);
  void releaseGathered(std::vector<GatheredTensor>::iterator tensor,
                       const char *caller);
  dcrt_future copyToDevice(dcrt_future_impl::Kind kind, const char *name,
                           const void *host, int64_t bytes, void *device,
                           Arena *releaseTo);
  dcrt_future copyToHost(const char *name, const void *device, int64_t bytes,
                         void *host);

  Job &job;
  Arena gatherArena, hostPool;
  BufferPool stepBuffers, staging;
  AlignedBuffer stepArenaMemory;
  CopyStream toHost, toDevice;

  std::vector<std::unique_ptr<HostFuture>> futures;
  std::vector<HostFuture *> freeFutures;
  int outstanding_ = 0;
  uint64_t startedOps = 0;
  std::vector<GatheredTensor> gathered;
  /// The host program's buffers (allocate/deallocate), by address, with
  /// the kind each was asked for: what it asked as device memory counts
  /// (hostProgramBytes), as the cuda backend counts its device buffers.
  std::vector<std::pair<AlignedBuffer, MemoryKind>> hostProgramBuffers;
  int64_t hostProgramBytes = 0;
  /// The step's first check that found a non-finite value (site null: none
  /// yet); later checks of the step are not even scanned.
  struct NonFiniteRecord {
    const char *site = nullptr;
    const char *what = nullptr;
    int64_t count = 0;
  } nonFinite;
};

} // namespace dcrt::detail

#endif // DCRT_HOST_HOSTBACKEND_H
