//===- Random.cpp - counter-based random values ---------------------------===//
#include "Random.h"

#include <cmath>

/// SplitMix64's finalizer: every input bit affects every output bit.
static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t dcrun::hashKey(uint64_t a, uint64_t b, uint64_t c) {
  return mix(mix(mix(a) ^ b) ^ c);
}

double dcrun::uniformFromKey(uint64_t key) {
  // 53 random bits; +1 keeps it off zero, so log() below is finite.
  return static_cast<double>((key >> 11) + 1) * 0x1.0p-53;
}

double dcrun::standardNormal(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t key = hashKey(a, b, c);
  double u1 = uniformFromKey(key);
  double u2 = uniformFromKey(mix(key));
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}
