//===- MemoryTest.cpp - the planned arena and the buffer pool -------------===//
#include "Memory.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>

using namespace dcrt;
using namespace dcrt::detail;

TEST(Arena, ReusesMemoryWithinThePlan) {
  Arena arena("gather arena", 1000);
  EXPECT_EQ(arena.stats().systemAllocations, 1); // sized from the plan once
  void *a = arena.allocate(400, "a");
  void *b = arena.allocate(600, "b"); // exactly the plan
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % bufferAlignment, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % bufferAlignment, 0u);
  EXPECT_EQ(arena.stats().live, 1000);
  EXPECT_EQ(arena.tryAllocate(1), nullptr); // over the plan
  arena.release(a, "test");
  // The freed range is handed out again, not new memory.
  EXPECT_EQ(arena.allocate(300, "c"), a);
  EXPECT_EQ(arena.stats().highWater, 1000);
  EXPECT_EQ(arena.stats().systemAllocations, 1);
  EXPECT_EQ(arena.allocationSize(b), 600);
  EXPECT_TRUE(arena.owns(b));
  EXPECT_FALSE(arena.owns(static_cast<char *>(b) + 1));
}

TEST(Arena, CoalescesFreedNeighbours) {
  Arena arena("arena", 64 * 3);
  void *a = arena.allocate(64, "a");
  void *b = arena.allocate(64, "b");
  void *c = arena.allocate(64, "c");
  arena.release(a, "test");
  arena.release(c, "test");
  arena.release(b, "test"); // joins a, b and c into one range
  EXPECT_EQ(arena.allocate(64 * 3, "all"), a);
  EXPECT_EQ(arena.stats().systemAllocations, 1);
}

TEST(Arena, StepsRepeatWithoutNewAllocations) {
  Arena arena("arena", 0); // no plan: grows as needed
  for (int step = 0; step < 3; ++step) {
    void *a = arena.allocate(1000, "a");
    void *b = arena.allocate(5000, "b");
    arena.release(a, "test");
    void *c = arena.allocate(800, "c");
    arena.release(b, "test");
    arena.release(c, "test");
    EXPECT_EQ(arena.stats().live, 0);
    EXPECT_EQ(arena.stats().systemAllocations, 1) << "step " << step;
  }
}

TEST(Arena, OverThePlanIsAFatalErrorNamingThePlan) {
  Arena arena("gather arena", 100);
  arena.allocate(60, "first");
  EXPECT_EXIT(arena.allocate(41, "an all-gather"), testing::ExitedWithCode(1),
              "gather arena exhausted: an all-gather needs 41 bytes, 60 of "
              "the planned 100 are in use");
}

TEST(Arena, ReleasingForeignOrFreedMemoryIsFatal) {
  Arena arena("gather arena", 100);
  void *a = arena.allocate(10, "a");
  arena.release(a, "dcrt_release");
  EXPECT_EXIT(arena.release(a, "dcrt_release"), testing::ExitedWithCode(1),
              "not a live buffer of the gather arena");
}

TEST(BufferPool, ReusesBuffersBySize) {
  BufferPool pool;
  void *big = pool.acquire(4096, "big");
  void *small = pool.acquire(100, "small");
  pool.release(big);
  // Best fit: the freed big buffer serves a smaller request too.
  EXPECT_EQ(pool.acquire(2000, "mid"), big);
  pool.releaseAll();
  EXPECT_EQ(pool.stats().live, 0);
  EXPECT_EQ(pool.acquire(50, "tiny"), small);
  EXPECT_EQ(pool.acquire(4000, "big again"), big);
  EXPECT_EQ(pool.stats().systemAllocations, 2);
  EXPECT_EQ(pool.stats().highWater, 4196);
}

// What the cuda backend relies on, checked without a GPU: a pool over
// another memory source (device memory there) takes it once from the plan,
// in the source's alignment, and gives it back at the end.
namespace {
int sourceAllocations = 0, sourceFrees = 0;
int64_t sourceBytes = 0;
void *countingAllocate(int64_t bytes, const char *) {
  ++sourceAllocations;
  sourceBytes += bytes;
  return std::aligned_alloc(256, (bytes + 255) / 256 * 256);
}
void countingFree(void *pointer) {
  ++sourceFrees;
  std::free(pointer);
}
const MemorySource countingSource{countingAllocate, countingFree, 256};
} // namespace

TEST(Arena, PlannedDevicePoolTakesItsMemoryOnce) {
  sourceAllocations = sourceFrees = 0;
  sourceBytes = 0;
  {
    Arena arena("step buffers", 4096, countingSource, true);
    EXPECT_EQ(sourceAllocations, 1);
    EXPECT_GE(sourceBytes, 4096);
    for (int step = 0; step < 3; ++step) {
      void *a = arena.allocate(1000, "a");
      void *b = arena.allocate(3000, "b");
      EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 256, 0u);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % 256, 0u);
      EXPECT_EQ(arena.tryAllocate(97), nullptr); // over the plan: no growth
      arena.release(a, "test");
      arena.release(b, "test");
    }
    EXPECT_EQ(sourceAllocations, 1);
    EXPECT_EQ(arena.stats().highWater, 4000);
  }
  EXPECT_EQ(sourceFrees, 1);
}

TEST(Arena, OverThePlanIsAFatalErrorNamingThePool) {
  EXPECT_DEATH(
      {
        Arena arena("gather arena", 1024, countingSource, true);
        arena.allocate(1000, "a");
        arena.allocate(100, "an all-gather");
      },
      "gather arena exhausted: an all-gather needs 100 bytes, 1000 of the "
      "planned 1024 are in use");
}

TEST(Arena, UnplannedDevicePoolGrowsWithAWarning) {
  testing::internal::CaptureStderr();
  Arena arena("staging", 0, countingSource, true);
  arena.allocate(100, "x");
  std::string warning = testing::internal::GetCapturedStderr();
  EXPECT_NE(warning.find("staging has no planned size"), std::string::npos)
      << warning;
}
