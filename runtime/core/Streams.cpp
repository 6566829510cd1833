//===- Streams.cpp - background communication and copy threads ------------===//
#include "Streams.h"

#include "dcrt/error.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

using namespace dcrt;
using namespace dcrt::detail;

static std::atomic<const char *> mpiActivity{"starting"};

const char *dcrt::detail::currentMpiActivity() { return mpiActivity.load(); }

void Completion::markDone(std::atomic<bool> &flag) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    flag.store(true, std::memory_order_release);
  }
  changed.notify_all();
}

bool Completion::waitFor(const std::atomic<bool> &flag, double seconds) {
  if (flag.load(std::memory_order_acquire))
    return true;
  std::unique_lock<std::mutex> lock(mutex);
  ++waiters;
  bool done =
      changed.wait_for(lock, std::chrono::duration<double>(seconds),
                       [&] { return flag.load(std::memory_order_acquire); });
  --waiters;
  return done;
}

//===----------------------------------------------------------------------===//
// CommEngine
//===----------------------------------------------------------------------===//

/// The longest pause between two tests of the collectives in flight while
/// the caller computes: short enough for multi-round collectives to keep
/// moving, long enough not to take a core from compute. While the caller
/// waits, the thread only yields between tests.
constexpr std::chrono::microseconds maxPollPause{100};

void CommEngine::start() {
  thread = std::thread([this] { run(); });
}

void CommEngine::stop() {
  if (!thread.joinable())
    return;
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  wakeUp.notify_all();
  thread.join();
}

void CommEngine::submit(CommOp *op) {
  op->done.store(false, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mutex);
    queue.push_back(op);
  }
  wakeUp.notify_all();
}

void CommEngine::issue(CommOp *op) {
  mpiActivity = op->name;
  op->issuedNs = nowNs();
  MPI_Comm comm = op->comm;
  if (comm == MPI_COMM_NULL)
    fatal("internal error: %s has no communicator", op->name);
  int rc = MPI_SUCCESS;
  switch (op->kind) {
  case CommKind::AllGather:
    rc = MPI_Iallgather(op->send, op->count, op->type, op->recv, op->count,
                        op->type, comm, &op->request);
    break;
  case CommKind::ReduceScatter:
    rc = MPI_Ireduce_scatter_block(op->send, op->recv, op->count, op->type,
                                   op->op, comm, &op->request);
    break;
  case CommKind::AllReduce: // send == recv: in place
    rc =
        MPI_Iallreduce(op->send == op->recv ? MPI_IN_PLACE : op->send, op->recv,
                       op->count, op->type, op->op, comm, &op->request);
    break;
  case CommKind::AllToAll:
    rc = MPI_Ialltoall(op->send, op->count, op->type, op->recv, op->count,
                       op->type, comm, &op->request);
    break;
  case CommKind::Gather:
    rc = MPI_Igather(op->send, op->count, op->type, op->recv, op->count,
                     op->type, op->root, comm, &op->request);
    break;
  case CommKind::Gatherv:
    rc =
        MPI_Igatherv(op->send, op->count, op->type, op->recv, op->recvCounts,
                     op->displacements, op->type, op->root, comm, &op->request);
    break;
  case CommKind::Barrier:
    rc = MPI_Ibarrier(comm, &op->request);
    break;
  case CommKind::Broadcast:
    rc =
        MPI_Ibcast(op->recv, op->count, op->type, op->root, comm, &op->request);
    break;
  }
  // The communicator's error handler reports first; this is the backstop.
  if (rc != MPI_SUCCESS)
    fatal("MPI failed to start %s (error %d)", op->name, rc);
}

void CommEngine::run() {
  std::vector<CommOp *> incoming, inFlight;
  std::vector<MPI_Request> requests;
  std::vector<int> completedIndices;
  std::chrono::microseconds pause{0};
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex);
      auto hasWork = [&] { return stopping || !queue.empty(); };
      if (inFlight.empty())
        wakeUp.wait(lock, hasWork);
      else if (pause.count() > 0)
        wakeUp.wait_for(lock, pause, hasWork);
      if (stopping && queue.empty() && inFlight.empty())
        return;
      incoming.swap(queue);
    }
    for (CommOp *op : incoming) {
      issue(op);
      inFlight.push_back(op);
      requests.push_back(op->request);
    }
    if (!incoming.empty())
      pause = std::chrono::microseconds(0);
    incoming.clear();
    if (inFlight.empty())
      continue;

    mpiActivity = "progressing collectives in flight";
    completedIndices.resize(requests.size());
    int completed = 0;
    int rc =
        MPI_Testsome(static_cast<int>(requests.size()), requests.data(),
                     &completed, completedIndices.data(), MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS)
      fatal("MPI failed while progressing collectives (error %d)", rc);
    if (completed == 0 || completed == MPI_UNDEFINED) {
      if (completion.hasWaiters()) {
        pause = std::chrono::microseconds(0);
        std::this_thread::yield();
      } else {
        pause =
            std::min(maxPollPause, pause * 2 + std::chrono::microseconds(1));
      }
      continue;
    }
    pause = std::chrono::microseconds(0);
    int64_t now = nowNs();
    for (int i = 0; i < completed; ++i) {
      CommOp *op = inFlight[completedIndices[i]];
      tracer.transfer(op->track, op->name, op->issuedNs, now, op->bytes);
      completion.markDone(op->done);
      inFlight[completedIndices[i]] = nullptr;
    }
    // Completed requests are MPI_REQUEST_NULL now; keep the rest in order.
    size_t kept = 0;
    for (size_t i = 0; i < inFlight.size(); ++i)
      if (inFlight[i]) {
        inFlight[kept] = inFlight[i];
        requests[kept] = requests[i];
        ++kept;
      }
    inFlight.resize(kept);
    requests.resize(kept);
  }
}

//===----------------------------------------------------------------------===//
// CopyStream
//===----------------------------------------------------------------------===//

void CopyStream::start() {
  thread = std::thread([this] { run(); });
}

void CopyStream::stop() {
  if (!thread.joinable())
    return;
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  wakeUp.notify_all();
  thread.join();
}

void CopyStream::submit(CopyJob *job) {
  job->done.store(false, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mutex);
    queue.push_back(job);
  }
  wakeUp.notify_all();
}

void CopyStream::run() {
  std::vector<CopyJob *> batch;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex);
      wakeUp.wait(lock, [&] { return stopping || !queue.empty(); });
      if (queue.empty())
        return; // stopping, and every copy done
      batch.swap(queue);
    }
    for (CopyJob *job : batch) { // in submission order, like a stream
      int64_t begin = nowNs();
      std::memcpy(job->dst, job->src, job->bytes);
      if (job->releaseTo)
        job->releaseTo->release(job->releasePointer, "returning a reloaded "
                                                     "host copy");
      tracer.transfer(track, job->name, begin, nowNs(), job->bytes);
      completion.markDone(job->done);
    }
    batch.clear();
  }
}
