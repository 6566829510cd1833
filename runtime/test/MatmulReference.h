//===- MatmulReference.h - dcrt_matmul test cases and a double reference --===//
//
// Shared by the host backend's unit and MPI tests and by matmul-check (the
// cuda backend on a GPU): one set of descriptors, random operands exactly
// representable in their dtype, and a check of a computed C against a
// double-precision reference. Elements of C outside the m x n matrices
// (padding of ldc, gaps between batches) must be left untouched bit for
// bit; with accumulate = 0, C starts as NaN (it must not be read).
//
//===----------------------------------------------------------------------===//
#ifndef DCRT_TEST_MATMULREFERENCE_H
#define DCRT_TEST_MATMULREFERENCE_H

#include "dcrt/dcrt.h"
#include "dcrt/dtype.hpp"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace dcrt::test {

struct MatmulShape {
  int64_t batch = 1, m = 1, n = 1, k = 1;
  bool transA = false, transB = false;
  int32_t abType = DCRT_F32, cType = DCRT_F32;
  bool accumulate = false;
  int64_t padA = 0, padB = 0, padC = 0;        // ld = row length + pad
  bool broadcastA = false, broadcastB = false; // batch stride 0
  int64_t gapC = 0; // extra elements between C matrices of a batch
};

/// The descriptor of `s`: strides of dense (or padded) row-major storage.
inline dcrt_matmul_desc makeMatmul(const MatmulShape &s) {
  dcrt_matmul_desc d{};
  d.batch = s.batch;
  d.m = s.m;
  d.n = s.n;
  d.k = s.k;
  d.trans_a = s.transA;
  d.trans_b = s.transB;
  d.lda = (s.transA ? s.m : s.k) + s.padA;
  d.ldb = (s.transB ? s.k : s.n) + s.padB;
  d.ldc = s.n + s.padC;
  d.batch_stride_a = s.broadcastA ? 0 : (s.transA ? s.k : s.m) * d.lda;
  d.batch_stride_b = s.broadcastB ? 0 : (s.transB ? s.n : s.k) * d.ldb;
  d.batch_stride_c = s.m * d.ldc + s.gapC;
  d.a_dtype = d.b_dtype = s.abType;
  d.c_dtype = s.cType;
  d.accumulate = s.accumulate;
  return d;
}

struct MatmulCase {
  std::string name;
  dcrt_matmul_desc desc;
};

/// The descriptor set every backend is checked on.
inline std::vector<MatmulCase> matmulCases() {
  std::vector<MatmulCase> cases;
  auto add = [&](const char *name, MatmulShape s) {
    cases.push_back({name, makeMatmul(s)});
  };
  MatmulShape base;
  base.m = 37;
  base.n = 29;
  base.k = 45;
  add("f32 plain", base);
  MatmulShape s = base;
  s.transA = true;
  add("f32 trans_a", s);
  s = base;
  s.transB = true;
  add("f32 trans_b", s);
  s.transA = true;
  add("f32 trans_a trans_b", s);
  s = base;
  s.batch = 3;
  add("f32 batch 3", s);
  s.transB = true;
  s.broadcastB = true;
  s.batch = 4;
  add("f32 batch 4, B broadcast (stride 0), trans_b", s);
  s = base;
  s.batch = 3;
  s.broadcastA = true;
  s.transA = true;
  add("f32 batch 3, A broadcast (stride 0), trans_a", s);
  s = base;
  s.padA = 5;
  s.padB = 3;
  s.padC = 7;
  s.batch = 2;
  s.gapC = 11;
  add("f32 padded lda/ldb/ldc, batch 2 with a gap", s);
  s.transA = s.transB = true;
  add("f32 padded, both transposed", s);
  s = base;
  s.accumulate = true;
  add("f32 accumulate", s);
  s.batch = 2;
  s.transA = true;
  s.padC = 4;
  add("f32 accumulate, batch 2, trans_a, padded ldc", s);
  s = base;
  s.m = 1;
  s.n = 64;
  s.k = 33;
  add("f32 m = 1", s);
  s = base;
  s.abType = DCRT_BF16;
  add("bf16 -> f32", s);
  s.cType = DCRT_BF16;
  add("bf16 -> bf16", s);
  s.accumulate = true;
  s.transB = true;
  add("bf16 -> bf16 accumulate, trans_b", s);
  s = base;
  s.abType = DCRT_BF16;
  s.batch = 3;
  s.broadcastB = true;
  s.transA = true;
  s.accumulate = true;
  add("bf16 -> f32 batch 3, B broadcast, trans_a, accumulate", s);
  s = base;
  s.abType = s.cType = DCRT_F16;
  add("f16 -> f16", s);
  s.cType = DCRT_F32;
  s.transA = s.transB = true;
  add("f16 -> f32 both transposed", s);
  s = base;
  s.m = 128;
  s.n = 256;
  s.k = 512;
  s.abType = DCRT_BF16;
  s.transB = true;
  add("bf16 -> f32 128x256x512 trans_b (x W^T)", s);
  s.cType = DCRT_BF16;
  s.transB = false;
  s.transA = true;
  add("bf16 -> bf16 128x256x512 trans_a (X^T dY)", s);
  return cases;
}

