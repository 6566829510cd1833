//===- MpiTest.cpp - libdcrt's collectives on 1, 2 and 3 ranks ------------===//
//
// Every rank runs every test, and every test issues the same collectives on
// every rank whatever its checks find (EXPECT, not ASSERT), so a failure on
// one rank cannot leave the others waiting. Expected values are written out
// from the rank's and the tensor's indices.
//
//===----------------------------------------------------------------------===//
#include "dcrt/core.hpp"
#include "dcrt/dcrt.h"
#include "dcrt/dtype.hpp"

#include "MatmulReference.h"
#include "RankFailurePrinter.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace dcrt;

namespace {
int rank() { return dcrt_rank(); }
int world() { return dcrt_world_size(); }

/// ceil(numel / world): the padded slot every rank holds.
int64_t shardNumel(int64_t fullNumel, int worldSize) {
  return (fullNumel + worldSize - 1) / worldSize;
}

/// This rank's padded slot of a tensor whose element i is value(i); padding
/// holds garbage that must never show up in a result.
template <typename T, typename F>
std::vector<T> slotOf(int64_t fullNumel, F value) {
  int64_t local = shardNumel(fullNumel, world());
  std::vector<T> slot(local, T(-99));
  for (int64_t i = 0; i < local; ++i) {
    int64_t at = rank() * local + i;
    if (at < fullNumel)
      slot[i] = value(at);
  }
  return slot;
}

int64_t transferCount(const std::string &kind) {
  for (const TransferStats &stats : transferStats())
    if (kind == stats.kind)
      return stats.count;
  return 0;
}

/// Polls a future without waiting on it: the runtime's own threads must
/// finish it (the proof that starts overlap with compute).
bool completesInBackground(dcrt_future future) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!isComplete(future)) {
    if (std::chrono::steady_clock::now() > deadline)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}
} // namespace

TEST(Gather, OneShardWhoseSizeDoesNotDivide) {
  const int64_t full = 7; // 3 ranks: slots of 3, the last holds 1 real value
  std::vector<float> slot =
      slotOf<float>(full, [](int64_t i) { return 10.0f * i + 0.5f; });
  void *shard = slot.data();
  int64_t local = slot.size();
  int32_t f32 = DCRT_F32;
  void *out = nullptr;
  dcrt_future future =
      dcrt_gather_start(0, 1, &shard, &local, &full, &f32, &f32, &out);
  ASSERT_NE(out, nullptr);
  dcrt_wait(future);
  const float *values = static_cast<const float *>(out);
  for (int64_t i = 0; i < full; ++i)
    EXPECT_EQ(values[i], 10.0f * i + 0.5f) << i;
  dcrt_release(out);
  EXPECT_EQ(memoryStats().gatherArena.live, 0);
  dcrt_end_step();
}

TEST(Gather, OneShardThatDividesGoesStraightIntoTheArena) {
  const int64_t full = 4 * world();
  std::vector<int64_t> slot =
      slotOf<int64_t>(full, [](int64_t i) { return (int64_t(1) << 40) + i; });
  void *shard = slot.data();
  int64_t local = slot.size();
  int32_t i64 = DCRT_I64;
  void *out = nullptr;
  int64_t stagingBefore = memoryStats().staging.systemAllocations;
  dcrt_future future =
      dcrt_gather_start(0, 1, &shard, &local, &full, &i64, &i64, &out);
  dcrt_wait(future);
  for (int64_t i = 0; i < full; ++i)
    EXPECT_EQ(static_cast<const int64_t *>(out)[i], (int64_t(1) << 40) + i);
  EXPECT_EQ(memoryStats().staging.systemAllocations, stagingBefore);
  dcrt_release(out);
  dcrt_end_step();
}

