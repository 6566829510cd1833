//===- AttentionTest.cpp - the host backend's dcrt_attention_* ------------===//
//
// The host loops (what dcrt_attention_fwd/bwd run on the host backend)
// against a direct double-precision reference of the op descriptions on
// random data, causal and not, f32 and bf16, with as many key/value heads
// as query heads and fewer (grouped-query attention); the backward also against
// finite differences of the forward; strided layouts ([B, S, H, D], slices
// of a fused q/k/v projection) bit-identical to the dense call on
// transposed copies; and every malformed descriptor ending the program with
// a message naming what is wrong.
//
//===----------------------------------------------------------------------===//
#include "Attention.h"

#include "dcrt/dtype.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace dcrt;
using namespace dcrt::detail;

namespace {

dcrt_attention_desc makeDesc(int64_t batch, int64_t seqQ, int64_t seqK,
                             int64_t dim, bool causal, float scale,
                             int32_t dtype = DCRT_F32, int64_t batchKV = 0) {
  dcrt_attention_desc d{};
  d.batch_kv = batchKV;
  d.struct_size = sizeof(d);
  d.dtype = dtype;
  d.batch = batch;
  d.seq_q = seqQ;
  d.seq_k = seqK;
  d.head_dim = dim;
  d.causal = causal;
  d.scale_f32_bits = attentionScaleBits(scale);
  return d;
}

std::vector<double> random(size_t count, unsigned seed) {
  std::mt19937 engine(seed);
  std::uniform_real_distribution<double> dist(-1, 1);
  std::vector<double> out(count);
  for (double &x : out)
    x = dist(engine);
  return out;
}

std::vector<float> toFloat(const std::vector<double> &x) {
  return std::vector<float>(x.begin(), x.end());
}

/// The op descriptions in double: o, lse, and given dO the gradients.
struct Reference {
  std::vector<double> o, lse, dq, dk, dv;
};
Reference reference(const dcrt_attention_desc &d, const std::vector<double> &q,
                    const std::vector<double> &k, const std::vector<double> &v,
                    const std::vector<double> &dO) {
  const int64_t M = d.seq_q, N = d.seq_k, D = d.head_dim;
  const int64_t G = attentionKVGroup(d);
  double scale = attentionScale(d);
  Reference r;
  r.o.assign(d.batch * M * D, 0);
  r.lse.assign(d.batch * M, 0);
  r.dq.assign(d.batch * M * D, 0);
  r.dk.assign(attentionKVBatch(d) * N * D, 0);
  r.dv.assign(attentionKVBatch(d) * N * D, 0);
  for (int64_t b = 0; b < d.batch; ++b) {
    const int64_t kvB = b / G; // the k/v batch entry b reads
    const double *qb = &q[b * M * D], *kb = &k[kvB * N * D],
                 *vb = &v[kvB * N * D], *dob = &dO[b * M * D];
    for (int64_t i = 0; i < M; ++i) {
      std::vector<double> z(N, -INFINITY), p(N, 0);
      double sum = 0;
      for (int64_t j = 0; j < N; ++j) {
        if (d.causal && j > i)
          continue;
        double dot = 0;
        for (int64_t e = 0; e < D; ++e)
          dot += qb[i * D + e] * kb[j * D + e];
        z[j] = scale * dot;
        sum += std::exp(z[j]);
      }
      double lse = std::log(sum);
      r.lse[b * M + i] = lse;
      for (int64_t j = 0; j < N; ++j)
        p[j] = std::exp(z[j] - lse);
      double *o = &r.o[(b * M + i) * D];
      for (int64_t j = 0; j < N; ++j)
        for (int64_t e = 0; e < D; ++e)
          o[e] += p[j] * vb[j * D + e];
      double delta = 0;
      for (int64_t e = 0; e < D; ++e)
        delta += dob[i * D + e] * o[e];
      for (int64_t j = 0; j < N; ++j) {
        double dp = 0;
        for (int64_t e = 0; e < D; ++e)
          dp += dob[i * D + e] * vb[j * D + e];
        double ds = scale * p[j] * (dp - delta);
        for (int64_t e = 0; e < D; ++e) {
          r.dv[(kvB * N + j) * D + e] += p[j] * dob[i * D + e];
          r.dq[(b * M + i) * D + e] += ds * kb[j * D + e];
          r.dk[(kvB * N + j) * D + e] += ds * qb[i * D + e];
        }
      }
    }
  }
  return r;
}

double maxDiff(const std::vector<float> &got, const std::vector<double> &want) {
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i)
    worst = std::max(worst, std::fabs(got[i] - want[i]));
  return worst;
}

