//===- Job.h - the ranks of a job and the host program's collectives ------===//
//
// What every backend shares: the job (rank, world size, the grid and its
// per-axis groups) over a transport (MPI or TCP, Transport.h), the watchdog
// timeout, the tracer, and the communication thread that runs the host
// program's blocking collectives (loss average, checkpoint gathers, trace
// collection) on host memory.
//
//===----------------------------------------------------------------------===//
#ifndef DCRT_CORE_JOB_H
#define DCRT_CORE_JOB_H

#include "Streams.h"
#include "Trace.h"
#include "Transport.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace dcrt::detail {

class Job {
public:
  /// Joins the job through the transport the environment asks for
  /// (chooseTransport), checks the world size and the grid, and waits for
  /// every rank (bounded by the timeout).
  Job(int32_t expectedWorldSize, std::vector<int64_t> gridShape);
  ~Job();
  Job(const Job &) = delete;
  Job &operator=(const Job &) = delete;

  int rank() const { return rank_; }
  int worldSize() const { return worldSize_; }
  double timeoutSeconds() const { return timeoutSeconds_; }
  /// "mpi" or "tcp".
  const char *transportName() const { return transport->name(); }
  const std::vector<int64_t> &gridShape() const { return gridShape_; }
  /// Groups are numbered by axis; on a grid of several axes one more,
  /// number gridShape().size(), is the whole grid (DCRT_ALL_AXES), its
  /// ranks in world order. "axis" below means such a group number.
  int groupCount() const { return static_cast<int>(axisGroups.size()); }
  /// The group number of a collective's `axis` argument (an axis or
  /// DCRT_ALL_AXES), or -1 if it names none.
  int groupOf(int32_t axis) const;
  /// This rank's coordinate along grid axis `axis`, and the axis' size.
  int64_t coordinate(int axis) const;
  int64_t axisSize(int axis) const {
    return axis < int(gridShape_.size()) ? gridShape_[axis] : worldSize_;
  }
  /// Ranks (world numbering) of this rank's group along `axis`, in order of
  /// their coordinate on the axis.
  std::vector<int> axisMembers(int axis) const;
  /// The transport's group (CommOp::group) of this rank's ranks along
  /// `axis`.
  int axisGroup(int axis) const { return axisGroups[axis]; }

  Tracer tracer;
  Completion completion;
  CommEngine commEngine;

  /// Submits a host collective and waits for it (fatal after the timeout).
  void runBlocking(CommOp &op);

private:
  std::unique_ptr<Transport> transport;
  int rank_ = 0, worldSize_ = 1;
  double timeoutSeconds_ = 300;
  std::vector<int64_t> gridShape_;
  std::vector<int> axisGroups;
};

} // namespace dcrt::detail

#endif // DCRT_CORE_JOB_H
