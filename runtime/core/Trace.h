//===- Trace.h - spans, transfer statistics and the op profile ------------===//
#ifndef DCRT_LIB_TRACE_H
#define DCRT_LIB_TRACE_H

#include "dcrt/core.hpp"

#include <atomic>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace dcrt::detail {

constexpr int trackCount = static_cast<int>(Track::CopyToDevice) + 1;

/// Records what every stream did. Thread-safe: the caller's thread, the
/// communication thread and the copy threads all report here.
class Tracer {
public:
  void setEnabled(bool enabled) { enabled_ = enabled; }
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }

  void span(Track track, const char *name, int64_t beginNs, int64_t endNs,
            const char *argName, int64_t argValue);
  /// A collective or copy: always counted, a span when tracing.
  void transfer(Track track, const char *name, int64_t beginNs, int64_t endNs,
                int64_t bytes);
  /// A compute op of a profiling run: profiled, and a span when tracing.
  void op(const char *key, int64_t beginNs, int64_t endNs);

  /// This rank's spans as Chrome trace events (comma-separated, no
  /// brackets), overlapping spans of one track spread over lanes.
  std::string eventsJson(int rank) const;
  std::vector<TransferStats> transferStats() const;
  std::vector<OpTime> opProfile() const;
  void resetOpProfile();

private:
  struct Event {
    Track track;
    const char *name;
    int64_t beginNs, endNs;
    const char *argName;
    int64_t argValue;
  };
  struct OpTotal {
    int64_t totalNs = 0, count = 0;
  };

  std::atomic<bool> enabled_{false};
  mutable std::mutex mutex;
  std::vector<Event> events;
  TransferStats transfers[trackCount] = {};
  // Keyed by the artifact's string address: no allocation per op.
  std::unordered_map<const char *, OpTotal> opTotals;
};

} // namespace dcrt::detail

#endif // DCRT_LIB_TRACE_H
