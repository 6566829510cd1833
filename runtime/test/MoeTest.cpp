//===- MoeTest.cpp - the host backend's mixture-of-experts calls ----------===//
//
// The host loops (what dcrt_topk, dcrt_group_by_expert, dcrt_gather_rows,
// dcrt_scatter_add_rows, dcrt_grouped_matmul and dcrt_grouped_weight_grad
// run on the host backend) against the references of MoeReference.h, on
// random and skewed routings (every assignment to one expert, experts
// without rows, dropped ids, k = experts), every float dtype and both index
// dtypes, padded row strides (slices), accumulation; the exact rules
// dcrt.h states (top-k's ties and NaNs, the grouping's stability, the
// scatter's summation order); malformed ends staying inside the buffers;
// and every malformed descriptor ending the program with a message naming
// what is wrong.
//
//===----------------------------------------------------------------------===//
#include "Moe.h"
#include "MoeReference.h"

#include "dcrt/dtype.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

using namespace dcrt;
using namespace dcrt::detail;
using namespace dcrt::test;

namespace {

const int32_t kFloatTypes[] = {DCRT_F32, DCRT_BF16, DCRT_F16};
const int32_t kIndexTypes[] = {DCRT_I32, DCRT_I64};
const Routing kRoutings[] = {Routing::Random,    Routing::Balanced,
                             Routing::OneExpert, Routing::Empty,
                             Routing::Dropped,   Routing::Skewed};

std::string caseName(int32_t dtype, Routing routing) {
  return std::string(dtypeName(dtype)) + ", " + routingName(routing);
}

//===----------------------------------------------------------------------===//
// Top-k
//===----------------------------------------------------------------------===//

/// Runs hostTopk on `scores` and checks it against the reference.
void expectTopk(const dcrt_topk_desc &d, const Bytes &scores,
                const std::string &what) {
  size_t size = static_cast<size_t>(dtypeSize(static_cast<int32_t>(d.dtype)));
  Bytes values(static_cast<size_t>(d.rows * d.values_ld) * size, 0xab);
  Bytes indices(
      static_cast<size_t>(d.rows * d.indices_ld *
                          dtypeSize(static_cast<int32_t>(d.index_dtype))),
      0xcd);
  Bytes valuesBefore = values, indicesBefore = indices;
  hostTopk(d, scores.data(), values.data(), indices.data());
  EXPECT_EQ(
      checkTopkResult(d, scores, valuesBefore, values, indicesBefore, indices),
      "")
      << what;
}

TEST(HostMoe, TopkMatchesTheReference) {
  std::mt19937 rng(1);
  for (int32_t dtype : kFloatTypes)
    for (int32_t indexType : kIndexTypes)
      for (auto [experts, k] : {std::pair<int64_t, int64_t>{8, 2},
                                {8, 8},
                                {1, 1},
                                {64, 6},
                                {37, 5},
                                {160, 8}}) {
        for (Scores kind : {Scores::Uniform, Scores::Ties, Scores::Special}) {
          dcrt_topk_desc d = makeTopk(dtype, indexType, 97, experts, k, 3);
          Bytes scores = topkScores(d, kind, rng);
          expectTopk(d, scores,
                     std::string(dtypeName(dtype)) + " E " +
                         std::to_string(experts) + " k " + std::to_string(k));
        }
      }
}

TEST(HostMoe, TopkTiesGoToTheLowerPositionAndNaNsFirst) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  // One row per rule; each row's expected positions.
  std::vector<std::vector<float>> rows = {
      {1, 3, 3, 2, 3, 0},              // ties: 1, 2, 4
      {0.0f, -0.0f, 0.0f, -1, -2, -3}, // -0 == 0: by position
      {1, nan, 5, nan, -inf, inf},     // NaNs first, by position, then inf
      {2, 2, 2, 2, 2, 2},              // all equal
      {-inf, -inf, -5, -inf, -inf, -inf},
  };
  std::vector<std::vector<int64_t>> want = {{1, 2, 4, 3, 0, 5},
                                            {0, 1, 2, 3, 4, 5},
                                            {1, 3, 5, 2, 0, 4},
                                            {0, 1, 2, 3, 4, 5},
                                            {2, 0, 1, 3, 4, 5}};
  for (int32_t dtype : kFloatTypes) {
    dcrt_topk_desc d = makeTopk(dtype, DCRT_I32, 5, 6, 6, 0);
    std::vector<float> flat;
    for (auto &row : rows)
      flat.insert(flat.end(), row.begin(), row.end());
    Bytes scores(flat.size() * static_cast<size_t>(dtypeSize(dtype)));
    convert(flat.data(), DCRT_F32, scores.data(), dtype,
            static_cast<int64_t>(flat.size()));
    std::vector<int32_t> indices(30);
    Bytes values(scores.size());
    hostTopk(d, scores.data(), values.data(), indices.data());
    for (size_t r = 0; r < rows.size(); ++r)
      for (size_t j = 0; j < 6; ++j)
        EXPECT_EQ(indices[r * 6 + j], want[r][j])
            << dtypeName(dtype) << " row " << r << " j " << j;
    expectTopk(d, scores, std::string("rules, ") + dtypeName(dtype));
  }
}