TEST(Gather, GroupWithCastsIsOneCollective) {
  // a: f32 -> bf16, with ties that must round to even;
  // b: bf16 -> bf16; c: i32 -> i32; d: f16 -> f32.
  const int64_t fullA = 5, fullB = 10, fullC = 4, fullD = 3;
  auto a = [](int64_t i) { return 1.0f + (2 * i + 1) * 0.00390625f; };
  auto b = [](int64_t i) { return floatToBF16(-0.5f * i); };
  auto c = [](int64_t i) { return int32_t(1000 - i); };
  auto d = [](int64_t i) { return floatToHalf(0.25f * i); };
  std::vector<float> slotA = slotOf<float>(fullA, a);
  std::vector<uint16_t> slotB = slotOf<uint16_t>(fullB, b);
  std::vector<int32_t> slotC = slotOf<int32_t>(fullC, c);
  std::vector<uint16_t> slotD = slotOf<uint16_t>(fullD, d);
  void *shards[4] = {slotA.data(), slotB.data(), slotC.data(), slotD.data()};
  int64_t local[4] = {int64_t(slotA.size()), int64_t(slotB.size()),
                      int64_t(slotC.size()), int64_t(slotD.size())};
  int64_t full[4] = {fullA, fullB, fullC, fullD};
  int32_t src[4] = {DCRT_F32, DCRT_BF16, DCRT_I32, DCRT_F16};
  int32_t dst[4] = {DCRT_BF16, DCRT_BF16, DCRT_I32, DCRT_F32};
  void *out[4] = {};
  int64_t gathersBefore = transferCount("all-gather");
  dcrt_future future =
      dcrt_gather_start(0, 4, shards, local, full, src, dst, out);
  dcrt_wait(future);
  for (int64_t i = 0; i < fullA; ++i)
    EXPECT_EQ(static_cast<uint16_t *>(out[0])[i], floatToBF16(a(i))) << i;
  // 1 + 2^-8 rounds down to 1, 1 + 3 * 2^-8 up to 1 + 2^-6.
  EXPECT_EQ(static_cast<uint16_t *>(out[0])[0], 0x3f80);
  EXPECT_EQ(static_cast<uint16_t *>(out[0])[1], 0x3f82);
  for (int64_t i = 0; i < fullB; ++i)
    EXPECT_EQ(static_cast<uint16_t *>(out[1])[i], b(i)) << i;
  for (int64_t i = 0; i < fullC; ++i)
    EXPECT_EQ(static_cast<int32_t *>(out[2])[i], c(i)) << i;
  for (int64_t i = 0; i < fullD; ++i)
    EXPECT_EQ(static_cast<float *>(out[3])[i], 0.25f * i) << i;
  EXPECT_EQ(transferCount("all-gather"), gathersBefore + 1);
  for (void *tensor : out)
    dcrt_release(tensor);
  dcrt_end_step();
}

TEST(Gather, TwoGroupsInFlightCompleteWithoutWaiting) {
  const int64_t full = 9;
  std::vector<float> first =
      slotOf<float>(full, [](int64_t i) { return float(i); });
  std::vector<float> second =
      slotOf<float>(full, [](int64_t i) { return -float(i); });
  void *shard1 = first.data(), *shard2 = second.data();
  int64_t local = first.size();
  int32_t f32 = DCRT_F32;
  void *out1 = nullptr, *out2 = nullptr;
  dcrt_future f1 =
      dcrt_gather_start(0, 1, &shard1, &local, &full, &f32, &f32, &out1);
  dcrt_future f2 =
      dcrt_gather_start(0, 1, &shard2, &local, &full, &f32, &f32, &out2);
  EXPECT_NE(out1, out2);
  // Both finish while this thread only polls ("computes").
  EXPECT_TRUE(completesInBackground(f2));
  EXPECT_TRUE(completesInBackground(f1));
  dcrt_wait(f2); // out of start order
  dcrt_wait(f1);
  for (int64_t i = 0; i < full; ++i) {
    EXPECT_EQ(static_cast<float *>(out1)[i], float(i));
    EXPECT_EQ(static_cast<float *>(out2)[i], -float(i));
  }
  dcrt_release(out1);
  dcrt_release(out2);
  dcrt_end_step();
}

