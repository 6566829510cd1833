//===- MoeReference.h - routing cases and references for the MoE calls ----===//
//
// Shared by the host backend's unit tests (MoeTest.cpp) and moe-kernels-check
// (the cuda backend on a GPU): routings (random, every assignment to one
// expert, experts without rows, dropped ids), random operands exactly
// representable in their dtype, descriptors with padded row strides, and
// references of every call written from the op descriptions
// (DCExpertOps.td), independently of the runtime's code: top-k and the
// grouping by std::stable_sort, the products in double.
//
//===----------------------------------------------------------------------===//
#ifndef DCRT_TEST_MOEREFERENCE_H
#define DCRT_TEST_MOEREFERENCE_H

#include "dcrt/dcrt.h"
#include "dcrt/dtype.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace dcrt::test {

using Bytes = std::vector<unsigned char>;

/// `count` elements of float `dtype`, uniform in [-1, 1) then rounded to
/// the dtype (so that the value each backend reads is exact).
inline Bytes randomFloats(int32_t dtype, int64_t count, std::mt19937 &rng,
                          float low = -1.0f, float high = 1.0f) {
  std::uniform_real_distribution<float> dist(low, high);
  std::vector<float> values(static_cast<size_t>(count));
  for (float &v : values)
    v = dist(rng);
  Bytes out(static_cast<size_t>(count * dtypeSize(dtype)));
  convert(values.data(), DCRT_F32, out.data(), dtype, count);
  return out;
}

/// Element i of float bytes of `dtype`, as a double.
inline double floatAt(const Bytes &data, int32_t dtype, int64_t i) {
  float value;
  convert(data.data() + i * dtypeSize(dtype), dtype, &value, DCRT_F32, 1);
  return value;
}

/// Every element of float bytes of `dtype`, as doubles.
inline std::vector<double> widenAll(const Bytes &data, int32_t dtype) {
  int64_t count = static_cast<int64_t>(data.size()) / dtypeSize(dtype);
  std::vector<float> narrow(static_cast<size_t>(count));
  convert(data.data(), dtype, narrow.data(), DCRT_F32, count);
  return std::vector<double>(narrow.begin(), narrow.end());
}

inline Bytes indexBytes(const std::vector<int64_t> &values, int32_t dtype) {
  Bytes out(values.size() * static_cast<size_t>(dtypeSize(dtype)));
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DCRT_I64) {
      std::memcpy(out.data() + i * 8, &values[i], 8);
    } else {
      auto narrow = static_cast<int32_t>(values[i]);
      std::memcpy(out.data() + i * 4, &narrow, 4);
    }
  }
  return out;
}

