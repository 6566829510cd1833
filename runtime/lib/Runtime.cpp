//===- Runtime.cpp - dcrt_init/finalize and the C++ core API --------------===//
#include "Runtime.h"

#include "Internal.h"

#include "dcrt/core.hpp"
#include "dcrt/error.hpp"

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <thread>

using namespace dcrt;
using namespace dcrt::detail;

namespace {
Runtime *state = nullptr;

using Clock = std::chrono::steady_clock;
/// The job's common start; reset by dcrt_init right after a barrier.
Clock::time_point epoch = Clock::now();

constexpr double defaultTimeoutSeconds = 300;

double timeoutFromEnvironment() {
  const char *text = std::getenv("DCRT_TIMEOUT_S");
  if (!text || !*text)
    return defaultTimeoutSeconds;
  char *end = nullptr;
  double seconds = std::strtod(text, &end);
  if (*end || !(seconds > 0))
    fatal("DCRT_TIMEOUT_S='%s' is not a positive number of seconds", text);
  return seconds;
}

void onMpiError(MPI_Comm *, int *code, ...) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(*code, text, &length);
  fatal("MPI failed while %s: %s", currentMpiActivity(), text);
}

void onOutOfMemory() {
  fatal("out of host memory (an allocation inside the runtime or dc-run "
        "failed)");
}

/// A barrier that fails after the timeout instead of hanging when a rank
/// never arrives (used before the communication thread exists).
void timedBarrier(MPI_Comm comm, double seconds) {
  MPI_Request request;
  MPI_Ibarrier(comm, &request);
  auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  for (int done = 0;;) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done)
      return;
    if (Clock::now() > deadline)
      fatal("timed out after %g s waiting for every rank to join dcrt_init",
            seconds);
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}
} // namespace

Runtime &dcrt::detail::runtime(const char *caller) {
  if (!state)
    fatal("%s called before dcrt_init (or after dcrt_finalize)", caller);
  return *state;
}

int64_t dcrt::nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() -
                                                              epoch)
      .count();
}

//===----------------------------------------------------------------------===//
// Runtime
//===----------------------------------------------------------------------===//

Runtime::Runtime(MPI_Comm comm, int rank, int worldSize, bool ownsMpi,
                 int64_t gatherArenaBytes, int64_t hostPoolBytes,
                 double timeoutSeconds)
    : comm(comm), rank(rank), worldSize(worldSize), ownsMpi(ownsMpi),
      timeoutSeconds(timeoutSeconds),
      gatherArena("gather arena", gatherArenaBytes),
      hostPool("host pool", hostPoolBytes),
      commEngine(comm, completion, tracer),
      toHost(Track::CopyToHost, completion, tracer),
      toDevice(Track::CopyToDevice, completion, tracer) {
  byteUnits[0] = MPI_BYTE;
  for (int i = 1; i < 4; ++i) {
    MPI_Type_contiguous(1 << i, MPI_BYTE, &byteUnits[i]);
    MPI_Type_commit(&byteUnits[i]);
  }
}

Runtime::~Runtime() {
  commEngine.stop();
  toHost.stop();
  toDevice.stop();
  for (int i = 1; i < 4; ++i)
    MPI_Type_free(&byteUnits[i]);
  MPI_Comm_free(&comm);
}

MPI_Datatype Runtime::unitFor(int64_t bytes, int &count,
                              const char *what) const {
  for (int i = 3; i >= 0; --i) {
    int64_t unit = int64_t(1) << i;
    if (bytes % unit == 0 && bytes / unit <= INT_MAX) {
      count = static_cast<int>(bytes / unit);
      return byteUnits[i];
    }
  }
  fatal("%s: %lld bytes per rank is too large for one MPI call", what,
        static_cast<long long>(bytes));
}

dcrt_future_impl *Runtime::newFuture(dcrt_future_impl::Kind kind) {
  dcrt_future_impl *future;
  if (freeFutures.empty()) {
    futures.push_back(std::make_unique<dcrt_future_impl>());
    future = futures.back().get();
  } else {
    future = freeFutures.back();
    freeFutures.pop_back();
  }
  future->kind = kind;
  future->inUse = true;
  future->sequence = ++startedOps;
  future->items.clear();
  future->sendStaging = future->recvStaging = nullptr;
  future->blockSize = 0;
  future->average = false;
  future->allReduceOut = nullptr;
  ++outstanding;
  return future;
}

