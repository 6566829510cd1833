//===- Finite.h - NaN and infinity by their bit patterns --------*- C++ -*-===//
//
// What dcrt_check_finite counts, shared by the host backend and the cuda
// backend's kernel (compiled by nvcc, hence the annotations): a float is
// non-finite when its exponent bits are all ones, a NaN when its mantissa
// is then nonzero. Read from the bits, bf16 and f16 need no conversion and
// no float arithmetic is involved (fast-math cannot fold the test away).
//
//===----------------------------------------------------------------------===//
#ifndef DCRT_CORE_FINITE_H
#define DCRT_CORE_FINITE_H

#include "dcrt/dcrt.h"

#include <cstdint>

#ifdef __CUDACC__
#define DCRT_HOST_DEVICE __host__ __device__
#else
#define DCRT_HOST_DEVICE
#endif

namespace dcrt::detail {

/// The NaN and infinity counts of some elements.
struct NonFiniteCounts {
  uint64_t nans = 0;
  uint64_t infinities = 0;
};

/// The exponent and mantissa masks of a float type's bits (f32 in 32 bits,
/// bf16 and f16 in 16).
struct FloatBits {
  uint32_t exponent, mantissa;
};

DCRT_HOST_DEVICE inline FloatBits floatBitsOf(int32_t dtype) {
  switch (dtype) {
  case DCRT_BF16:
    return {0x7f80u, 0x007fu};
  case DCRT_F16:
    return {0x7c00u, 0x03ffu};
  default:
    return {0x7f800000u, 0x007fffffu};
  }
}

/// Adds `bits` (one element) to `counts`.
DCRT_HOST_DEVICE inline void countBits(uint32_t bits, FloatBits masks,
                                       NonFiniteCounts &counts) {
  if ((bits & masks.exponent) != masks.exponent)
    return;
  if (bits & masks.mantissa)
    ++counts.nans;
  else
    ++counts.infinities;
}

} // namespace dcrt::detail

#endif // DCRT_CORE_FINITE_H