inline std::vector<int64_t> indexValues(const Bytes &data, int32_t dtype) {
  size_t size = static_cast<size_t>(dtypeSize(dtype));
  std::vector<int64_t> out(data.size() / size);
  for (size_t i = 0; i < out.size(); ++i) {
    if (dtype == DCRT_I64) {
      std::memcpy(&out[i], data.data() + i * 8, 8);
    } else {
      int32_t narrow;
      std::memcpy(&narrow, data.data() + i * 4, 4);
      out[i] = narrow;
    }
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Routings
//===----------------------------------------------------------------------===//

enum class Routing {
  Random,    // uniform over the experts
  Balanced,  // expert i % E of assignment i, shuffled
  OneExpert, // every assignment to expert E / 2
  Empty,     // random, but experts 0 and E - 1 get none
  Dropped,   // random, with ids -1 and E (and larger) sprinkled in
  Skewed,    // half to expert 1, the rest random
};

inline const char *routingName(Routing routing) {
  switch (routing) {
  case Routing::Random:
    return "random";
  case Routing::Balanced:
    return "balanced";
  case Routing::OneExpert:
    return "all to one expert";
  case Routing::Empty:
    return "first and last expert empty";
  case Routing::Dropped:
    return "dropped ids";
  case Routing::Skewed:
    return "half to one expert";
  }
  return "?";
}

/// `n` expert ids for `experts` experts.
inline std::vector<int64_t> routingIds(Routing routing, int64_t n,
                                       int64_t experts, std::mt19937 &rng) {
  std::vector<int64_t> ids(static_cast<size_t>(n));
  std::uniform_int_distribution<int64_t> any(0, experts - 1);
  for (int64_t i = 0; i < n; ++i) {
    int64_t &id = ids[static_cast<size_t>(i)];
    switch (routing) {
    case Routing::Random:
      id = any(rng);
      break;
    case Routing::Balanced:
      id = i % experts;
      break;
    case Routing::OneExpert:
      id = experts / 2;
      break;
    case Routing::Empty:
      id = experts <= 2
               ? experts - 1
               : std::uniform_int_distribution<int64_t>(1, experts - 2)(rng);
      break;
    case Routing::Dropped: {
      int64_t pick = std::uniform_int_distribution<int64_t>(0, 9)(rng);
      id = pick == 0 ? -1 : pick == 1 ? experts + pick : any(rng);
      break;
    }
    case Routing::Skewed:
      id = i % 2 == 0 ? std::min<int64_t>(1, experts - 1) : any(rng);
      break;
    }
  }
  if (routing == Routing::Balanced)
    std::shuffle(ids.begin(), ids.end(), rng);
  return ids;
}

/// dc.group_by_expert by its description: order by a stable sort of the
/// positions on (valid ? id : experts), ends the inclusive counts.
struct Grouping {
  std::vector<int64_t> order, ends;
};
inline Grouping referenceGrouping(const std::vector<int64_t> &ids,
                                  int64_t experts) {
  Grouping g;
  g.order.resize(ids.size());
  std::iota(g.order.begin(), g.order.end(), 0);
  auto key = [&](int64_t i) {
    int64_t id = ids[static_cast<size_t>(i)];
    return id >= 0 && id < experts ? id : experts;
  };
  std::stable_sort(g.order.begin(), g.order.end(),
                   [&](int64_t a, int64_t b) { return key(a) < key(b); });
  g.ends.assign(static_cast<size_t>(experts), 0);
  for (int64_t e = 0; e < experts; ++e)
    for (int64_t id : ids)
      g.ends[static_cast<size_t>(e)] += id >= 0 && id <= e ? 1 : 0;
  return g;
}

//===----------------------------------------------------------------------===//
// Top-k
//===----------------------------------------------------------------------===//

/// dc.topk's order by its description (larger first, ties to the lower
/// position), with dcrt.h's rule for NaN (before every number).
inline bool referenceTopkBefore(double a, int64_t ai, double b, int64_t bi) {
  if (std::isnan(a) || std::isnan(b))
    return std::isnan(a) && (!std::isnan(b) || ai < bi);
  if (a != b)
    return a > b;
  return ai < bi;
}

/// The positions of the k largest of each row, in order.
inline std::vector<int64_t> referenceTopk(const Bytes &scores, int32_t dtype,
                                          int64_t rows, int64_t experts,
                                          int64_t ld, int64_t k) {
  std::vector<int64_t> out;
  std::vector<int64_t> positions(static_cast<size_t>(experts));
  std::vector<double> all = widenAll(scores, dtype);
  for (int64_t r = 0; r < rows; ++r) {
    std::iota(positions.begin(), positions.end(), 0);
    auto value = [&](int64_t e) {
      return all[static_cast<size_t>(r * ld + e)];
    };
    std::sort(positions.begin(), positions.end(), [&](int64_t a, int64_t b) {
      return referenceTopkBefore(value(a), a, value(b), b);
    });
    out.insert(out.end(), positions.begin(), positions.begin() + k);
  }
  return out;
}

inline dcrt_topk_desc makeTopk(int32_t dtype, int32_t indexType, int64_t rows,
                               int64_t experts, int64_t k, int64_t pad) {
  dcrt_topk_desc d{};
  d.struct_size = sizeof(d);
  d.dtype = dtype;
  d.index_dtype = indexType;
  d.rows = rows;
  d.experts = experts;
  d.k = k;
  d.scores_ld = experts + pad;
  d.values_ld = k + pad;
  d.indices_ld = k + 2 * pad;
  return d;
}

/// Scores for top-k: uniform, or (`ties`) from 4 values only, or
/// (`special`) uniform with NaNs, infinities and signed zeros sprinkled in.
enum class Scores { Uniform, Ties, Special };
inline Bytes topkScores(const dcrt_topk_desc &d, Scores kind,
                        std::mt19937 &rng) {
  auto dtype = static_cast<int32_t>(d.dtype);
  int64_t count = d.rows * d.scores_ld;
  std::vector<float> values(static_cast<size_t>(count));
  std::uniform_real_distribution<float> uniform(-1, 1);
  std::uniform_int_distribution<int> pick(0, 15);
  const float specials[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f};
  for (float &v : values) {
    v = uniform(rng);
    if (kind == Scores::Ties)
      v = 0.5f * static_cast<float>(pick(rng) % 4);
    else if (kind == Scores::Special && pick(rng) < 5)
      v = specials[pick(rng) % 5];
  }
  Bytes out(static_cast<size_t>(count * dtypeSize(dtype)));
  convert(values.data(), DCRT_F32, out.data(), dtype, count);
  return out;
}

/// "" when `indices` and `values` are top-k's of `scores` (positions as
/// referenceTopk's, values the scores' bits there) and their padding is as
/// in `indicesBefore` and `valuesBefore`; else the first mismatch.
inline std::string checkTopkResult(const dcrt_topk_desc &d, const Bytes &scores,
                                   const Bytes &valuesBefore,
                                   const Bytes &values,
                                   const Bytes &indicesBefore,
                                   const Bytes &indices) {
  auto dtype = static_cast<int32_t>(d.dtype);
  auto indexType = static_cast<int32_t>(d.index_dtype);
  size_t size = static_cast<size_t>(dtypeSize(dtype));
  std::vector<int64_t> want =
      referenceTopk(scores, dtype, d.rows, d.experts, d.scores_ld, d.k);
  std::vector<int64_t> got = indexValues(indices, indexType);
  std::vector<int64_t> gotBefore = indexValues(indicesBefore, indexType);
  char text[160];
  for (int64_t r = 0; r < d.rows; ++r) {
    for (int64_t j = 0; j < d.indices_ld; ++j) {
      size_t at = static_cast<size_t>(r * d.indices_ld + j);
      int64_t expected =
          j < d.k ? want[static_cast<size_t>(r * d.k + j)] : gotBefore[at];
      if (got[at] != expected) {
        std::snprintf(
            text, sizeof(text), "row %lld: indices[%lld] = %lld, want %lld%s",
            static_cast<long long>(r), static_cast<long long>(j),
            static_cast<long long>(got[at]), static_cast<long long>(expected),
            j < d.k ? "" : " (padding)");
        return text;
      }
    }
    for (int64_t j = 0; j < d.values_ld; ++j) {
      size_t at = static_cast<size_t>(r * d.values_ld + j) * size;
      const unsigned char *expected =
          j < d.k
              ? scores.data() + static_cast<size_t>(
                                    r * d.scores_ld +
                                    want[static_cast<size_t>(r * d.k + j)]) *
                                    size
              : valuesBefore.data() + at;
      if (std::memcmp(values.data() + at, expected, size) != 0) {
        std::snprintf(text, sizeof(text), "row %lld: values[%lld] differs%s",
                      static_cast<long long>(r), static_cast<long long>(j),
                      j < d.k ? "" : " (padding)");
        return text;
      }
    }
  }
  return "";
}

/// The first differing byte of two buffers as "element i", or "".
inline std::string firstDifference(const Bytes &got, const Bytes &want,
                                   int64_t elementSize) {
  if (got.size() != want.size())
    return "sizes differ";
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i])
      return "element " + std::to_string(i / static_cast<size_t>(elementSize)) +
             " differs";
  return "";
}