void checkF32(int64_t batch, int64_t seqQ, int64_t seqK, int64_t dim,
              bool causal, unsigned seed, int64_t batchKV = 0) {
  dcrt_attention_desc d =
      makeDesc(batch, seqQ, seqK, dim, causal, 1 / std::sqrt(double(dim)),
               DCRT_F32, batchKV);
  d = checkAttentionDesc(&d, "test", AttentionDirection::Backward);
  const int64_t kvBatch = attentionKVBatch(d);
  auto q = random(batch * seqQ * dim, seed),
       k = random(kvBatch * seqK * dim, seed + 1),
       v = random(kvBatch * seqK * dim, seed + 2),
       dO = random(batch * seqQ * dim, seed + 3);
  Reference r = reference(d, q, k, v, dO);
  auto qf = toFloat(q), kf = toFloat(k), vf = toFloat(v), dof = toFloat(dO);
  std::vector<float> o(q.size()), lse(batch * seqQ), dq(q.size()), dk(k.size()),
      dv(v.size());
  hostAttentionForward(d, qf.data(), kf.data(), vf.data(), o.data(),
                       lse.data());
  hostAttentionBackward(d, qf.data(), kf.data(), vf.data(), o.data(),
                        lse.data(), dof.data(), dq.data(), dk.data(),
                        dv.data());
  std::string what = describeAttention(d);
  EXPECT_LT(maxDiff(o, r.o), 1e-5) << what;
  EXPECT_LT(maxDiff(lse, r.lse), 1e-5) << what;
  EXPECT_LT(maxDiff(dq, r.dq), 1e-5) << what;
  EXPECT_LT(maxDiff(dk, r.dk), 1e-5) << what;
  EXPECT_LT(maxDiff(dv, r.dv), 1e-5) << what;
}

using Bytes = std::vector<unsigned char>;
using Op = AttentionOperand;

/// `count` random elements of `dtype`.
Bytes randomBytes(int64_t count, int32_t dtype, unsigned seed) {
  std::vector<float> values = toFloat(random(count, seed));
  Bytes out(static_cast<size_t>(count * dtypeSize(dtype)));
  convert(values.data(), DCRT_F32, out.data(), dtype, count);
  return out;
}

int64_t entriesOf(const dcrt_attention_desc &d, Op op) {
  return isKVOperand(op) ? d.batch_kv : d.batch;
}
int64_t rowsOf(const dcrt_attention_desc &d, Op op) {
  return isKVOperand(op) ? d.seq_k : d.seq_q;
}

/// Copies every row of `op` from `src` laid out as in `from` to `dst` laid
/// out as in `to` (both checked descriptors of the same shape).
void relayout(const dcrt_attention_desc &from, const void *src,
              const dcrt_attention_desc &to, void *dst, Op op) {
  AttentionLayout a = attentionLayout(from, op), b = attentionLayout(to, op);
  const int64_t size = dtypeSize(static_cast<int32_t>(from.dtype));
  for (int64_t n = 0; n < entriesOf(from, op); ++n)
    for (int64_t i = 0; i < rowsOf(from, op); ++i)
      std::memcpy(static_cast<char *>(dst) + b.offset(n, i) * size,
                  static_cast<const char *>(src) + a.offset(n, i) * size,
                  static_cast<size_t>(from.head_dim * size));
}

/// Marks the bytes of `op`'s rows at byte `at` of a buffer.
void markRows(const dcrt_attention_desc &d, Op op, int64_t at,
              std::vector<bool> &written) {
  AttentionLayout layout = attentionLayout(d, op);
  const int64_t size = dtypeSize(static_cast<int32_t>(d.dtype));
  for (int64_t n = 0; n < entriesOf(d, op); ++n)
    for (int64_t i = 0; i < rowsOf(d, op); ++i)
      for (int64_t byte = 0; byte < d.head_dim * size; ++byte) {
        size_t index =
            static_cast<size_t>(at + layout.offset(n, i) * size + byte);
        ASSERT_LT(index, written.size()) << attentionOperandName(op);
        written[index] = true;
      }
}

