//===- MatmulTest.cpp - the host backend's dcrt_matmul and its checks -----===//
//
// The host loop (what dcrt_matmul runs on the host backend) against a
// double-precision reference on random data, for every descriptor of the
// shared set (MatmulReference.h); and every malformed descriptor ending the
// program with a message naming what is wrong. MpiTest runs the same set
// through the C ABI after dcrt_init.
//
//===----------------------------------------------------------------------===//
#include "Matmul.h"
#include "MatmulReference.h"

#include <gtest/gtest.h>

using namespace dcrt;
using namespace dcrt::detail;
using namespace dcrt::test;

namespace {
/// fp32 accumulation over k <= 512 products of values in [-1, 1].
constexpr double hostTolerance = 1e-5;

void runCase(const MatmulCase &c, unsigned seed) {
  MatmulData data = randomOperands(c.desc, seed);
  std::vector<unsigned char> out = data.c;
  checkMatmul(&c.desc, data.a.data(), data.b.data(), out.data(), "test");
  hostMatmul(c.desc, data.a.data(), data.b.data(), out.data());
  double worst = 0;
  EXPECT_EQ(checkMatmulResult(c.desc, data, out.data(), hostTolerance, &worst),
            "")
      << c.name << ": " << describeMatmul(c.desc);
}
} // namespace

TEST(HostMatmul, EveryDescriptorMatchesADoubleReference) {
  unsigned seed = 1;
  for (const MatmulCase &c : matmulCases())
    runCase(c, seed++);
}

TEST(HostMatmul, AccumulateAddsToCAndOverwriteIgnoresIt) {
  MatmulShape s;
  s.m = 2;
  s.n = 2;
  s.k = 2;
  dcrt_matmul_desc d = makeMatmul(s);
  float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, c[4] = {1, 1, 1, 1};
  hostMatmul(d, a, b, c);
  EXPECT_EQ(c[0], 19); // [[1 2] [3 4]] [[5 6] [7 8]] = [[19 22] [43 50]]
  EXPECT_EQ(c[3], 50);
  d.accumulate = 1;
  hostMatmul(d, a, b, c);
  EXPECT_EQ(c[0], 38);
  EXPECT_EQ(c[1], 44);
  EXPECT_EQ(c[2], 86);
  EXPECT_EQ(c[3], 100);
  // trans_a and trans_b read A^T and B^T from the same storage.
  d.accumulate = 0;
  d.trans_a = d.trans_b = 1;
  hostMatmul(d, a, b, c); // [[1 3] [2 4]] [[5 7] [6 8]]
  EXPECT_EQ(c[0], 23);
  EXPECT_EQ(c[1], 31);
  EXPECT_EQ(c[2], 34);
  EXPECT_EQ(c[3], 46);
}

TEST(HostMatmul, BF16OutputIsRoundedOnce) {
  MatmulShape s;
  s.m = s.n = 1;
  s.k = 3;
  s.abType = DCRT_BF16;
  s.cType = DCRT_BF16;
  dcrt_matmul_desc d = makeMatmul(s);
  // 1 + 2^-8 + 2^-8: each product is a bf16, the fp32 sum 1 + 2^-7 is one.
  uint16_t a[3] = {floatToBF16(1.0f), floatToBF16(0.00390625f),
                   floatToBF16(0.00390625f)};
  uint16_t b[3] = {floatToBF16(1.0f), floatToBF16(1.0f), floatToBF16(1.0f)};
  uint16_t c = 0;
  hostMatmul(d, a, b, &c);
  EXPECT_EQ(bf16ToFloat(c), 1.0078125f);
}

namespace {
/// A valid 4 x 3 x 2 f32 descriptor to break one field of.
dcrt_matmul_desc valid() {
  MatmulShape s;
  s.m = 4;
  s.n = 3;
  s.k = 2;
  s.batch = 2;
  return makeMatmul(s);
}
float buffer[64];
void check(const dcrt_matmul_desc &d) {
  checkMatmul(&d, buffer, buffer, buffer, "dcrt_matmul");
}
} // namespace

TEST(HostMatmulDeathTest, BadDescriptorsAreFatalAndNamed) {
  check(valid()); // passes
  dcrt_matmul_desc d = valid();
  d.m = 0;
  EXPECT_EXIT(check(d), testing::ExitedWithCode(1),
              "dcrt_matmul: bad descriptor: batch, m, n and k must be "
              "positive \\(batch 2, m 0 n 3 k 2");
  d = valid();
  d.batch = -1;
  EXPECT_EXIT(check(d), testing::ExitedWithCode(1), "must be positive");
  d = valid();
  d.lda = 1;
  EXPECT_EXIT(check(d), testing::ExitedWithCode(1),
              "lda must be at least k \\(A is stored m x k\\)");
  d = valid();
  d.trans_a = 1; // A stored k x m: lda 2 < m 4
  EXPECT_EXIT(check(d), testing::ExitedWithCode(1),
              "lda must be at least m \\(A is stored k x m\\)");
  d = valid();
  d.ldb = 2;
  EXPECT_EXIT(check(d), testing::ExitedWithCode(1), "ldb must be at least n");
  d = valid();
  d.trans_b = 1;
  d.ldb = 1;
  EXPECT_EXIT(check(d), testing::ExitedWithCode(1), "ldb must be at least k");
  d = valid();
  d.ldc = 2;
  EXPECT_EXIT(check(d), testing::ExitedWithCode(1), "ldc must be at least n");
  d = valid();
  d.trans_a = 2;
  EXPECT_EXIT(check(d), testing::ExitedWithCode(1), "trans_a must be 0 or 1");
  d = valid();
  d.trans_b = -1;
  EXPECT_EXIT(check(d), testing::ExitedWithCode(1), "trans_b must be 0 or 1");
  d = valid();
  d.accumulate = 2;
  EXPECT_EXIT(check(d), testing::ExitedWithCode(1),
              "accumulate must be 0 or 1");
  d = valid();
  d.a_dtype = d.b_dtype = DCRT_I32;
  EXPECT_EXIT(check(d), testing::ExitedWithCode(1),
              "dtypes must be f32, bf16 or f16 \\(.*A i32");
  d = valid();
  d.c_dtype = 9;
  EXPECT_EXIT(check(d), testing::ExitedWithCode(1),
              "dtypes must be f32, bf16 or f16");
  d = valid();
  d.b_dtype = DCRT_BF16;
  EXPECT_EXIT(check(d), testing::ExitedWithCode(1),
              "A and B must have the same dtype");
  d = valid();
  d.c_dtype = DCRT_BF16; // f32 inputs, bf16 output: not a cuBLASLt kind
  EXPECT_EXIT(check(d), testing::ExitedWithCode(1),
              "C must have A's dtype or f32");
  d = valid();
  d.batch_stride_b = -3;
  EXPECT_EXIT(check(d), testing::ExitedWithCode(1),
              "batch strides must not be negative");
  d = valid();
  d.batch_stride_c = 0; // both batches would write one C
  EXPECT_EXIT(check(d), testing::ExitedWithCode(1),
              "batch_stride_c must be at least one C matrix");
  EXPECT_EXIT(checkMatmul(nullptr, buffer, buffer, buffer, "dcrt_matmul"),
              testing::ExitedWithCode(1), "dcrt_matmul: null descriptor");
  d = valid();
  EXPECT_EXIT(checkMatmul(&d, buffer, nullptr, buffer, "dcrt_matmul"),
              testing::ExitedWithCode(1), "dcrt_matmul: null buffer");
}