TEST(ReduceScatter, SumAndAverageOverUnevenSlots) {
  // Rank r contributes (r + 1) * i to element i: the sum is
  // i * W (W + 1) / 2, the average that over W.
  const int64_t full = 7;
  const double weight = world() * (world() + 1) / 2.0;
  std::vector<float> grad(full);
  for (int64_t i = 0; i < full; ++i)
    grad[i] = float((rank() + 1) * i);
  for (int32_t op : {DCRT_SUM, DCRT_AVG}) {
    void *input = grad.data();
    int64_t local = shardNumel(full, world());
    int32_t f32 = DCRT_F32;
    void *out = nullptr;
    dcrt_future future = dcrt_reduce_scatter_start(0, 1, op, &input, &full,
                                                   &f32, &local, &f32, &out);
    dcrt_wait(future);
    for (int64_t j = 0; j < local; ++j) {
      int64_t i = rank() * local + j;
      double expected = i < full ? i * weight : 0.0; // padding reduces to 0
      if (op == DCRT_AVG)
        expected /= world();
      EXPECT_FLOAT_EQ(static_cast<float *>(out)[j], float(expected))
          << "op " << op << " element " << i;
    }
    dcrt_end_step();
  }
}

TEST(ReduceScatter, MixedBucketReducesInF32) {
  // g1: f32 gradient -> bf16 shard; g2: bf16 gradient -> f32 shard;
  // g3: f16 gradient -> f16 shard. Element i of rank r is r + i / 4 (exact
  // in every type); the average is (W - 1) / 2 + i / 4.
  const int64_t full[3] = {5, 8, 2};
  std::vector<float> g1(full[0]);
  std::vector<uint16_t> g2(full[1]), g3(full[2]);
  for (int64_t i = 0; i < full[0]; ++i)
    g1[i] = rank() + i / 4.0f;
  for (int64_t i = 0; i < full[1]; ++i)
    g2[i] = floatToBF16(rank() + i / 4.0f);
  for (int64_t i = 0; i < full[2]; ++i)
    g3[i] = floatToHalf(rank() + i / 4.0f);
  void *grads[3] = {g1.data(), g2.data(), g3.data()};
  int32_t gradTypes[3] = {DCRT_F32, DCRT_BF16, DCRT_F16};
  int32_t shardTypes[3] = {DCRT_BF16, DCRT_F32, DCRT_F16};
  int64_t local[3];
  for (int i = 0; i < 3; ++i)
    local[i] = shardNumel(full[i], world());
  void *out[3] = {};
  dcrt_future future = dcrt_reduce_scatter_start(
      0, 3, DCRT_AVG, grads, full, gradTypes, local, shardTypes, out);
  dcrt_wait(future);
  for (int t = 0; t < 3; ++t)
    for (int64_t j = 0; j < local[t]; ++j) {
      int64_t i = rank() * local[t] + j;
      double expected = i < full[t] ? (world() - 1) / 2.0 + i / 4.0 : 0.0;
      EXPECT_EQ(loadAsDouble(out[t], shardTypes[t], j), expected)
          << "tensor " << t << " element " << i;
    }
  dcrt_end_step();
}

TEST(AllReduce, SumAverageAndTypes) {
  const int64_t n = 5;
  std::vector<float> f(n);
  std::vector<uint16_t> bf(n);
  std::vector<int32_t> ints(n);
  for (int64_t i = 0; i < n; ++i) {
    f[i] = float(rank() * 10 + i);
    bf[i] = floatToBF16(float(rank() + i));
    ints[i] = int32_t(rank() * 1000 + i);
  }
  void *sum = nullptr, *avg = nullptr, *bfAvg = nullptr, *intSum = nullptr;
  dcrt_future f1 =
      dcrt_all_reduce_start(0, DCRT_SUM, f.data(), n, DCRT_F32, &sum);
  dcrt_future f2 =
      dcrt_all_reduce_start(0, DCRT_AVG, f.data(), n, DCRT_F32, &avg);
  dcrt_future f3 =
      dcrt_all_reduce_start(0, DCRT_AVG, bf.data(), n, DCRT_BF16, &bfAvg);
  dcrt_future f4 =
      dcrt_all_reduce_start(0, DCRT_SUM, ints.data(), n, DCRT_I32, &intSum);
  dcrt_wait(f1);
  dcrt_wait(f2);
  dcrt_wait(f3);
  dcrt_wait(f4);
  double rankSum = world() * (world() - 1) / 2.0;
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(static_cast<float *>(sum)[i], float(10 * rankSum + world() * i));
    EXPECT_FLOAT_EQ(static_cast<float *>(avg)[i],
                    float((10 * rankSum + world() * i) / world()));
    EXPECT_EQ(bf16ToFloat(static_cast<uint16_t *>(bfAvg)[i]),
              float(rankSum / world() + i));
    EXPECT_EQ(static_cast<int32_t *>(intSum)[i],
              int32_t(1000 * rankSum + world() * i));
  }
  dcrt_end_step();
}

