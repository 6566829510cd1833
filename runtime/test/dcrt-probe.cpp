//===- dcrt-probe.cpp - misuse and failure scenarios of libdcrt -----------===//
//
// `dcrt-probe <scenario>` under mpirun does one thing libdcrt must turn into
// an error that ends every rank with a message (test/Runtime checks the
// message, the exit status and that it happens in bounded time).
//
//===----------------------------------------------------------------------===//
#include "dcrt/assert.hpp"
#include "dcrt/core.hpp"
#include "dcrt/dcrt.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <sys/resource.h>
#include <unistd.h>
#include <vector>

namespace {
/// dcrt_init with a planned gather arena and host pool (0: unplanned).
void init(int32_t worldSize, int64_t gatherArenaBytes, int64_t hostPoolBytes) {
  dcrt_init_options options{};
  options.struct_size = sizeof(options);
  options.expected_world_size = worldSize;
  options.gather_arena_bytes = gatherArenaBytes;
  options.host_pool_bytes = hostPoolBytes;
  dcrt_init(&options);
}

/// Gathers a tensor of `full` floats and returns the future.
dcrt_future gather(std::vector<float> &slot, int64_t full, int64_t local,
                   void **out) {
  void *shard = slot.data();
  int32_t f32 = DCRT_F32;
  return dcrt_gather_start(0, 1, &shard, &local, &full, &f32, &f32, out);
}

int64_t slotFor(int64_t full) {
  return (full + dcrt_world_size() - 1) / dcrt_world_size();
}

void overPlan() {
  init(0, /*gather_arena_bytes=*/100, 0);
  std::vector<float> slot(slotFor(20));
  void *first, *second;
  dcrt_wait(gather(slot, 20, slotFor(20), &first)); // 80 of 100 bytes
  gather(slot, 20, slotFor(20), &second);           // 80 more: over
}

void hostPoolOverPlan() {
  init(0, 0, /*host_pool_bytes=*/64);
  std::vector<char> activation(100);
  void *host;
  dcrt_offload_start(activation.data(), 100, &host);
}

void peerNeverJoins() {
  init(0, 0, 0);
  std::vector<float> slot(slotFor(8));
  void *out;
  if (dcrt_rank() == 1)
    sleep(120); // never reaches the gather; rank 0's wait must time out
  dcrt_wait(gather(slot, 8, slotFor(8), &out));
}

void peerDies() {
  init(0, 0, 0);
  if (dcrt_rank() == 1)
    _exit(3);
  std::vector<float> slot(slotFor(8));
  void *out;
  dcrt_wait(gather(slot, 8, slotFor(8), &out));
}

void waitTwice() {
  init(0, 0, 0);
  std::vector<float> slot(slotFor(8));
  void *out;
  dcrt_future future = gather(slot, 8, slotFor(8), &out);
  dcrt_wait(future);
  dcrt_wait(future);
}

void releaseTwice() {
  init(0, 0, 0);
  std::vector<float> slot(slotFor(8));
  void *out;
  dcrt_wait(gather(slot, 8, slotFor(8), &out));
  dcrt_release(out);
  dcrt_release(out);
}

void releaseBeforeWait() {
  init(0, 0, 0);
  std::vector<float> slot(slotFor(8));
  void *out;
  gather(slot, 8, slotFor(8), &out);
  dcrt_release(out);
}

void releaseReloadDestination() {
  init(0, 0, 0);
  std::vector<char> activation(64), destination(64);
  void *host;
  dcrt_wait(dcrt_offload_start(activation.data(), 64, &host));
  dcrt_wait(dcrt_reload_into(host, 64, destination.data()));
  dcrt_release(destination.data()); // the caller's, not the runtime's
}

void reloadTwice() {
  init(0, 0, 0);
  std::vector<char> activation(64), destination(64);
  void *host;
  dcrt_wait(dcrt_offload_start(activation.data(), 64, &host));
  dcrt_wait(dcrt_reload_into(host, 64, destination.data()));
  dcrt_reload_into(host, 64, destination.data()); // back in the pool already
}

void releaseUnknown() {
  init(0, 0, 0);
  std::vector<char> mine(64);
  dcrt_release(mine.data()); // never handed out by the runtime
}

void wrongShardSize() {
  init(0, 0, 0);
  std::vector<float> slot(8);
  void *out;
  gather(slot, 8, 8, &out); // 8 elements is not ceil(8 / 2)
}

void averageOfIntegers() {
  init(0, 0, 0);
  int32_t values[2] = {1, 2};
  void *out;
  dcrt_all_reduce_start(0, DCRT_AVG, values, 2, DCRT_I32, &out);
}

void uploadPoolCopy() {
  init(0, 0, 0);
  std::vector<char> activation(64);
  std::vector<char> destination(64);
  void *host;
  dcrt_wait(dcrt_offload_start(activation.data(), 64, &host));
  // A pool copy is reloaded, not uploaded.
  dcrt_upload_into(host, 64, destination.data());
}

void stepEndsWithFutureInFlight() {
  init(0, 0, 0);
  std::vector<float> slot(slotFor(8));
  void *out;
  gather(slot, 8, slotFor(8), &out);
  dcrt_end_step();
}

void wrongWorldSize() { init(5, 0, 0); }

/// A flag this runtime does not know (a caller built against a newer
/// dcrt.h): refused, not ignored.
void unknownInitFlags() {
  dcrt_init_options options{};
  options.struct_size = sizeof(options);
  options.flags = DCRT_INIT_DETERMINISTIC | 0x40;
  dcrt_init(&options);
}

void mpiError() {
  init(0, 0, 0);
  char byte = 0;
  dcrt::broadcast(&byte, 1, /*root=*/99); // no such rank: MPI_ERR_ROOT
}

void outOfMemory() {
  init(0, 0, 0);
  // Cap this process's address space, then offload more than fits (the
  // host pool has no plan, so it asks the system for it).
  rlimit limit;
  getrlimit(RLIMIT_AS, &limit);
  limit.rlim_cur = rlim_t(8) << 30;
  setrlimit(RLIMIT_AS, &limit);
  static char source[1];
  void *host;
  dcrt_offload_start(source, int64_t(16) << 30, &host);
}

void callBeforeInit() { dcrt_end_step(); }

/// dcrt_matmul with lda shorter than A's rows: the descriptor is rejected
/// before any backend runs it.
void badMatmul() {
  init(0, 0, 0);
  static float a[64], b[64], c[64];
  dcrt_matmul_desc desc{};
  desc.batch = 1;
  desc.m = 4;
  desc.n = 3;
  desc.k = 5;
  desc.lda = 4; // A is 4 x 5: lda must be >= 5
  desc.ldb = 3;
  desc.ldc = 3;
  desc.a_dtype = desc.b_dtype = desc.c_dtype = DCRT_F32;
  dcrt_matmul(&desc, a, b, c);
}

/// A GPU kernel launched on the host backend.
void kernelOnHost() {
  init(0, 0, 0);
  static const char binary[16] = "not a fatbin";
  int64_t dims[6] = {1, 1, 1, 32, 1, 1};
  dcrt_launch_kernel(binary, sizeof(binary), "train_step_kernel_0", dims, 0,
                     nullptr);
}

/// A kernel whose blocks wait for each other, launched on the host backend.
void coresidentKernelOnHost() {
  init(0, 0, 0);
  static const char binary[16] = "not a fatbin";
  int64_t dims[6] = {4, 1, 1, 32, 1, 1};
  dcrt_launch_kernel_coresident(binary, sizeof(binary), "train_step_kernel_1",
                                dims, 0, nullptr, 4);
}

/// More blocks that must be resident at once than the grid has: the
/// artifact and the runtime disagree; caught before any backend runs it.
void coresidentBeyondGrid() {
  init(0, 0, 0);
  static const char binary[16] = "not a fatbin";
  int64_t dims[6] = {2, 2, 1, 32, 1, 1};
  dcrt_launch_kernel_coresident(binary, sizeof(binary), "train_step_kernel_2",
                                dims, 0, nullptr, 5);
}

/// A finite-value check of an integer buffer (only float outputs are
/// checked: compiled code never asks for one).
void badCheckFinite() {
  dcrt_init_options options{};
  options.struct_size = sizeof(options);
  options.flags = DCRT_INIT_CHECK_FINITE;
  dcrt_init(&options);
  int32_t values[4] = {1, 2, 3, 4};
  dcrt_check_finite(values, 4, DCRT_I32, 0,
                    "train_step: arith.addi at model.py:3");
}

/// A DCRT_ASSERT failing on rank 1 while rank 0 waits for it in a gather.
void brokenInvariant() {
  init(0, 0, 0);
  if (dcrt_rank() == 1)
    DCRT_ASSERT(dcrt_rank() == 0, "the probe's invariant: only rank 0 here");
  std::vector<float> slot(slotFor(8));
  void *out;
  dcrt_wait(gather(slot, 8, slotFor(8), &out));
}

struct Scenario {
  const char *name;
  void (*run)();
};

const Scenario scenarios[] = {
    {"over-plan", overPlan},
    {"host-pool-over-plan", hostPoolOverPlan},
    {"peer-never-joins", peerNeverJoins},
    {"peer-dies", peerDies},
    {"wait-twice", waitTwice},
    {"release-twice", releaseTwice},
    {"release-before-wait", releaseBeforeWait},
    {"release-reload-destination", releaseReloadDestination},
    {"reload-twice", reloadTwice},
    {"release-unknown", releaseUnknown},
    {"wrong-shard-size", wrongShardSize},
    {"average-of-integers", averageOfIntegers},
    {"upload-pool-copy", uploadPoolCopy},
    {"step-ends-with-future-in-flight", stepEndsWithFutureInFlight},
    {"wrong-world-size", wrongWorldSize},
    {"unknown-init-flags", unknownInitFlags},
    {"mpi-error", mpiError},
    {"out-of-memory", outOfMemory},
    {"call-before-init", callBeforeInit},
    {"bad-matmul", badMatmul},
    {"kernel-on-host", kernelOnHost},
    {"coresident-kernel-on-host", coresidentKernelOnHost},
    {"coresident-beyond-grid", coresidentBeyondGrid},
    {"bad-check-finite", badCheckFinite},
    {"broken-invariant", brokenInvariant},
};
} // namespace

int main(int argc, char **argv) {
  for (const Scenario &scenario : scenarios)
    if (argc == 2 && std::strcmp(argv[1], scenario.name) == 0) {
      scenario.run();
      // Reaching this line means the runtime accepted the misuse.
      std::fprintf(stderr, "dcrt-probe: %s was not reported\n", scenario.name);
      return 0;
    }
  std::fprintf(stderr, "usage: dcrt-probe <scenario>; scenarios:");
  for (const Scenario &scenario : scenarios)
    std::fprintf(stderr, " %s", scenario.name);
  std::fprintf(stderr, "\n");
  return 2;
}
