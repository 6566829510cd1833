//===- StreamSimulator.cpp - predicted execution on four streams ----------===//
#include "dc/Analysis/StreamSimulator.h"

#include "dc/Dialect/DC/IR/DCDialect.h"
#include "dc/Support/Assert.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <algorithm>
#include <array>
#include <limits>

using namespace mlir;
using namespace dc;

static constexpr StreamKind kStreams[] = {
    StreamKind::Compute, StreamKind::Collective, StreamKind::HostToDevice,
    StreamKind::DeviceToHost};

static size_t streamIndex(StreamKind stream) {
  return static_cast<size_t>(stream);
}

static bool isCopyStream(StreamKind stream) {
  return stream == StreamKind::HostToDevice ||
         stream == StreamKind::DeviceToHost;
}

namespace {
/// The busy spans of the two copy streams so far, to slow the compute that
/// overlaps them. Spans come in start order on each stream (one queue
/// each), and compute only moves forward, so each stream keeps a cursor.
class CopyOverlap {
public:
  explicit CopyOverlap(double slowdown) : slowdown(slowdown) {}

  void add(StreamKind stream, double start, double end) {
    if (slowdown > 0 && end > start)
      streams[stream == StreamKind::DeviceToHost].spans.push_back({start, end});
  }

  /// When `seconds` of compute started at `begin` ends: each second
  /// stretched by `slowdown` for each direction copying meanwhile.
  double end(double begin, double seconds) {
    double now = begin, left = seconds;
    while (slowdown > 0 && left > 0) {
      int busy = 0;
      double next = std::numeric_limits<double>::infinity();
      for (Stream &stream : streams) {
        while (stream.cursor < stream.spans.size() &&
               stream.spans[stream.cursor].second <= now)
          ++stream.cursor;
        if (stream.cursor == stream.spans.size())
          continue;
        auto [start, end] = stream.spans[stream.cursor];
        if (start <= now) {
          ++busy;
          next = std::min(next, end);
        } else {
          next = std::min(next, start);
        }
      }
      double stretch = 1 + slowdown * busy;
      if (now + left * stretch <= next) {
        added += left * (stretch - 1);
        return now + left * stretch;
      }
      double done = (next - now) / stretch;
      added += done * (stretch - 1);
      left -= done;
      now = next;
    }
    return now + left;
  }

  /// The compute time added so far.
  double getAdded() const { return added; }

private:
  struct Stream {
    std::vector<std::pair<double, double>> spans;
    size_t cursor = 0;
  };
  double slowdown, added = 0;
  std::array<Stream, 2> streams;
};
} // namespace

SimulationResult StreamSimulator::run(func::FuncOp fn,
                                      const MemoryTimeline &timeline) const {
  return run(timeline, costModel.estimateFunction(fn));
}