/// The strided forward and backward on `buffers` (q, k, v, o, dO, dq, dk,
/// dv, in AttentionOperand's order) give the same bits as the dense call on
/// dense copies of the inputs: o, lse, dq, dk, dv.
void expectSameAsDense(const dcrt_attention_desc &in,
                       void *const (&buffers)[kAttentionOperands]) {
  dcrt_attention_desc s =
      checkAttentionDesc(&in, "test", AttentionDirection::Backward);
  dcrt_attention_desc d = s;
  d.heads = 0;
  d = checkAttentionDesc(&d, "test", AttentionDirection::Backward);
  std::string what = describeAttention(s);
  const int64_t size = dtypeSize(static_cast<int32_t>(s.dtype));
  std::vector<Bytes> dense(kAttentionOperands);
  void *x[kAttentionOperands];
  for (int i = 0; i < kAttentionOperands; ++i) {
    auto op = static_cast<Op>(i);
    dense[i].assign(static_cast<size_t>(entriesOf(s, op) * rowsOf(s, op) *
                                        s.head_dim * size),
                    0);
    x[i] = dense[i].data();
  }
  for (Op op : {Op::Q, Op::K, Op::V, Op::DO})
    relayout(s, buffers[static_cast<int>(op)], d, x[static_cast<int>(op)], op);
  std::vector<float> lse(s.batch * s.seq_q), denseLse(lse.size());
  auto b = [&](Op op) { return buffers[static_cast<int>(op)]; };
  auto dn = [&](Op op) { return x[static_cast<int>(op)]; };
  hostAttentionForward(s, b(Op::Q), b(Op::K), b(Op::V), b(Op::O), lse.data());
  hostAttentionForward(d, dn(Op::Q), dn(Op::K), dn(Op::V), dn(Op::O),
                       denseLse.data());
  hostAttentionBackward(s, b(Op::Q), b(Op::K), b(Op::V), b(Op::O), lse.data(),
                        b(Op::DO), b(Op::DQ), b(Op::DK), b(Op::DV));
  hostAttentionBackward(d, dn(Op::Q), dn(Op::K), dn(Op::V), dn(Op::O),
                        denseLse.data(), dn(Op::DO), dn(Op::DQ), dn(Op::DK),
                        dn(Op::DV));
  EXPECT_EQ(0, std::memcmp(lse.data(), denseLse.data(), lse.size() * 4))
      << "lse of " << what;
  for (Op op : {Op::O, Op::DQ, Op::DK, Op::DV}) {
    Bytes got(dense[static_cast<int>(op)].size());
    relayout(s, b(op), d, got.data(), op);
    EXPECT_TRUE(got == dense[static_cast<int>(op)])
        << attentionOperandName(op) << " of " << what;
  }
}

/// A strided descriptor: `heads` query heads, every operand with the
/// strides of its row in `strides` (q, k, v, o, dO, dq, dk, dv).
dcrt_attention_desc
makeStrided(dcrt_attention_desc d, int64_t heads,
            const int64_t (&strides)[kAttentionOperands][3]) {
  d.heads = heads;
  for (int i = 0; i < kAttentionOperands; ++i)
    std::memcpy(
        const_cast<int64_t *>(attentionStrideField(d, static_cast<Op>(i))),
        strides[i], sizeof(strides[i]));
  return d;
}

