//===- Memory.cpp - the gather arena, the host pool, reusable buffers -----===//
#include "Memory.h"

#include "dcrt/assert.hpp"
#include "dcrt/error.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

using namespace dcrt;
using namespace dcrt::detail;

AlignedBuffer::AlignedBuffer(int64_t bytes, const char *what, bool zeroed) {
  if (bytes < 0)
    fatal("negative allocation (%lld bytes) for %s",
          static_cast<long long>(bytes), what);
  int64_t rounded = alignUp(std::max<int64_t>(bytes, 1), bufferAlignment);
  data_ = std::aligned_alloc(bufferAlignment, rounded);
  if (!data_)
    fatal("out of host memory: %lld bytes for %s",
          static_cast<long long>(bytes), what);
  if (zeroed)
    std::memset(data_, 0, rounded);
  size_ = bytes;
}

AlignedBuffer::AlignedBuffer(AlignedBuffer &&other) noexcept
    : data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

AlignedBuffer &AlignedBuffer::operator=(AlignedBuffer &&other) noexcept {
  std::swap(data_, other.data_);
  std::swap(size_, other.size_);
  return *this;
}

AlignedBuffer::~AlignedBuffer() { std::free(data_); }

//===----------------------------------------------------------------------===//
// Arena
//===----------------------------------------------------------------------===//

/// Alignment slack a planned chunk gets beyond the plan itself.
constexpr int64_t planSlackAllocations = 64;
/// Chunk size when there is no plan.
constexpr int64_t unplannedChunkBytes = int64_t(16) << 20;

static void *allocateHost(int64_t bytes, const char *what) {
  // Not zeroed: untouched pages of a large plan cost nothing until used.
  void *memory =
      std::aligned_alloc(bufferAlignment, alignUp(bytes, bufferAlignment));
  if (!memory)
    fatal("out of host memory: %lld bytes for %s",
          static_cast<long long>(bytes), what);
  return memory;
}

const MemorySource &dcrt::detail::hostMemory() {
  static const MemorySource source{allocateHost, std::free, bufferAlignment};
  return source;
}

Arena::Arena(const char *name, int64_t planBytes, const MemorySource &source,
             bool warnUnplanned)
    : name(name), plan(planBytes), source(source),
      warnUnplanned(warnUnplanned) {
  if (planBytes < 0)
    fatal("%s: negative planned size %lld", name,
          static_cast<long long>(planBytes));
  if (plan > 0) // sized from the plan, once
    addChunk(alignUp(plan, source.alignment) +
             planSlackAllocations * source.alignment);
}

void Arena::addChunk(int64_t size) {
  Chunk chunk;
  if (plan == 0 && warnUnplanned && systemAllocations == 0)
    warn("%s has no planned size: it grows inside steps (the artifact's "
         "manifest should size it)",
         name);
  chunk.memory = std::shared_ptr<char>(
      static_cast<char *>(source.allocate(size, name)), source.free);
  chunk.freeRanges.push_back({0, size});
  chunks.push_back(std::move(chunk));
  reserved += size;
  ++systemAllocations;
}

void *Arena::placeInChunks(int64_t size, int64_t requested) {
  // Best fit over every chunk: the smallest free range that holds `size`.
  size_t bestChunk = 0, bestRange = 0;
  int64_t bestSize = -1;
  for (size_t c = 0; c < chunks.size(); ++c)
    for (size_t r = 0; r < chunks[c].freeRanges.size(); ++r) {
      int64_t rangeSize = chunks[c].freeRanges[r].size;
      if (rangeSize >= size && (bestSize < 0 || rangeSize < bestSize)) {
        bestChunk = c;
        bestRange = r;
        bestSize = rangeSize;
      }
    }
  if (bestSize < 0)
    return nullptr;
  std::vector<Range> &ranges = chunks[bestChunk].freeRanges;
  Range taken{ranges[bestRange].offset, size};
  ranges[bestRange].offset += size;
  ranges[bestRange].size -= size;
  if (ranges[bestRange].size == 0)
    ranges.erase(ranges.begin() + bestRange);
  void *pointer = chunks[bestChunk].memory.get() + taken.offset;
  allocations.push_back({pointer, bestChunk, taken, requested});
  return pointer;
}