//===----------------------------------------------------------------------===//
// Grouping
//===----------------------------------------------------------------------===//

TEST(HostMoe, GroupByExpertIsAStableSortWithInclusiveEnds) {
  std::mt19937 rng(2);
  for (Routing routing : kRoutings)
    for (int32_t idsType : kIndexTypes)
      for (int32_t outType : kIndexTypes)
        for (int64_t experts : {1, 2, 8, 33}) {
          const int64_t n = 517;
          std::vector<int64_t> ids = routingIds(routing, n, experts, rng);
          dcrt_group_by_expert_desc d{};
          d.struct_size = sizeof(d);
          d.ids_dtype = idsType;
          d.order_dtype = outType;
          d.ends_dtype = idsType == outType ? outType : idsType;
          d.assignments = n;
          d.experts = experts;
          Bytes idBytes = indexBytes(ids, idsType);
          Bytes order(static_cast<size_t>(n * dtypeSize(outType)));
          Bytes ends(static_cast<size_t>(
              experts * dtypeSize(static_cast<int32_t>(d.ends_dtype))));
          hostGroupByExpert(d, idBytes.data(), order.data(), ends.data());
          Grouping want = referenceGrouping(ids, experts);
          EXPECT_EQ(indexValues(order, outType), want.order)
              << routingName(routing) << " E " << experts;
          EXPECT_EQ(indexValues(ends, static_cast<int32_t>(d.ends_dtype)),
                    want.ends)
              << routingName(routing) << " E " << experts;
        }
}

//===----------------------------------------------------------------------===//
// Gather and scatter-add
//===----------------------------------------------------------------------===//

/// The index of a combine: the token of each sorted assignment (order / k)
/// for `routing`, with some entries out of range when `outOfRange`.
std::vector<int64_t> tokenIndex(Routing routing, int64_t tokens, int64_t k,
                                int64_t experts, std::mt19937 &rng) {
  std::vector<int64_t> ids = routingIds(routing, tokens * k, experts, rng);
  Grouping g = referenceGrouping(ids, experts);
  std::vector<int64_t> index(g.order.size());
  for (size_t p = 0; p < index.size(); ++p)
    index[p] = g.order[p] / k;
  if (routing == Routing::Dropped) // and some out of range
    for (size_t p = 0; p < index.size(); p += 7)
      index[p] = p % 2 ? -3 : tokens + static_cast<int64_t>(p);
  return index;
}

TEST(HostMoe, GatherRowsCopiesRowsAndZeroesOutOfRange) {
  std::mt19937 rng(3);
  for (int32_t dtype : kFloatTypes)
    for (int32_t indexType : kIndexTypes)
      for (Routing routing : {Routing::Random, Routing::Dropped}) {
        const int64_t tokens = 61, k = 3, width = 24;
        std::vector<int64_t> index = tokenIndex(routing, tokens, k, 8, rng);
        dcrt_row_map_desc d =
            makeRowMap(dtype, indexType, tokens * k, tokens, width, 5, 3);
        Bytes source = randomFloats(dtype, tokens * d.source_ld, rng);
        Bytes result = randomFloats(dtype, d.indexed_rows * d.result_ld, rng);
        Bytes want = referenceGather(d, source, index, result);
        Bytes indexData = indexBytes(index, indexType);
        hostGatherRows(d, source.data(), indexData.data(), result.data());
        EXPECT_EQ(result, want) << caseName(dtype, routing);
      }
}