/// q, o, dO, dq as [B, S, H, D] and k, v, dk, dv as [B, S, Hkv, D] (the
/// layout before the head transposes), against the dense call.
void checkBSHD(int64_t B, int64_t S, int64_t H, int64_t Hkv, int64_t D,
               int32_t dtype, bool causal, unsigned seed) {
  const int64_t q[3] = {S * H * D, D, H * D}, kv[3] = {S * Hkv * D, D, Hkv * D};
  const int64_t strides[kAttentionOperands][3] = {
      {q[0], q[1], q[2]},    {kv[0], kv[1], kv[2]}, {kv[0], kv[1], kv[2]},
      {q[0], q[1], q[2]},    {q[0], q[1], q[2]},    {q[0], q[1], q[2]},
      {kv[0], kv[1], kv[2]}, {kv[0], kv[1], kv[2]}};
  dcrt_attention_desc d = makeStrided(
      makeDesc(B * H, S, S, D, causal, 1 / std::sqrt(float(D)), dtype, B * Hkv),
      H, strides);
  std::vector<Bytes> x(kAttentionOperands);
  void *buffers[kAttentionOperands];
  for (int i = 0; i < kAttentionOperands; ++i) {
    x[i] = randomBytes(B * S * (isKVOperand(static_cast<Op>(i)) ? Hkv : H) * D,
                       dtype, seed + i);
    buffers[i] = x[i].data();
  }
  expectSameAsDense(d, buffers);
}

} // namespace

TEST(HostAttention, F32MatchesADoubleReference) {
  checkF32(2, 5, 5, 4, false, 1);
  checkF32(2, 5, 5, 4, true, 11);
  checkF32(3, 3, 7, 8, false, 21); // more keys than queries
  checkF32(1, 16, 16, 16, true, 31);
}

TEST(HostAttention, GroupedQueryF32MatchesADoubleReference) {
  // 6 query batch entries over 3 (groups of 2), 2 (groups of 3) and 1
  // (multi-query) key/value entries; the reference sums dk and dv over a
  // group.
  checkF32(6, 5, 5, 4, true, 51, 3);
  checkF32(6, 5, 5, 4, false, 61, 2);
  checkF32(6, 3, 7, 8, false, 71, 1);
  checkF32(4, 6, 6, 4, true, 81, 4); // batch_kv == batch: no grouping
}

TEST(HostAttention, GroupedQueryEqualsRepeatedKeysAndValues) {
  // Grouping is repeat_kv: the same outputs as k and v repeated per query
  // entry, with dk and dv the sums of the repeated copies' gradients.
  const int64_t B = 4, G = 2, S = 5, D = 4;
  dcrt_attention_desc grouped = makeDesc(B, S, S, D, true, 0.5f, DCRT_F32, 2);
  dcrt_attention_desc full = makeDesc(B, S, S, D, true, 0.5f);
  auto q = toFloat(random(B * S * D, 91)), k = toFloat(random(2 * S * D, 92)),
       v = toFloat(random(2 * S * D, 93)), dO = toFloat(random(B * S * D, 94));
  std::vector<float> kr, vr;
  for (int64_t b = 0; b < B; ++b) {
    kr.insert(kr.end(), k.begin() + (b / G) * S * D,
              k.begin() + (b / G + 1) * S * D);
    vr.insert(vr.end(), v.begin() + (b / G) * S * D,
              v.begin() + (b / G + 1) * S * D);
  }
  std::vector<float> o1(q.size()), o2(q.size()), l1(B * S), l2(B * S),
      dq1(q.size()), dq2(q.size()), dk1(k.size()), dv1(v.size()),
      dk2(kr.size()), dv2(vr.size());
  hostAttentionForward(grouped, q.data(), k.data(), v.data(), o1.data(),
                       l1.data());
  hostAttentionForward(full, q.data(), kr.data(), vr.data(), o2.data(),
                       l2.data());
  EXPECT_EQ(o1, o2);
  EXPECT_EQ(l1, l2);
  hostAttentionBackward(grouped, q.data(), k.data(), v.data(), o1.data(),
                        l1.data(), dO.data(), dq1.data(), dk1.data(),
                        dv1.data());
  hostAttentionBackward(full, q.data(), kr.data(), vr.data(), o2.data(),
                        l2.data(), dO.data(), dq2.data(), dk2.data(),
                        dv2.data());
  EXPECT_EQ(dq1, dq2);
  for (size_t i = 0; i < k.size(); ++i) {
    size_t row = i / (S * D), rest = i % (S * D);
    float dk =
        dk2[(row * G) * S * D + rest] + dk2[(row * G + 1) * S * D + rest];
    float dv =
        dv2[(row * G) * S * D + rest] + dv2[(row * G + 1) * S * D + rest];
    EXPECT_NEAR(dk1[i], dk, 1e-6) << i;
    EXPECT_NEAR(dv1[i], dv, 1e-6) << i;
  }
}

