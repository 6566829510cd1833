//===- TrainerMpiTest.cpp - sharded init and checkpoints on 1, 2, 3 ranks -===//
//
// As runtime/test/MpiTest.cpp: every rank runs every test and issues the
// same collectives whatever its checks find (EXPECT, not ASSERT).
//
//===----------------------------------------------------------------------===//
#include "Checkpoint.h"
#include "Params.h"

#include "RankFailurePrinter.h"
#include "dcrt/core.hpp"
#include "dcrt/dcrt.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <unistd.h>
#include <vector>

using namespace dcrt;
using namespace dcrun;

namespace {
int rank() { return dcrt_rank(); }
int world() { return dcrt_world_size(); }
} // namespace

TEST(Params, InitIsTheSameFullTensorAsOnOneRank) {
  // Gather the initialized shards of this world; compare them with what a
  // 1-rank registry holds.
  ParamSpec weight;
  weight.id = 3;
  weight.name = "layers.0.mlp.w_up";
  weight.shape = {5, 7};
  ParamRegistry sharded(rank(), world()), single(0, 1);
  Param &slice = sharded.add(weight);
  Param &reference = single.add(weight);
  InitOptions options;
  options.seed = 42;
  sharded.initialize(options);
  single.initialize(options);
  void *shard = slice.data.data();
  int64_t local = slice.localNumel, full = slice.fullNumel;
  int32_t f32 = DCRT_F32;
  void *out = nullptr;
  dcrt_wait(dcrt_gather_start(0, 1, &shard, &local, &full, &f32, &f32, &out));
  for (int64_t i = 0; i < full; ++i)
    EXPECT_EQ(static_cast<float *>(out)[i], reference.master[i]) << i;
  dcrt_end_step();
}

TEST(Checkpoint, SavedByThisWorldLoadsOnEveryWorldSize) {
  std::vector<ParamSpec> specs(2);
  specs[0].id = 0;
  specs[0].name = "w";
  specs[0].shape = {3, 5};
  specs[1].id = 1;
  specs[1].name = "scale";
  specs[1].shape = {4};
  specs[1].dtype = DCRT_BF16;
  specs[1].sharded = false;
  ParamRegistry trained(rank(), world());
  for (const ParamSpec &spec : specs)
    trained.add(spec);
  InitOptions options;
  options.seed = 9;
  trained.initialize(options);
  for (Param &param : trained.params())
    for (int64_t i = 0; i < param.validNumel; ++i)
      param.expAvg[i] = float(param.offset + i);
  // Rank 0 names the file; everyone needs the same name.
  char path[256] = {};
  if (rank() == 0)
    std::snprintf(path, sizeof(path), "%s/dcrt-mpi-%d.safetensors",
                  testing::TempDir().c_str(), getpid());
  broadcast(path, sizeof(path), 0);
  saveCheckpoint(path, trained, 3);

  ParamRegistry single(0, 1);
  for (const ParamSpec &spec : specs)
    single.add(spec);
  single.initialize(options);
  for (int32_t otherWorld : {1, 2, 3, 4})
    for (int32_t otherRank = 0; otherRank < otherWorld; ++otherRank) {
      ParamRegistry restored(otherRank, otherWorld);
      for (const ParamSpec &spec : specs)
        restored.add(spec);
      EXPECT_EQ(loadCheckpoint(path, restored), 3);
      for (size_t p = 0; p < specs.size(); ++p) {
        const Param &param = restored.params()[p];
        for (int64_t i = 0; i < param.validNumel; ++i) {
          EXPECT_EQ(param.master[i],
                    single.params()[p].master[param.offset + i]);
          EXPECT_EQ(param.expAvg[i], float(param.offset + i));
        }
      }
    }
  barrier(); // nobody removes the file while others read it
  if (rank() == 0)
    std::remove(path);
}

TEST(Checkpoint, ReplicasAreSavedOnceAndCountedOnceInTheNorm) {
  // The world as a 2-axis grid both ways round; "w" split over axis 0, axis
  // 1 or both. Replicas (ranks that differ on an axis "w" is not split
  // over) must leave one copy of each slot in the file and in the norm.
  ParamSpec weight;
  weight.id = 0;
  weight.name = "w";
  weight.shape = {3, 5};
  ParamRegistry single(0, 1);
  Param &reference = single.add(weight);
  InitOptions options;
  options.seed = 11;
  single.initialize(options);
  double squares = 0;
  for (float value : reference.master)
    squares += double(value) * value;
  char path[256] = {};
  if (rank() == 0)
    std::snprintf(path, sizeof(path), "%s/dcrt-mpi-grid-%d.safetensors",
                  testing::TempDir().c_str(), getpid());
  broadcast(path, sizeof(path), 0);
  for (std::vector<int64_t> grid :
       {std::vector<int64_t>{1, world()}, std::vector<int64_t>{world(), 1}})
    for (std::vector<int64_t> axes :
         {std::vector<int64_t>{0}, std::vector<int64_t>{1},
          std::vector<int64_t>{0, 1}}) {
      ParamSpec split = weight;
      split.shardAxes = axes;
      ParamRegistry trained(rank(), world(), grid);
      Param &param = trained.add(split);
      trained.initialize(options);
      double share = 0;
      for (int64_t i = 0; i < param.validNumel; ++i)
        share += double(param.master[i]) * param.master[i];
      share = shareOfSquaredNorm(param, share);
      allReduceSum(&share, 1);
      EXPECT_NEAR(share, squares, 1e-12) << grid[0] << "x" << grid[1];
      saveCheckpoint(path, trained, 1);
      ParamRegistry loaded(0, 1);
      loaded.add(weight);
      loadCheckpoint(path, loaded);
      EXPECT_EQ(loaded.params()[0].master, reference.master)
          << grid[0] << "x" << grid[1] << " axes " << axes.size();
      barrier(); // the next save replaces the file
    }
  if (rank() == 0)
    std::remove(path);
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
