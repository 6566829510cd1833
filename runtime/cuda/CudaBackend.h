//===- CudaBackend.h - the cuda backend: streams, events, NCCL ------------===//
//
// The artifact's compute runs on one compute stream. Collectives run on two
// high-priority streams with NCCL, gathers on one and reductions (and
// all-reduce, all-to-all) on the other, each with its own communicator per
// grid axis so that a gather and a reduce-scatter overlap. Offloads and
// reloads run on a device-to-host and a host-to-device copy stream.
//
// Ordering, without a host synchronization inside a step:
//  - a start records an event on the compute stream and its stream waits on
//    it, so the operation sees everything the artifact enqueued before;
//  - its completion is an event recorded on its own stream after the last
//    piece of work (unpack, convert); dcrt_wait makes the compute stream
//    wait on it;
//  - memory handed back (a release, the end of a step) is reused only by
//    operations started later, which the first rule orders after the
//    compute that read it.
// Device memory comes from pools sized by the compile-time plan and
// allocated once at dcrt_init (a pool without a plan grows, with a
// warning); the host pool and host-resident parameters are pinned.
//
//===----------------------------------------------------------------------===//
#ifndef DCRT_CUDA_CUDABACKEND_H
#define DCRT_CUDA_CUDABACKEND_H

#include "Backend.h"
#include "Job.h"
#include "Kernels.h"
#include "Memory.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace dcrt::detail {

/// cuBLASLt's workspace for dcrt_matmul: one buffer, allocated at dcrt_init
/// and shared by every matmul (they all run on the compute stream).
constexpr int64_t matmulWorkspaceBytes = int64_t(32) << 20;

/// The key of a cached library plan: `N` int64 fields, compared and hashed
/// (FNV-1a) as a whole.
template <size_t N> struct PlanKey {
  int64_t fields[N];
  bool operator==(const PlanKey &other) const {
    return std::memcmp(fields, other.fields, sizeof(fields)) == 0;
  }
};
struct PlanKeyHash {
  template <size_t N> size_t operator()(const PlanKey<N> &key) const {
    uint64_t hash = 1469598103934665603ull;
    for (int64_t field : key.fields) {
      hash ^= static_cast<uint64_t>(field);
      hash *= 1099511628211ull;
    }
    return static_cast<size_t>(hash);
  }
};

/// What a cached matmul plan is chosen for: every descriptor field, then
/// the alignment class (1..256 bytes) of the A, B and C pointers.
using MatmulKey = PlanKey<19>;

/// What a cached attention graph is built for: the direction (0 forward,
/// 1 backward), then dtype, batch, seq_q, seq_k, head_dim, causal, the
/// scale's bits, batch_kv, heads and the eight operands' strides (those the
/// call ignores zeroed by checkAttentionDesc).
using AttentionKey = PlanKey<34>;
/// A cuDNN graph with its execution plan and workspace (CudaAttention.cpp).
struct AttentionPlan;
struct AttentionPlanDeleter {
  void operator()(AttentionPlan *plan) const;
};

/// The mixture-of-experts calls' workspaces (CudaMoe.cpp).
struct MoeWorkspaces;
struct MoeWorkspacesDeleter {
  void operator()(MoeWorkspaces *workspaces) const;
};

/// A dcrt_matmul descriptor as cuBLASLt objects, with the algorithm its
/// heuristic chose (row-major C = A B computed as column-major
/// C^T = B^T A^T: cuBLASLt's first operand is B's memory).
struct MatmulPlan {
  cublasLtMatmulDesc_t operation = nullptr;
  cublasLtMatrixLayout_t first = nullptr;  // B's memory
  cublasLtMatrixLayout_t second = nullptr; // A's memory
  cublasLtMatrixLayout_t output = nullptr; // C (and D: in place)
  cublasLtMatmulAlgo_t algorithm{};
};

/// A fatbin or cubin of dcrt_launch_kernel, loaded once, with the kernels
/// looked up in it so far (by name).
struct LoadedBinary {
  struct Kernel {
    cudaKernel_t handle = nullptr;
    int32_t sharedBytesAllowed = 48 << 10; // dynamic shared memory opted in
    /// dcrt_launch_kernel_coresident: the blocks the GPU holds at once for
    /// the block shape and shared memory last checked (0: none checked).
    int64_t residentBlocks = 0;
    int64_t residentThreads = 0;
    int32_t residentSharedBytes = 0;
  };
  cudaLibrary_t library = nullptr;
  int64_t bytes = 0;
  std::unordered_map<std::string, Kernel> kernels;
};

