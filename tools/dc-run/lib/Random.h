//===- Random.h - counter-based, order-free random values -------*- C++ -*-===//
//
// A value depends only on its coordinates (seed, tensor, element), never on
// the order values are drawn in or on how a tensor is split over ranks: a
// 1-rank and a 3-rank run see the same initial parameters and the same data.
//
//===----------------------------------------------------------------------===//
#ifndef DC_RUN_RANDOM_H
#define DC_RUN_RANDOM_H

#include <cstdint>

namespace dcrun {

/// A well-mixed 64-bit key of three coordinates.
uint64_t hashKey(uint64_t a, uint64_t b, uint64_t c);
/// Uniform in (0, 1] from a key.
double uniformFromKey(uint64_t key);
/// Standard normal at the coordinates (Box-Muller over two derived keys).
double standardNormal(uint64_t a, uint64_t b, uint64_t c);

} // namespace dcrun

#endif // DC_RUN_RANDOM_H
