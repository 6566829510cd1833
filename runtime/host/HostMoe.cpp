//===- HostMoe.cpp - the host backend's mixture-of-experts calls ----------===//
//
// Plain loops, for tests and CPU artifacts, with the semantics of dcrt.h
// that the cuda backend's kernels share bit for bit where dcrt.h says so:
// top-k picks the k entries of each row one after the other in
// topkBefore's order; group_by_expert is a counting sort (counts, exclusive
// scan, stable placement); scatter_add sums each result row's sources in
// increasing source row in f32 and rounds once. The grouped products widen
// operands to f32 (dcrt::convert) and accumulate in f32, i-k-j order, each
// output rounded once; the experts' rows come from expertRowRanges (Moe.h),
// as the kernels read them.
//
//===----------------------------------------------------------------------===//
#include "Moe.h"

#include "dcrt/dtype.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

using namespace dcrt;
using namespace dcrt::detail;

namespace {

void writeIndex(void *data, int32_t dtype, int64_t i, int64_t value) {
  if (dtype == DCRT_I64)
    static_cast<int64_t *>(data)[i] = value;
  else
    static_cast<int32_t *>(data)[i] = static_cast<int32_t>(value);
}

const char *at(const void *base, int64_t elements, int64_t size) {
  return static_cast<const char *>(base) + elements * size;
}
char *at(void *base, int64_t elements, int64_t size) {
  return static_cast<char *>(base) + elements * size;
}

/// `rows` x `cols` of `dtype` at `base` (row stride `ld`) as dense f32,
/// transposed (cols x rows) when `transpose`.
void widen(const void *base, int32_t dtype, int64_t rows, int64_t cols,
           int64_t ld, bool transpose, std::vector<float> &out) {
  int64_t size = dtypeSize(dtype);
  out.resize(static_cast<size_t>(rows * cols));
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    convert(at(base, r * ld, size), dtype, row.data(), DCRT_F32, cols);
    for (int64_t c = 0; c < cols; ++c)
      out[static_cast<size_t>(transpose ? c * rows + r : r * cols + c)] =
          row[static_cast<size_t>(c)];
  }
}

/// Rounds `sum` (n f32) into `dst` of `dtype`, adding dst's old values
/// first when `accumulate`.
void store(const float *sum, int64_t n, void *dst, int32_t dtype,
           bool accumulate, std::vector<float> &scratch) {
  if (!accumulate) {
    convert(sum, DCRT_F32, dst, dtype, n);
    return;
  }
  scratch.resize(static_cast<size_t>(n));
  convert(dst, dtype, scratch.data(), DCRT_F32, n);
  for (int64_t j = 0; j < n; ++j)
    scratch[static_cast<size_t>(j)] += sum[j];
  convert(scratch.data(), DCRT_F32, dst, dtype, n);
}

} // namespace

void dcrt::detail::hostTopk(const dcrt_topk_desc &d, const void *scores,
                            void *values, void *indices) {
  auto dtype = static_cast<int32_t>(d.dtype);
  auto indexType = static_cast<int32_t>(d.index_dtype);
  int64_t size = dtypeSize(dtype);
  std::vector<float> row(static_cast<size_t>(d.experts));
  for (int64_t r = 0; r < d.rows; ++r) {
    const char *source = at(scores, r * d.scores_ld, size);
    convert(source, dtype, row.data(), DCRT_F32, d.experts);
    // The j-th entry is the first in order after the (j-1)-th.
    int64_t previous = -1;
    for (int64_t j = 0; j < d.k; ++j) {
      int64_t best = -1;
      for (int64_t e = 0; e < d.experts; ++e) {
        float x = row[static_cast<size_t>(e)];
        if (previous >= 0 &&
            !topkBefore(row[static_cast<size_t>(previous)], previous, x, e))
          continue;
        if (best < 0 || topkBefore(x, e, row[static_cast<size_t>(best)], best))
          best = e;
      }
      std::memcpy(at(values, r * d.values_ld + j, size), source + best * size,
                  static_cast<size_t>(size));
      writeIndex(indices, indexType, r * d.indices_ld + j, best);
      previous = best;
    }
  }
}

void dcrt::detail::hostGroupByExpert(const dcrt_group_by_expert_desc &d,
                                     const void *ids, void *order, void *ends) {
  auto idsType = static_cast<int32_t>(d.ids_dtype);
  const int64_t n = d.assignments, experts = d.experts;
  // Bin E holds the ids outside [0, experts).
  auto binOf = [&](int64_t i) {
    int64_t id = readIndex(ids, idsType, i);
    return id >= 0 && id < experts ? id : experts;
  };
  std::vector<int64_t> next(static_cast<size_t>(experts + 1), 0);
  for (int64_t i = 0; i < n; ++i)
    ++next[static_cast<size_t>(binOf(i))];
  int64_t total = 0;
  for (int64_t b = 0; b <= experts; ++b) {
    int64_t count = next[static_cast<size_t>(b)];
    next[static_cast<size_t>(b)] = total;
    total += count;
    if (b < experts)
      writeIndex(ends, static_cast<int32_t>(d.ends_dtype), b, total);
  }
  for (int64_t i = 0; i < n; ++i)
    writeIndex(order, static_cast<int32_t>(d.order_dtype),
               next[static_cast<size_t>(binOf(i))]++, i);
}

