//===- Job.cpp - the ranks of a job and the host program's collectives ----===//
#include "Job.h"

#include "dcrt/dcrt.h"

#include "Internal.h"

#include "dcrt/error.hpp"

#include <cstdlib>

using namespace dcrt;
using namespace dcrt::detail;

namespace {
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
} // namespace

Job::Job(int32_t expectedWorldSize, std::vector<int64_t> gridShape)
    : commEngine(completion, tracer),
      timeoutSeconds_(timeoutFromEnvironment()) {
  std::string kind = chooseTransport();
  transport = kind == "tcp" ? createTcpTransport(timeoutSeconds_)
                            : createMpiTransport(timeoutSeconds_);
  rank_ = transport->rank();
  worldSize_ = transport->worldSize();
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

  // One group per axis: the ranks that differ only in that coordinate,
  // ordered by it.
  for (size_t axis = 0; axis < gridShape_.size(); ++axis)
    axisGroups.push_back(
        transport->addGroup(axisMembers(static_cast<int>(axis))));
  // A tensor sharded over every axis reduces over the whole grid.
  if (gridShape_.size() > 1)
    axisGroups.push_back(
        transport->addGroup(axisMembers(static_cast<int>(gridShape_.size()))));

  transport->barrier(timeoutSeconds_);
  resetClock();
  commEngine.start(*transport);
}

Job::~Job() {
  // The thread first: it may still be using the transport.
  commEngine.stop();
  transport.reset();
}

int Job::groupOf(int32_t axis) const {
  if (axis == DCRT_ALL_AXES)
    return groupCount() - 1; // the whole grid, or the one axis of a 1-D one
  return axis >= 0 && axis < int32_t(gridShape_.size()) ? axis : -1;
}

int64_t Job::coordinate(int axis) const {
  if (axis == int(gridShape_.size()))
    return rank_;
  int64_t stride = 1;
  for (size_t a = axis + 1; a < gridShape_.size(); ++a)
    stride *= gridShape_[a];
  return rank_ / stride % gridShape_[axis];
}

std::vector<int> Job::axisMembers(int axis) const {
  if (axis == int(gridShape_.size())) {
    std::vector<int> everyone(worldSize_);
    for (int r = 0; r < worldSize_; ++r)
      everyone[r] = r;
    return everyone;
  }
  int64_t stride = 1;
  for (size_t a = axis + 1; a < gridShape_.size(); ++a)
    stride *= gridShape_[a];
  int64_t base = rank_ - coordinate(axis) * stride;
  std::vector<int> members;
  for (int64_t c = 0; c < gridShape_[axis]; ++c)
    members.push_back(static_cast<int>(base + c * stride));
  return members;
}

void Job::runBlocking(CommOp &op) {
  commEngine.submit(&op);
  if (!completion.waitFor(op.done, timeoutSeconds_))
    fatal("timed out after %g s in %s: a peer rank may have died, stalled or "
          "issued different collectives (DCRT_TIMEOUT_S sets the limit)",
          timeoutSeconds_, op.name);
}
