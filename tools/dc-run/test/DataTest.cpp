//===- DataTest.cpp - each rank's part of the global batch ----------------===//
#include "Data.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using namespace dcrun;

namespace {
TensorSpec dataSpec(const char *name, std::vector<int64_t> shape,
                    dcrt_dtype dtype) {
  TensorSpec spec;
  spec.kind = TensorKind::Data;
  spec.name = name;
  spec.shape = std::move(shape);
  spec.dtype = dtype;
  if (dtype == DCRT_I32)
    spec.vocab = 32;
  return spec;
}

/// The step's data on `rank` of a `grid` job after fill(1): argument i's
/// elements as floats (ids converted).
std::vector<std::vector<float>> dataOf(const StepSpec &step, int rank,
                                       int world, std::vector<int64_t> grid,
                                       int64_t micro = 0, int64_t micros = 1,
                                       const std::string &tokens = "") {
  DataSource data(step, /*seed=*/7, /*vocab=*/0, tokens, rank, world, grid);
  data.fill(1, micro, micros);
  std::vector<std::vector<float>> values;
  for (size_t i = 0; i < step.args.size(); ++i) {
    const TensorSpec &spec = step.args[i];
    std::vector<float> &out = values.emplace_back(spec.numel());
    for (int64_t e = 0; e < spec.numel(); ++e)
      out[e] = spec.dtype == DCRT_F32
                   ? static_cast<const float *>(data.buffer(i))[e]
                   : float(static_cast<const int32_t *>(data.buffer(i))[e]);
  }
  return values;
}
} // namespace

TEST(Data, SequenceGroupsShareTheirRows) {
  // One rank, a batch of 4: x [4, 3] and token ids [4, 8].
  StepSpec single;
  single.args = {dataSpec("x", {4, 3}, DCRT_F32),
                 dataSpec("tokens", {4, 8}, DCRT_I32)};
  std::vector<std::vector<float>> whole = dataOf(single, 0, 1, {});
  // DP=2 x SP=2 (rank = 2 d + s): x [2, 3] is not sequence-sharded but
  // still split over the data axis only; the ids [2, 4] are rows of data
  // rank d, positions [4 s, 4 s + 4).
  StepSpec grid;
  TensorSpec tokens = dataSpec("tokens", {2, 4}, DCRT_I32);
  tokens.seqDim = 1;
  tokens.seqAxis = 1;
  grid.args = {dataSpec("x", {2, 3}, DCRT_F32), tokens};
  for (int rank = 0; rank < 4; ++rank) {
    std::vector<std::vector<float>> part = dataOf(grid, rank, 4, {2, 2});
    int d = rank / 2, s = rank % 2;
    for (int64_t e = 0; e < 6; ++e)
      EXPECT_EQ(part[0][e], whole[0][d * 6 + e]) << "x, rank " << rank;
    for (int64_t row = 0; row < 2; ++row)
      for (int64_t p = 0; p < 4; ++p)
        EXPECT_EQ(part[1][row * 4 + p], whole[1][(d * 2 + row) * 8 + s * 4 + p])
            << "tokens, rank " << rank;
  }
}

TEST(Data, MicroBatchesSliceTheRowsOfOneLargerBatch) {
  // 2 ranks with 6 rows each, against 2 ranks with 2 rows in 3
  // micro-batches: rank r's micro-batch m is rows [2 m, 2 m + 2) of rank
  // r's 6, synthetic and token-file data alike.
  std::string tokenFile = ::testing::TempDir() + "micro-tokens.bin";
  {
    std::vector<int32_t> ids(500);
    for (size_t i = 0; i < ids.size(); ++i)
      ids[i] = static_cast<int32_t>((i * 7 + 3) % 32);
    FILE *file = std::fopen(tokenFile.c_str(), "wb");
    ASSERT_NE(file, nullptr);
    std::fwrite(ids.data(), sizeof(int32_t), ids.size(), file);
    std::fclose(file);
  }
  for (const std::string &tokens : {std::string(), tokenFile}) {
    StepSpec large, small;
    large.args = {dataSpec("x", {6, 3}, DCRT_F32),
                  dataSpec("ids", {6, 5}, DCRT_I32)};
    small.args = {dataSpec("x", {2, 3}, DCRT_F32),
                  dataSpec("ids", {2, 5}, DCRT_I32)};
    for (int rank = 0; rank < 2; ++rank) {
      std::vector<std::vector<float>> whole =
          dataOf(large, rank, 2, {}, 0, 1, tokens);
      for (int64_t micro = 0; micro < 3; ++micro) {
        std::vector<std::vector<float>> part =
            dataOf(small, rank, 2, {}, micro, 3, tokens);
        for (int64_t e = 0; e < 6; ++e)
          EXPECT_EQ(part[0][e], whole[0][micro * 6 + e])
              << "x, rank " << rank << ", micro-batch " << micro;
        for (int64_t e = 0; e < 10; ++e)
          EXPECT_EQ(part[1][e], whole[1][micro * 10 + e])
              << "ids, rank " << rank << ", micro-batch " << micro
              << (tokens.empty() ? "" : ", token file");
      }
      // The slices differ: micro-batches do not repeat the data.
      EXPECT_NE(dataOf(small, rank, 2, {}, 0, 3, tokens)[0],
                dataOf(small, rank, 2, {}, 1, 3, tokens)[0]);
    }
  }
  std::remove(tokenFile.c_str());
}