//===----------------------------------------------------------------------===//
// Grouped products
//===----------------------------------------------------------------------===//

/// A grouped product's shape for tests; pads are the extra elements of each
/// row stride (column slices of wider tensors).
struct GroupedShape {
  int32_t dtype = DCRT_F32, endsType = DCRT_I64;
  int64_t rows = 1, experts = 1, k = 1, p = 1;
  bool transposeRhs = false, accumulate = false;
  int64_t padLhs = 0, padRhs = 0, padOut = 0, gapRhs = 0, gapOut = 0;
};

inline dcrt_grouped_matmul_desc makeGroupedForward(const GroupedShape &s) {
  dcrt_grouped_matmul_desc d{};
  d.struct_size = sizeof(d);
  d.dtype = s.dtype;
  d.ends_dtype = s.endsType;
  d.rows = s.rows;
  d.experts = s.experts;
  d.k = s.k;
  d.p = s.p;
  d.transpose_rhs = s.transposeRhs;
  d.accumulate = s.accumulate;
  d.lhs_ld = s.k + s.padLhs;
  d.rhs_ld = (s.transposeRhs ? s.k : s.p) + s.padRhs;
  d.out_ld = s.p + s.padOut;
  d.rhs_expert_stride = (s.transposeRhs ? s.p : s.k) * d.rhs_ld + s.gapRhs;
  return d;
}