void *Arena::tryAllocate(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex);
  if (bytes < 0 || (plan > 0 && live + bytes > plan))
    return nullptr;
  int64_t size = alignUp(std::max<int64_t>(bytes, 1), source.alignment);
  void *pointer = placeInChunks(size, bytes);
  if (!pointer) {
    if (plan > 0)
      warn("%s: free space too fragmented for %lld bytes (%lld of the "
           "planned %lld in use); adding a chunk",
           name, static_cast<long long>(bytes), static_cast<long long>(live),
           static_cast<long long>(plan));
    addChunk(std::max(size, plan > 0 ? size : unplannedChunkBytes));
    pointer = placeInChunks(size, bytes);
    // Otherwise the caller would report the plan exceeded, which it is not.
    DCRT_ASSERT(pointer, "a new chunk holds the allocation it was added for");
  }
  live += bytes;
  highWater = std::max(highWater, live);
  return pointer;
}

void *Arena::allocate(int64_t bytes, const char *what) {
  if (void *pointer = tryAllocate(bytes))
    return pointer;
  std::lock_guard<std::mutex> lock(mutex);
  fatal("%s exhausted: %s needs %lld bytes, %lld of the planned %lld are in "
        "use (the compiler's memory plan was exceeded)",
        name, what, static_cast<long long>(bytes), static_cast<long long>(live),
        static_cast<long long>(plan));
}

void Arena::release(void *pointer, const char *what) {
  std::lock_guard<std::mutex> lock(mutex);
  auto found = std::find_if(allocations.rbegin(), allocations.rend(),
                            [&](const Allocation &allocation) {
                              return allocation.pointer == pointer;
                            });
  if (found == allocations.rend())
    fatal("%s: %s of %p, which is not a live buffer of the %s (released "
          "twice, or never handed out)",
          name, what, pointer, name);
  std::vector<Range> &ranges = chunks[found->chunk].freeRanges;
  Range freed = found->range;
  auto next = std::lower_bound(
      ranges.begin(), ranges.end(), freed,
      [](const Range &a, const Range &b) { return a.offset < b.offset; });
  next = ranges.insert(next, freed);
  // Coalesce with the following, then the preceding free range.
  if (next + 1 != ranges.end() &&
      next->offset + next->size == (next + 1)->offset) {
    next->size += (next + 1)->size;
    ranges.erase(next + 1);
  }
  if (next != ranges.begin() &&
      (next - 1)->offset + (next - 1)->size == next->offset) {
    (next - 1)->size += next->size;
    ranges.erase(next);
  }
  live -= found->requested;
  allocations.erase(std::next(found).base());
}

bool Arena::owns(const void *pointer) const {
  std::lock_guard<std::mutex> lock(mutex);
  return std::any_of(allocations.begin(), allocations.end(),
                     [&](const Allocation &allocation) {
                       return allocation.pointer == pointer;
                     });
}

int64_t Arena::allocationSize(const void *pointer) const {
  std::lock_guard<std::mutex> lock(mutex);
  for (const Allocation &allocation : allocations)
    if (allocation.pointer == pointer)
      return allocation.requested;
  return 0;
}

PoolStats Arena::stats() const {
  std::lock_guard<std::mutex> lock(mutex);
  return {plan, live, highWater, reserved, systemAllocations};
}

void Arena::resetHighWater() {
  std::lock_guard<std::mutex> lock(mutex);
  highWater = live;
}

//===----------------------------------------------------------------------===//
// BufferPool
//===----------------------------------------------------------------------===//

void *BufferPool::acquire(int64_t bytes, const char *what) {
  // Best fit among free buffers; a new one only if none holds `bytes`.
  Entry *best = nullptr;
  for (Entry &entry : entries)
    if (entry.inUseBytes == 0 && entry.memory.size() >= bytes &&
        (!best || entry.memory.size() < best->memory.size()))
      best = &entry;
  if (!best) {
    entries.push_back({AlignedBuffer(std::max<int64_t>(bytes, 1), what), 0});
    best = &entries.back();
    reserved += best->memory.size();
    ++systemAllocations;
  }
  best->inUseBytes = std::max<int64_t>(bytes, 1);
  live += best->inUseBytes;
  highWater = std::max(highWater, live);
  return best->memory.data();
}

void BufferPool::release(void *pointer) {
  for (Entry &entry : entries)
    if (entry.memory.data() == pointer && entry.inUseBytes > 0) {
      live -= entry.inUseBytes;
      entry.inUseBytes = 0;
      return;
    }
  fatal("internal: releasing %p, which no runtime buffer holds", pointer);
}

void BufferPool::releaseAll() {
  for (Entry &entry : entries)
    entry.inUseBytes = 0;
  live = 0;
}

PoolStats BufferPool::stats() const {
  return {0, live, highWater, reserved, systemAllocations};
}

void BufferPool::resetHighWater() { highWater = live; }