void Runtime::awaitCompletion(dcrt_future_impl *future) {
  if (!completion.waitFor(future->doneFlag(), timeoutSeconds))
    fatal("timed out after %g s waiting for %s #%llu: a peer rank may have "
          "died, stalled or issued different collectives (DCRT_TIMEOUT_S "
          "sets the limit)",
          timeoutSeconds, future->what(),
          static_cast<unsigned long long>(future->sequence));
}

void Runtime::runBlocking(CommOp &op) {
  commEngine.submit(&op);
  if (!completion.waitFor(op.done, timeoutSeconds))
    fatal("timed out after %g s in %s: a peer rank may have died, stalled or "
          "issued different collectives (DCRT_TIMEOUT_S sets the limit)",
          timeoutSeconds, op.name);
}

//===----------------------------------------------------------------------===//
// C ABI: joining and leaving the job
//===----------------------------------------------------------------------===//

int32_t dcrt_abi_version(void) { return DCRT_ABI_VERSION; }

void dcrt_init(int32_t expected_world_size, int64_t gather_arena_bytes,
               int64_t host_pool_bytes) {
  if (state)
    fatal("dcrt_init called twice");
  std::set_new_handler(onOutOfMemory);
  double timeout = timeoutFromEnvironment();

  // Every MPI call after this one comes from one thread at a time (the
  // communication thread), so SERIALIZED is enough.
  int initialized = 0, provided = 0;
  MPI_Initialized(&initialized);
  bool ownsMpi = !initialized;
  if (ownsMpi)
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
  else
    MPI_Query_thread(&provided);
  if (provided < MPI_THREAD_SERIALIZED)
    fatal("the MPI library provides thread level %d; libdcrt needs "
          "MPI_THREAD_SERIALIZED (%d)",
          provided, MPI_THREAD_SERIALIZED);

  MPI_Errhandler handler;
  MPI_Comm_create_errhandler(onMpiError, &handler);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, handler);
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm); // inherits the handler
  MPI_Errhandler_free(&handler);

  int rank = 0, worldSize = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &worldSize);
  setErrorRank(rank, worldSize);
  if (expected_world_size > 0 && expected_world_size != worldSize)
    fatal("the artifact was compiled for %d ranks, but this job has %d",
          expected_world_size, worldSize);
  if (gather_arena_bytes < 0 || host_pool_bytes < 0)
    fatal("dcrt_init: negative planned sizes (gather arena %lld, host pool "
          "%lld bytes)",
          static_cast<long long>(gather_arena_bytes),
          static_cast<long long>(host_pool_bytes));

  timedBarrier(comm, timeout);
  epoch = Clock::now();
  state = new Runtime(comm, rank, worldSize, ownsMpi, gather_arena_bytes,
                      host_pool_bytes, timeout);
  state->commEngine.start();
  state->toHost.start();
  state->toDevice.start();
}

void dcrt_finalize(void) {
  Runtime &rt = runtime("dcrt_finalize");
  if (rt.outstanding > 0)
    fatal("dcrt_finalize with %d operations still in flight (every future "
          "must be waited)",
          rt.outstanding);
  bool ownsMpi = rt.ownsMpi;
  delete state;
  state = nullptr;
  if (ownsMpi)
    MPI_Finalize();
}

int32_t dcrt_rank(void) { return runtime("dcrt_rank").rank; }

int32_t dcrt_world_size(void) { return runtime("dcrt_world_size").worldSize; }

int64_t dcrt_op_begin(void) { return nowNs(); }

void dcrt_op_end(const char *op_key, int64_t begin) {
  runtime("dcrt_op_end").tracer.op(op_key, begin, nowNs());
}

//===----------------------------------------------------------------------===//
// C++ core API
//===----------------------------------------------------------------------===//

int64_t MemoryStats::peakBytes() const {
  return gatherArena.highWater + hostPool.highWater + stepBuffers.highWater +
         staging.highWater;
}

MemoryStats dcrt::memoryStats() {
  Runtime &rt = runtime("dcrt::memoryStats");
  return {rt.gatherArena.stats(), rt.hostPool.stats(), rt.stepBuffers.stats(),
          rt.staging.stats()};
}

void dcrt::resetPeakMemory() {
  Runtime &rt = runtime("dcrt::resetPeakMemory");
  rt.gatherArena.resetHighWater();
  rt.hostPool.resetHighWater();
  rt.stepBuffers.resetHighWater();
  rt.staging.resetHighWater();
}

bool dcrt::isComplete(dcrt_future future) {
  return future->doneFlag().load(std::memory_order_acquire);
}

int64_t dcrt::endedSteps() { return runtime("dcrt::endedSteps").endedSteps; }

double dcrt::timeoutSeconds() {
  return runtime("dcrt::timeoutSeconds").timeoutSeconds;
}

