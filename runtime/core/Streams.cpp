//===- Streams.cpp - background communication and copy threads ------------===//
#include "Streams.h"

#include "dcrt/error.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

using namespace dcrt;
using namespace dcrt::detail;

static std::atomic<const char *> commActivity{"starting"};

const char *dcrt::detail::currentCommActivity() { return commActivity.load(); }

const char *dcrt::detail::commKindName(CommKind kind) {
  switch (kind) {
  case CommKind::AllGather:
    return "all-gather";
  case CommKind::ReduceScatter:
    return "reduce-scatter";
  case CommKind::AllReduce:
    return "all-reduce";
  case CommKind::AllToAll:
    return "all-to-all";
  case CommKind::Gather:
    return "gather";
  case CommKind::Gatherv:
    return "gatherv";
  case CommKind::Barrier:
    return "barrier";
  case CommKind::Broadcast:
    return "broadcast";
  }
  return "collective";
}

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

void CommEngine::start(Transport &transport) {
  this->transport = &transport;
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

void CommEngine::run() {
  std::vector<CommOp *> incoming, completed;
  size_t inFlight = 0;
  std::chrono::microseconds pause{0};
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex);
      auto hasWork = [&] { return stopping || !queue.empty(); };
      if (inFlight == 0)
        wakeUp.wait(lock, hasWork);
      else if (pause.count() > 0)
        wakeUp.wait_for(lock, pause, hasWork);
      if (stopping && queue.empty() && inFlight == 0)
        return;
      incoming.swap(queue);
    }
    for (CommOp *op : incoming) {
      commActivity = op->name;
      op->issuedNs = nowNs();
      transport->start(*op);
      ++inFlight;
    }
    if (!incoming.empty())
      pause = std::chrono::microseconds(0);
    incoming.clear();
    if (inFlight == 0)
      continue;

    commActivity = "progressing collectives in flight";
    completed.clear();
    transport->progress(completed);
    if (completed.empty()) {
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
    for (CommOp *op : completed) {
      tracer.transfer(op->track, op->name, op->issuedNs, now, op->bytes);
      completion.markDone(op->done);
    }
    inFlight -= completed.size();
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
