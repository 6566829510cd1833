//===- ParamsTest.cpp - shards, deterministic init and AdamW --------------===//
#include "Params.h"

#include "dcrt/dtype.hpp"

#include <gtest/gtest.h>

#include <cmath>

using namespace dcrt;
using namespace dcrun;

TEST(AdamW, MatchesHandComputedSteps) {
  AdamWConfig config;
  config.lr = 0.1;
  config.weightDecay = 0.01;
  float master[4] = {1.0f, -2.0f, 0.5f, 3.0f};
  float m[4] = {}, v[4] = {};
  const float grad1[4] = {0.5f, -1.0f, 0.0f, 2.0f};
  const float grad2[4] = {0.25f, 0.5f, -2.0f, 2.0f};

  // Step 1, element 0: p = 1 * (1 - 0.1 * 0.01) = 0.999; m = 0.05,
  // v = 0.00025; m / (1 - 0.9) = 0.5 and sqrt(v / (1 - 0.999)) = 0.5, so
  // p -= 0.1 * 0.5 / (0.5 + 1e-8): 0.899. A zero gradient only decays.
  adamwUpdate(master, grad1, m, v, 4, config, 1);
  EXPECT_NEAR(master[0], 0.899, 1e-6);
  EXPECT_NEAR(master[1], -1.898, 1e-6);
  EXPECT_NEAR(master[2], 0.4995, 1e-6);
  EXPECT_NEAR(master[3], 2.897, 1e-6);
  EXPECT_FLOAT_EQ(m[3], 0.2f);
  EXPECT_FLOAT_EQ(v[3], 0.004f);

  // Step 2, element 0: p = 0.899 * 0.999 = 0.898101; m = 0.07,
  // v = 0.00031225; 0.07 / 0.19 = 0.368421,
  // sqrt(0.00031225 / 0.001999) = 0.395225: p -= 0.1 * 0.932182 -> 0.804883.
  adamwUpdate(master, grad2, m, v, 4, config, 2);
  EXPECT_NEAR(master[0], 0.804883003, 1e-6);
  EXPECT_NEAR(master[1], -1.86946833, 1e-6);
  EXPECT_NEAR(master[2], 0.573414207, 1e-6);
  EXPECT_NEAR(master[3], 2.79410315, 1e-6);
  EXPECT_FLOAT_EQ(m[2], -0.2f);
  EXPECT_FLOAT_EQ(v[1], 0.001249f);
}

TEST(AdamW, StepsCountFromOne) {
  float value = 0, grad = 0, m = 0, v = 0;
  EXPECT_EXIT(adamwUpdate(&value, &grad, &m, &v, 1, AdamWConfig(), 0),
              testing::ExitedWithCode(1), "steps count from 1");
}

static ParamSpec spec(int32_t id, std::string name, std::vector<int64_t> shape,
                      dcrt_dtype dtype = DCRT_F32) {
  ParamSpec result;
  result.id = id;
  result.name = std::move(name);
  result.shape = std::move(shape);
  result.dtype = dtype;
  return result;
}

TEST(ParamRegistry, ShardsArePaddedSlots) {
  ParamRegistry last(2, 3);
  Param &param = last.add(spec(0, "w", {7}));
  EXPECT_EQ(param.fullNumel, 7);
  EXPECT_EQ(param.localNumel, 3); // ceil(7 / 3)
  EXPECT_EQ(param.offset, 6);
  EXPECT_EQ(param.validNumel, 1); // the rest of the slot is padding
  EXPECT_EQ(param.data.size(), 12);
  ParamSpec replicated = spec(1, "norm", {5});
  replicated.sharded = false;
  Param &full = last.add(replicated);
  EXPECT_EQ(full.localNumel, 5);
  EXPECT_EQ(full.offset, 0);
  EXPECT_EXIT(last.add(spec(0, "again", {1})), testing::ExitedWithCode(1),
              "parameter id 0 appears twice");
  EXPECT_EXIT(last.add(spec(9, "w", {1})), testing::ExitedWithCode(1),
              "parameter name 'w' appears twice");
}

