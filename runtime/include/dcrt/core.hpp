//===- core.hpp - libdcrt's C++ API for the host program --------*- C++ -*-===//
//
// What dc-run (not the artifact) needs beyond the C ABI: memory statistics,
// blocking collectives on the runtime's communicator, tracing and the
// per-op profile. Artifacts use only dcrt.h.
//
//===----------------------------------------------------------------------===//
#ifndef DCRT_CORE_HPP
#define DCRT_CORE_HPP

#include "dcrt/dcrt.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dcrt {

/// Owned host memory, 64-byte aligned (compiled code may assume vector
/// alignment). Fatal, naming `what`, when the allocation fails.
class AlignedBuffer {
public:
  AlignedBuffer() = default;
  AlignedBuffer(int64_t bytes, const char *what, bool zeroed = true);
  AlignedBuffer(AlignedBuffer &&other) noexcept;
  AlignedBuffer &operator=(AlignedBuffer &&other) noexcept;
  AlignedBuffer(const AlignedBuffer &) = delete;
  AlignedBuffer &operator=(const AlignedBuffer &) = delete;
  ~AlignedBuffer();

  void *data() const { return data_; }
  template <typename T> T *as() const { return static_cast<T *>(data_); }
  int64_t size() const { return size_; }

private:
  void *data_ = nullptr;
  int64_t size_ = 0;
};

/// Where a buffer of the host program lives. Device: what the artifact
/// computes on (host memory on the host backend); Host: host memory the
/// device copies from at full speed (pinned on a device backend).
enum class MemoryKind { Device, Host };

/// Memory the host program hands to the artifact (parameters, gradients,
/// data, results) or keeps beside it (optimizer state). Zeroed. Allocated
/// before the first step, never inside one. Fatal, naming `what`, when the
/// memory is not there.
void *allocate(int64_t bytes, MemoryKind kind, const char *what);
void deallocate(void *pointer);
/// Synchronous copy between any two buffers (host or device), ordered after
/// the work enqueued so far.
void copy(void *dst, const void *src, int64_t bytes);
/// Blocks until every operation enqueued so far (the step) is done; a hung
/// collective is a fatal error after timeoutSeconds().
void synchronize();
/// The backend's compute stream (a cudaStream_t; null on the host backend).
void *computeStream();
/// True when device memory is host memory (the host backend).
bool deviceIsHost();

/// A buffer from allocate(), owned, or bytes of memory someone else owns
/// (borrow: a result the step keeps in its arena).
class Buffer {
public:
  Buffer() = default;
  Buffer(int64_t bytes, MemoryKind kind, const char *what)
      : data_(allocate(bytes, kind, what)), size_(bytes), kind_(kind) {}
  static Buffer borrow(void *data, int64_t bytes, MemoryKind kind) {
    Buffer buffer;
    buffer.data_ = data;
    buffer.size_ = bytes;
    buffer.kind_ = kind;
    buffer.owned_ = false;
    return buffer;
  }
  Buffer(Buffer &&other) noexcept { *this = std::move(other); }
  Buffer &operator=(Buffer &&other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    std::swap(kind_, other.kind_);
    std::swap(owned_, other.owned_);
    return *this;
  }
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
  ~Buffer() {
    if (data_ && owned_)
      deallocate(data_);
  }

  void *data() const { return data_; }
  template <typename T> T *as() const { return static_cast<T *>(data_); }
  int64_t size() const { return size_; }
  MemoryKind kind() const { return kind_; }

  bool owned() const { return owned_; }

private:
  void *data_ = nullptr;
  int64_t size_ = 0;
  MemoryKind kind_ = MemoryKind::Device;
  bool owned_ = true;
};

/// One pool of runtime memory, in bytes.
struct PoolStats {
  int64_t plan = 0;      // the planned bound (0: grows as needed)
  int64_t live = 0;      // handed out now
  int64_t highWater = 0; // most handed out at once since resetPeakMemory
  int64_t reserved = 0;  // held from the system
  int64_t systemAllocations = 0; // constant in steady state: no churn
};

struct MemoryStats {
  PoolStats gatherArena; // gathered parameters (dcrt_gather_start)
  PoolStats hostPool;    // offloaded copies (dcrt_offload_start)
  PoolStats stepBuffers; // reduced shards, all-reduce results, reloads, uploads
  PoolStats staging;     // packed send/receive buffers of collectives
  PoolStats stepArena;   // the artifact's planned temporaries
  /// Device memory the host program allocated (parameters, optimizer
  /// state, data, results).
  int64_t hostProgramBytes = 0;
  /// Device memory in use on this rank's GPU by every allocator
  /// (cudaMemGetInfo: total - free; NCCL's and CUDA's own included), 0 on
  /// the host backend.
  int64_t deviceUsedBytes = 0;
  /// cuBLASLt's workspace for dcrt_matmul (device memory allocated once at
  /// dcrt_init by the cuda backend; empty on the host backend).
  PoolStats matmulWorkspace;
  /// cuDNN's workspaces for dcrt_attention_* (one per cached graph, made on
  /// its first call by the cuda backend; empty on the host backend).
  PoolStats attentionWorkspace;
  /// The mixture-of-experts calls' workspaces (the cuda backend's group
  /// counts, the scatter's source lists, the weight gradient's partial
  /// sums: one per descriptor that needs one, made on its first call;
  /// empty on the host backend).
  PoolStats moeWorkspace;
  /// Sum of the high-water marks of the runtime's device pools (the host
  /// pool is host memory: not counted): the peak dc-run reports beside the
  /// plan.
  int64_t peakBytes() const;
  /// peakBytes plus what the host program holds on the device (parameters,
  /// optimizer state, data): everything dc puts on the device, comparable
  /// to another framework's peak of allocated memory.
  int64_t devicePeakBytes() const { return peakBytes() + hostProgramBytes; }
};