SimulationResult StreamSimulator::run(const MemoryTimeline &timeline,
                                      const std::vector<OpCost> &costs) const {
  SimulationResult result;
  const std::vector<Operation *> &ops = timeline.getOps();
  // zip_equal below reads past `costs` otherwise.
  DC_ASSERT(costs.size() == ops.size(),
            "one cost per op of the timeline (costs of another function, or "
            "of the function before a change)");

  double now = 0; // the compute stream's cursor
  std::array<double, std::size(kStreams)> streamFree{};
  std::array<double, std::size(kStreams)> streamBusy{};
  llvm::DenseMap<Value, StreamKind> producerStream;
  CopyOverlap overlap(costModel.getTarget().copyComputeSlowdown);
  result.ops.reserve(ops.size());

  for (auto [op, cost] : llvm::zip_equal(ops, costs)) {
    SimulatedOp sim;
    sim.op = op;
    sim.stream = cost.stream;
    sim.bytes = cost.bytes;
    sim.issue = sim.start = sim.end = now;

    // Every start op (dc.all_to_all_start included) runs on its stream
    // while compute goes on, until a wait of its futures.
    if (isa<AsyncStartOpInterface>(op)) {
      size_t stream = streamIndex(cost.stream);
      sim.start = std::max(now, streamFree[stream]);
      double seconds = cost.seconds;
      // Both directions share the link: a copy that starts while the other
      // direction is busy runs at the duplex bandwidth.
      if (isCopyStream(cost.stream)) {
        StreamKind other = cost.stream == StreamKind::HostToDevice
                               ? StreamKind::DeviceToHost
                               : StreamKind::HostToDevice;
        if (streamFree[streamIndex(other)] > sim.start)
          seconds = costModel.copySeconds(cost.bytes, /*duplex=*/true);
      }
      sim.end = sim.start + seconds;
      streamFree[stream] = sim.end;
      streamBusy[stream] += seconds;
      if (isCopyStream(cost.stream))
        overlap.add(cost.stream, sim.start, sim.end);
      for (Value future : op->getResults()) {
        result.futureReady[future] = sim.end;
        producerStream[future] = cost.stream;
      }
    } else if (isa<AllToAllOp>(op)) {
      size_t stream = streamIndex(StreamKind::Collective);
      sim.start = std::max(now, streamFree[stream]);
      sim.end = sim.start + cost.seconds;
      streamFree[stream] = sim.end;
      streamBusy[stream] += cost.seconds;
      sim.stall = sim.end - now;
      result.exposedCollectiveSeconds += sim.stall;
      now = sim.end;
    } else if (isa<WaitOp, EndBackwardOp>(op)) {
      double ready = now;
      StreamKind stalledOn = StreamKind::None;
      for (Value future : op->getOperands()) {
        auto it = result.futureReady.find(future);
        if (it != result.futureReady.end() && it->second > ready) {
          ready = it->second;
          stalledOn = producerStream.lookup(future);
        }
      }
      sim.stall = ready - now;
      sim.end = ready;
      if (stalledOn == StreamKind::Collective)
        result.exposedCollectiveSeconds += sim.stall;
      else if (isCopyStream(stalledOn))
        result.exposedCopySeconds += sim.stall;
      now = ready;
    } else if (cost.stream == StreamKind::Compute) {
      // A copy issued later starts after this op (it is queued behind it
      // on the host), so the spans so far are all it can overlap.
      sim.end = overlap.end(now, cost.seconds);
      streamBusy[streamIndex(StreamKind::Compute)] += sim.end - now;
      now = sim.end;
    }
    result.ops.push_back(sim);
  }

  result.stepSeconds = now;
  result.copySlowdownSeconds = overlap.getAdded();
  for (double free : streamFree)
    result.stepSeconds = std::max(result.stepSeconds, free);
  result.computeSeconds = streamBusy[streamIndex(StreamKind::Compute)];
  result.collectiveSeconds = streamBusy[streamIndex(StreamKind::Collective)];
  result.copySeconds = streamBusy[streamIndex(StreamKind::HostToDevice)] +
                       streamBusy[streamIndex(StreamKind::DeviceToHost)];
  return result;
}

SimulationResult IncrementalSimulation::run(const MemoryTimeline &timeline) {
  // The first run estimates the whole body at once (profile keys and grid
  // sizes are per body); later runs only what is new.
  if (costs.empty())
    for (auto [op, cost] :
         llvm::zip_equal(timeline.getOps(), costModel.estimateFunction(fn)))
      costs[op] = cost;
  std::vector<OpCost> opCosts;
  opCosts.reserve(timeline.getOps().size());
  for (Operation *op : timeline.getOps()) {
    auto it = costs.find(op);
    if (it == costs.end())
      it = costs.try_emplace(op, costModel.estimate(op)).first;
    opCosts.push_back(it->second);
  }
  return StreamSimulator(costModel).run(timeline, opCosts);
}