/// Elements a buffer needs for `batch` matrices of rows x cols with row
/// stride `ld` and batch stride `stride`.
inline int64_t spanOf(int64_t batch, int64_t rows, int64_t cols, int64_t ld,
                      int64_t stride) {
  return (batch - 1) * stride + (rows - 1) * ld + cols;
}
inline int64_t elementsA(const dcrt_matmul_desc &d) {
  return spanOf(d.batch, d.trans_a ? d.k : d.m, d.trans_a ? d.m : d.k, d.lda,
                d.batch_stride_a);
}
inline int64_t elementsB(const dcrt_matmul_desc &d) {
  return spanOf(d.batch, d.trans_b ? d.n : d.k, d.trans_b ? d.k : d.n, d.ldb,
                d.batch_stride_b);
}
inline int64_t elementsC(const dcrt_matmul_desc &d) {
  return spanOf(d.batch, d.m, d.n, d.ldc, d.batch_stride_c);
}

/// Operands in their dtypes (raw bytes, host memory).
struct MatmulData {
  std::vector<unsigned char> a, b, c;
};

/// `count` values of `dtype` uniform in [-1, 1] (rounded to the dtype).
inline std::vector<unsigned char> randomValues(int64_t count, int32_t dtype,
                                               std::mt19937 &random) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(count));
  for (float &value : values)
    value = uniform(random);
  std::vector<unsigned char> bytes(static_cast<size_t>(count) *
                                   dtypeSize(dtype));
  convert(values.data(), DCRT_F32, bytes.data(), dtype, count);
  return bytes;
}

inline MatmulData randomOperands(const dcrt_matmul_desc &d, unsigned seed) {
  std::mt19937 random(seed);
  MatmulData data;
  auto ab = static_cast<int32_t>(d.a_dtype);
  auto ct = static_cast<int32_t>(d.c_dtype);
  data.a = randomValues(elementsA(d), ab, random);
  data.b = randomValues(elementsB(d), ab, random);
  if (d.accumulate) {
    data.c = randomValues(elementsC(d), ct, random);
  } else {
    std::vector<float> nan(static_cast<size_t>(elementsC(d)),
                           std::numeric_limits<float>::quiet_NaN());
    data.c.resize(nan.size() * dtypeSize(ct));
    convert(nan.data(), DCRT_F32, data.c.data(), ct, elementsC(d));
  }
  // Padding and gaps hold a recognizable value that must survive.
  std::vector<unsigned char> marker(dtypeSize(ct));
  float sentinel = 12345.0f;
  convert(&sentinel, DCRT_F32, marker.data(), ct, 1);
  int64_t size = dtypeSize(ct);
  for (int64_t e = 0; e < elementsC(d); ++e) {
    int64_t inBatch = e % d.batch_stride_c, row = inBatch / d.ldc,
            col = inBatch % d.ldc;
    if (d.batch == 1)
      row = e / d.ldc, col = e % d.ldc;
    if (row >= d.m || col >= d.n)
      std::memcpy(&data.c[e * size], marker.data(), size);
  }
  return data;
}