TEST(HostAttention, OldStructSizeReadsNoBatchKV) {
  // A caller built before batch_kv (struct_size 64): whatever follows its
  // struct is not read, and k has q's batch.
  dcrt_attention_desc d = makeDesc(6, 4, 4, 8, true, 0.5f, DCRT_F32, 3);
  d.struct_size = kAttentionDescV1Size;
  dcrt_attention_desc checked =
      checkAttentionDesc(&d, "test", AttentionDirection::Backward);
  EXPECT_EQ(checked.batch_kv, 6);
  EXPECT_EQ(checked.struct_size, kAttentionDescV1Size);
  d.struct_size = sizeof(d);
  EXPECT_EQ(
      checkAttentionDesc(&d, "test", AttentionDirection::Backward).batch_kv, 3);
  d.batch_kv = 0;
  EXPECT_EQ(
      checkAttentionDesc(&d, "test", AttentionDirection::Backward).batch_kv, 6);
}

TEST(HostAttention, StridedBSHDIsTheDenseCallOnTransposedCopies) {
  // [B, S, H, D] (seq before heads): the same bits as the dense call on
  // [B, H, S, D] copies, the order of every sum unchanged.
  for (bool causal : {false, true}) {
    checkBSHD(2, 5, 3, 3, 4, DCRT_F32, causal, 101);
    checkBSHD(2, 5, 3, 3, 8, DCRT_BF16, causal, 111);
    checkBSHD(1, 3, 2, 2, 4, DCRT_F16, causal, 121);
  }
  // More keys than queries.
  const int64_t B = 2, M = 3, N = 6, H = 2, D = 4;
  const int64_t q[3] = {M * H * D, D, H * D}, k[3] = {N * H * D, D, H * D};
  const int64_t strides[kAttentionOperands][3] = {
      {q[0], q[1], q[2]}, {k[0], k[1], k[2]}, {k[0], k[1], k[2]},
      {q[0], q[1], q[2]}, {q[0], q[1], q[2]}, {q[0], q[1], q[2]},
      {k[0], k[1], k[2]}, {k[0], k[1], k[2]}};
  dcrt_attention_desc d =
      makeStrided(makeDesc(B * H, M, N, D, false, 0.5f, DCRT_BF16), H, strides);
  std::vector<Bytes> x;
  void *buffers[kAttentionOperands];
  for (int i = 0; i < kAttentionOperands; ++i) {
    x.push_back(
        randomBytes(B * H * (isKVOperand(static_cast<Op>(i)) ? N : M) * D,
                    DCRT_BF16, 131 + i));
  }
  for (int i = 0; i < kAttentionOperands; ++i)
    buffers[i] = x[i].data();
  expectSameAsDense(d, buffers);
}

TEST(HostAttention, StridedGroupedQueryIsTheDenseCallOnTransposedCopies) {
  // 4 query heads over 2 and over 1 key/value heads per sequence: query
  // head h reads key/value head h / group of the same sequence.
  for (bool causal : {false, true}) {
    checkBSHD(2, 5, 4, 2, 4, DCRT_F32, causal, 201);
    checkBSHD(2, 5, 4, 1, 8, DCRT_BF16, causal, 211);
  }
}

