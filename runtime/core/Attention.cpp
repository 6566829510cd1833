//===- Attention.cpp - dcrt_attention_*'s descriptor checks and messages --===//
#include "Attention.h"

#include "Descriptor.h"

#include "dcrt/dtype.hpp"
#include "dcrt/error.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>

using namespace dcrt;
using namespace dcrt::detail;

float dcrt::detail::attentionScale(const dcrt_attention_desc &desc) {
  auto bits = static_cast<uint32_t>(static_cast<uint64_t>(desc.scale_f32_bits));
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return scale;
}

int64_t dcrt::detail::attentionScaleBits(float scale) {
  uint32_t bits;
  std::memcpy(&bits, &scale, sizeof(bits));
  return static_cast<int64_t>(bits);
}

static const char *nameOf(int64_t dtype) { return descriptorDTypeName(dtype); }

namespace {
/// Each operand's name in messages, its stride field's name in dcrt.h and
/// that field, in AttentionOperand's order.
struct OperandInfo {
  const char *name;
  const char *strideFieldName;
  int64_t (dcrt_attention_desc::*strides)[3];
};
constexpr OperandInfo kOperandInfo[kAttentionOperands] = {
    {"q", "q_strides", &dcrt_attention_desc::q_strides},
    {"k", "k_strides", &dcrt_attention_desc::k_strides},
    {"v", "v_strides", &dcrt_attention_desc::v_strides},
    {"o", "o_strides", &dcrt_attention_desc::o_strides},
    {"dO", "do_strides", &dcrt_attention_desc::do_strides},
    {"dq", "dq_strides", &dcrt_attention_desc::dq_strides},
    {"dk", "dk_strides", &dcrt_attention_desc::dk_strides},
    {"dv", "dv_strides", &dcrt_attention_desc::dv_strides},
};
} // namespace

const char *dcrt::detail::attentionOperandName(AttentionOperand operand) {
  return kOperandInfo[static_cast<int>(operand)].name;
}

static const char *strideFieldName(AttentionOperand operand) {
  return kOperandInfo[static_cast<int>(operand)].strideFieldName;
}

static int64_t *strideField(dcrt_attention_desc &d, AttentionOperand operand) {
  return d.*(kOperandInfo[static_cast<int>(operand)].strides);
}

const int64_t *dcrt::detail::attentionStrideField(const dcrt_attention_desc &d,
                                                  AttentionOperand operand) {
  return strideField(const_cast<dcrt_attention_desc &>(d), operand);
}

AttentionLayout dcrt::detail::attentionLayout(const dcrt_attention_desc &d,
                                              AttentionOperand operand) {
  bool kv = isKVOperand(operand);
  if (d.heads > 0) {
    const int64_t *s = attentionStrideField(d, operand);
    return {kv ? d.heads / attentionKVGroup(d) : d.heads, {s[0], s[1], s[2]}};
  }
  // Dense: entry n is [n / heads, n % heads] of [batch_kv, heads] with
  // heads = group for q's side and 1 for k's, rows of head_dim.
  int64_t rows = kv ? d.seq_k : d.seq_q, entry = rows * d.head_dim;
  int64_t heads = kv ? 1 : attentionKVGroup(d);
  return {heads, {heads * entry, entry, d.head_dim}};
}

std::string dcrt::detail::describeAttention(const dcrt_attention_desc &d) {
  char text[384];
  std::snprintf(
      text, sizeof(text),
      "%s, batch %lld (kv %lld), seq_q %lld seq_k %lld head_dim %lld, %s "
      "%lld, scale %g (bits 0x%llx), struct_size %lld",
      nameOf(d.dtype), static_cast<long long>(d.batch),
      static_cast<long long>(d.batch_kv), static_cast<long long>(d.seq_q),
      static_cast<long long>(d.seq_k), static_cast<long long>(d.head_dim),
      "causal", static_cast<long long>(d.causal),
      static_cast<double>(attentionScale(d)),
      static_cast<unsigned long long>(d.scale_f32_bits),
      static_cast<long long>(d.struct_size));
  std::string out = text;
  if (d.heads == 0)
    return out;
  std::snprintf(text, sizeof(text), ", heads %lld, strides",
                static_cast<long long>(d.heads));
  out += text;
  // All-zero triples are operands the call does not use.
  for (int i = 0; i < kAttentionOperands; ++i) {
    auto operand = static_cast<AttentionOperand>(i);
    const int64_t *s = attentionStrideField(d, operand);
    if (s[0] == 0 && s[1] == 0 && s[2] == 0)
      continue;
    std::snprintf(text, sizeof(text), " %s {%lld, %lld, %lld}",
                  attentionOperandName(operand), static_cast<long long>(s[0]),
                  static_cast<long long>(s[1]), static_cast<long long>(s[2]));
    out += text;
  }
  return out;
}