void dcrt::detail::hostGatherRows(const dcrt_row_map_desc &d,
                                  const void *source, const void *index,
                                  void *result) {
  int64_t size = dtypeSize(static_cast<int32_t>(d.dtype));
  auto bytes = static_cast<size_t>(d.width * size);
  for (int64_t i = 0; i < d.indexed_rows; ++i) {
    int64_t m = readIndex(index, static_cast<int32_t>(d.index_dtype), i);
    char *dst = at(result, i * d.result_ld, size);
    if (m >= 0 && m < d.table_rows)
      std::memcpy(dst, at(source, m * d.source_ld, size), bytes);
    else
      std::memset(dst, 0, bytes); // +0.0 in every float dtype
  }
}

void dcrt::detail::hostScatterAddRows(const dcrt_row_map_desc &d,
                                      const void *source, const void *index,
                                      void *result) {
  auto dtype = static_cast<int32_t>(d.dtype);
  int64_t size = dtypeSize(dtype), width = d.width;
  std::vector<float> sum(static_cast<size_t>(d.table_rows * width), 0.0f),
      row(static_cast<size_t>(width));
  for (int64_t i = 0; i < d.indexed_rows; ++i) {
    int64_t m = readIndex(index, static_cast<int32_t>(d.index_dtype), i);
    if (m < 0 || m >= d.table_rows)
      continue;
    convert(at(source, i * d.source_ld, size), dtype, row.data(), DCRT_F32,
            width);
    float *target = sum.data() + m * width;
    for (int64_t c = 0; c < width; ++c)
      target[c] += row[static_cast<size_t>(c)];
  }
  for (int64_t m = 0; m < d.table_rows; ++m)
    convert(sum.data() + m * width, DCRT_F32, at(result, m * d.result_ld, size),
            dtype, width);
}

void dcrt::detail::hostGroupedMatmul(const dcrt_grouped_matmul_desc &d,
                                     const void *lhs, const void *rhs,
                                     const void *ends, void *out) {
  auto dtype = static_cast<int32_t>(d.dtype);
  int64_t size = dtypeSize(dtype);
  const int64_t K = d.k, P = d.p;
  std::vector<RowRange> ranges = expertRowRanges(
      ends, static_cast<int32_t>(d.ends_dtype), d.experts, d.rows);
  std::vector<float> weight, a, acc(static_cast<size_t>(P)), scratch;
  for (int64_t e = 0; e <= d.experts; ++e) {
    RowRange range = ranges[static_cast<size_t>(e)];
    if (range.lo == range.hi)
      continue;
    if (e == d.experts) {
      // Rows past the last expert: zero (out += 0 when accumulating).
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t i = range.lo; i < range.hi && !d.accumulate; ++i)
        convert(acc.data(), DCRT_F32, at(out, i * d.out_ld, size), dtype, P);
      continue;
    }
    // weight: dense f32 [K, P] of expert e.
    const void *matrix = at(rhs, e * d.rhs_expert_stride, size);
    if (d.transpose_rhs)
      widen(matrix, dtype, P, K, d.rhs_ld, true, weight);
    else
      widen(matrix, dtype, K, P, d.rhs_ld, false, weight);
    a.resize(static_cast<size_t>(K));
    for (int64_t i = range.lo; i < range.hi; ++i) {
      convert(at(lhs, i * d.lhs_ld, size), dtype, a.data(), DCRT_F32, K);
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t kk = 0; kk < K; ++kk) {
        float aik = a[static_cast<size_t>(kk)];
        const float *w = weight.data() + kk * P;
        for (int64_t j = 0; j < P; ++j)
          acc[static_cast<size_t>(j)] += aik * w[j];
      }
      store(acc.data(), P, at(out, i * d.out_ld, size), dtype, d.accumulate,
            scratch);
    }
  }
}

void dcrt::detail::hostGroupedWeightGrad(const dcrt_grouped_matmul_desc &d,
                                         const void *lhs, const void *rhs,
                                         const void *ends, void *out) {
  auto dtype = static_cast<int32_t>(d.dtype);
  int64_t size = dtypeSize(dtype);
  const int64_t K = d.k, P = d.p;
  std::vector<RowRange> ranges = expertRowRanges(
      ends, static_cast<int32_t>(d.ends_dtype), d.experts, d.rows);
  std::vector<float> acc(static_cast<size_t>(K * P)), a(static_cast<size_t>(K)),
      b(static_cast<size_t>(P)), scratch;
  for (int64_t e = 0; e < d.experts; ++e) {
    RowRange range = ranges[static_cast<size_t>(e)];
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t r = range.lo; r < range.hi; ++r) {
      convert(at(lhs, r * d.lhs_ld, size), dtype, a.data(), DCRT_F32, K);
      convert(at(rhs, r * d.rhs_ld, size), dtype, b.data(), DCRT_F32, P);
      for (int64_t kk = 0; kk < K; ++kk) {
        float x = a[static_cast<size_t>(kk)];
        float *row = acc.data() + kk * P;
        for (int64_t j = 0; j < P; ++j)
          row[j] += x * b[static_cast<size_t>(j)];
      }
    }
    void *matrix = at(out, e * d.out_expert_stride, size);
    for (int64_t kk = 0; kk < K; ++kk)
      store(acc.data() + kk * P, P, at(matrix, kk * d.out_ld, size), dtype,
            d.accumulate, scratch);
  }
}