/// The cuda backend's future.
struct CudaFuture : dcrt_future_impl {
  cudaStream_t stream = nullptr; // where the operation runs
  cudaEvent_t start = nullptr;   // on `stream`, before its first work
  cudaEvent_t done = nullptr;    // on `stream`, after its last work
  /// Staging buffers of this operation (returned at the wait: later work on
  /// the same stream is ordered after it).
  std::vector<std::pair<Arena *, void *>> staging;
  int64_t bytes = 0; // this rank's payload, for statistics
  Track track = Track::Gather;
};

/// One communicator pair of a grid axis.
struct AxisComms {
  ncclComm_t gather = nullptr;
  ncclComm_t reduce = nullptr;
  int size = 1, rank = 0;
};

class CudaBackend final : public Backend {
public:
  CudaBackend(Job &job, const RuntimeConfig &config);
  ~CudaBackend() override;

  const char *name() const override { return "cuda"; }
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
  void *computeStream() override { return compute; }
  void *stepArena() override { return stepArenaBase; }
  int64_t opBegin() override;
  void opEnd(const char *key, int64_t begin) override;
  void matmul(const dcrt_matmul_desc &desc, const void *a, const void *b,
              void *c) override;
  void launchKernel(const void *binary, int64_t binaryBytes, const char *kernel,
                    const int64_t *dims, int32_t sharedBytes, void **args,
                    int64_t coresidentBlocks) override;
  void attentionForward(const dcrt_attention_desc &desc, const void *q,
                        const void *k, const void *v, void *o,
                        float *lse) override;
  void attentionBackward(const dcrt_attention_desc &desc, const void *q,
                         const void *k, const void *v, const void *o,
                         const float *lse, const void *dO, void *dq, void *dk,
                         void *dv) override;
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
  void checkFinite(const void *data, int64_t numel, int32_t dtype,
                   int32_t flags, const char *site) override;
  const char *firstNonFinite(const char *&what, int64_t &count) override;

  void *allocate(int64_t bytes, MemoryKind kind, const char *what) override;
  void deallocate(void *pointer) override;
  void copy(void *dst, const void *src, int64_t bytes) override;
  void synchronize() override;
  bool deviceIsHost() const override { return false; }
  MemoryStats memoryStats() override;
  void resetPeakMemory() override;
  bool isComplete(dcrt_future future) override;
  int outstanding() const override { return outstanding_; }
  bool canCaptureSteps() const override { return true; }
  void beginCapture() override;
  void *endCapture() override;
  void replay(void *graph) override;
  void destroyGraph(void *graph) override;

  /// Aborts every communicator (fatal errors, so peers do not hang).
  void abortCommunicators();
  /// Runs one collective on every communicator so that NCCL sets up its
  /// connections at dcrt_init.
  void connectCommunicators();

private:
  struct Gathered {
    void *full;
    const void *shard;
    CudaFuture *pending; // until waited
  };
  struct ProfiledOp {
    const char *key;
    cudaEvent_t begin, end;
    int64_t callsAtBegin; // apiCalls after dcrt_op_begin
  };
  /// A collective or copy whose events are resolved at the next synchronize.
  struct PendingTransfer {
    cudaEvent_t start, done;
    Track track;
    const char *name;
    int64_t bytes;
  };

  CudaFuture *newFuture(dcrt_future_impl::Kind kind, cudaStream_t stream,
                        Track track);
  /// Orders `stream` after everything enqueued on the compute stream so far.
  void followCompute(cudaStream_t stream);
  void finishStart(CudaFuture *future);
  void *stage(CudaFuture *future, Arena &arena, int64_t bytes,
              const char *what);
  void releaseGathered(std::vector<Gathered>::iterator tensor,
                       const char *caller);
  cudaEvent_t takeEvent();
  /// Blocks until `event` completed, polling NCCL for asynchronous errors;
  /// fatal after the job's timeout.
  void waitForEvent(cudaEvent_t event, const char *what);
  void resolveTimings();
  /// cuBLASLt's handle and workspace (CudaCompute.cpp), at dcrt_init.
  void setUpCompute();
  /// Destroys the matmul plans and the handle, frees the workspace and
  /// unloads the kernels' binaries (after the last synchronize).
  void tearDownCompute();
  MatmulPlan planMatmul(const dcrt_matmul_desc &desc, const MatmulKey &key);
  /// The cached cuDNN graph of an attention descriptor, made (with its
  /// workspace) on first use (CudaAttention.cpp).
  AttentionPlan &attentionPlan(const dcrt_attention_desc &desc, bool backward);
  /// Destroys the attention plans (freeing their workspaces) and the cuDNN
  /// handle.
  void tearDownAttention();
  /// The mixture-of-experts workspaces, made on first use
  /// (CudaMoe.cpp); a zeroed device allocation counted in them; their
  /// release (after the last synchronize); their statistics.
  MoeWorkspaces &moeWorkspaces();
  void *moeAllocate(int64_t bytes, const char *caller, const std::string &what);
  void tearDownMoe();
  PoolStats moeStats() const;
  /// dcrt_grad_squares' partial sums (AdamWKernels.h), made zeroed on
  /// first use and kept until dcrt_finalize (captured steps hold it).
  void *squaresWorkspace = nullptr;
  /// Enqueues the reset of finiteRecord for the next step.
  void resetFiniteRecord();

