//===- DTypeTest.cpp - software bf16/f16 and conversions ------------------===//
#include "dcrt/dtype.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace dcrt;

TEST(DType, SizesNamesAndParsing) {
  EXPECT_EQ(dtypeSize(DCRT_F32), 4);
  EXPECT_EQ(dtypeSize(DCRT_BF16), 2);
  EXPECT_EQ(dtypeSize(DCRT_F16), 2);
  EXPECT_EQ(dtypeSize(DCRT_I32), 4);
  EXPECT_EQ(dtypeSize(DCRT_I64), 8);
  EXPECT_EQ(parseDType("bf16"), DCRT_BF16);
  EXPECT_EQ(parseDType("i64"), DCRT_I64);
  // f64 is the optimizer's scalars' dtype, not a tensor element type.
  EXPECT_EQ(parseDType("f64"), DCRT_F64);
  EXPECT_EQ(dtypeSize(DCRT_F64), 8);
  EXPECT_FALSE(isFloatDType(DCRT_F64));
  EXPECT_FALSE(parseDType("f8").has_value());
  EXPECT_STREQ(dtypeName(DCRT_F16), "f16");
  EXPECT_TRUE(isFloatDType(DCRT_BF16));
  EXPECT_FALSE(isFloatDType(DCRT_I32));
}

TEST(DType, BF16RoundsToNearestEven) {
  EXPECT_EQ(floatToBF16(1.0f), 0x3f80);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even 1.0.
  EXPECT_EQ(floatToBF16(1.00390625f), 0x3f80);
  // 1 + 3 * 2^-8 is halfway between odd 1 + 2^-7 and even 1 + 2^-6.
  EXPECT_EQ(floatToBF16(1.01171875f), 0x3f82);
  // Just above halfway rounds up.
  EXPECT_EQ(floatToBF16(std::nextafter(1.00390625f, 2.0f)), 0x3f81);
  EXPECT_EQ(floatToBF16(-2.0f), 0xc000);
  EXPECT_EQ(bf16ToFloat(0x3f82), 1.015625f);
  EXPECT_EQ(floatToBF16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBF16(std::nanf("")))));
  // The largest float rounds up to infinity, as hardware does.
  EXPECT_EQ(floatToBF16(std::numeric_limits<float>::max()), 0x7f80);
}

TEST(DType, HalfNormalsSubnormalsAndOverflow) {
  EXPECT_EQ(floatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(floatToHalf(-2.5f), 0xc100);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff);               // largest half
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00);               // rounds to infinity
  EXPECT_EQ(floatToHalf(5.9604644775390625e-8f), 0x0001); // 2^-24
  EXPECT_EQ(floatToHalf(2.9802322387695312e-8f), 0x0000); // 2^-25 ties to 0
  EXPECT_EQ(floatToHalf(6.103515625e-05f), 0x0400);       // smallest normal
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even.
  EXPECT_EQ(floatToHalf(1.00048828125f), 0x3c00);
  EXPECT_EQ(floatToHalf(1.00146484375f), 0x3c02);
  EXPECT_EQ(halfToFloat(0x0001), 5.9604644775390625e-8f);
  EXPECT_EQ(halfToFloat(0x8400), -6.103515625e-05f);
  EXPECT_EQ(halfToFloat(0x7bff), 65504.0f);
  EXPECT_TRUE(std::isinf(halfToFloat(0xfc00)));
  EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(std::nanf("")))));
  // Every half survives a round trip through float.
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    if ((bits & 0x7c00) == 0x7c00 && (bits & 0x3ff))
      continue; // NaN payloads
    ASSERT_EQ(floatToHalf(halfToFloat(bits)), bits) << bits;
  }
}

TEST(DType, ConvertBetweenTypes) {
  float source[3] = {1.5f, -3.0f, 0.25f};
  uint16_t half[3];
  float back[3];
  convert(source, DCRT_F32, half, DCRT_F16, 3);
  convert(half, DCRT_F16, back, DCRT_F32, 3);
  EXPECT_EQ(back[0], 1.5f);
  EXPECT_EQ(back[1], -3.0f);
  EXPECT_EQ(back[2], 0.25f);
  uint16_t brain[3];
  convert(half, DCRT_F16, brain, DCRT_BF16, 3);
  EXPECT_EQ(brain[1], 0xc040);
  int32_t narrow[2] = {-7, 1 << 30};
  int64_t wide[2];
  convert(narrow, DCRT_I32, wide, DCRT_I64, 2);
  EXPECT_EQ(wide[0], -7);
  EXPECT_EQ(wide[1], 1 << 30);
  EXPECT_EQ(loadAsDouble(brain, DCRT_BF16, 1), -3.0);
  EXPECT_EXIT(convert(source, DCRT_F32, narrow, DCRT_I32, 1),
              testing::ExitedWithCode(1), "no conversion from f32 to i32");
}