/// Checks `actual` (C after the matmul, host memory) against a double
/// reference computed from `data`. The error allowed for an element is
/// `accumulationTolerance` times the sum of |a_ik b_kj| (and |C_old|), plus
/// the rounding to C's dtype (2^-8 relative for bf16, 2^-11 for f16).
/// Returns "" or a description of the first mismatch; *maxError (if given)
/// gets the largest error relative to that bound's scale.
inline std::string checkMatmulResult(const dcrt_matmul_desc &d,
                                     const MatmulData &data, const void *actual,
                                     double accumulationTolerance,
                                     double *maxError = nullptr) {
  auto ab = static_cast<int32_t>(d.a_dtype);
  auto ct = static_cast<int32_t>(d.c_dtype);
  double rounding = ct == DCRT_BF16  ? 1.0 / 256
                    : ct == DCRT_F16 ? 1.0 / 2048
                                     : 0.0;
  int64_t size = dtypeSize(ct);
  double worst = 0;
  // Element (row, col) of op(X), X stored with row stride ld.
  auto at = [](bool trans, int64_t ld, int64_t row, int64_t col) {
    return trans ? col * ld + row : row * ld + col;
  };
  for (int64_t e = 0; e < elementsC(d); ++e) {
    int64_t inBatch = d.batch == 1 ? e : e % d.batch_stride_c;
    int64_t row = inBatch / d.ldc, col = inBatch % d.ldc;
    if (row >= d.m || col >= d.n) {
      if (std::memcmp(static_cast<const unsigned char *>(actual) + e * size,
                      &data.c[e * size], size) != 0)
        return "element " + std::to_string(e) +
               " of C outside the matrices (padding) was written";
    }
  }
  for (int64_t p = 0; p < d.batch; ++p)
    for (int64_t i = 0; i < d.m; ++i)
      for (int64_t j = 0; j < d.n; ++j) {
        double sum = 0, absSum = 0;
        for (int64_t kk = 0; kk < d.k; ++kk) {
          double x =
              loadAsDouble(data.a.data(), ab,
                           p * d.batch_stride_a + at(d.trans_a, d.lda, i, kk));
          double y =
              loadAsDouble(data.b.data(), ab,
                           p * d.batch_stride_b + at(d.trans_b, d.ldb, kk, j));
          sum += x * y;
          absSum += std::fabs(x * y);
        }
        int64_t e = p * d.batch_stride_c + i * d.ldc + j;
        if (d.accumulate) {
          double old = loadAsDouble(data.c.data(), ct, e);
          sum += old;
          absSum += std::fabs(old);
        }
        double got = loadAsDouble(actual, ct, e);
        double error = std::fabs(got - sum);
        double bound =
            accumulationTolerance * absSum + rounding * std::fabs(sum) + 1e-30;
        double scale = absSum > 0 ? absSum : 1;
        if (error / scale > worst)
          worst = error / scale;
        if (!(error <= bound)) { // NaN fails too
          char text[256];
          std::snprintf(text, sizeof(text),
                        "batch %lld C[%lld][%lld] = %.9g, expected %.9g "
                        "(error %.3g > bound %.3g)",
                        static_cast<long long>(p), static_cast<long long>(i),
                        static_cast<long long>(j), got, sum, error, bound);
          if (maxError)
            *maxError = worst;
          return text;
        }
      }
  if (maxError)
    *maxError = worst;
  return "";
}

} // namespace dcrt::test

#endif // DCRT_TEST_MATMULREFERENCE_H