inline dcrt_grouped_matmul_desc makeGroupedWeightGrad(const GroupedShape &s) {
  dcrt_grouped_matmul_desc d{};
  d.struct_size = sizeof(d);
  d.dtype = s.dtype;
  d.ends_dtype = s.endsType;
  d.rows = s.rows;
  d.experts = s.experts;
  d.k = s.k;
  d.p = s.p;
  d.accumulate = s.accumulate;
  d.lhs_ld = s.k + s.padLhs;
  d.rhs_ld = s.p + s.padRhs;
  d.out_ld = s.p + s.padOut;
  d.out_expert_stride = s.k * d.out_ld + s.gapOut;
  return d;
}

/// Elements of each operand's buffer (padding included).
inline int64_t groupedLhsElements(const dcrt_grouped_matmul_desc &d) {
  return d.rows * d.lhs_ld;
}
inline int64_t groupedRhsElements(const dcrt_grouped_matmul_desc &d,
                                  bool weightGrad) {
  if (weightGrad)
    return d.rows * d.rhs_ld;
  return (d.experts - 1) * d.rhs_expert_stride +
         (d.transpose_rhs ? d.p : d.k) * d.rhs_ld;
}
inline int64_t groupedOutElements(const dcrt_grouped_matmul_desc &d,
                                  bool weightGrad) {
  if (weightGrad)
    return (d.experts - 1) * d.out_expert_stride + d.k * d.out_ld;
  return d.rows * d.out_ld;
}