TEST(HostMoe, ScatterAddRowsSumsInIncreasingSourceRow) {
  std::mt19937 rng(4);
  for (int32_t dtype : kFloatTypes)
    for (int32_t indexType : kIndexTypes)
      for (Routing routing :
           {Routing::Random, Routing::Dropped, Routing::OneExpert}) {
        const int64_t tokens = 53, k = 4, width = 19;
        std::vector<int64_t> index = tokenIndex(routing, tokens, k, 8, rng);
        // Repeats beyond a combine's k: a few rows all land on token 2.
        for (size_t p = 3; p < index.size(); p += 11)
          index[p] = 2;
        dcrt_row_map_desc d =
            makeRowMap(dtype, indexType, tokens * k, tokens, width, 2, 7);
        Bytes source = randomFloats(dtype, d.indexed_rows * d.source_ld, rng);
        Bytes result = randomFloats(dtype, tokens * d.result_ld, rng);
        std::vector<double> exact;
        Bytes want = referenceScatterAdd(d, source, index, result, &exact);
        Bytes indexData = indexBytes(index, indexType);
        hostScatterAddRows(d, source.data(), indexData.data(), result.data());
        EXPECT_EQ(result, want) << caseName(dtype, routing);
        // The rule itself is the sum within f32 accumulation and rounding.
        for (size_t at = 0; at < exact.size(); ++at) {
          if (std::isnan(exact[at]))
            continue;
          ASSERT_NEAR(floatAt(result, dtype, static_cast<int64_t>(at)),
                      exact[at],
                      1e-5 * 16 + roundingOf(dtype) * std::fabs(exact[at]))
              << caseName(dtype, routing) << " element " << at;
        }
      }
}

//===----------------------------------------------------------------------===//
// Grouped products
//===----------------------------------------------------------------------===//

/// Runs one grouped product on the host for `ids`' grouping and checks it
/// against the double reference.
void expectGrouped(const GroupedShape &s, bool weightGrad,
                   const std::vector<int64_t> &ids, unsigned seed,
                   const std::string &what) {
  std::mt19937 rng(seed);
  dcrt_grouped_matmul_desc d =
      weightGrad ? makeGroupedWeightGrad(s) : makeGroupedForward(s);
  Grouping g = referenceGrouping(ids, s.experts);
  int32_t dtype = s.dtype;
  Bytes lhs = randomFloats(dtype, groupedLhsElements(d), rng);
  Bytes rhs = randomFloats(dtype, groupedRhsElements(d, weightGrad), rng);
  Bytes out = randomFloats(dtype, groupedOutElements(d, weightGrad), rng);
  Bytes before = out;
  Bytes ends = indexBytes(g.ends, s.endsType);
  GroupedReference r = referenceGrouped(d, weightGrad, lhs, rhs, g.ends, out);
  if (weightGrad)
    hostGroupedWeightGrad(d, lhs.data(), rhs.data(), ends.data(), out.data());
  else
    hostGroupedMatmul(d, lhs.data(), rhs.data(), ends.data(), out.data());
  EXPECT_EQ(checkGrouped(d, weightGrad, r, before, out, 1e-5), "")
      << what << ": " << describeGroupedMatmul(d);
}

TEST(HostMoe, GroupedMatmulMatchesADoubleReference) {
  unsigned seed = 10;
  for (int32_t dtype : kFloatTypes)
    for (Routing routing : kRoutings)
      for (bool transpose : {false, true}) {
        GroupedShape s;
        s.dtype = dtype;
        s.endsType = seed % 2 ? DCRT_I32 : DCRT_I64;
        s.rows = 67;
        s.experts = 5;
        s.k = 23;
        s.p = 18;
        s.transposeRhs = transpose;
        s.accumulate = seed % 3 == 0;
        s.padLhs = 3;
        s.padRhs = 2;
        s.padOut = 5;
        s.gapRhs = 7;
        std::mt19937 rng(seed);
        std::vector<int64_t> ids = routingIds(routing, s.rows, s.experts, rng);
        expectGrouped(s, false, ids, seed++,
                      caseName(dtype, routing) +
                          (transpose ? ", transpose_rhs" : ""));
      }
}

