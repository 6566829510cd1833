//===- DType.cpp - element types and software bf16/f16 --------------------===//
#include "dcrt/dtype.hpp"
#include "dcrt/error.hpp"

#include <cstring>

using namespace dcrt;

bool dcrt::isValidDType(int32_t dtype) {
  return dtype >= DCRT_F32 && dtype <= DCRT_F64;
}

bool dcrt::isFloatDType(int32_t dtype) {
  return dtype == DCRT_F32 || dtype == DCRT_BF16 || dtype == DCRT_F16;
}

int64_t dcrt::dtypeSize(int32_t dtype) {
  switch (dtype) {
  case DCRT_F32:
  case DCRT_I32:
    return 4;
  case DCRT_BF16:
  case DCRT_F16:
    return 2;
  case DCRT_I64:
  case DCRT_F64:
    return 8;
  }
  fatal("unknown dtype code %d (dcrt.h knows 0..5)", dtype);
}

const char *dcrt::dtypeName(int32_t dtype) {
  switch (dtype) {
  case DCRT_F32:
    return "f32";
  case DCRT_BF16:
    return "bf16";
  case DCRT_F16:
    return "f16";
  case DCRT_I32:
    return "i32";
  case DCRT_I64:
    return "i64";
  case DCRT_F64:
    return "f64";
  }
  return "<unknown dtype>";
}

std::optional<dcrt_dtype> dcrt::parseDType(std::string_view name) {
  for (dcrt_dtype dtype :
       {DCRT_F32, DCRT_BF16, DCRT_F16, DCRT_I32, DCRT_I64, DCRT_F64})
    if (name == dtypeName(dtype))
      return dtype;
  return std::nullopt;
}

static uint32_t floatBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

static float bitsToFloat(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

uint16_t dcrt::floatToBF16(float value) {
  uint32_t bits = floatBits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) // NaN: keep it quiet, not Inf
    return static_cast<uint16_t>((bits >> 16) | 0x40);
  uint32_t roundingBias = 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + roundingBias) >> 16);
}

float dcrt::bf16ToFloat(uint16_t bits) {
  return bitsToFloat(static_cast<uint32_t>(bits) << 16);
}

uint16_t dcrt::floatToHalf(float value) {
  uint32_t bits = floatBits(value);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) // NaN
    return sign | 0x7e00;
  if (magnitude >= 0x477ff000u) // rounds to >= 65520: Inf
    return sign | 0x7c00;
  if (magnitude < 0x38800000u) { // below 2^-14: subnormal half or zero
    // Scale so the half's subnormal unit (2^-24) becomes an integer step.
    float scaled = bitsToFloat(magnitude) * 16777216.0f; // 2^24
    // Round to nearest even, done by the FPU on the addition.
    float rounded = (scaled + 8388608.0f) - 8388608.0f; // 2^23
    return sign | static_cast<uint16_t>(rounded);
  }
  uint32_t exponent = (magnitude >> 23) - 127 + 15;
  uint32_t mantissa = magnitude & 0x7fffffu;
  uint32_t half = (exponent << 10) | (mantissa >> 13);
  uint32_t rest = mantissa & 0x1fffu;
  // Ties to even; a carry into the exponent is the correct rounding.
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1)))
    ++half;
  return sign | static_cast<uint16_t>(half);
}

float dcrt::halfToFloat(uint16_t bits) {
  uint32_t sign = static_cast<uint32_t>(bits & 0x8000) << 16;
  uint32_t exponent = (bits >> 10) & 0x1f;
  uint32_t mantissa = bits & 0x3ff;
  if (exponent == 0) { // zero or subnormal: mantissa * 2^-24
    float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31)
    return bitsToFloat(sign | 0x7f800000u | (mantissa << 13));
  return bitsToFloat(sign | ((exponent - 15 + 127) << 23) | (mantissa << 13));
}

static float loadFloat(const void *data, int32_t dtype, int64_t index) {
  switch (dtype) {
  case DCRT_BF16:
    return bf16ToFloat(static_cast<const uint16_t *>(data)[index]);
  case DCRT_F16:
    return halfToFloat(static_cast<const uint16_t *>(data)[index]);
  default:
    return static_cast<const float *>(data)[index];
  }
}

static void storeFloat(void *data, int32_t dtype, int64_t index, float value) {
  switch (dtype) {
  case DCRT_BF16:
    static_cast<uint16_t *>(data)[index] = floatToBF16(value);
    return;
  case DCRT_F16:
    static_cast<uint16_t *>(data)[index] = floatToHalf(value);
    return;
  default:
    static_cast<float *>(data)[index] = value;
  }
}

static int64_t loadInt(const void *data, int32_t dtype, int64_t index) {
  if (dtype == DCRT_I32)
    return static_cast<const int32_t *>(data)[index];
  return static_cast<const int64_t *>(data)[index];
}

void dcrt::convert(const void *src, int32_t srcType, void *dst, int32_t dstType,
                   int64_t numel) {
  // An empty shard (a rank past a small tensor's elements) may have null
  // pointers, which memmove must not get even for 0 bytes (UBSan found it).
  if (numel <= 0)
    return;
  if (srcType == dstType) {
    std::memmove(dst, src, numel * dtypeSize(srcType));
    return;
  }
  if (isFloatDType(srcType) && isFloatDType(dstType)) {
    for (int64_t i = 0; i < numel; ++i)
      storeFloat(dst, dstType, i, loadFloat(src, srcType, i));
    return;
  }
  auto isInteger = [](int32_t type) {
    return type == DCRT_I32 || type == DCRT_I64;
  };
  if (isInteger(srcType) && isInteger(dstType)) {
    for (int64_t i = 0; i < numel; ++i) {
      int64_t value = loadInt(src, srcType, i);
      if (dstType == DCRT_I32)
        static_cast<int32_t *>(dst)[i] = static_cast<int32_t>(value);
      else
        static_cast<int64_t *>(dst)[i] = value;
    }
    return;
  }
  fatal("no conversion from %s to %s", dtypeName(srcType), dtypeName(dstType));
}

double dcrt::loadAsDouble(const void *data, int32_t dtype, int64_t index) {
  if (isFloatDType(dtype))
    return loadFloat(data, dtype, index);
  if (dtype == DCRT_I32 || dtype == DCRT_I64)
    return static_cast<double>(loadInt(data, dtype, index));
  if (dtype == DCRT_F64)
    return static_cast<const double *>(data)[index];
  fatal("unknown dtype code %d", dtype);
}