TEST(HostAttention, StridedSlicesOfAFusedProjection) {
  // q, k and v as column slices of one [B*S, 3*H*D] projection output; dq,
  // dk and dv into the same slices of a wider gradient buffer (a column
  // before, two after) whose other bytes stay as they were; o and dO
  // [B, S, H, D].
  const int64_t B = 2, S = 5, H = 3, D = 4, HD = H * D;
  for (int32_t dtype : {DCRT_F32, DCRT_BF16})
    for (bool causal : {false, true}) {
      const int64_t size = dtypeSize(dtype);
      const int64_t W = 3 * HD, GW = 3 * HD + 3, first = 1;
      const int64_t fused[3] = {S * W, D, W}, grad[3] = {S * GW, D, GW},
                    bshd[3] = {S * HD, D, HD};
      const int64_t strides[kAttentionOperands][3] = {
          {fused[0], fused[1], fused[2]}, {fused[0], fused[1], fused[2]},
          {fused[0], fused[1], fused[2]}, {bshd[0], bshd[1], bshd[2]},
          {bshd[0], bshd[1], bshd[2]},    {grad[0], grad[1], grad[2]},
          {grad[0], grad[1], grad[2]},    {grad[0], grad[1], grad[2]}};
      dcrt_attention_desc d = makeStrided(
          makeDesc(B * H, S, S, D, causal, 0.5f, dtype), H, strides);
      d = checkAttentionDesc(&d, "test", AttentionDirection::Backward);
      Bytes qkv = randomBytes(B * S * W, dtype, 301), o(B * S * HD * size),
            dO = randomBytes(B * S * HD, dtype, 302),
            grads = randomBytes(B * S * GW, dtype, 303);
      const Bytes gradsBefore = grads;
      char *g = reinterpret_cast<char *>(grads.data());
      char *f = reinterpret_cast<char *>(qkv.data());
      void *buffers[kAttentionOperands] = {f,
                                           f + HD * size,
                                           f + 2 * HD * size,
                                           o.data(),
                                           dO.data(),
                                           g + first * size,
                                           g + (first + HD) * size,
                                           g + (first + 2 * HD) * size};
      expectSameAsDense(d, buffers);
      std::vector<bool> written(grads.size());
      markRows(d, Op::DQ, first * size, written);
      markRows(d, Op::DK, (first + HD) * size, written);
      markRows(d, Op::DV, (first + 2 * HD) * size, written);
      int64_t untouched = 0, changed = 0;
      for (size_t i = 0; i < grads.size(); ++i)
        if (!written[i]) {
          ++untouched;
          changed += grads[i] != gradsBefore[i];
        }
      EXPECT_EQ(untouched, B * S * (GW - 3 * HD) * size);
      EXPECT_EQ(changed, 0) << describeAttention(d);
    }
}

TEST(HostAttention, StridedLayoutIsDescribedAndZeroedWhereIgnored) {
  const int64_t strides[kAttentionOperands][3] = {
      {60, 4, 12}, {60, 4, 12}, {60, 4, 12}, {60, 4, 12},
      {60, 4, 12}, {60, 4, 12}, {60, 4, 12}, {60, 4, 12}};
  dcrt_attention_desc d =
      makeStrided(makeDesc(6, 5, 5, 4, true, 0.5f), 3, strides);
  dcrt_attention_desc forward =
      checkAttentionDesc(&d, "test", AttentionDirection::Forward);
  EXPECT_EQ(forward.heads, 3);
  EXPECT_EQ(forward.o_strides[2], 12);
  // The backward's strides are the forward's to ignore: zeroed (plans are
  // keyed on them), and not shown.
  EXPECT_EQ(forward.do_strides[0], 0);
  EXPECT_EQ(forward.dv_strides[2], 0);
  EXPECT_NE(describeAttention(forward).find(
                ", heads 3, strides q {60, 4, 12} k {60, 4, 12} v {60, 4, "
                "12} o {60, 4, 12}"),
            std::string::npos)
      << describeAttention(forward);
  EXPECT_EQ(describeAttention(forward).find("dq"), std::string::npos);
  dcrt_attention_desc backward =
      checkAttentionDesc(&d, "test", AttentionDirection::Backward);
  EXPECT_NE(describeAttention(backward).find("dv {60, 4, 12}"),
            std::string::npos);
  // Dense: every stride field ignored, and the description as before.
  d.heads = 0;
  dcrt_attention_desc dense =
      checkAttentionDesc(&d, "test", AttentionDirection::Backward);
  EXPECT_EQ(dense.q_strides[0], 0);
  EXPECT_EQ(describeAttention(dense).find("heads"), std::string::npos);
  // The dense layout as [batch_kv, group] query entries, [batch_kv, 1]
  // key/value entries.
  d = makeDesc(6, 5, 7, 4, false, 0.5f, DCRT_F32, 2);
  d = checkAttentionDesc(&d, "test", AttentionDirection::Forward);
  AttentionLayout q = attentionLayout(d, Op::Q), k = attentionLayout(d, Op::K);
  EXPECT_EQ(q.heads, 3);
  EXPECT_EQ(k.heads, 1);
  for (int64_t n = 0; n < 6; ++n)
    EXPECT_EQ(q.offset(n, 2), (n * 5 + 2) * 4);
  for (int64_t n = 0; n < 2; ++n)
    EXPECT_EQ(k.offset(n, 6), (n * 7 + 6) * 4);
}

