//===- Runtime.h - the per-process state behind the C ABI -----------------===//
#ifndef DCRT_LIB_RUNTIME_H
#define DCRT_LIB_RUNTIME_H

#include "Memory.h"
#include "Streams.h"
#include "Trace.h"

#include "dcrt/dcrt.h"

#include <mpi.h>

#include <memory>
#include <vector>

/// An operation in flight (the C ABI's dcrt_future). Pooled: a step's
/// futures are reused by the next step, buffers and all.
struct dcrt_future_impl {
  enum class Kind { Gather, ReduceScatter, AllReduce, Offload, Reload, Upload };
  /// One tensor of a group gather or a reduce-scatter bucket.
  struct Item {
    void *out;     // the full tensor, or the reduced shard
    int32_t dtype; // of `out`
    int64_t localNumel;
    int64_t fullNumel;
    int64_t segment; // offset of its slot in a rank's packed block
  };

  Kind kind = Kind::Gather;
  bool inUse = false;
  uint64_t sequence = 0; // nth start of this process, for messages
  dcrt::detail::CommOp comm;
  dcrt::detail::CopyJob copy;
  std::vector<Item> items;
  void *sendStaging = nullptr; // from the staging pool, or null
  void *recvStaging = nullptr;
  int64_t blockSize = 0; // gather: bytes, reduce-scatter: f32 elements
  bool average = false;
  // All-reduce: the caller's output (recvStaging holds f32 when converting).
  void *allReduceOut = nullptr;
  int32_t allReduceType = DCRT_F32;
  int64_t allReduceNumel = 0;

  const std::atomic<bool> &doneFlag() const;
  const char *what() const;
};

namespace dcrt::detail {

/// A full tensor handed out by a gather, until dcrt_release.
struct GatheredTensor {
  void *full;
  const void *shard;
  dcrt_future_impl *pending; // the gather, until waited
};

/// A device buffer a reload or an upload handed out (a step buffer), until
/// dcrt_release or the end of the step.
struct CopiedTensor {
  void *device;
  dcrt_future_impl *pending; // the copy, until waited
};

struct Runtime {
  Runtime(MPI_Comm comm, int rank, int worldSize, bool ownsMpi,
          int64_t gatherArenaBytes, int64_t hostPoolBytes,
          double timeoutSeconds);
  ~Runtime();

  MPI_Comm comm;
  int rank, worldSize;
  bool ownsMpi; // we called MPI_Init, so we call MPI_Finalize
  double timeoutSeconds;
  MPI_Datatype byteUnits[4]; // contiguous 1, 2, 4 and 8 bytes

  Arena gatherArena, hostPool;
  BufferPool stepBuffers, staging;
  Tracer tracer;
  Completion completion;
  CommEngine commEngine;
  CopyStream toHost, toDevice;

  std::vector<std::unique_ptr<dcrt_future_impl>> futures;
  std::vector<dcrt_future_impl *> freeFutures;
  int outstanding = 0;
  uint64_t startedOps = 0;
  int64_t endedSteps = 0;
  std::vector<GatheredTensor> gathered;
  std::vector<CopiedTensor> copied;

  dcrt_future_impl *newFuture(dcrt_future_impl::Kind kind);
  /// Blocks until `future` finished, or fails the job after the timeout.
  void awaitCompletion(dcrt_future_impl *future);
  /// Submits a host collective and waits for it.
  void runBlocking(CommOp &op);
  /// The largest contiguous-bytes unit dividing `bytes`, and the count.
  MPI_Datatype unitFor(int64_t bytes, int &count, const char *what) const;
};

/// The runtime, or a fatal error naming `caller` before dcrt_init.
Runtime &runtime(const char *caller);

} // namespace dcrt::detail

#endif // DCRT_LIB_RUNTIME_H