TEST(AllToAll, SplitOneDimConcatAnother) {
  // Input [2W, 3] holds r*100 + i*10 + j; split dim 0, concat dim 1: the
  // output [2, 3W] holds, in column block q, rows 2r..2r+1 of rank q.
  const int64_t rows = 2 * world();
  std::vector<int32_t> input(rows * 3), output(2 * 3 * world());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < 3; ++j)
      input[i * 3 + j] = int32_t(rank() * 100 + i * 10 + j);
  int64_t shape[2] = {rows, 3};
  dcrt_wait(dcrt_all_to_all_start(0, input.data(), output.data(), 2, shape, 0,
                                  1, DCRT_I32));
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t q = 0; q < world(); ++q)
      for (int64_t j = 0; j < 3; ++j)
        EXPECT_EQ(output[a * 3 * world() + q * 3 + j],
                  int32_t(q * 100 + (2 * rank() + a) * 10 + j))
            << a << " " << q << " " << j;
}

TEST(AllToAll, UlyssesHeadsToSequence) {
  // [2, 2W, 3] split dim 1 (heads), concat dim 0 (sequence): the output
  // [2W, 2, 3] holds at [2q + b, c, d] rank q's element [b, 2r + c, d].
  const int64_t heads = 2 * world();
  std::vector<uint16_t> input(2 * heads * 3), output(2 * heads * 3);
  auto value = [](int64_t q, int64_t b, int64_t h, int64_t d) {
    return uint16_t(q * 1000 + b * 100 + h * 10 + d);
  };
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t d = 0; d < 3; ++d)
        input[(b * heads + h) * 3 + d] = value(rank(), b, h, d);
  int64_t shape[3] = {2, heads, 3};
  dcrt_wait(dcrt_all_to_all_start(0, input.data(), output.data(), 3, shape, 1,
                                  0, DCRT_BF16));
  for (int64_t q = 0; q < world(); ++q)
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t c = 0; c < 2; ++c)
        for (int64_t d = 0; d < 3; ++d)
          EXPECT_EQ(output[((2 * q + b) * 2 + c) * 3 + d],
                    value(q, b, 2 * rank() + c, d));
}

TEST(AllToAll, SameSplitAndConcatDimExchangesBlocks) {
  std::vector<float> input(2 * world()), output(2 * world());
  for (int64_t i = 0; i < 2 * world(); ++i)
    input[i] = float(rank() * 100 + i);
  int64_t shape[1] = {2 * world()};
  dcrt_wait(dcrt_all_to_all_start(0, input.data(), output.data(), 1, shape, 0,
                                  0, DCRT_F32));
  for (int64_t q = 0; q < world(); ++q)
    for (int64_t a = 0; a < 2; ++a)
      EXPECT_EQ(output[2 * q + a], float(q * 100 + 2 * rank() + a));
}