TEST(ParamRegistry, ShardGroupsFollowTheShardAxes) {
  // A 2x3 grid (rank = 3 d + s). "w" split over axis 0: rank (d, s) holds
  // slot d and owns it where s = 0; "v" over both axes: slot = rank.
  ParamSpec w = spec(0, "w", {9});
  w.shardAxes = {0};
  ParamSpec v = spec(1, "v", {9});
  ParamSpec norm = spec(2, "norm", {4});
  norm.sharded = false;
  for (int32_t rank = 0; rank < 6; ++rank) {
    ParamRegistry registry(rank, 6, {2, 3});
    const Param &byData = registry.add(w);
    EXPECT_EQ(byData.shardRanks, 2);
    EXPECT_EQ(byData.localNumel, 5);
    EXPECT_EQ(byData.shardIndex, rank / 3);
    EXPECT_EQ(byData.offset, rank / 3 * 5);
    EXPECT_EQ(byData.validNumel, rank / 3 ? 4 : 5);
    EXPECT_EQ(byData.owner, rank % 3 == 0) << rank;
    EXPECT_EQ(registry.ownerOfSlot(byData, 1), 3);
    const Param &byBoth = registry.add(v);
    EXPECT_EQ(byBoth.shardRanks, 6);
    EXPECT_EQ(byBoth.shardIndex, rank);
    EXPECT_TRUE(byBoth.owner);
    EXPECT_EQ(registry.ownerOfSlot(byBoth, 4), 4);
    const Param &full = registry.add(norm);
    EXPECT_EQ(full.owner, rank == 0);
    // Each slot's squares count once over the ranks.
    EXPECT_EQ(shareOfSquaredNorm(byData, 2.0), rank % 3 == 0 ? 2.0 : 0.0);
    EXPECT_EQ(shareOfSquaredNorm(full, 2.0), rank == 0 ? 2.0 : 0.0);
  }
  // The other grid order: axis 1 split, rank = 2 s + d on a 3x2 grid.
  ParamRegistry transposed(5, 6, {3, 2});
  ParamSpec u = spec(0, "u", {9});
  u.shardAxes = {1};
  const Param &byAxis1 = transposed.add(u);
  EXPECT_EQ(byAxis1.shardIndex, 1);
  EXPECT_FALSE(byAxis1.owner);
  EXPECT_EQ(transposed.ownerOfSlot(byAxis1, 1), 1);
  ParamSpec bad = spec(3, "bad", {9});
  bad.shardAxes = {2};
  EXPECT_EXIT(transposed.add(bad), testing::ExitedWithCode(1),
              "parameter 'bad': shard axes are not distinct axes of the "
              "2-axis grid");
  bad.shardAxes = {1, 1};
  EXPECT_EXIT(transposed.add(bad), testing::ExitedWithCode(1),
              "parameter 'bad': shard axes are not distinct axes of the "
              "2-axis grid");
  // A block of experts (dc-expert-parallel) lists its expert axis first:
  // on a 3x2 grid with the experts on axis 1, rank = 2 d + e holds slot
  // 3 e + d, block e's shard d, a contiguous range of the full tensor.
  for (int32_t rank = 0; rank < 6; ++rank) {
    ParamRegistry grid(rank, 6, {3, 2});
    ParamSpec experts = spec(0, "experts", {2, 9});
    experts.shardAxes = {1, 0};
    const Param &block = grid.add(experts);
    int64_t d = rank / 2, e = rank % 2;
    EXPECT_EQ(block.shardIndex, 3 * e + d) << rank;
    EXPECT_EQ(block.offset, 9 * e + 3 * d) << rank;
    EXPECT_EQ(block.validNumel, 3) << rank;
    EXPECT_TRUE(block.owner) << rank;
    EXPECT_EQ(grid.ownerOfSlot(block, 3 * e + d), rank);
  }
  EXPECT_EXIT(ParamRegistry(0, 6, {2, 2}), testing::ExitedWithCode(1),
              "a grid of 4 ranks for a world of 6");
}

