//===- GridTest.cpp - collectives on the groups of a 2 x (W/2) grid -------===//
//
// Run on an even number of ranks: the job's grid is 2 x (W/2), rank
// r = (W/2) d + s. Each collective runs on axis 0 (the ranks of one s),
// axis 1 (one d) or DCRT_ALL_AXES (every rank), and its result is written
// out from the members' coordinates. As MpiTest.cpp, every rank issues the
// same collectives whatever its checks find.
//
//===----------------------------------------------------------------------===//
#include "dcrt/core.hpp"
#include "dcrt/dcrt.h"

#include "RankFailurePrinter.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

using namespace dcrt;

namespace {
int rank() { return dcrt_rank(); }
int world() { return dcrt_world_size(); }
int64_t columns() { return world() / 2; }

/// The group of `axis` as world ranks, in order of the group's coordinate.
std::vector<int> members(int32_t axis) {
  std::vector<int> ranks;
  int64_t d = rank() / columns(), s = rank() % columns();
  if (axis == 0)
    for (int64_t i = 0; i < 2; ++i)
      ranks.push_back(int(i * columns() + s));
  else if (axis == 1)
    for (int64_t i = 0; i < columns(); ++i)
      ranks.push_back(int(d * columns() + i));
  else
    for (int i = 0; i < world(); ++i)
      ranks.push_back(i);
  return ranks;
}
} // namespace

TEST(Grid, GathersRunOnTheAxisTheyName) {
  for (int32_t axis : {0, 1, DCRT_ALL_AXES}) {
    std::vector<int> group = members(axis);
    // Each rank's slot of 3 holds 100 r + i.
    std::vector<float> slot = {100.0f * rank(), 100.0f * rank() + 1,
                               100.0f * rank() + 2};
    void *shard = slot.data();
    int64_t local = 3, full = 3 * int64_t(group.size());
    int32_t f32 = DCRT_F32;
    void *out = nullptr;
    dcrt_wait(
        dcrt_gather_start(axis, 1, &shard, &local, &full, &f32, &f32, &out));
    for (size_t m = 0; m < group.size(); ++m)
      for (int i = 0; i < 3; ++i)
        EXPECT_EQ(static_cast<float *>(out)[3 * m + i], 100.0f * group[m] + i)
            << "axis " << axis << " member " << m;
    dcrt_release(out);
    dcrt_end_step();
  }
}

TEST(Grid, ReductionsRunOnTheAxisTheyName) {
  for (int32_t axis : {0, 1, DCRT_ALL_AXES}) {
    std::vector<int> group = members(axis);
    int64_t n = int64_t(group.size());
    int memberSum = 0, position = 0;
    for (int m = 0; m < int(n); ++m) {
      memberSum += group[m];
      if (group[m] == rank())
        position = m;
    }
    // Element i of rank r's gradient is r + i: the sum over the group is
    // memberSum + n i; this rank keeps the slot at its position.
    std::vector<float> grad(2 * n);
    for (int64_t i = 0; i < 2 * n; ++i)
      grad[i] = float(rank() + i);
    void *input = grad.data();
    int64_t full = 2 * n, local = 2;
    int32_t f32 = DCRT_F32;
    void *out = nullptr;
    dcrt_wait(dcrt_reduce_scatter_start(axis, 1, DCRT_SUM, &input, &full, &f32,
                                        &local, &f32, &out));
    for (int64_t j = 0; j < 2; ++j)
      EXPECT_EQ(static_cast<float *>(out)[j],
                float(memberSum + n * (2 * position + j)))
          << "axis " << axis;
    float value = float(rank());
    void *sum = nullptr;
    dcrt_wait(dcrt_all_reduce_start(axis, DCRT_SUM, &value, 1, DCRT_F32, &sum));
    EXPECT_EQ(*static_cast<float *>(sum), float(memberSum)) << "axis " << axis;
    dcrt_end_step();
  }
}

namespace {
/// A descriptor of a parameter of `full` f32 elements, `local` of them on
/// each rank, split over `axis`.
dcrt_adamw_desc adamwDesc(int64_t full, int64_t local, int64_t axis) {
  dcrt_adamw_desc desc{};
  desc.struct_size = sizeof(desc);
  desc.full_numel = full;
  desc.local_numel = local;
  desc.shard_axis = axis;
  desc.param_dtype = desc.grad_dtype = desc.moment_dtype = DCRT_F32;
  desc.master_dtype = -1;
  desc.beta1 = 0.9;
  desc.beta2 = 0.999;
  return desc;
}
} // namespace

// A slot is counted in the norm by one rank of those holding it; ranks
// that differ on a distinct axis (experts) hold different blocks and each
// counts its own. The share of a sum over micro-batches is of the mean.
TEST(Grid, NormSharesCountEachSlotOnce) {
  int64_t d = rank() / columns(), s = rank() % columns();
  std::vector<float> grad = {1.0f + float(rank()), 2.0f};
  double squares = (1.0 + rank()) * (1.0 + rank()) + 4.0;
  struct Case {
    int64_t shardAxis, distinctAxes, microBatches;
    bool counts;
  };
  Case cases[] = {
      {0, 0, 0, s == 0},                     // split over axis 0: axis 1 copies
      {0, 1 << 1, 0, true},                  // axis 1 holds other experts
      {1, 0, 0, d == 0},                     // split over axis 1: axis 0 copies
      {DCRT_NOT_SHARDED, 0, 0, rank() == 0}, // whole everywhere
      {DCRT_NOT_SHARDED, 1 << 1, 0, d == 0}, // a block per axis-1 rank
      {DCRT_ALL_AXES, 0, 4, true},           // a sum of 4: a sixteenth
  };
  for (const Case &c : cases) {
    int64_t ranks = c.shardAxis == 0               ? 2
                    : c.shardAxis == 1             ? columns()
                    : c.shardAxis == DCRT_ALL_AXES ? world()
                                                   : 1;
    dcrt_adamw_desc desc = adamwDesc(2 * ranks, 2, c.shardAxis);
    desc.distinct_axes = c.distinctAxes;
    desc.micro_batches = c.microBatches;
    double in = 0.5, out = 0;
    dcrt_grad_squares(&desc, grad.data(), &in, &out);
    double share = c.microBatches > 1 ? squares / 16.0 : squares;
    EXPECT_EQ(out, c.counts ? 0.5 + share : 0.5)
        << "shard_axis " << c.shardAxis << " distinct_axes " << c.distinctAxes;
  }
  // A micro-batch's gradient added into its fp32 sum, in place.
  dcrt_adamw_desc desc = adamwDesc(2 * world(), 2, DCRT_ALL_AXES);
  std::vector<float> sum = {0.25f, -1.0f};
  dcrt_grad_accumulate(&desc, grad.data(), sum.data(), sum.data());
  EXPECT_EQ(sum[0], 1.25f + float(rank()));
  EXPECT_EQ(sum[1], 1.0f);
}

int main(int argc, char **argv) {
  testing::InitGoogleTest(&argc, argv);
  int worldSize = 0;
  // The grid needs the world size before dcrt_init: the launcher's.
  for (const char *name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char *value = std::getenv(name))
      worldSize = std::atoi(value);
  if (worldSize < 2 || worldSize % 2) {
    std::fprintf(stderr, "dcrt-grid-tests: run on an even number of ranks "
                         "(an MPI launcher's -n)\n");
    return 1;
  }
  int64_t grid[2] = {2, worldSize / 2};
  dcrt_init_options options{};
  options.struct_size = sizeof(options);
  options.expected_world_size = worldSize;
  options.grid_rank = 2;
  options.grid_shape = grid;
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