static llvm::StringRef getStreamName(StreamKind stream) {
  switch (stream) {
  case StreamKind::Compute:
    return "compute";
  case StreamKind::Collective:
    return "collective";
  case StreamKind::HostToDevice:
    return "host-to-device";
  case StreamKind::DeviceToHost:
    return "device-to-host";
  case StreamKind::None:
    break;
  }
  return "none";
}

/// Chrome trace thread ids: one per stream, from 1.
static int64_t getTraceThread(StreamKind stream) {
  return static_cast<int64_t>(streamIndex(stream)) + 1;
}

static double toMicroseconds(double seconds) { return seconds * 1e6; }

void dc::writeChromeTrace(const SimulationResult &result,
                          llvm::StringRef fnName, llvm::raw_ostream &os,
                          const MemoryTimeline *timeline) {
  namespace json = llvm::json;
  json::Array events;
  events.push_back(json::Object{{"name", "process_name"},
                                {"ph", "M"},
                                {"pid", 0},
                                {"args", json::Object{{"name", fnName}}}});
  for (StreamKind stream : kStreams) {
    events.push_back(
        json::Object{{"name", "thread_name"},
                     {"ph", "M"},
                     {"pid", 0},
                     {"tid", getTraceThread(stream)},
                     {"args", json::Object{{"name", getStreamName(stream)}}}});
  }
  // json::Value borrows a StringRef: the slice name is owned.
  auto addSlice = [&](std::string name, StreamKind stream, double begin,
                      double end, size_t index, const SimulatedOp &sim) {
    llvm::StringRef opName = sim.op->getName().getStringRef();
    events.push_back(json::Object{
        {"name", std::move(name)},
        {"cat", getStreamName(stream)},
        {"ph", "X"},
        {"pid", 0},
        {"tid", getTraceThread(stream)},
        {"ts", toMicroseconds(begin)},
        {"dur", toMicroseconds(end - begin)},
        {"args", json::Object{{"op", opName},
                              {"index", static_cast<int64_t>(index)},
                              {"bytes", sim.bytes}}}});
  };
  for (auto [index, sim] : llvm::enumerate(result.ops)) {
    llvm::StringRef opName = sim.op->getName().getStringRef();
    if (sim.stream != StreamKind::None)
      addSlice(opName.str(), sim.stream, sim.start, sim.end, index, sim);
    // Stalls show on the compute track, where the time is lost.
    if (sim.stall > 0 && sim.stream != StreamKind::Compute)
      addSlice(("stall: " + opName).str(), StreamKind::Compute, sim.issue,
               sim.issue + sim.stall, index, sim);
  }
  if (timeline) {
    DC_ASSERT(timeline->getOps().size() == result.ops.size(),
              "the trace's timeline is the one the simulation ran on");
    for (auto [index, sim] : llvm::enumerate(result.ops)) {
      // Sample only where the bytes change, to keep traces small.
      if (index > 0 &&
          timeline->deviceBytesAt(index) ==
              timeline->deviceBytesAt(index - 1) &&
          timeline->hostBytesAt(index) == timeline->hostBytesAt(index - 1))
        continue;
      events.push_back(json::Object{
          {"name", "memory"},
          {"ph", "C"},
          {"pid", 0},
          {"ts", toMicroseconds(sim.issue)},
          {"args",
           json::Object{{"device bytes", timeline->deviceBytesAt(index)},
                        {"host bytes", timeline->hostBytesAt(index)}}}});
    }
  }
  os << llvm::formatv("{0}", json::Value(json::Object{
                                 {"traceEvents", std::move(events)},
                                 {"displayTimeUnit", "ms"},
                             }));
}

std::vector<double> dc::streamFreeBefore(const SimulationResult &result,
                                         StreamKind stream) {
  std::vector<double> free(result.ops.size() + 1, 0);
  for (size_t i = 0; i < result.ops.size(); ++i)
    free[i + 1] = result.ops[i].stream == stream
                      ? std::max(free[i], result.ops[i].end)
                      : free[i];
  return free;
}