TEST(Memory, StepsReuseTheArenaAndBuffers) {
  // A step as compiled code runs it; from the second step on, nothing new
  // is taken from the system.
  const int64_t fullA = 10, fullB = 33;
  std::vector<float> a = slotOf<float>(fullA, [](int64_t i) { return i; });
  std::vector<float> b = slotOf<float>(fullB, [](int64_t i) { return i; });
  std::vector<float> gradA(fullA, 1.0f), gradB(fullB, 2.0f);
  PoolStats arenaAfterFirst, stepAfterFirst, stagingAfterFirst;
  for (int step = 0; step < 4; ++step) {
    void *shards[2] = {a.data(), b.data()};
    int64_t local[2] = {int64_t(a.size()), int64_t(b.size())};
    int64_t full[2] = {fullA, fullB};
    int32_t f32[2] = {DCRT_F32, DCRT_F32};
    void *gathered[2];
    dcrt_future gather =
        dcrt_gather_start(0, 2, shards, local, full, f32, f32, gathered);
    dcrt_wait(gather);
    dcrt_release(gathered[0]);
    void *persistent = gathered[1]; // never released: freed by end_step
    EXPECT_EQ(static_cast<float *>(persistent)[fullB - 1], float(fullB - 1));
    void *grads[2] = {gradA.data(), gradB.data()};
    void *reduced[2];
    dcrt_future reduce = dcrt_reduce_scatter_start(0, 2, DCRT_SUM, grads, full,
                                                   f32, local, f32, reduced);
    void *host = nullptr;
    dcrt_future offload = dcrt_offload_start(gradB.data(), fullB * 4, &host);
    dcrt_wait(offload);
    std::vector<float> back(fullB); // the artifact's buffer (step arena)
    dcrt_future reload = dcrt_reload_into(host, fullB * 4, back.data());
    dcrt_wait(reload);
    dcrt_wait(reduce);
    dcrt_end_step();
    MemoryStats stats = memoryStats();
    EXPECT_EQ(stats.gatherArena.live, 0);
    EXPECT_EQ(stats.hostPool.live, 0);
    EXPECT_EQ(stats.stepBuffers.live, 0);
    EXPECT_EQ(stats.staging.live, 0);
    if (step == 0) {
      arenaAfterFirst = stats.gatherArena;
      stepAfterFirst = stats.stepBuffers;
      stagingAfterFirst = stats.staging;
    } else {
      EXPECT_EQ(stats.gatherArena.systemAllocations,
                arenaAfterFirst.systemAllocations);
      EXPECT_EQ(stats.stepBuffers.systemAllocations,
                stepAfterFirst.systemAllocations);
      EXPECT_EQ(stats.staging.systemAllocations,
                stagingAfterFirst.systemAllocations);
    }
  }
}

TEST(Memory, InvalidateAndClearDropGatheredCopies) {
  const int64_t full = 6;
  std::vector<float> slot = slotOf<float>(full, [](int64_t i) { return i; });
  void *shard = slot.data();
  int64_t local = slot.size();
  int32_t f32 = DCRT_F32;
  void *first = nullptr, *second = nullptr;
  dcrt_wait(dcrt_gather_start(0, 1, &shard, &local, &full, &f32, &f32, &first));
  dcrt_wait(
      dcrt_gather_start(0, 1, &shard, &local, &full, &f32, &f32, &second));
  EXPECT_EQ(memoryStats().gatherArena.live, 2 * full * 4);
  dcrt_invalidate_gathered(shard); // both copies of this shard
  EXPECT_EQ(memoryStats().gatherArena.live, 0);
  dcrt_wait(dcrt_gather_start(0, 1, &shard, &local, &full, &f32, &f32, &first));
  dcrt_clear_gathered();
  EXPECT_EQ(memoryStats().gatherArena.live, 0);
  dcrt_end_step();
}

TEST(Copies, OffloadAndReloadRunOnTheCopyStreams) {
  std::vector<double> activation(1000);
  for (size_t i = 0; i < activation.size(); ++i)
    activation[i] = rank() + i * 0.5;
  int64_t bytes = activation.size() * sizeof(double);
  void *host = nullptr;
  dcrt_future offload = dcrt_offload_start(activation.data(), bytes, &host);
  EXPECT_TRUE(completesInBackground(offload));
  dcrt_wait(offload);
  EXPECT_EQ(memoryStats().hostPool.live, bytes);
  std::fill(activation.begin(), activation.end(), -1.0); // device reuses it
  // Back into the caller's buffer (compiled code: a step-arena temporary);
  // the runtime's step buffers take no part.
  std::vector<double> device(activation.size(), -2.0);
  MemoryStats before = memoryStats();
  dcrt_future reload = dcrt_reload_into(host, bytes, device.data());
  EXPECT_TRUE(completesInBackground(reload));
  dcrt_wait(reload);
  for (size_t i = 0; i < activation.size(); ++i)
    EXPECT_EQ(device[i], rank() + i * 0.5);
  MemoryStats after = memoryStats();
  EXPECT_EQ(after.hostPool.live, 0); // back in the pool
  EXPECT_EQ(after.stepBuffers.live, before.stepBuffers.live);
  EXPECT_EQ(after.stepBuffers.systemAllocations,
            before.stepBuffers.systemAllocations);
  dcrt_end_step();
}