void dcrt::allReduceSum(double *values, int count) {
  Runtime &rt = runtime("dcrt::allReduceSum");
  CommOp op;
  op.kind = CommKind::AllReduce;
  op.name = "host all-reduce";
  op.send = op.recv = values;
  op.count = count;
  op.type = MPI_DOUBLE;
  op.bytes = count * int64_t(sizeof(double));
  rt.runBlocking(op);
}

void dcrt::broadcast(void *data, int64_t bytes, int root) {
  Runtime &rt = runtime("dcrt::broadcast");
  CommOp op;
  op.kind = CommKind::Broadcast;
  op.name = "host broadcast";
  op.recv = data;
  op.type = rt.unitFor(bytes, op.count, op.name);
  op.root = root;
  op.bytes = bytes;
  rt.runBlocking(op);
}

void dcrt::gatherToRoot(const void *local, int64_t bytes, void *out, int root) {
  Runtime &rt = runtime("dcrt::gatherToRoot");
  CommOp op;
  op.kind = CommKind::Gather;
  op.name = "host gather";
  op.send = local;
  op.recv = out;
  op.type = rt.unitFor(bytes, op.count, op.name);
  op.root = root;
  op.bytes = bytes;
  rt.runBlocking(op);
}

std::vector<std::string> dcrt::gatherStrings(const std::string &local,
                                             int root) {
  Runtime &rt = runtime("dcrt::gatherStrings");
  if (local.size() > INT_MAX)
    fatal("dcrt::gatherStrings: %zu bytes is too large", local.size());
  int length = static_cast<int>(local.size());
  std::vector<int> lengths(rt.worldSize), offsets(rt.worldSize);
  CommOp counts;
  counts.kind = CommKind::Gather;
  counts.name = "host gather";
  counts.send = &length;
  counts.recv = lengths.data();
  counts.count = 1;
  counts.type = MPI_INT;
  counts.root = root;
  rt.runBlocking(counts);

  int64_t total = 0;
  for (int r = 0; r < rt.worldSize; ++r) {
    if (total > INT_MAX)
      fatal("dcrt::gatherStrings: more than 2 GiB in total");
    offsets[r] = static_cast<int>(total);
    total += lengths[r];
  }
  std::string all(rt.rank == root ? total : 0, '\0');
  CommOp text;
  text.kind = CommKind::Gatherv;
  text.name = "host gather";
  text.send = local.data();
  text.recv = all.data();
  text.count = length;
  text.type = MPI_CHAR;
  text.root = root;
  text.recvCounts = lengths.data();
  text.displacements = offsets.data();
  text.bytes = length;
  rt.runBlocking(text);

  std::vector<std::string> result;
  if (rt.rank == root)
    for (int r = 0; r < rt.worldSize; ++r)
      result.push_back(all.substr(offsets[r], lengths[r]));
  return result;
}

void dcrt::barrier() {
  Runtime &rt = runtime("dcrt::barrier");
  CommOp op;
  op.kind = CommKind::Barrier;
  op.name = "host barrier";
  rt.runBlocking(op);
}

void dcrt::setTracing(bool enabled) {
  runtime("dcrt::setTracing").tracer.setEnabled(enabled);
}

void dcrt::traceSpan(Track track, const char *name, int64_t beginNs,
                     int64_t endNs, const char *argName, int64_t argValue) {
  runtime("dcrt::traceSpan")
      .tracer.span(track, name, beginNs, endNs, argName, argValue);
}

void dcrt::writeTrace(const std::string &path) {
  Runtime &rt = runtime("dcrt::writeTrace");
  std::vector<std::string> ranks =
      gatherStrings(rt.tracer.eventsJson(rt.rank), 0);
  if (rt.rank != 0)
    return;
  FILE *file = std::fopen(path.c_str(), "w");
  if (!file)
    fatal("cannot write the trace '%s'", path.c_str());
  std::fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", file);
  for (size_t r = 0; r < ranks.size(); ++r) {
    std::fputs(ranks[r].c_str(), file);
    std::fputs(r + 1 < ranks.size() ? ",\n" : "\n", file);
  }
  std::fputs("]}\n", file);
  if (std::fclose(file) != 0)
    fatal("cannot write the trace '%s'", path.c_str());
}

std::vector<TransferStats> dcrt::transferStats() {
  return runtime("dcrt::transferStats").tracer.transferStats();
}

std::vector<OpTime> dcrt::opProfile() {
  return runtime("dcrt::opProfile").tracer.opProfile();
}

void dcrt::resetOpProfile() {
  runtime("dcrt::resetOpProfile").tracer.resetOpProfile();
}