MemoryStats memoryStats();
/// Starts a new high-water window (dc-run: once per step).
void resetPeakMemory();

/// A whole step captured once and replayed with one launch (a CUDA graph on
/// the cuda backend): no host work per operation. Only work the step
/// enqueues is replayed: the runtime's host-side bookkeeping ran once, at
/// capture, so a captured step must be deterministic (the same calls with
/// the same buffers every time; a compiled step is).
class StepGraph {
public:
  StepGraph() = default;
  StepGraph(StepGraph &&other) noexcept { std::swap(handle, other.handle); }
  StepGraph &operator=(StepGraph &&other) noexcept {
    std::swap(handle, other.handle);
    return *this;
  }
  StepGraph(const StepGraph &) = delete;
  StepGraph &operator=(const StepGraph &) = delete;
  ~StepGraph();
  explicit operator bool() const { return handle != nullptr; }

private:
  friend StepGraph captureStep(void (*step)(void *), void *context);
  friend void replay(const StepGraph &graph);
  void *handle = nullptr;
};

/// Whether the backend can capture steps (false on the host backend).
bool canCaptureSteps();
/// Runs `step(context)` in capture mode: the work it enqueues is recorded,
/// not executed. Call it on a warmed-up step (pools sized, communicators
/// connected), not inside another capture.
StepGraph captureStep(void (*step)(void *), void *context);
/// Enqueues the captured step once on the compute stream.
void replay(const StepGraph &graph);

/// True once the operation behind `future` has finished in the background:
/// the runtime's communication and copy threads progress it without
/// dcrt_wait. The future must still be waited.
bool isComplete(dcrt_future future);

/// How many times dcrt_end_step ran: the host program checks that an entry
/// ended its step.
int64_t endedSteps();

/// Seconds a wait may block before it is an error (DCRT_TIMEOUT_S, 300).
double timeoutSeconds();

/// How dcrt_init will join the job in this environment, "mpi" or "tcp"
/// (DCRT_TRANSPORT, else an MPI launcher's variables, else torchrun's or
/// srun's): callable before dcrt_init.
std::string transportFromEnvironment();

/// Blocking collectives for the host program, on the runtime's communicator
/// and in program order with the artifact's collectives.
void allReduceSum(double *values, int count);
void broadcast(void *data, int64_t bytes, int root);
/// `bytes` from every rank, concatenated in rank order into `out` on `root`.
void gatherToRoot(const void *local, int64_t bytes, void *out, int root);
/// Each rank's string, in rank order, on `root` (empty elsewhere).
std::vector<std::string> gatherStrings(const std::string &local, int root);
void barrier();

/// Streams of the trace, as the CUDA backend will have them.
enum class Track {
  Compute,
  Gather,
  ReduceScatter,
  AllReduce,
  AllToAll,
  HostCollective,
  CopyToHost,
  CopyToDevice,
};

/// Nanoseconds since the job's common start (set by a barrier in dcrt_init).
int64_t nowNs();
/// Recording spans costs a lock per event; off unless a trace is wanted.
void setTracing(bool enabled);
/// Records a span; `name` must stay valid until writeTrace (a literal).
/// `argName`/`argValue`, when set, show as the span's argument.
void traceSpan(Track track, const char *name, int64_t beginNs, int64_t endNs,
               const char *argName = nullptr, int64_t argValue = 0);
/// Collective: writes every rank's spans to `path` as a Chrome trace
/// (Perfetto opens it); rank 0 writes.
void writeTrace(const std::string &path);

/// Count, time and bytes of each collective and copy kind so far.
struct TransferStats {
  const char *kind;
  int64_t count = 0;
  double seconds = 0; // start to completion
  int64_t bytes = 0;  // this rank's payload
};
std::vector<TransferStats> transferStats();

/// Mean time per op key from dcrt_op_begin/dcrt_op_end.
struct OpTime {
  std::string key;
  double meanSeconds = 0;
  int64_t count = 0;
};
std::vector<OpTime> opProfile();
/// Forgets measurements so far (dc-run drops the warm-up step).
void resetOpProfile();

} // namespace dcrt

#endif // DCRT_CORE_HPP