TEST(Copies, ReloadWritesOnlyItsBytesOfTheDestination) {
  // A destination larger than the copy (an arena region): the bytes past
  // `bytes` stay as they were, and the host copy is free for the next
  // offload at once.
  std::vector<float> activation(100);
  for (size_t i = 0; i < activation.size(); ++i)
    activation[i] = rank() * 10.0f + i;
  int64_t bytes = activation.size() * sizeof(float);
  void *host = nullptr;
  dcrt_wait(dcrt_offload_start(activation.data(), bytes, &host));
  std::vector<float> arena(150, -3.0f);
  dcrt_wait(dcrt_reload_into(host, bytes, arena.data() + 25));
  for (size_t i = 0; i < arena.size(); ++i) {
    bool copied = i >= 25 && i < 125;
    EXPECT_EQ(arena[i], copied ? rank() * 10.0f + (i - 25) : -3.0f) << i;
  }
  EXPECT_EQ(memoryStats().hostPool.live, 0);
  // The round trip again, from the arena back to the activation.
  dcrt_wait(dcrt_offload_start(arena.data(), bytes, &host));
  dcrt_wait(dcrt_reload_into(host, bytes, activation.data()));
  EXPECT_EQ(activation[0], -3.0f);
  EXPECT_EQ(activation[99], rank() * 10.0f + 74);
  EXPECT_EQ(memoryStats().hostPool.live, 0);
  dcrt_end_step();
}

TEST(Copies, UploadCopiesACallersHostBufferAndLeavesIt) {
  // A parameter shard kept in host memory: uploaded twice in one step (a
  // forward and a backward use), the source is the caller's throughout.
  std::vector<float> shard(777);
  for (size_t i = 0; i < shard.size(); ++i)
    shard[i] = rank() * 1000.0f + i * 0.25f;
  const std::vector<float> original = shard;
  int64_t bytes = shard.size() * sizeof(float);
  int64_t uploadsBefore = transferCount("copy h2d (reload)");
  MemoryStats before = memoryStats();
  std::vector<float> first(shard.size()), second(shard.size());
  dcrt_future upload = dcrt_upload_into(shard.data(), bytes, first.data());
  EXPECT_TRUE(completesInBackground(upload));
  dcrt_wait(upload);
  dcrt_future again = dcrt_upload_into(shard.data(), bytes, second.data());
  EXPECT_TRUE(completesInBackground(again));
  dcrt_wait(again);
  EXPECT_EQ(first, original);
  EXPECT_EQ(second, original);
  EXPECT_EQ(shard, original); // untouched
  // Nothing came from or went to the host pool or the step buffers: the
  // device copies are the caller's.
  MemoryStats during = memoryStats();
  EXPECT_EQ(during.hostPool.live, before.hostPool.live);
  EXPECT_EQ(during.hostPool.systemAllocations,
            before.hostPool.systemAllocations);
  EXPECT_EQ(during.stepBuffers.live, before.stepBuffers.live);
  EXPECT_EQ(transferCount("copy h2d (reload)"), uploadsBefore + 2);
  dcrt_end_step();
  // Still the caller's: writable, and a new step uploads the new values.
  shard[5] = -7.0f;
  dcrt_wait(dcrt_upload_into(shard.data(), bytes, first.data()));
  EXPECT_EQ(first[5], -7.0f);
  EXPECT_EQ(first[6], rank() * 1000.0f + 6 * 0.25f);
  dcrt_end_step();
}

TEST(Compute, MatmulThroughTheAbiMatchesTheReference) {
  // No collectives: every rank computes the whole set on its own.
  unsigned seed = 100 + rank();
  for (const test::MatmulCase &c : test::matmulCases()) {
    test::MatmulData data = test::randomOperands(c.desc, seed++);
    std::vector<unsigned char> out = data.c;
    dcrt_matmul(&c.desc, data.a.data(), data.b.data(), out.data());
    EXPECT_EQ(test::checkMatmulResult(c.desc, data, out.data(), 1e-5), "")
        << c.name;
  }
  EXPECT_EQ(dcrt_compute_stream(), nullptr);
}

int main(int argc, char **argv) {
  testing::InitGoogleTest(&argc, argv);
  dcrt_init_options options{};
  options.struct_size = sizeof(options); // any world size, no plan
  dcrt_init(&options);
  if (dcrt_rank() != 0) {
    testing::TestEventListeners &listeners =
        testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter);
  }
  double failed = RUN_ALL_TESTS() != 0;
  allReduceSum(&failed, 1);
  dcrt_finalize();
  return failed > 0 ? 1 : 0;
}
