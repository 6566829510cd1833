//===- MpiTransport.cpp - the job through MPI nonblocking collectives -----===//
#include "Streams.h"
#include "Transport.h"

#include "dcrt/error.hpp"

#include <mpi.h>

#include <chrono>
#include <climits>
#include <thread>

using namespace dcrt;
using namespace dcrt::detail;

namespace {
using Clock = std::chrono::steady_clock;

void onMpiError(MPI_Comm *, int *code, ...) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(*code, text, &length);
  fatal("MPI failed while %s: %s", currentCommActivity(), text);
}

class MpiTransport final : public Transport {
public:
  explicit MpiTransport(double timeoutSeconds);
  ~MpiTransport() override;
  const char *name() const override { return "mpi"; }
  int addGroup(const std::vector<int> &members) override;
  void barrier(double seconds) override;
  void start(CommOp &op) override;
  void progress(std::vector<CommOp *> &completed) override;

private:
  /// `count` elements of `type` as MPI sees them: a Byte payload becomes
  /// the largest contiguous unit (1, 2, 4 or 8 bytes) dividing it, so that
  /// gathers of more than 2^31 bytes still fit MPI's int counts.
  MPI_Datatype mpiType(ElementType type, int64_t count, int &mpiCount,
                       const char *what) const;

  bool ownsMpi = false; // we called MPI_Init, so we call MPI_Finalize
  std::vector<MPI_Comm> groups;
  MPI_Datatype byteUnits[4]; // contiguous 1, 2, 4 and 8 bytes
  std::vector<CommOp *> inFlight;
  std::vector<MPI_Request> requests;
  std::vector<int> completedIndices;
};

MpiTransport::MpiTransport(double) {
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
  MPI_Comm world;
  MPI_Comm_dup(MPI_COMM_WORLD, &world); // inherits the handler
  MPI_Errhandler_free(&handler);
  MPI_Comm_rank(world, &rank_);
  MPI_Comm_size(world, &worldSize_);
  groups.push_back(world);

  byteUnits[0] = MPI_BYTE;
  for (int i = 1; i < 4; ++i) {
    MPI_Type_contiguous(1 << i, MPI_BYTE, &byteUnits[i]);
    MPI_Type_commit(&byteUnits[i]);
  }
}

MpiTransport::~MpiTransport() {
  for (int i = 1; i < 4; ++i)
    MPI_Type_free(&byteUnits[i]);
  for (MPI_Comm &comm : groups)
    MPI_Comm_free(&comm);
  if (ownsMpi)
    MPI_Finalize();
}

int MpiTransport::addGroup(const std::vector<int> &members) {
  // The groups of one call partition the world: the first member names
  // the part, the index orders it (collective, same order on every rank).
  int key = 0;
  while (members[key] != rank_)
    ++key;
  MPI_Comm comm;
  MPI_Comm_split(groups[0], members[0], key, &comm);
  groups.push_back(comm);
  return static_cast<int>(groups.size()) - 1;
}

void MpiTransport::barrier(double seconds) {
  // Nonblocking and tested: fails after the timeout instead of hanging when
  // a rank never arrives.
  MPI_Request request;
  MPI_Ibarrier(groups[0], &request);
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

MPI_Datatype MpiTransport::mpiType(ElementType type, int64_t count,
                                   int &mpiCount, const char *what) const {
  if (type == ElementType::Byte) {
    for (int i = 3; i >= 0; --i) {
      int64_t unit = int64_t(1) << i;
      if (count % unit == 0 && count / unit <= INT_MAX) {
        mpiCount = static_cast<int>(count / unit);
        return byteUnits[i];
      }
    }
    fatal("%s: %lld bytes per rank is too large for one MPI call", what,
          static_cast<long long>(count));
  }
  if (count > INT_MAX)
    fatal("%s: %lld elements per rank is too large for one MPI call", what,
          static_cast<long long>(count));
  mpiCount = static_cast<int>(count);
  switch (type) {
  case ElementType::F32:
    return MPI_FLOAT;
  case ElementType::F64:
    return MPI_DOUBLE;
  case ElementType::I32:
    return MPI_INT32_T;
  case ElementType::I64:
    return MPI_INT64_T;
  case ElementType::Byte:
    break;
  }
  return MPI_BYTE;
}

void MpiTransport::start(CommOp &op) {
  if (op.group < 0 || op.group >= static_cast<int>(groups.size()))
    fatal("internal error: %s has no group %d", op.name, op.group);
  MPI_Comm comm = groups[op.group];
  int count = 0;
  MPI_Datatype type = op.kind == CommKind::Gatherv
                          ? MPI_BYTE // counts are per element as given
                          : mpiType(op.type, op.count, count, op.name);
  if (op.kind == CommKind::Gatherv) {
    if (op.type != ElementType::Byte || op.count > INT_MAX)
      fatal("internal error: %s: gatherv takes bytes, at most 2^31-1", op.name);
    count = static_cast<int>(op.count);
  }
  MPI_Request request = MPI_REQUEST_NULL;
  int rc = MPI_SUCCESS;
  switch (op.kind) {
  case CommKind::AllGather:
    rc = MPI_Iallgather(op.send, count, type, op.recv, count, type, comm,
                        &request);
    break;
  case CommKind::ReduceScatter:
    rc = MPI_Ireduce_scatter_block(op.send, op.recv, count, type, MPI_SUM, comm,
                                   &request);
    break;
  case CommKind::AllReduce: // send == recv: in place
    rc = MPI_Iallreduce(op.send == op.recv ? MPI_IN_PLACE : op.send, op.recv,
                        count, type, MPI_SUM, comm, &request);
    break;
  case CommKind::AllToAll:
    rc = MPI_Ialltoall(op.send, count, type, op.recv, count, type, comm,
                       &request);
    break;
  case CommKind::Gather:
    rc = MPI_Igather(op.send, count, type, op.recv, count, type, op.root, comm,
                     &request);
    break;
  case CommKind::Gatherv:
    rc = MPI_Igatherv(op.send, count, type, op.recv, op.recvCounts,
                      op.displacements, type, op.root, comm, &request);
    break;
  case CommKind::Barrier:
    rc = MPI_Ibarrier(comm, &request);
    break;
  case CommKind::Broadcast:
    rc = MPI_Ibcast(op.recv, count, type, op.root, comm, &request);
    break;
  }
  // The communicator's error handler reports first; this is the backstop.
  if (rc != MPI_SUCCESS)
    fatal("MPI failed to start %s (error %d)", op.name, rc);
  inFlight.push_back(&op);
  requests.push_back(request);
}

void MpiTransport::progress(std::vector<CommOp *> &completed) {
  if (inFlight.empty())
    return;
  completedIndices.resize(requests.size());
  int count = 0;
  int rc = MPI_Testsome(static_cast<int>(requests.size()), requests.data(),
                        &count, completedIndices.data(), MPI_STATUSES_IGNORE);
  if (rc != MPI_SUCCESS)
    fatal("MPI failed while progressing collectives (error %d)", rc);
  if (count == 0 || count == MPI_UNDEFINED)
    return;
  for (int i = 0; i < count; ++i) {
    completed.push_back(inFlight[completedIndices[i]]);
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
} // namespace

std::unique_ptr<Transport>
dcrt::detail::createMpiTransport(double timeoutSeconds) {
  return std::make_unique<MpiTransport>(timeoutSeconds);
}
