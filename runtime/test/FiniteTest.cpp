//===- FiniteTest.cpp - dcrt_check_finite on the host backend -------------===//
//
// The finite-value checks through the C ABI: the step's first failing check
// (in call order) is reported with its kind and count, once, then the next
// step starts clean; DCRT_FINITE_ALLOW_INF lets infinities pass but not
// NaN; bf16 and f16 are read by their bit patterns; without
// DCRT_INIT_CHECK_FINITE nothing is recorded. Each test joins and leaves
// the job itself (different init flags): this program starts MPI, so that
// libdcrt leaves it up between them.
//
//===----------------------------------------------------------------------===//
#include "dcrt/core.hpp"
#include "dcrt/dcrt.h"
#include "dcrt/dtype.hpp"

#include <gtest/gtest.h>
#include <mpi.h>

#include <cfloat>
#include <limits>
#include <string>
#include <vector>

namespace {
/// The runtime on the host backend for one test, with `flags`.
class Runtime {
public:
  explicit Runtime(int32_t flags) {
    dcrt_init_options options{};
    options.struct_size = sizeof(options);
    options.backend = DCRT_BACKEND_HOST;
    options.flags = flags;
    dcrt_init(&options);
  }
  ~Runtime() { dcrt_finalize(); }
  Runtime(const Runtime &) = delete;
  Runtime &operator=(const Runtime &) = delete;
};

/// What dcrt_first_nonfinite returned, as one comparable string:
/// "site: what count", or "none" (then `what` must be null and the count
/// 0).
std::string firstNonFinite() {
  const char *what = "unset";
  int64_t count = -1;
  const char *site = dcrt_first_nonfinite(&what, &count);
  if (!site)
    return what == nullptr && count == 0 ? "none" : "none, but what/count set";
  return std::string(site) + ": " + what + " " + std::to_string(count);
}

constexpr float quietNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float infinity = std::numeric_limits<float>::infinity();

std::vector<uint16_t> bf16(const std::vector<float> &values) {
  std::vector<uint16_t> bits;
  for (float value : values)
    bits.push_back(dcrt::floatToBF16(value));
  return bits;
}

std::vector<uint16_t> f16(const std::vector<float> &values) {
  std::vector<uint16_t> bits;
  for (float value : values)
    bits.push_back(dcrt::floatToHalf(value));
  return bits;
}
} // namespace

TEST(FiniteChecks, TheFirstFailingCheckOfAStepIsReported) {
  Runtime runtime(DCRT_INIT_CHECK_FINITE);
  std::vector<float> a = {1.0f, -2.0f, 0.0f, 3.5f};
  std::vector<uint16_t> b = bf16({1.0f, quietNaN, 2.0f, -quietNaN, infinity});
  std::vector<float> c = {infinity, 1.0f};
  dcrt_check_finite(a.data(), 4, DCRT_F32, 0, "a");
  dcrt_check_finite(b.data(), 5, DCRT_BF16, 0, "b");
  dcrt_check_finite(c.data(), 2, DCRT_F32, 0, "c");
  // b holds NaN and an infinity: its NaNs are what is counted.
  EXPECT_EQ(firstNonFinite(), "b: NaN 2");
  dcrt_end_step();
  // Reported once: the next step starts clean.
  EXPECT_EQ(firstNonFinite(), "none");
  dcrt_check_finite(a.data(), 4, DCRT_F32, 0, "a");
  dcrt_check_finite(a.data(), 4, DCRT_F32, 0, "a again");
  EXPECT_EQ(firstNonFinite(), "none");
  dcrt_end_step();
  // An output with infinities and no NaN.
  dcrt_check_finite(a.data(), 4, DCRT_F32, 0, "a");
  c = {infinity, -infinity, 1.0f, infinity};
  dcrt_check_finite(c.data(), 4, DCRT_F32, 0, "c");
  dcrt_check_finite(b.data(), 5, DCRT_BF16, 0, "b");
  EXPECT_EQ(firstNonFinite(), "c: infinity 3");
  dcrt_end_step();
}

