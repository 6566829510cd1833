//===- Job.cpp - the ranks of a job and the host program's collectives ----===//
#include "Job.h"

#include "Internal.h"

#include "dcrt/error.hpp"

#include <chrono>
#include <climits>
#include <cstdlib>
#include <thread>

using namespace dcrt;
using namespace dcrt::detail;

namespace {
using Clock = std::chrono::steady_clock;

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

Job::Job(int32_t expectedWorldSize, std::vector<int64_t> gridShape)
    : commEngine(completion, tracer),
      timeoutSeconds_(timeoutFromEnvironment()) {
  // Every MPI call after this one comes from one thread at a time (the
  // communication thread, or the caller before it starts), so SERIALIZED
  // is enough.
  int initialized = 0, provided = 0;
  MPI_Initialized(&initialized);
  ownsMpi = !initialized;
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
  MPI_Comm_dup(MPI_COMM_WORLD, &comm_); // inherits the handler
  MPI_Errhandler_free(&handler);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &worldSize_);
  setErrorRank(rank_, worldSize_);
  if (expectedWorldSize > 0 && expectedWorldSize != worldSize_)
    fatal("the artifact was compiled for %d ranks, but this job has %d",
          expectedWorldSize, worldSize_);

  if (gridShape.empty())
    gridShape.push_back(worldSize_);
  int64_t product = 1;
  for (int64_t size : gridShape) {
    if (size < 1)
      fatal("dcrt_init: a grid axis of size %lld",
            static_cast<long long>(size));
    product *= size;
  }
  if (product != worldSize_)
    fatal("dcrt_init: the grid has %lld ranks, but this job has %d",
          static_cast<long long>(product), worldSize_);
  gridShape_ = std::move(gridShape);

  // One communicator per axis: the ranks that differ only in that
  // coordinate, ordered by it (MPI_Comm_split is collective, same order on
  // every rank).
  for (size_t axis = 0; axis < gridShape_.size(); ++axis) {
    int64_t stride = 1;
    for (size_t a = axis + 1; a < gridShape_.size(); ++a)
      stride *= gridShape_[a];
    int64_t coord = coordinate(static_cast<int>(axis));
    int color = static_cast<int>(rank_ - coord * stride);
    MPI_Comm axisComm;
    MPI_Comm_split(comm_, color, static_cast<int>(coord), &axisComm);
    axisComms.push_back(axisComm);
  }

  byteUnits[0] = MPI_BYTE;
  for (int i = 1; i < 4; ++i) {
    MPI_Type_contiguous(1 << i, MPI_BYTE, &byteUnits[i]);
    MPI_Type_commit(&byteUnits[i]);
  }
  timedBarrier(comm_, timeoutSeconds_);
  resetClock();
  commEngine.start();
}

Job::~Job() {
  commEngine.stop();
  for (int i = 1; i < 4; ++i)
    MPI_Type_free(&byteUnits[i]);
  for (MPI_Comm &axisComm : axisComms)
    MPI_Comm_free(&axisComm);
  MPI_Comm_free(&comm_);
  if (ownsMpi)
    MPI_Finalize();
}

int64_t Job::coordinate(int axis) const {
  int64_t stride = 1;
  for (size_t a = axis + 1; a < gridShape_.size(); ++a)
    stride *= gridShape_[a];
  return rank_ / stride % gridShape_[axis];
}

std::vector<int> Job::axisMembers(int axis) const {
  int64_t stride = 1;
  for (size_t a = axis + 1; a < gridShape_.size(); ++a)
    stride *= gridShape_[a];
  int64_t base = rank_ - coordinate(axis) * stride;
  std::vector<int> members;
  for (int64_t c = 0; c < gridShape_[axis]; ++c)
    members.push_back(static_cast<int>(base + c * stride));
  return members;
}

MPI_Datatype Job::unitFor(int64_t bytes, int &count, const char *what) const {
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

void Job::runBlocking(CommOp &op) {
  if (op.comm == MPI_COMM_NULL)
    op.comm = comm_;
  commEngine.submit(&op);
  if (!completion.waitFor(op.done, timeoutSeconds_))
    fatal("timed out after %g s in %s: a peer rank may have died, stalled or "
          "issued different collectives (DCRT_TIMEOUT_S sets the limit)",
          timeoutSeconds_, op.name);
}