TEST(ParamRegistry, InitIsTheSameFullTensorOnEveryWorldSize) {
  InitOptions options;
  options.seed = 1234;
  std::vector<ParamSpec> specs = {
      spec(0, "layers.0.attn.wqkv", {5, 7}), spec(1, "fc.bias", {3}),
      spec(2, "layers.0.attn_norm", {4}), spec(3, "emb", {11}, DCRT_BF16)};
  ParamRegistry single(0, 1);
  for (const ParamSpec &s : specs)
    single.add(s);
  single.initialize(options);
  for (int32_t world : {2, 3, 4}) {
    for (int32_t rank = 0; rank < world; ++rank) {
      ParamRegistry registry(rank, world);
      for (const ParamSpec &s : specs)
        registry.add(s);
      registry.initialize(options);
      for (size_t p = 0; p < specs.size(); ++p) {
        const Param &slice = registry.params()[p];
        const Param &full = single.params()[p];
        for (int64_t i = 0; i < slice.validNumel; ++i)
          ASSERT_EQ(slice.master[i], full.master[slice.offset + i])
              << specs[p].name << " world " << world << " rank " << rank;
      }
    }
  }
  const Param &weight = single.params()[0];
  EXPECT_NE(weight.master[0], weight.master[1]);
  EXPECT_EQ(single.params()[1].master[2], 0.0f); // a bias starts at 0
  EXPECT_EQ(single.params()[2].master[3], 1.0f); // a norm weight at 1
  // The artifact's view is the master copy in the parameter's dtype.
  const Param &emb = single.params()[3];
  EXPECT_EQ(emb.data.as<uint16_t>()[4], floatToBF16(emb.master[4]));
  // Another seed, other values; the std scales them.
  InitOptions other = options;
  other.seed = 1235;
  EXPECT_NE(initialValue(other, specs[0], 0), weight.master[0]);
  other = options;
  other.std = 0.04;
  EXPECT_FLOAT_EQ(initialValue(other, specs[0], 5), 2 * weight.master[5]);
}

TEST(HostAdamW, UpdatesShardsFromTheirGradients) {
  ParamRegistry registry(0, 1);
  ParamSpec half = spec(0, "w", {2}, DCRT_BF16);
  half.gradDtype = DCRT_BF16;
  Param &param = registry.add(half);
  param.master = {1.0f, -1.0f};
  uint16_t *grad = param.grad.as<uint16_t>();
  grad[0] = floatToBF16(0.5f);
  grad[1] = floatToBF16(-0.25f);
  AdamWConfig config;
  config.lr = 0.01;
  HostAdamW().step(registry, config, 1, 1.0);
  // First step moves each weight by lr against its gradient's sign.
  EXPECT_NEAR(param.master[0], 0.99, 1e-6);
  EXPECT_NEAR(param.master[1], -0.99, 1e-6);
  EXPECT_EQ(param.data.as<uint16_t>()[0], floatToBF16(param.master[0]));
}

TEST(HostAdamW, ClipsToTheGlobalGradientNorm) {
  // Gradients (3, 4) have norm 5: clipped to norm 1 they are (0.6, 0.8),
  // so the update equals an unclipped one on the scaled gradients. The
  // first AdamW step is sign-like, so compare the second.
  auto run = [](float g0, float g1, double maxNorm, double *norm) {
    ParamRegistry registry(0, 1);
    Param &param = registry.add(spec(0, "w", {2}, DCRT_F32));
    param.master = {1.0f, -1.0f};
    AdamWConfig config;
    config.lr = 0.01;
    config.maxGradNorm = maxNorm;
    HostAdamW optimizer;
    for (int64_t step = 1; step <= 2; ++step) {
      param.grad.as<float>()[0] = step == 1 ? g0 : g0 * 0.5f;
      param.grad.as<float>()[1] = step == 1 ? g1 : g1 * 2.0f;
      *norm = std::sqrt(optimizer.gradientSquares(registry));
      optimizer.step(registry, config, step, clipScale(*norm, maxNorm));
    }
    return param.master;
  };
  double norm = 0, unused = 0;
  std::vector<float> clipped = run(3.0f, 4.0f, 1.0, &norm);
  // The second step's gradients (1.5, 8) have norm sqrt(66.25).
  EXPECT_NEAR(norm, std::sqrt(66.25), 1e-9);
  double scale2 = 1.0 / (std::sqrt(66.25) + 1e-6);
  // The same two steps without clipping, on hand-scaled gradients (step
  // reads them itself when gradientSquares was not called).
  ParamRegistry registry(0, 1);
  Param &param = registry.add(spec(0, "w", {2}, DCRT_F32));
  param.master = {1.0f, -1.0f};
  AdamWConfig config;
  config.lr = 0.01;
  HostAdamW optimizer;
  double scale1 = 1.0 / (5.0 + 1e-6);
  param.grad.as<float>()[0] = static_cast<float>(3.0f * scale1);
  param.grad.as<float>()[1] = static_cast<float>(4.0f * scale1);
  optimizer.step(registry, config, 1, 1.0);
  param.grad.as<float>()[0] = static_cast<float>(1.5f * scale2);
  param.grad.as<float>()[1] = static_cast<float>(8.0f * scale2);
  optimizer.step(registry, config, 2, 1.0);
  EXPECT_NEAR(clipped[0], param.master[0], 1e-7);
  EXPECT_NEAR(clipped[1], param.master[1], 1e-7);
  // A norm under the limit is left alone.
  run(0.3f, 0.4f, 10.0, &unused);
  EXPECT_NEAR(unused, std::sqrt(0.15 * 0.15 + 0.8 * 0.8), 1e-7);
  EXPECT_EQ(clipScale(0.5, 10.0), 1.0);
  EXPECT_EQ(clipScale(123.0, 0.0), 1.0);
}