/// The product in double, and per element the sum of |products| (the scale
/// of f32 accumulation's error). `out` holds out's old values (read when
/// accumulating); entries outside the matrices are NaN in `want` (must stay
/// as they were). `ends` must be nondecreasing within [0, rows].
struct GroupedReference {
  std::vector<double> want, scale;
};
inline GroupedReference referenceGrouped(const dcrt_grouped_matmul_desc &d,
                                         bool weightGrad, const Bytes &lhs,
                                         const Bytes &rhs,
                                         const std::vector<int64_t> &ends,
                                         const Bytes &out) {
  auto dtype = static_cast<int32_t>(d.dtype);
  const int64_t K = d.k, P = d.p;
  std::vector<double> a = widenAll(lhs, dtype), b = widenAll(rhs, dtype);
  std::vector<double> old = widenAll(out, dtype);
  GroupedReference r;
  r.want.assign(old.size(), NAN);
  r.scale.assign(old.size(), 0);
  std::vector<double> sum(static_cast<size_t>(K * P)),
      scale(static_cast<size_t>(K * P)), w(static_cast<size_t>(K * P));
  auto put = [&](int64_t at, double value, double magnitude) {
    r.want[static_cast<size_t>(at)] =
        (d.accumulate ? old[static_cast<size_t>(at)] : 0.0) + value;
    r.scale[static_cast<size_t>(at)] = magnitude;
  };
  for (int64_t e = 0; e <= d.experts; ++e) {
    int64_t first = e == 0 ? 0 : ends[static_cast<size_t>(e - 1)];
    int64_t last = e < d.experts ? ends[static_cast<size_t>(e)] : d.rows;
    if (!weightGrad) {
      // w = expert e's [K, P] (none for the rows past the last end).
      for (int64_t kk = 0; e < d.experts && kk < K; ++kk)
        for (int64_t j = 0; j < P; ++j)
          w[static_cast<size_t>(kk * P + j)] = b[static_cast<size_t>(
              e * d.rhs_expert_stride +
              (d.transpose_rhs ? j * d.rhs_ld + kk : kk * d.rhs_ld + j))];
      for (int64_t i = first; i < last; ++i) {
        std::fill(sum.begin(), sum.begin() + P, 0.0);
        std::fill(scale.begin(), scale.begin() + P, 0.0);
        for (int64_t kk = 0; e < d.experts && kk < K; ++kk) {
          double x = a[static_cast<size_t>(i * d.lhs_ld + kk)];
          for (int64_t j = 0; j < P; ++j) {
            double term = x * w[static_cast<size_t>(kk * P + j)];
            sum[static_cast<size_t>(j)] += term;
            scale[static_cast<size_t>(j)] += std::fabs(term);
          }
        }
        for (int64_t j = 0; j < P; ++j)
          put(i * d.out_ld + j, sum[static_cast<size_t>(j)],
              scale[static_cast<size_t>(j)]);
      }
      continue;
    }
    if (e == d.experts)
      break;
    std::fill(sum.begin(), sum.end(), 0.0);
    std::fill(scale.begin(), scale.end(), 0.0);
    for (int64_t i = first; i < last; ++i)
      for (int64_t kk = 0; kk < K; ++kk) {
        double x = a[static_cast<size_t>(i * d.lhs_ld + kk)];
        const double *y = b.data() + i * d.rhs_ld;
        double *s = sum.data() + kk * P, *m = scale.data() + kk * P;
        for (int64_t j = 0; j < P; ++j) {
          s[j] += x * y[j];
          m[j] += std::fabs(x * y[j]);
        }
      }
    for (int64_t kk = 0; kk < K; ++kk)
      for (int64_t j = 0; j < P; ++j)
        put(e * d.out_expert_stride + kk * d.out_ld + j,
            sum[static_cast<size_t>(kk * P + j)],
            scale[static_cast<size_t>(kk * P + j)]);
  }
  return r;
}

/// The relative precision of `dtype` (half an ulp at 1).
inline double roundingOf(int32_t dtype) {
  return dtype == DCRT_BF16 ? 1.0 / 256 : dtype == DCRT_F16 ? 1.0 / 2048 : 0;
}

/// "" when every element of `got` is within `tolerance` x scale (f32
/// accumulation; plus the output's rounding of |want|) of the reference and
/// every element outside the matrices is as it was in `before`; else the
/// first mismatch. `worst` gets the largest error over its allowance (<= 1
/// when "").
inline std::string checkGrouped(const dcrt_grouped_matmul_desc &d,
                                bool weightGrad, const GroupedReference &r,
                                const Bytes &before, const Bytes &got,
                                double tolerance, double *worst = nullptr) {
  auto dtype = static_cast<int32_t>(d.dtype);
  size_t size = static_cast<size_t>(dtypeSize(dtype));
  double rounding = roundingOf(dtype), largest = 0;
  std::vector<double> values = widenAll(got, dtype);
  for (size_t at = 0; at < r.want.size(); ++at) {
    char text[256];
    if (std::isnan(r.want[at])) {
      if (std::memcmp(got.data() + at * size, before.data() + at * size,
                      size) != 0) {
        std::snprintf(text, sizeof(text),
                      "element %zu (padding) changed: %g, was %g", at,
                      floatAt(got, dtype, static_cast<int64_t>(at)),
                      floatAt(before, dtype, static_cast<int64_t>(at)));
        return text;
      }
      continue;
    }
    double value = values[at];
    double error = std::fabs(value - r.want[at]);
    double allowed = tolerance * (r.scale[at] + 1e-30) +
                     rounding * std::fabs(r.want[at]) +
                     (d.accumulate ? rounding * 2 : 0) * std::fabs(r.want[at]);
    largest = std::max(largest, error / allowed);
    if (!(error <= allowed)) {
      std::snprintf(text, sizeof(text),
                    "element %zu: got %.9g, want %.9g (error %.3g, allowed "
                    "%.3g)",
                    at, value, r.want[at], error, allowed);
      return text;
    }
  }
  if (worst)
    *worst = largest;
  return "";
}