TEST(HostMoe, GroupedWeightGradMatchesADoubleReference) {
  unsigned seed = 100;
  for (int32_t dtype : kFloatTypes)
    for (Routing routing : kRoutings) {
      GroupedShape s;
      s.dtype = dtype;
      s.endsType = seed % 2 ? DCRT_I32 : DCRT_I64;
      s.rows = 71;
      s.experts = 6;
      s.k = 13;
      s.p = 21;
      s.accumulate = seed % 3 == 1;
      s.padLhs = 4;
      s.padRhs = 1;
      s.padOut = 3;
      s.gapOut = 9;
      std::mt19937 rng(seed);
      std::vector<int64_t> ids = routingIds(routing, s.rows, s.experts, rng);
      expectGrouped(s, true, ids, seed++, caseName(dtype, routing));
    }
}

TEST(HostMoe, GroupedProductsOfOneExpertAreMatmuls) {
  // experts = 1, every row to it: a plain product, exact on small integers.
  GroupedShape s;
  s.rows = 2;
  s.k = 2;
  s.p = 2;
  float lhs[4] = {1, 2, 3, 4}, rhs[4] = {5, 6, 7, 8}, out[4] = {1, 1, 1, 1};
  int64_t ends[1] = {2};
  dcrt_grouped_matmul_desc d = makeGroupedForward(s);
  hostGroupedMatmul(d, lhs, rhs, ends, out);
  EXPECT_EQ(std::vector<float>(out, out + 4),
            (std::vector<float>{19, 22, 43, 50}));
  d.transpose_rhs = 1; // rhs read as [p, k]
  hostGroupedMatmul(d, lhs, rhs, ends, out);
  EXPECT_EQ(std::vector<float>(out, out + 4),
            (std::vector<float>{17, 23, 39, 53}));
  // lhs^T rhs = [[1 3] [2 4]] [[5 6] [7 8]], then accumulated once more.
  d = makeGroupedWeightGrad(s);
  hostGroupedWeightGrad(d, lhs, rhs, ends, out);
  EXPECT_EQ(std::vector<float>(out, out + 4),
            (std::vector<float>{26, 30, 38, 44}));
  d.accumulate = 1;
  hostGroupedWeightGrad(d, lhs, rhs, ends, out);
  EXPECT_EQ(std::vector<float>(out, out + 4),
            (std::vector<float>{52, 60, 76, 88}));
  // Rows past the last end are zero, and count nowhere.
  ends[0] = 1;
  d = makeGroupedForward(s);
  hostGroupedMatmul(d, lhs, rhs, ends, out);
  EXPECT_EQ(std::vector<float>(out, out + 4),
            (std::vector<float>{19, 22, 0, 0}));
  d = makeGroupedWeightGrad(s);
  hostGroupedWeightGrad(d, lhs, rhs, ends, out);
  EXPECT_EQ(std::vector<float>(out, out + 4),
            (std::vector<float>{5, 6, 10, 12}));
}

TEST(HostMoe, MalformedEndsStayInsideTheBuffers) {
  // Decreasing, negative and past-the-end ends: clamped as
  // expertRowRanges reads them (every row written once, no access outside).
  int64_t ends[4] = {5, 2, -7, 100};
  std::vector<RowRange> ranges = expertRowRanges(ends, DCRT_I64, 4, 9);
  ASSERT_EQ(ranges.size(), 5u);
  EXPECT_EQ(ranges[0].lo, 0);
  EXPECT_EQ(ranges[0].hi, 5);
  EXPECT_EQ(ranges[1].lo, 5);
  EXPECT_EQ(ranges[1].hi, 5);
  EXPECT_EQ(ranges[2].hi, 5);
  EXPECT_EQ(ranges[3].lo, 5);
  EXPECT_EQ(ranges[3].hi, 9);
  EXPECT_EQ(ranges[4].lo, 9);
  EXPECT_EQ(ranges[4].hi, 9);
  GroupedShape s;
  s.rows = 9;
  s.experts = 4;
  s.k = 3;
  s.p = 2;
  dcrt_grouped_matmul_desc d = makeGroupedForward(s);
  std::vector<float> lhs(27, 1), rhs(24, 1), out(18, -1);
  hostGroupedMatmul(d, lhs.data(), rhs.data(), ends, out.data());
  for (float x : out)
    EXPECT_EQ(x, 3);
  d = makeGroupedWeightGrad(s);
  std::vector<float> dw(24, -1), rows(18, 1);
  hostGroupedWeightGrad(d, lhs.data(), rows.data(), ends, dw.data());
  EXPECT_EQ(dw[0], 5);  // expert 0: rows [0, 5)
  EXPECT_EQ(dw[6], 0);  // expert 1: none
  EXPECT_EQ(dw[18], 4); // expert 3: rows [5, 9)
}

