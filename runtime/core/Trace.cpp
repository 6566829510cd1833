//===- Trace.cpp - spans, transfer statistics and the op profile ----------===//
#include "Trace.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>

using namespace dcrt;
using namespace dcrt::detail;

static const char *trackName(Track track) {
  switch (track) {
  case Track::Compute:
    return "compute";
  case Track::Gather:
    return "all-gather";
  case Track::ReduceScatter:
    return "reduce-scatter";
  case Track::AllReduce:
    return "all-reduce";
  case Track::AllToAll:
    return "all-to-all";
  case Track::HostCollective:
    return "host collective";
  case Track::CopyToHost:
    return "copy d2h (offload)";
  case Track::CopyToDevice:
    return "copy h2d (reload)";
  }
  return "?";
}

void Tracer::span(Track track, const char *name, int64_t beginNs, int64_t endNs,
                  const char *argName, int64_t argValue) {
  if (!enabled())
    return;
  std::lock_guard<std::mutex> lock(mutex);
  events.push_back({track, name, beginNs, endNs, argName, argValue});
}

void Tracer::transfer(Track track, const char *name, int64_t beginNs,
                      int64_t endNs, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex);
  TransferStats &stats = transfers[static_cast<int>(track)];
  stats.kind = trackName(track);
  ++stats.count;
  stats.seconds += (endNs - beginNs) * 1e-9;
  stats.bytes += bytes;
  if (enabled())
    events.push_back({track, name, beginNs, endNs, "bytes", bytes});
}

void Tracer::op(const char *key, int64_t beginNs, int64_t endNs) {
  std::lock_guard<std::mutex> lock(mutex);
  OpTotal &total = opTotals[key];
  total.totalNs += endNs - beginNs;
  ++total.count;
  if (enabled())
    events.push_back({Track::Compute, key, beginNs, endNs, nullptr, 0});
}

std::vector<TransferStats> Tracer::transferStats() const {
  std::lock_guard<std::mutex> lock(mutex);
  std::vector<TransferStats> result;
  for (const TransferStats &stats : transfers)
    if (stats.count > 0)
      result.push_back(stats);
  return result;
}

std::vector<OpTime> Tracer::opProfile() const {
  std::lock_guard<std::mutex> lock(mutex);
  // Equal keys at different addresses (two artifacts) add up.
  std::map<std::string, OpTotal> byKey;
  for (const auto &[key, total] : opTotals) {
    OpTotal &merged = byKey[key];
    merged.totalNs += total.totalNs;
    merged.count += total.count;
  }
  std::vector<OpTime> result;
  for (const auto &[key, total] : byKey)
    result.push_back({key, total.totalNs * 1e-9 / total.count, total.count});
  return result;
}

void Tracer::resetOpProfile() {
  std::lock_guard<std::mutex> lock(mutex);
  opTotals.clear();
}

std::string Tracer::eventsJson(int rank) const {
  std::lock_guard<std::mutex> lock(mutex);
  std::vector<const Event *> sorted;
  for (const Event &event : events)
    sorted.push_back(&event);
  std::stable_sort(
      sorted.begin(), sorted.end(),
      [](const Event *a, const Event *b) { return a->beginNs < b->beginNs; });
  // Spans of one track that overlap (two gathers in flight, an op inside a
  // step) go to separate lanes, so every lane nests properly.
  std::vector<std::vector<int64_t>> laneEnds(trackCount);
  std::string out;
  auto append = [&](const nlohmann::json &event) {
    if (!out.empty())
      out += ",\n";
    out += event.dump();
  };
  append({{"name", "process_name"},
          {"ph", "M"},
          {"pid", rank},
          {"args", {{"name", "rank " + std::to_string(rank)}}}});
  append({{"name", "process_sort_index"},
          {"ph", "M"},
          {"pid", rank},
          {"args", {{"sort_index", rank}}}});
  for (const Event *event : sorted) {
    std::vector<int64_t> &lanes = laneEnds[static_cast<int>(event->track)];
    // A lane is free once its last span ended; on the compute track a span
    // inside the running one (an op inside its step) nests on its lane.
    auto usable = [&](int64_t laneEnd) {
      return laneEnd <= event->beginNs ||
             (event->track == Track::Compute && laneEnd >= event->endNs);
    };
    size_t lane = 0;
    while (lane < lanes.size() && !usable(lanes[lane]))
      ++lane;
    bool newLane = lane == lanes.size();
    if (newLane)
      lanes.push_back(event->endNs);
    else
      lanes[lane] = std::max(lanes[lane], event->endNs);
    int tid = static_cast<int>(event->track) * 100 + static_cast<int>(lane);
    if (newLane) {
      std::string threadName = trackName(event->track);
      if (lane > 0)
        threadName += " #" + std::to_string(lane + 1);
      append({{"name", "thread_name"},
              {"ph", "M"},
              {"pid", rank},
              {"tid", tid},
              {"args", {{"name", threadName}}}});
    }
    // Chrome traces count microseconds.
    nlohmann::json span = {{"name", event->name},
                           {"cat", trackName(event->track)},
                           {"ph", "X"},
                           {"ts", event->beginNs * 1e-3},
                           {"dur", (event->endNs - event->beginNs) * 1e-3},
                           {"pid", rank},
                           {"tid", tid}};
    if (event->argName)
      span["args"] = {{event->argName, event->argValue}};
    append(span);
  }
  return out;
}