TEST(HostAdamW, SquaredNormSharesAddUpOverRanks) {
  // A sharded gradient counts where it lives; a replicated one (on every
  // rank) once, on rank 0; a NaN anywhere, a replica's too, makes the
  // share NaN.
  for (int32_t rank : {0, 1}) {
    ParamRegistry registry(rank, 2);
    Param &sharded = registry.add(spec(0, "w", {4}, DCRT_F32));
    ParamSpec replicatedSpec = spec(1, "b", {2}, DCRT_F32);
    replicatedSpec.sharded = false;
    Param &replicated = registry.add(replicatedSpec);
    sharded.grad.as<float>()[0] = 3.0f;
    sharded.grad.as<float>()[1] = 4.0f;
    replicated.grad.as<float>()[0] = 2.0f;
    replicated.grad.as<float>()[1] = 0.0f;
    HostAdamW optimizer;
    EXPECT_DOUBLE_EQ(optimizer.gradientSquares(registry),
                     rank == 0 ? 25.0 + 4.0 : 25.0);
    replicated.grad.as<float>()[1] = std::nanf("");
    EXPECT_TRUE(std::isnan(optimizer.gradientSquares(registry))) << rank;
    replicated.grad.as<float>()[1] = 0.0f;
    sharded.grad.as<float>()[1] = std::nanf("");
    EXPECT_TRUE(std::isnan(optimizer.gradientSquares(registry))) << rank;
  }
}

TEST(HostAdamW, AccumulatesMicroBatchesInFp32) {
  // Three micro-batches of bf16 gradient shards. The update must equal one
  // on their mean, summed in fp32 (in bf16, 256 + 1 + 1 would lose both
  // ones), and the norm must be the mean's. A parameter the step sums
  // itself (stepAccumulates) is read once, from the last micro-batch.
  ParamRegistry registry(0, 1);
  ParamSpec bf16 = spec(0, "w", {2}, DCRT_F32);
  bf16.gradDtype = DCRT_BF16;
  Param &summed = registry.add(bf16);
  ParamSpec ownSpec = spec(1, "norm", {1}, DCRT_F32);
  ownSpec.stepAccumulates = true;
  Param &own = registry.add(ownSpec);
  const float micro[3][2] = {{256.0f, 0.5f}, {1.0f, 0.25f}, {1.0f, -2.0f}};
  HostAdamW optimizer;
  for (int64_t m = 0; m < 3; ++m) {
    summed.grad.as<uint16_t>()[0] = floatToBF16(micro[m][0]);
    summed.grad.as<uint16_t>()[1] = floatToBF16(micro[m][1]);
    // Only the last entry writes it; earlier values must be ignored.
    own.grad.as<float>()[0] = m == 2 ? 9.0f : 1000.0f;
    optimizer.accumulate(registry, m, 3);
  }
  double mean0 = 258.0 / 3, mean1 = -1.25 / 3, ownMean = 9.0 / 3;
  EXPECT_NEAR(optimizer.gradientSquares(registry),
              mean0 * mean0 + mean1 * mean1 + ownMean * ownMean, 1e-9);
  summed.master = {1.0f, -1.0f};
  own.master = {0.5f};
  AdamWConfig config;
  config.lr = 0.01;
  optimizer.step(registry, config, 1, 0.5);
  // The same update from the mean gradients written directly (and the
  // same clipping scale).
  ParamRegistry reference(0, 1);
  Param &direct = reference.add(spec(0, "w", {2}, DCRT_F32));
  Param &directOwn = reference.add(spec(1, "norm", {1}, DCRT_F32));
  direct.master = {1.0f, -1.0f};
  directOwn.master = {0.5f};
  direct.grad.as<float>()[0] = static_cast<float>(mean0);
  direct.grad.as<float>()[1] = static_cast<float>(mean1);
  directOwn.grad.as<float>()[0] = static_cast<float>(ownMean);
  HostAdamW().step(reference, config, 1, 0.5);
  EXPECT_FLOAT_EQ(summed.master[0], direct.master[0]);
  EXPECT_FLOAT_EQ(summed.master[1], direct.master[1]);
  EXPECT_FLOAT_EQ(own.master[0], directOwn.master[0]);
  // The second AdamW step is not sign-like: check it tracks the mean
  // (not the sum) of the next step's micro-batches.
  for (int64_t m = 0; m < 2; ++m) {
    summed.grad.as<uint16_t>()[0] = floatToBF16(m ? 3.0f : 1.0f);
    summed.grad.as<uint16_t>()[1] = floatToBF16(0.0f);
    own.grad.as<float>()[0] = 4.0f;
    optimizer.accumulate(registry, m, 2);
  }
  EXPECT_NEAR(optimizer.gradientSquares(registry), 4.0 + 4.0, 1e-9);
  optimizer.step(registry, config, 2, 1.0);
  direct.grad.as<float>()[0] = 2.0f;
  direct.grad.as<float>()[1] = 0.0f;
  directOwn.grad.as<float>()[0] = 2.0f;
  HostAdamW().step(reference, config, 2, 1.0);
  EXPECT_FLOAT_EQ(summed.master[0], direct.master[0]);
  EXPECT_FLOAT_EQ(summed.master[1], direct.master[1]);
  EXPECT_FLOAT_EQ(own.master[0], directOwn.master[0]);
  // After a step the optimizer reads `grad` directly again.
  summed.grad.as<uint16_t>()[0] = floatToBF16(3.0f);
  summed.grad.as<uint16_t>()[1] = floatToBF16(4.0f);
  own.grad.as<float>()[0] = 0.0f;
  EXPECT_DOUBLE_EQ(optimizer.gradientSquares(registry), 25.0);
}

