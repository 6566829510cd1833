//===- Job.h - the ranks of a job and the host program's collectives ------===//
//
// What every backend shares: the MPI job (rank, world size, the grid and its
// per-axis groups), the watchdog timeout, the tracer, and the communication
// thread that runs the host program's blocking collectives (loss average,
// checkpoint gathers, trace collection) on host memory.
//
//===----------------------------------------------------------------------===//
#ifndef DCRT_CORE_JOB_H
#define DCRT_CORE_JOB_H

#include "Streams.h"
#include "Trace.h"

#include <mpi.h>

#include <cstdint>
#include <vector>

namespace dcrt::detail {

class Job {
public:
  /// Joins the MPI job (initializing MPI if nobody did), checks the world
  /// size and the grid, and waits for every rank (bounded by the timeout).
  Job(int32_t expectedWorldSize, std::vector<int64_t> gridShape);
  ~Job();
  Job(const Job &) = delete;
  Job &operator=(const Job &) = delete;

  int rank() const { return rank_; }
  int worldSize() const { return worldSize_; }
  double timeoutSeconds() const { return timeoutSeconds_; }
  MPI_Comm comm() const { return comm_; }
  const std::vector<int64_t> &gridShape() const { return gridShape_; }
  /// This rank's coordinate along grid axis `axis`, and the axis' size.
  int64_t coordinate(int axis) const;
  int64_t axisSize(int axis) const { return gridShape_[axis]; }
  /// Ranks (world numbering) of this rank's group along `axis`, in order of
  /// their coordinate on the axis.
  std::vector<int> axisMembers(int axis) const;
  /// An MPI communicator over this rank's group along `axis` (owned).
  MPI_Comm axisComm(int axis) const { return axisComms[axis]; }

  Tracer tracer;
  Completion completion;
  CommEngine commEngine;

  /// Submits a host collective and waits for it (fatal after the timeout).
  void runBlocking(CommOp &op);
  /// The largest contiguous-bytes unit dividing `bytes`, and the count.
  MPI_Datatype unitFor(int64_t bytes, int &count, const char *what) const;

private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, worldSize_ = 1;
  bool ownsMpi = false; // we called MPI_Init, so we call MPI_Finalize
  double timeoutSeconds_ = 300;
  std::vector<int64_t> gridShape_;
  std::vector<MPI_Comm> axisComms;
  MPI_Datatype byteUnits[4]; // contiguous 1, 2, 4 and 8 bytes
};

} // namespace dcrt::detail

#endif // DCRT_CORE_JOB_H
