//===- Attention.cpp - dcrt_attention_*'s descriptor checks and messages --===//
#include "Attention.h"

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

static const char *nameOf(int64_t dtype) {
  return dtype >= 0 && dtype <= DCRT_I64
             ? dtypeName(static_cast<int32_t>(dtype))
             : "<unknown dtype>";
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
  return text;
}

dcrt_attention_desc
dcrt::detail::checkAttentionDesc(const dcrt_attention_desc *desc,
                                 const char *caller) {
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
