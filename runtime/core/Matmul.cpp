//===- Matmul.cpp - dcrt_matmul's descriptor checks and messages ----------===//
#include "Matmul.h"

#include "Descriptor.h"

#include "dcrt/dtype.hpp"
#include "dcrt/error.hpp"

#include <cstdio>

using namespace dcrt;
using namespace dcrt::detail;

StoredMatrix dcrt::detail::storedA(const dcrt_matmul_desc &desc) {
  return desc.trans_a ? StoredMatrix{desc.k, desc.m}
                      : StoredMatrix{desc.m, desc.k};
}

StoredMatrix dcrt::detail::storedB(const dcrt_matmul_desc &desc) {
  return desc.trans_b ? StoredMatrix{desc.n, desc.k}
                      : StoredMatrix{desc.k, desc.n};
}

StoredMatrix dcrt::detail::storedC(const dcrt_matmul_desc &desc) {
  return {desc.m, desc.n};
}

static const char *nameOf(int64_t dtype) { return descriptorDTypeName(dtype); }

std::string dcrt::detail::describeMatmul(const dcrt_matmul_desc &d) {
  char text[512];
  std::snprintf(
      text, sizeof(text),
      "batch %lld, m %lld n %lld k %lld, A %s%s lda %lld stride %lld, B %s%s "
      "ldb %lld stride %lld, C %s ldc %lld stride %lld, accumulate %lld",
      static_cast<long long>(d.batch), static_cast<long long>(d.m),
      static_cast<long long>(d.n), static_cast<long long>(d.k),
      nameOf(d.a_dtype), d.trans_a == 1 ? " (trans)" : "",
      static_cast<long long>(d.lda), static_cast<long long>(d.batch_stride_a),
      nameOf(d.b_dtype), d.trans_b == 1 ? " (trans)" : "",
      static_cast<long long>(d.ldb), static_cast<long long>(d.batch_stride_b),
      nameOf(d.c_dtype), static_cast<long long>(d.ldc),
      static_cast<long long>(d.batch_stride_c),
      static_cast<long long>(d.accumulate));
  return text;
}

void dcrt::detail::checkMatmul(const dcrt_matmul_desc *desc, const void *a,
                               const void *b, const void *c,
                               const char *caller) {
  if (!desc)
    fatal("%s: null descriptor", caller);
  const dcrt_matmul_desc &d = *desc;
  auto bad = [&](const char *why) {
    fatal("%s: bad descriptor: %s (%s)", caller, why,
          describeMatmul(d).c_str());
  };
  if (d.batch <= 0 || d.m <= 0 || d.n <= 0 || d.k <= 0)
    bad("batch, m, n and k must be positive");
  if (d.trans_a != 0 && d.trans_a != 1)
    bad("trans_a must be 0 or 1");
  if (d.trans_b != 0 && d.trans_b != 1)
    bad("trans_b must be 0 or 1");
  if (d.accumulate != 0 && d.accumulate != 1)
    bad("accumulate must be 0 or 1");
  auto isFloat = [](int64_t dtype) {
    return dtype == DCRT_F32 || dtype == DCRT_BF16 || dtype == DCRT_F16;
  };
  if (!isFloat(d.a_dtype) || !isFloat(d.b_dtype) || !isFloat(d.c_dtype))
    bad("dtypes must be f32, bf16 or f16");
  if (d.a_dtype != d.b_dtype)
    bad("A and B must have the same dtype");
  if (d.c_dtype != d.a_dtype && d.c_dtype != DCRT_F32)
    bad("C must have A's dtype or f32");
  if (d.lda < storedA(d).cols)
    bad(d.trans_a ? "lda must be at least m (A is stored k x m)"
                  : "lda must be at least k (A is stored m x k)");
  if (d.ldb < storedB(d).cols)
    bad(d.trans_b ? "ldb must be at least k (B is stored n x k)"
                  : "ldb must be at least n (B is stored k x n)");
  if (d.ldc < d.n)
    bad("ldc must be at least n (C is stored m x n)");
  if (d.batch_stride_a < 0 || d.batch_stride_b < 0 || d.batch_stride_c < 0)
    bad("batch strides must not be negative");
  if (d.batch > 1 && d.batch_stride_c < (d.m - 1) * d.ldc + d.n)
    bad("batch_stride_c must be at least one C matrix ((m - 1) * ldc + n): "
        "the batch's outputs would overlap");
  if (!a || !b || !c)
    fatal("%s: null buffer (A %p, B %p, C %p) for %s", caller, a, b, c,
          describeMatmul(d).c_str());
}