  Job &job;
  int device = 0;
  cudaStream_t compute = nullptr, gatherStream = nullptr,
               reduceStream = nullptr, toHost = nullptr, toDevice = nullptr;
  std::vector<AxisComms> comms;
  std::unique_ptr<Arena> gatherArena, stepBuffers, gatherStaging, reduceStaging,
      hostPool;
  void *stepArenaBase = nullptr;
  int64_t stepArenaBytes = 0;
  /// DCRT_INIT_DETERMINISTIC: attention's backward without atomics.
  bool deterministic = false;
  /// Host pool buffers handed back by reloads, reusable by offloads once
  /// this event (the last reload copy) completed.
  cudaEvent_t lastReload = nullptr;
  /// Whether lastReload was recorded in the capture under way (a captured
  /// stream may only wait on events of its own capture).
  bool lastReloadCaptured = false;
  /// A step is being captured: work is recorded, not run, so there are no
  /// timings to resolve.
  bool capturing = false;

  std::vector<std::unique_ptr<CudaFuture>> futures;
  std::vector<CudaFuture *> freeFutures;
  std::vector<cudaEvent_t> eventPool, eventsInUse;
  int outstanding_ = 0;
  uint64_t startedOps = 0;
  std::vector<Gathered> gathered;
  std::vector<void *> stepOutputs; // reduced shards, all-reduce results
  std::vector<ProfiledOp> profiled;
  std::vector<PendingTransfer> transfers;
  /// A reference point for converting event times to the job's clock.
  cudaEvent_t anchor = nullptr;
  int64_t anchorNs = 0;

  struct HostProgramBuffer {
    void *pointer;
    int64_t bytes;
    MemoryKind kind;
  };
  std::vector<HostProgramBuffer> hostProgramBuffers;
  int64_t hostProgramDeviceBytes = 0;

  // Compute: dcrt_matmul (cuBLASLt) and dcrt_launch_kernel. A descriptor's
  // first call creates its plan and a binary's first launch loads it (host
  // work only, no stream work); later calls only enqueue, so a step can be
  // captured once every descriptor and kernel was used outside the capture
  // (dc-run --cuda-graphs captures the second step).
  cublasLtHandle_t lt = nullptr;
  void *matmulWorkspace = nullptr;
  std::unordered_map<MatmulKey, MatmulPlan, PlanKeyHash> matmulPlans;
  std::unordered_map<const void *, LoadedBinary> binaries;
  // dcrt_attention_*: cuDNN's handle (a cudnnHandle_t, made on the first
  // call) and one plan per descriptor; workspace bytes of all plans.
  void *dnn = nullptr;
  std::unordered_map<AttentionKey,
                     std::unique_ptr<AttentionPlan, AttentionPlanDeleter>,
                     PlanKeyHash>
      attentionPlans;
  int64_t attentionWorkspaceBytes = 0;
  std::unique_ptr<MoeWorkspaces, MoeWorkspacesDeleter> moeState;

  // dcrt_check_finite (DCRT_INIT_CHECK_FINITE only): what the step's check
  // kernels found, in device memory allocated at dcrt_init (the kernels of
  // a captured step write the same record in every replay), its pinned
  // copy for dcrt_first_nonfinite, and the checks the step made so far
  // (the next one's sequence number).
  cuda::FiniteRecord *finiteRecord = nullptr;
  cuda::FiniteRecord *finiteRecordHost = nullptr;
  unsigned finiteChecks = 0;
};

} // namespace dcrt::detail

#endif // DCRT_CUDA_CUDABACKEND_H