TEST(HostAttention, OldStructSizeReadsNoHeads) {
  // A caller built before heads (struct_size 72): heads and the strides
  // are not read, so whatever follows its struct does not make it strided.
  const int64_t strides[kAttentionOperands][3] = {};
  dcrt_attention_desc d =
      makeStrided(makeDesc(6, 4, 4, 8, true, 0.5f, DCRT_F32, 3), 3, strides);
  d.struct_size = kAttentionDescV2Size;
  d.q_strides[0] = -1; // would be rejected if read
  dcrt_attention_desc checked =
      checkAttentionDesc(&d, "test", AttentionDirection::Backward);
  EXPECT_EQ(checked.heads, 0);
  EXPECT_EQ(checked.q_strides[0], 0);
  EXPECT_EQ(checked.batch_kv, 3);
  EXPECT_EQ(checked.struct_size, kAttentionDescV2Size);
}

TEST(HostAttention, Bf16RoundsOnceFromF32) {
  const int64_t B = 2, S = 8, D = 8;
  dcrt_attention_desc d = makeDesc(B, S, S, D, true, 0.25f, DCRT_BF16);
  auto q = random(B * S * D, 5), k = random(B * S * D, 6),
       v = random(B * S * D, 7), dO = random(B * S * D, 8);
  // bf16 operands, and the same values in double for the reference.
  auto round = [](std::vector<double> &x, std::vector<uint16_t> &bits) {
    std::vector<float> f = toFloat(x);
    bits.resize(x.size());
    convert(f.data(), DCRT_F32, bits.data(), DCRT_BF16,
            static_cast<int64_t>(x.size()));
    convert(bits.data(), DCRT_BF16, f.data(), DCRT_F32,
            static_cast<int64_t>(x.size()));
    x.assign(f.begin(), f.end());
  };
  std::vector<uint16_t> qb, kb, vb, dob;
  round(q, qb);
  round(k, kb);
  round(v, vb);
  round(dO, dob);
  Reference r = reference(d, q, k, v, dO);
  std::vector<uint16_t> o(q.size()), dq(q.size()), dk(k.size()), dv(v.size());
  std::vector<float> lse(B * S);
  hostAttentionForward(d, qb.data(), kb.data(), vb.data(), o.data(),
                       lse.data());
  hostAttentionBackward(d, qb.data(), kb.data(), vb.data(), o.data(),
                        lse.data(), dob.data(), dq.data(), dk.data(),
                        dv.data());
  auto widen = [](const std::vector<uint16_t> &bits) {
    std::vector<float> f(bits.size());
    convert(bits.data(), DCRT_BF16, f.data(), DCRT_F32,
            static_cast<int64_t>(bits.size()));
    return f;
  };
  // One bf16 rounding of values below 2 (8 bits of mantissa), plus the
  // backward seeing the rounded o.
  EXPECT_LT(maxDiff(widen(o), r.o), 1e-2);
  EXPECT_LT(maxDiff(lse, r.lse), 1e-5);
  EXPECT_LT(maxDiff(widen(dq), r.dq), 2e-2);
  EXPECT_LT(maxDiff(widen(dk), r.dk), 2e-2);
  EXPECT_LT(maxDiff(widen(dv), r.dv), 2e-2);
}

TEST(HostAttention, BackwardMatchesFiniteDifferences) {
  // d/dq of sum(o * w) for a fixed w is the backward with dO = w.
  const int64_t B = 1, S = 4, D = 3;
  dcrt_attention_desc d = makeDesc(B, S, S, D, true, 0.7f);
  auto q = random(B * S * D, 41), k = random(B * S * D, 42),
       v = random(B * S * D, 43), w = random(B * S * D, 44);
  Reference r = reference(d, q, k, v, w);
  auto loss = [&](const std::vector<double> &qq) {
    Reference x = reference(d, qq, k, v, w);
    double sum = 0;
    for (size_t i = 0; i < x.o.size(); ++i)
      sum += x.o[i] * w[i];
    return sum;
  };
  for (size_t i = 0; i < q.size(); ++i) {
    auto plus = q, minus = q;
    plus[i] += 1e-6;
    minus[i] -= 1e-6;
    EXPECT_NEAR((loss(plus) - loss(minus)) / 2e-6, r.dq[i], 1e-6) << i;
  }
}