dcrt_attention_desc
dcrt::detail::checkAttentionDesc(const dcrt_attention_desc *desc,
                                 const char *caller,
                                 AttentionDirection direction) {
  if (!desc)
    fatal("%s: null descriptor", caller);
  // Only the caller's struct_size bytes are read: an older caller's struct
  // ends before the fields appended since, which stay zero.
  dcrt_attention_desc d{};
  std::memcpy(&d, desc, kAttentionDescV1Size);
  auto bad = [&](const char *why) {
    fatal("%s: bad descriptor: %s (%s)", caller, why,
          describeAttention(d).c_str());
  };
  if (d.struct_size < kAttentionDescV1Size)
    bad("struct_size must be at least 64 (sizeof(dcrt_attention_desc) "
        "before batch_kv)");
  std::memcpy(&d, desc,
              std::min<size_t>(static_cast<size_t>(d.struct_size),
                               sizeof(dcrt_attention_desc)));
  if (d.dtype != DCRT_F32 && d.dtype != DCRT_BF16 && d.dtype != DCRT_F16)
    bad("dtype must be f32, bf16 or f16");
  if (d.batch <= 0 || d.seq_q <= 0 || d.seq_k <= 0 || d.head_dim <= 0)
    bad("batch, seq_q, seq_k and head_dim must be positive");
  if (d.batch_kv < 0 || (d.batch_kv > 0 && d.batch % d.batch_kv != 0))
    bad("batch_kv must be 0 or divide batch");
  if (d.causal != 0 && d.causal != 1)
    bad("causal must be 0 or 1");
  if (d.causal && d.seq_q != d.seq_k)
    bad("causal attention needs seq_q == seq_k");
  if (static_cast<uint64_t>(d.scale_f32_bits) >> 32)
    bad("the upper 32 bits of scale_f32_bits must be zero");
  if (!std::isfinite(attentionScale(d)))
    bad("the scale must be finite");
  d.batch_kv = attentionKVBatch(d);
  int used = d.heads ? attentionOperandCount(direction) : 0;
  // What the call does not read is zeroed, so that plans keyed on the
  // descriptor do not depend on it.
  for (int i = used; i < kAttentionOperands; ++i)
    std::fill_n(strideField(d, static_cast<AttentionOperand>(i)), 3, 0);
  if (d.heads == 0)
    return d;
  if (d.heads < 0)
    bad("heads must be 0 (dense) or positive");
  if (d.batch % d.heads != 0)
    bad("heads must divide batch");
  if (d.batch_kv % (d.batch / d.heads) != 0)
    bad("batch / heads (the outer dims) must divide batch_kv");
  for (int i = 0; i < used; ++i) {
    auto operand = static_cast<AttentionOperand>(i);
    const int64_t *s = attentionStrideField(d, operand);
    for (int j = 0; j < 3; ++j)
      if (s[j] <= 0) {
        char why[96];
        std::snprintf(why, sizeof(why), "%s[%d] must be positive",
                      strideFieldName(operand), j);
        bad(why);
      }
  }
  return d;
}

void dcrt::detail::checkAttentionBuffers(const dcrt_attention_desc &desc,
                                         const void *const *buffers,
                                         const char *const *names, int count,
                                         const char *caller) {
  for (int i = 0; i < count; ++i)
    if (!buffers[i])
      fatal("%s: null buffer %s for %s", caller, names[i],
            describeAttention(desc).c_str());
}