TEST(HostAdamW, KeepsItsStateInTheChosenDtypes) {
  // Three steps with bf16 moments and a bf16 master: every kept value is on
  // the bf16 grid, the parameter's data is the master itself, and the
  // result stays within bf16 rounding of the f32 run's.
  auto run = [](dcrt_dtype master, dcrt_dtype moments) {
    ParamRegistry registry(0, 1);
    ParamSpec bf16 = spec(0, "w", {3}, DCRT_BF16);
    bf16.gradDtype = DCRT_BF16;
    Param &param = registry.add(bf16);
    param.master = {0.5f, -0.25f, 0.125f};
    param.refreshData();
    AdamWConfig config;
    config.lr = 0.01;
    config.weightDecay = 0.1;
    config.masterDtype = master;
    config.momentDtype = moments;
    HostAdamW optimizer;
    for (int64_t step = 1; step <= 3; ++step) {
      for (int i = 0; i < 3; ++i)
        param.grad.as<uint16_t>()[i] =
            floatToBF16(0.1f * static_cast<float>(i + step));
      optimizer.step(registry, config, step, 1.0);
    }
    struct Kept {
      std::vector<float> master, expAvg, expAvgSq;
      std::vector<uint16_t> data;
    };
    const uint16_t *data = param.data.as<uint16_t>();
    return Kept{param.master, param.expAvg, param.expAvgSq, {data, data + 3}};
  };
  auto wide = run(DCRT_F32, DCRT_F32);
  auto narrow = run(DCRT_BF16, DCRT_BF16);
  for (int i = 0; i < 3; ++i) {
    for (float value : {narrow.master[i], narrow.expAvg[i], narrow.expAvgSq[i]})
      EXPECT_EQ(value, roundToStateDtype(value, DCRT_BF16)) << i;
    EXPECT_EQ(narrow.data[i], floatToBF16(narrow.master[i]));
    EXPECT_NEAR(narrow.master[i], wide.master[i],
                std::fabs(wide.master[i]) * 8e-3);
    EXPECT_NEAR(narrow.expAvg[i], wide.expAvg[i],
                std::fabs(wide.expAvg[i]) * 8e-3);
  }
  // The f32 master keeps what bf16 rounds away.
  bool offGrid = false;
  for (int i = 0; i < 3; ++i)
    offGrid |= wide.master[i] != roundToStateDtype(wide.master[i], DCRT_BF16);
  EXPECT_TRUE(offGrid);
}

TEST(AdamW, StateBytesPerElement) {
  AdamWConfig config;
  EXPECT_EQ(stateBytesPerElement(config), 12);
  config.momentDtype = DCRT_BF16;
  EXPECT_EQ(stateBytesPerElement(config), 8);
  config.masterDtype = DCRT_BF16;
  EXPECT_EQ(stateBytesPerElement(config), 4);
}