//===----------------------------------------------------------------------===//
// Gather and scatter-add
//===----------------------------------------------------------------------===//

inline dcrt_row_map_desc makeRowMap(int32_t dtype, int32_t indexType,
                                    int64_t indexed, int64_t table,
                                    int64_t width, int64_t padSource,
                                    int64_t padResult) {
  dcrt_row_map_desc d{};
  d.struct_size = sizeof(d);
  d.dtype = dtype;
  d.index_dtype = indexType;
  d.indexed_rows = indexed;
  d.table_rows = table;
  d.width = width;
  d.source_ld = width + padSource;
  d.result_ld = width + padResult;
  return d;
}

/// dc.gather_rows: the result's bytes (padding as in `result`).
inline Bytes referenceGather(const dcrt_row_map_desc &d, const Bytes &source,
                             const std::vector<int64_t> &index,
                             const Bytes &result) {
  size_t size = static_cast<size_t>(dtypeSize(static_cast<int32_t>(d.dtype)));
  Bytes out = result;
  for (int64_t i = 0; i < d.indexed_rows; ++i) {
    int64_t m = index[static_cast<size_t>(i)];
    unsigned char *dst = out.data() + i * d.result_ld * size;
    if (m >= 0 && m < d.table_rows)
      std::memcpy(dst, source.data() + m * d.source_ld * size, d.width * size);
    else
      std::memset(dst, 0, d.width * size);
  }
  return out;
}

/// dc.scatter_add_rows as dcrt.h pins it down: f32 sums in increasing source
/// row, rounded once (the bits every backend must produce); `exact` gets
/// the sums in double (NaN on padding), for a tolerance check of the rule.
inline Bytes referenceScatterAdd(const dcrt_row_map_desc &d,
                                 const Bytes &source,
                                 const std::vector<int64_t> &index,
                                 const Bytes &result,
                                 std::vector<double> *exact = nullptr) {
  auto dtype = static_cast<int32_t>(d.dtype);
  size_t size = static_cast<size_t>(dtypeSize(dtype));
  std::vector<float> sum(static_cast<size_t>(d.table_rows * d.width), 0.0f);
  if (exact)
    exact->assign(result.size() / size, NAN);
  std::vector<double> wide(sum.size(), 0.0), all = widenAll(source, dtype);
  for (int64_t i = 0; i < d.indexed_rows; ++i) {
    int64_t m = index[static_cast<size_t>(i)];
    if (m < 0 || m >= d.table_rows)
      continue;
    for (int64_t c = 0; c < d.width; ++c) {
      double x = all[static_cast<size_t>(i * d.source_ld + c)];
      sum[static_cast<size_t>(m * d.width + c)] += static_cast<float>(x);
      wide[static_cast<size_t>(m * d.width + c)] += x;
    }
  }
  Bytes out = result;
  for (int64_t m = 0; m < d.table_rows; ++m) {
    convert(sum.data() + m * d.width, DCRT_F32,
            out.data() + m * d.result_ld * size, dtype, d.width);
    if (exact)
      for (int64_t c = 0; c < d.width; ++c)
        (*exact)[static_cast<size_t>(m * d.result_ld + c)] =
            wide[static_cast<size_t>(m * d.width + c)];
  }
  return out;
}

} // namespace dcrt::test

#endif // DCRT_TEST_MOEREFERENCE_H