//===----------------------------------------------------------------------===//
// Descriptor checks
//===----------------------------------------------------------------------===//

TEST(HostMoe, MalformedDescriptorsAreFatal) {
  float buffer[64] = {};
  void *b = buffer;
  dcrt_topk_desc t = makeTopk(DCRT_F32, DCRT_I64, 4, 8, 2, 0);
  auto topk = [&](dcrt_topk_desc d) { checkTopk(&d, b, b, b, "test"); };
  dcrt_topk_desc bad = t;
  bad.struct_size = 8;
  EXPECT_DEATH(topk(bad), "struct_size 8, must be at least 72");
  bad = t;
  bad.k = 9;
  EXPECT_DEATH(topk(bad), "k must be in \\[1, experts\\]");
  bad = t;
  bad.index_dtype = DCRT_F32;
  EXPECT_DEATH(topk(bad), "index_dtype must be i32 or i64");
  bad = t;
  bad.scores_ld = 7;
  EXPECT_DEATH(topk(bad), "scores_ld must be at least experts");
  EXPECT_DEATH(checkTopk(&t, b, nullptr, b, "test"), "null buffer");

  dcrt_group_by_expert_desc g{};
  g.struct_size = sizeof(g);
  g.ids_dtype = g.order_dtype = g.ends_dtype = DCRT_I32;
  g.assignments = 16;
  g.experts = 0;
  EXPECT_DEATH(checkGroupByExpert(&g, b, b, b, "test"),
               "assignments and experts must be positive");
  g.experts = 4;
  g.order_dtype = DCRT_BF16;
  EXPECT_DEATH(checkGroupByExpert(&g, b, b, b, "test"), "must be i32 or i64");

  dcrt_row_map_desc m = makeRowMap(DCRT_BF16, DCRT_I64, 4, 4, 8, 0, 0);
  m.result_ld = 7;
  EXPECT_DEATH(checkRowMap(&m, b, b, b, "test"),
               "source_ld and result_ld must be at least width");
  m = makeRowMap(DCRT_I32, DCRT_I64, 4, 4, 8, 0, 0);
  EXPECT_DEATH(checkRowMap(&m, b, b, b, "test"),
               "dtype must be f32, bf16 or f16");

  GroupedShape s;
  s.rows = 8;
  s.experts = 2;
  s.k = 4;
  s.p = 4;
  auto forward = [&](dcrt_grouped_matmul_desc d) {
    checkGroupedMatmul(&d, GroupedProduct::Forward, b, b, b, b, "test");
  };
  auto weightGrad = [&](dcrt_grouped_matmul_desc d) {
    checkGroupedMatmul(&d, GroupedProduct::WeightGrad, b, b, b, b, "test");
  };
  dcrt_grouped_matmul_desc d = makeGroupedForward(s);
  d.rhs_ld = 3;
  EXPECT_DEATH(forward(d), "rhs_ld must be at least p");
  d = makeGroupedForward(s);
  d.transpose_rhs = 2;
  EXPECT_DEATH(forward(d), "transpose_rhs must be 0 or 1");
  d = makeGroupedWeightGrad(s);
  d.transpose_rhs = 1;
  EXPECT_DEATH(weightGrad(d), "transpose_rhs must be 0 for the weight");
  d = makeGroupedWeightGrad(s);
  d.out_expert_stride = 4;
  EXPECT_DEATH(weightGrad(d), "the experts' outputs would overlap");
  d = makeGroupedForward(s);
  d.ends_dtype = DCRT_F16;
  EXPECT_DEATH(forward(d), "ends_dtype must be i32 or i64");
  // The fields a call ignores come back zeroed (plans key on them).
  d = makeGroupedForward(s);
  d.out_expert_stride = 99;
  EXPECT_EQ(checkGroupedMatmul(&d, GroupedProduct::Forward, b, b, b, b, "test")
                .out_expert_stride,
            0);
}

} // namespace
