//===- dtype.hpp - element types and software bf16/f16 ----------*- C++ -*-===//
#ifndef DCRT_DTYPE_HPP
#define DCRT_DTYPE_HPP

#include "dcrt/dcrt.h"

#include <cstdint>
#include <optional>
#include <string_view>

namespace dcrt {

bool isValidDType(int32_t dtype);
bool isFloatDType(int32_t dtype);
/// Bytes per element; fatal on an unknown code.
int64_t dtypeSize(int32_t dtype);
/// "f32", "bf16", "f16", "i32", "i64" (the manifest's spelling).
const char *dtypeName(int32_t dtype);
std::optional<dcrt_dtype> parseDType(std::string_view name);

/// Round to nearest even, as hardware casts do; NaN stays NaN.
uint16_t floatToBF16(float value);
float bf16ToFloat(uint16_t bits);
uint16_t floatToHalf(float value);
float halfToFloat(uint16_t bits);

/// Converts `numel` elements between float types or between integer types
/// (same type: a copy); fatal for float <-> integer.
void convert(const void *src, int32_t srcType, void *dst, int32_t dstType,
             int64_t numel);

/// Element `index` of `data` read as a double (any type).
double loadAsDouble(const void *data, int32_t dtype, int64_t index);

} // namespace dcrt

#endif // DCRT_DTYPE_HPP
