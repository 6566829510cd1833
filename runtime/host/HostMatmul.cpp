//===- HostMatmul.cpp - the host backend's dcrt_matmul --------------------===//
//
// Plain loops, for tests and CPU artifacts: each batch's op(A) and op(B)
// are first widened to dense fp32 (through dcrt::convert, the runtime's
// bf16/f16 conversions), then C's rows are accumulated in fp32 in i-k-j
// order (the inner loop runs along contiguous rows of op(B) and C) and
// rounded once to C's dtype. A matrix shared by every batch (stride 0) is
// widened once.
//
//===----------------------------------------------------------------------===//
#include "Matmul.h"

#include "dcrt/dtype.hpp"

#include <vector>

using namespace dcrt;
using namespace dcrt::detail;

namespace {
/// The stored row-major matrix at `base` (rows x cols, row stride `ld`
/// elements of `dtype`) as a dense fp32 matrix, transposed if `transpose`
/// (out is then cols x rows).
void widen(const void *base, int32_t dtype, int64_t rows, int64_t cols,
           int64_t ld, bool transpose, std::vector<float> &out,
           std::vector<float> &row) {
  int64_t size = dtypeSize(dtype);
  out.resize(static_cast<size_t>(rows * cols));
  row.resize(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    const char *source = static_cast<const char *>(base) + r * ld * size;
    if (!transpose) {
      convert(source, dtype, out.data() + r * cols, DCRT_F32, cols);
      continue;
    }
    convert(source, dtype, row.data(), DCRT_F32, cols);
    for (int64_t c = 0; c < cols; ++c)
      out[static_cast<size_t>(c * rows + r)] = row[static_cast<size_t>(c)];
  }
}
} // namespace

void dcrt::detail::hostMatmul(const dcrt_matmul_desc &d, const void *a,
                              const void *b, void *c) {
  auto abType = static_cast<int32_t>(d.a_dtype);
  auto cType = static_cast<int32_t>(d.c_dtype);
  int64_t abSize = dtypeSize(abType), cSize = dtypeSize(cType);
  StoredMatrix sa = storedA(d), sb = storedB(d);
  std::vector<float> opA, opB, scratch, acc(static_cast<size_t>(d.n)),
      old(static_cast<size_t>(d.n));
  const int64_t m = d.m, n = d.n, k = d.k;
  for (int64_t p = 0; p < d.batch; ++p) {
    // op(A) is m x k, op(B) k x n, both dense fp32.
    if (p == 0 || d.batch_stride_a != 0)
      widen(static_cast<const char *>(a) + p * d.batch_stride_a * abSize,
            abType, sa.rows, sa.cols, d.lda, d.trans_a != 0, opA, scratch);
    if (p == 0 || d.batch_stride_b != 0)
      widen(static_cast<const char *>(b) + p * d.batch_stride_b * abSize,
            abType, sb.rows, sb.cols, d.ldb, d.trans_b != 0, opB, scratch);
    char *cBatch = static_cast<char *>(c) + p * d.batch_stride_c * cSize;
    for (int64_t i = 0; i < m; ++i) {
      float *sum = acc.data();
      for (int64_t j = 0; j < n; ++j)
        sum[j] = 0.0f;
      const float *aRow = opA.data() + i * k;
      for (int64_t kk = 0; kk < k; ++kk) {
        float aik = aRow[kk];
        const float *bRow = opB.data() + kk * n;
        for (int64_t j = 0; j < n; ++j)
          sum[j] += aik * bRow[j];
      }
      char *cRow = cBatch + i * d.ldc * cSize;
      if (d.accumulate) {
        convert(cRow, cType, old.data(), DCRT_F32, n);
        for (int64_t j = 0; j < n; ++j)
          sum[j] += old[static_cast<size_t>(j)];
      }
      convert(sum, DCRT_F32, cRow, cType, n);
    }
  }
}