TEST(FiniteChecks, AllowInfLetsInfinitiesPassButNotNaN) {
  Runtime runtime(DCRT_INIT_CHECK_FINITE);
  std::vector<float> mask = {0.0f, -infinity, -infinity, 0.0f};
  dcrt_check_finite(mask.data(), 4, DCRT_F32, DCRT_FINITE_ALLOW_INF, "mask");
  EXPECT_EQ(firstNonFinite(), "none");
  std::vector<float> scores = {0.5f, -infinity, quietNaN, 1.0f};
  dcrt_check_finite(scores.data(), 4, DCRT_F32, DCRT_FINITE_ALLOW_INF,
                    "scores");
  dcrt_check_finite(mask.data(), 4, DCRT_F32, 0, "mask, checked");
  EXPECT_EQ(firstNonFinite(), "scores: NaN 1");
  // The same mask without the flag fails.
  dcrt_check_finite(mask.data(), 4, DCRT_F32, 0, "mask, checked");
  EXPECT_EQ(firstNonFinite(), "mask, checked: infinity 2");
}

TEST(FiniteChecks, HalfTypesAreReadByTheirBits) {
  Runtime runtime(DCRT_INIT_CHECK_FINITE);
  // The largest finite values, subnormals and zeros of each type pass.
  std::vector<float> f32 = {FLT_MAX, -FLT_MAX, FLT_MIN / 4, -0.0f};
  std::vector<uint16_t> bf16Edges = {0x7f7f, 0xff7f, 0x0001, 0x8000};
  std::vector<uint16_t> f16Edges = {0x7bff, 0xfbff, 0x0001, 0x8000};
  dcrt_check_finite(f32.data(), 4, DCRT_F32, 0, "f32");
  dcrt_check_finite(bf16Edges.data(), 4, DCRT_BF16, 0, "bf16");
  dcrt_check_finite(f16Edges.data(), 4, DCRT_F16, 0, "f16");
  EXPECT_EQ(firstNonFinite(), "none");
  // f16's exponent is 5 bits: 0x7c00 is an infinity, 0x7e00 and a
  // signalling 0x7c01 NaN; 70000 overflows f16 to an infinity.
  std::vector<uint16_t> halves = {0x7c00, 0x7e00, 0x7c01, 0x3c00};
  dcrt_check_finite(halves.data(), 4, DCRT_F16, 0, "f16 NaN");
  EXPECT_EQ(firstNonFinite(), "f16 NaN: NaN 2");
  halves = f16({70000.0f, -70000.0f, 1.0f});
  dcrt_check_finite(halves.data(), 3, DCRT_F16, 0, "f16 overflow");
  EXPECT_EQ(firstNonFinite(), "f16 overflow: infinity 2");
  // bf16 0x7f81 (a signalling NaN) and 0xff80 (-infinity).
  std::vector<uint16_t> bf16Bits = {0x7f81, 0xff80, 0x3f80};
  dcrt_check_finite(bf16Bits.data(), 3, DCRT_BF16, 0, "bf16 bits");
  EXPECT_EQ(firstNonFinite(), "bf16 bits: NaN 1");
  // Nothing to read: no data needed.
  dcrt_check_finite(nullptr, 0, DCRT_F32, 0, "empty");
  EXPECT_EQ(firstNonFinite(), "none");
}

TEST(FiniteChecks, NothingIsRecordedWithoutTheInitFlag) {
  Runtime runtime(DCRT_INIT_DETERMINISTIC);
  std::vector<float> bad = {quietNaN, infinity};
  dcrt_check_finite(bad.data(), 2, DCRT_F32, 0, "bad");
  EXPECT_EQ(firstNonFinite(), "none");
  // Not even checked: the arguments of a disabled check are not read.
  dcrt_check_finite(nullptr, 5, DCRT_I32, 99, nullptr);
  EXPECT_EQ(firstNonFinite(), "none");
  // Null `what` and `count` are allowed.
  EXPECT_EQ(dcrt_first_nonfinite(nullptr, nullptr), nullptr);
}

TEST(FiniteChecks, WhatAndCountMayBeNull) {
  Runtime runtime(DCRT_INIT_CHECK_FINITE);
  std::vector<float> bad = {quietNaN};
  dcrt_check_finite(bad.data(), 1, DCRT_F32, 0, "bad");
  const char *site = dcrt_first_nonfinite(nullptr, nullptr);
  ASSERT_NE(site, nullptr);
  EXPECT_STREQ(site, "bad");
}

int main(int argc, char **argv) {
  testing::InitGoogleTest(&argc, argv);
  // Up for the whole program: each test's dcrt_finalize leaves MPI to us.
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  int failed = RUN_ALL_TESTS();
  MPI_Finalize();
  return failed;
}
