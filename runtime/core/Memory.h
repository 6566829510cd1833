//===- Memory.h - the gather arena, the host pool, reusable buffers -------===//
//
// No allocator churn: memory is taken from the system once and handed out
// again step after step (the seed PR lost 8-9% of step time to allocator
// retries). Two shapes:
//  - Arena: bounded by a planned byte count (the compiler's plan); handing
//    out more than the plan at once is a fatal error naming the plan, not a
//    silent allocation. Buffers come and go in any order.
//  - BufferPool: buffers handed out until the end of a step (or until their
//    collective completes), then reused by size.
//
//===----------------------------------------------------------------------===//
#ifndef DCRT_LIB_MEMORY_H
#define DCRT_LIB_MEMORY_H

#include "dcrt/core.hpp"

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace dcrt::detail {

/// Every buffer starts on this boundary (vector loads, cache lines).
constexpr int64_t bufferAlignment = 64;

inline int64_t alignUp(int64_t value, int64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

/// Where an arena's chunks come from: aligned host memory by default; a
/// device backend passes its device or pinned-host allocator. `allocate`
/// never returns null (it fails the job, naming `what`).
struct MemorySource {
  void *(*allocate)(int64_t bytes, const char *what);
  void (*free)(void *pointer);
  /// Bytes every buffer is aligned to.
  int64_t alignment = 64;
};
const MemorySource &hostMemory();

/// Best-fit allocation in large chunks taken from the system. The plan is
/// checked on the bytes asked for (what the compiler counts); chunks get a
/// little slack for alignment, and a new chunk is added only if the free
/// space is too fragmented (a warning when a plan exists).
/// Thread-safe: copy threads return host buffers.
class Arena {
public:
  /// `planBytes` 0: no bound, chunks are added as needed (a warning once
  /// when `warnUnplanned`: a device backend should never grow in a step).
  Arena(const char *name, int64_t planBytes,
        const MemorySource &source = hostMemory(), bool warnUnplanned = false);

  /// Fatal, naming `what`, the plan and the bytes in use, when the plan
  /// would be exceeded.
  void *allocate(int64_t bytes, const char *what);
  /// nullptr instead of the fatal error.
  void *tryAllocate(int64_t bytes);
  /// Fatal, naming `what`, for a pointer this arena did not hand out.
  void release(void *pointer, const char *what);
  bool owns(const void *pointer) const;
  /// The bytes asked for when `pointer` was allocated (0 if not ours).
  int64_t allocationSize(const void *pointer) const;

  PoolStats stats() const;
  void resetHighWater();

private:
  struct Range {
    int64_t offset, size;
  };
  struct Chunk {
    std::shared_ptr<char> memory;
    std::vector<Range> freeRanges; // sorted by offset, coalesced
  };
  struct Allocation {
    const void *pointer;
    size_t chunk;
    Range range;
    int64_t requested;
  };

  void *placeInChunks(int64_t size, int64_t requested);
  void addChunk(int64_t size);

  const char *name;
  int64_t plan;
  const MemorySource &source;
  bool warnUnplanned;
  mutable std::mutex mutex;
  std::vector<Chunk> chunks;
  std::vector<Allocation> allocations;
  int64_t live = 0, highWater = 0, reserved = 0, systemAllocations = 0;
};

/// Buffers reused by size. Used from one thread (the caller of the C ABI).
class BufferPool {
public:
  void *acquire(int64_t bytes, const char *what);
  /// Returns one buffer; fatal for a pointer not handed out.
  void release(void *pointer);
  /// Returns every buffer handed out (dcrt_end_step).
  void releaseAll();
  PoolStats stats() const;
  void resetHighWater();

private:
  struct Entry {
    AlignedBuffer memory;
    int64_t inUseBytes = 0; // 0: free
  };
  std::vector<Entry> entries;
  int64_t live = 0, highWater = 0, reserved = 0, systemAllocations = 0;
};

} // namespace dcrt::detail

#endif // DCRT_LIB_MEMORY_H