TEST(HostAttentionDeathTest, MalformedDescriptorsEndTheProgram) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto check = [](dcrt_attention_desc d) {
    checkAttentionDesc(&d, "test", AttentionDirection::Backward);
  };
  dcrt_attention_desc good = makeDesc(2, 4, 4, 8, true, 0.5f);
  check(good);
  EXPECT_DEATH(checkAttentionDesc(nullptr, "test", AttentionDirection::Forward),
               "test: null descriptor");
  dcrt_attention_desc d = good;
  d.struct_size = 8;
  EXPECT_DEATH(check(d), "struct_size must be at least 64");
  d = good;
  d.batch_kv = 3;
  EXPECT_DEATH(check(d), "batch_kv must be 0 or divide batch");
  d = good;
  d.batch_kv = -2;
  EXPECT_DEATH(check(d), "batch_kv must be 0 or divide batch");
  d = good;
  d.dtype = DCRT_I32;
  EXPECT_DEATH(check(d), "dtype must be f32, bf16 or f16");
  d = good;
  d.head_dim = 0;
  EXPECT_DEATH(check(d), "batch, seq_q, seq_k and head_dim must be positive");
  d = good;
  d.causal = 2;
  EXPECT_DEATH(check(d), "causal must be 0 or 1");
  d = good;
  d.seq_k = 5;
  EXPECT_DEATH(check(d), "causal attention needs seq_q == seq_k");
  d = good;
  d.scale_f32_bits = int64_t(1) << 40;
  EXPECT_DEATH(check(d), "upper 32 bits of scale_f32_bits must be zero");
  d = good;
  d.scale_f32_bits = attentionScaleBits(INFINITY);
  EXPECT_DEATH(check(d), "the scale must be finite");
  // Strided layouts: 2 heads of 3 sequences, [B, S, H, D].
  const int64_t bshd[3] = {4 * 2 * 8, 8, 2 * 8};
  const int64_t strides[kAttentionOperands][3] = {
      {bshd[0], bshd[1], bshd[2]}, {bshd[0], bshd[1], bshd[2]},
      {bshd[0], bshd[1], bshd[2]}, {bshd[0], bshd[1], bshd[2]},
      {bshd[0], bshd[1], bshd[2]}, {bshd[0], bshd[1], bshd[2]},
      {bshd[0], bshd[1], bshd[2]}, {bshd[0], bshd[1], bshd[2]}};
  const dcrt_attention_desc strided =
      makeStrided(makeDesc(6, 4, 4, 8, true, 0.5f), 2, strides);
  check(strided);
  d = strided;
  d.heads = -2;
  EXPECT_DEATH(check(d), "heads must be 0 \\(dense\\) or positive");
  d = strided;
  d.heads = 4;
  EXPECT_DEATH(check(d), "heads must divide batch \\(.*, heads 4, strides q");
  d = strided;
  d.batch_kv = 2; // outer = 3 sequences do not divide 2 k/v entries
  EXPECT_DEATH(check(d), "batch / heads \\(the outer dims\\) must divide "
                         "batch_kv");
  d = strided;
  d.k_strides[2] = 0;
  EXPECT_DEATH(check(d), "k_strides\\[2\\] must be positive");
  d = strided;
  d.q_strides[0] = -64;
  EXPECT_DEATH(check(d), "q_strides\\[0\\] must be positive");
  d = strided;
  d.dv_strides[1] = 0;
  EXPECT_DEATH(check(d), "dv_strides\\[1\\] must be positive");
  // The forward reads no gradient strides.
  checkAttentionDesc(&d, "test", AttentionDirection::Forward);
  d.o_strides[1] = 0;
  EXPECT_DEATH(checkAttentionDesc(&d, "test", AttentionDirection::Forward),
               "o_strides\\[1\\] must be positive");

  const void *buffers[] = {&d, nullptr};
  const char *names[] = {"q", "k"};
  EXPECT_DEATH(checkAttentionBuffers(good, buffers, names, 2, "test"),
               "test: null buffer k for bf16|f32");
}
