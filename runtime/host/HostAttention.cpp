//===- HostAttention.cpp - the host backend's dcrt_attention_* ------------===//
//
// Plain loops, for tests and CPU artifacts, with the maths of
// dc-expand-attention: per batch the operands are widened to dense f32
// (through dcrt::convert), scores, probabilities and products are
// accumulated in f32, and each output is rounded once to its dtype. With
// grouped-query attention (batch_kv < batch) query batch b reads k/v batch
// b / group, and dk, dv accumulate over the group before their rounding.
// Rows are read and written where attentionLayout puts them, so dense and
// strided layouts share every loop and a strided call gives the same bits
// as the dense one on transposed copies.
//
//===----------------------------------------------------------------------===//
#include "Attention.h"

#include "dcrt/dtype.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

using namespace dcrt;
using namespace dcrt::detail;

namespace {

/// Rows 0..rows-1 of entry `n` of an operand laid out as `layout`, as
/// dense rows x dim f32.
void widen(const void *base, int32_t dtype, const AttentionLayout &layout,
           int64_t n, int64_t rows, int64_t dim, std::vector<float> &out) {
  out.resize(static_cast<size_t>(rows * dim));
  const int64_t size = dtypeSize(dtype);
  for (int64_t i = 0; i < rows; ++i)
    convert(static_cast<const char *>(base) + layout.offset(n, i) * size, dtype,
            &out[i * dim], DCRT_F32, dim);
}

/// `values` (dense rows x dim f32) into entry `n` of an operand laid out as
/// `layout`, rounded to `dtype`.
void narrow(const std::vector<float> &values, void *base, int32_t dtype,
            const AttentionLayout &layout, int64_t n, int64_t dim) {
  const int64_t rows = static_cast<int64_t>(values.size()) / dim;
  const int64_t size = dtypeSize(dtype);
  for (int64_t i = 0; i < rows; ++i)
    convert(&values[i * dim], DCRT_F32,
            static_cast<char *>(base) + layout.offset(n, i) * size, dtype, dim);
}

float dot(const float *a, const float *b, int64_t n) {
  float sum = 0;
  for (int64_t d = 0; d < n; ++d)
    sum += a[d] * b[d];
  return sum;
}

/// The keys query `i` sees: all, or 0..i when causal.
int64_t keysOf(const dcrt_attention_desc &d, int64_t i) {
  return d.causal ? i + 1 : d.seq_k;
}

} // namespace

void dcrt::detail::hostAttentionForward(const dcrt_attention_desc &d,
                                        const void *q, const void *k,
                                        const void *v, void *o, float *lse) {
  auto dtype = static_cast<int32_t>(d.dtype);
  const int64_t M = d.seq_q, N = d.seq_k, D = d.head_dim;
  const float scale = attentionScale(d);
  const int64_t group = attentionKVGroup(d);
  using Op = AttentionOperand;
  const AttentionLayout qL = attentionLayout(d, Op::Q),
                        kL = attentionLayout(d, Op::K),
                        vL = attentionLayout(d, Op::V),
                        oL = attentionLayout(d, Op::O);
  std::vector<float> qb, kb, vb, ob(static_cast<size_t>(M * D)),
      z(static_cast<size_t>(N));
  for (int64_t b = 0; b < d.batch; ++b) {
    widen(q, dtype, qL, b, M, D, qb);
    if (b % group == 0) {
      widen(k, dtype, kL, b / group, N, D, kb);
      widen(v, dtype, vL, b / group, N, D, vb);
    }
    for (int64_t i = 0; i < M; ++i) {
      int64_t keys = keysOf(d, i);
      float max = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < keys; ++j) {
        z[j] = scale * dot(&qb[i * D], &kb[j * D], D);
        max = std::max(max, z[j]);
      }
      float sum = 0;
      for (int64_t j = 0; j < keys; ++j)
        sum += std::exp(z[j] - max);
      float rowLse = max + std::log(sum);
      lse[b * M + i] = rowLse;
      float *out = &ob[i * D];
      for (int64_t e = 0; e < D; ++e)
        out[e] = 0;
      for (int64_t j = 0; j < keys; ++j) {
        float p = std::exp(z[j] - rowLse);
        const float *vRow = &vb[j * D];
        for (int64_t e = 0; e < D; ++e)
          out[e] += p * vRow[e];
      }
    }
    narrow(ob, o, dtype, oL, b, D);
  }
}

void dcrt::detail::hostAttentionBackward(const dcrt_attention_desc &d,
                                         const void *q, const void *k,
                                         const void *v, const void *o,
                                         const float *lse, const void *dO,
                                         void *dq, void *dk, void *dv) {
  auto dtype = static_cast<int32_t>(d.dtype);
  const int64_t M = d.seq_q, N = d.seq_k, D = d.head_dim;
  const float scale = attentionScale(d);
  std::vector<float> qb, kb, vb, ob, dob;
  std::vector<float> dqb(static_cast<size_t>(M * D)),
      dkb(static_cast<size_t>(N * D)), dvb(static_cast<size_t>(N * D));
  const int64_t group = attentionKVGroup(d);
  using Op = AttentionOperand;
  const AttentionLayout qL = attentionLayout(d, Op::Q),
                        kL = attentionLayout(d, Op::K),
                        vL = attentionLayout(d, Op::V),
                        oL = attentionLayout(d, Op::O),
                        doL = attentionLayout(d, Op::DO),
                        dqL = attentionLayout(d, Op::DQ),
                        dkL = attentionLayout(d, Op::DK),
                        dvL = attentionLayout(d, Op::DV);
  for (int64_t b = 0; b < d.batch; ++b) {
    widen(q, dtype, qL, b, M, D, qb);
    widen(o, dtype, oL, b, M, D, ob);
    widen(dO, dtype, doL, b, M, D, dob);
    std::fill(dqb.begin(), dqb.end(), 0.0f);
    if (b % group == 0) {
      widen(k, dtype, kL, b / group, N, D, kb);
      widen(v, dtype, vL, b / group, N, D, vb);
      std::fill(dkb.begin(), dkb.end(), 0.0f);
      std::fill(dvb.begin(), dvb.end(), 0.0f);
    }
    for (int64_t i = 0; i < M; ++i) {
      const float *qRow = &qb[i * D], *doRow = &dob[i * D];
      float delta = dot(doRow, &ob[i * D], D);
      float rowLse = lse[b * M + i];
      float *dqRow = &dqb[i * D];
      for (int64_t j = 0; j < keysOf(d, i); ++j) {
        const float *kRow = &kb[j * D], *vRow = &vb[j * D];
        float p = std::exp(scale * dot(qRow, kRow, D) - rowLse);
        float ds = scale * p * (dot(doRow, vRow, D) - delta);
        float *dkRow = &dkb[j * D], *dvRow = &dvb[j * D];
        for (int64_t e = 0; e < D; ++e) {
          dvRow[e] += p * doRow[e];
          dqRow[e] += ds * kRow[e];
          dkRow[e] += ds * qRow[e];
        }
      }
    }
    narrow(dqb, dq, dtype, dqL, b, D);
    if (b % group == group - 1) {
      narrow(dkb, dk, dtype, dkL, b / group, D);
      narrow(dvb, dv, dtype, dvL, b / group, D);
    }
  }
}
