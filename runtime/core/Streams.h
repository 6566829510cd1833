//===- Streams.h - background communication and copy threads --------------===//
//
// The host backend's streams. Open MPI progresses a nonblocking collective
// only inside MPI calls, so a start alone would not overlap with compute: one
// communication thread owns the transport (every MPI call, or every socket
// of the tcp transport) after dcrt_init and keeps progressing the
// collectives in flight. Copies (offload, reload) run on their own threads
// like the CUDA backend's copy streams.
//
//===----------------------------------------------------------------------===//
#ifndef DCRT_LIB_STREAMS_H
#define DCRT_LIB_STREAMS_H

#include "Memory.h"
#include "Trace.h"
#include "Transport.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace dcrt::detail {

/// The one condition every waiter blocks on; background threads signal it
/// when they finish something.
class Completion {
public:
  void markDone(std::atomic<bool> &flag);
  /// False if `seconds` passed first.
  bool waitFor(const std::atomic<bool> &flag, double seconds);
  /// Whether a thread is blocked in waitFor: the caller has nothing to
  /// overlap with, so completion latency is all that matters.
  bool hasWaiters() const {
    return waiters.load(std::memory_order_relaxed) > 0;
  }

private:
  std::mutex mutex;
  std::condition_variable changed;
  std::atomic<int> waiters{0};
};

enum class CommKind {
  AllGather,
  ReduceScatter,
  AllReduce,
  AllToAll,
  Gather,
  Gatherv,
  Barrier,
  Broadcast,
};

const char *commKindName(CommKind kind);

/// One nonblocking collective, described by the caller and issued by the
/// communication thread through the job's transport. Counts are in elements
/// of `type` per rank; `root` and Gatherv's counts and displacements (in
/// elements) are by index in the group.
struct CommOp {
  CommKind kind = CommKind::Barrier;
  Track track = Track::HostCollective;
  const char *name = "";
  const void *send = nullptr;
  void *recv = nullptr; // AllReduce: == send means in place
  int64_t count = 0;
  ElementType type = ElementType::Byte;
  ReduceOp op = ReduceOp::Sum;
  int root = 0;
  const int *recvCounts = nullptr; // Gatherv, on the root
  const int *displacements = nullptr;
  int group = 0;     // Transport::addGroup's id; 0: the world
  int64_t bytes = 0; // this rank's payload, for statistics
  std::atomic<bool> done{false};
  int64_t issuedNs = 0;
};

class CommEngine {
public:
  CommEngine(Completion &completion, Tracer &tracer)
      : completion(completion), tracer(tracer) {}
  ~CommEngine() { stop(); }

  void start(Transport &transport);
  /// Returns once every submitted op has completed and the thread ended.
  void stop();
  /// Ops are issued in submission order: every rank submits the same
  /// collectives in the same order, as MPI (and the tcp transport) require.
  void submit(CommOp *op);

private:
  void run();

  Completion &completion;
  Tracer &tracer;
  Transport *transport = nullptr;
  std::thread thread;
  std::mutex mutex;
  std::condition_variable wakeUp;
  std::vector<CommOp *> queue;
  bool stopping = false;
};

/// A host-memory copy on a copy stream; `releaseTo`, when set, gets
/// `releasePointer` back once the copy is done (a reload frees its host copy;
/// an upload leaves its source, the caller's buffer, alone).
struct CopyJob {
  void *dst = nullptr;
  const void *src = nullptr;
  int64_t bytes = 0;
  const char *name = "";
  Arena *releaseTo = nullptr;
  void *releasePointer = nullptr;
  std::atomic<bool> done{false};
};

class CopyStream {
public:
  CopyStream(Track track, Completion &completion, Tracer &tracer)
      : track(track), completion(completion), tracer(tracer) {}
  ~CopyStream() { stop(); }

  void start();
  void stop();
  void submit(CopyJob *job);

private:
  void run();

  Track track;
  Completion &completion;
  Tracer &tracer;
  std::thread thread;
  std::mutex mutex;
  std::condition_variable wakeUp;
  std::vector<CopyJob *> queue;
  bool stopping = false;
};

/// What the communication thread is doing, for the MPI error handler.
const char *currentCommActivity();

} // namespace dcrt::detail

#endif // DCRT_LIB_STREAMS_H
