//===- AttentionTest.cpp - the host backend's dcrt_attention_* ------------===//
//
// The host loops (what dcrt_attention_fwd/bwd run on the host backend)
// against a direct double-precision reference of the op descriptions on
// random data, causal and not, f32 and bf16, with as many key/value heads
// as query heads and fewer (grouped-query attention); the backward also against
// finite differences of the forward; and every malformed descriptor ending
// the program with a message naming what is wrong.
//
//===----------------------------------------------------------------------===//
#include "Attention.h"

#include "dcrt/dtype.hpp"

#include <gtest/gtest.h>

#include <cmath>
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
  d = checkAttentionDesc(&d, "test");
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
  dcrt_attention_desc checked = checkAttentionDesc(&d, "test");
  EXPECT_EQ(checked.batch_kv, 6);
  EXPECT_EQ(checked.struct_size, kAttentionDescV1Size);
  d.struct_size = sizeof(d);
  EXPECT_EQ(checkAttentionDesc(&d, "test").batch_kv, 3);
  d.batch_kv = 0;
  EXPECT_EQ(checkAttentionDesc(&d, "test").batch_kv, 6);
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
  auto check = [](dcrt_attention_desc d) { checkAttentionDesc(&d, "test"); };
  dcrt_attention_desc good = makeDesc(2, 4, 4, 8, true, 0.5f);
  check(good);
  EXPECT_DEATH(checkAttentionDesc(nullptr, "test"), "test: null descriptor");
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
  const void *buffers[] = {&d, nullptr};
  const char *names[] = {"q", "k"};
  EXPECT_DEATH(checkAttentionBuffers(good, buffers, names, 2, "test"),
               "test: null buffer k for bf16|f32");
}
