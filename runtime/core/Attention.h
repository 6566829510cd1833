//===- Attention.h - dcrt_attention_*'s descriptor: checks, host loops ----===//
//
// What every backend shares about a dcrt_attention_desc (dcrt.h): the checks
// core/Runtime.cpp runs before forwarding, the one-line description error
// messages print, the scale, and where each operand's rows lie (dense or
// strided). The host backend's loops
// (host/HostAttention.cpp) are declared here too so that unit tests can
// call them without a job.
//
//===----------------------------------------------------------------------===//
#ifndef DCRT_CORE_ATTENTION_H
#define DCRT_CORE_ATTENTION_H

#include "dcrt/dcrt.h"

#include <cstdint>
#include <string>

namespace dcrt::detail {

/// The scale a descriptor holds (the float of its low 32 bits).
float attentionScale(const dcrt_attention_desc &desc);
/// The scale_f32_bits field for `scale`.
int64_t attentionScaleBits(float scale);

/// The struct_size of a dcrt_attention_desc before batch_kv (the oldest
/// accepted).
constexpr int64_t kAttentionDescV1Size = 64;
/// The struct_size before heads and the strides.
constexpr int64_t kAttentionDescV2Size = 72;

/// Which call a descriptor is checked for: the forward reads q, k, v and o's
/// strides, the backward all eight.
enum class AttentionDirection { Forward, Backward };

/// The operands with a layout (lse is always dense), in the descriptor's
/// order of stride fields.
enum class AttentionOperand { Q, K, V, O, DO, DQ, DK, DV };
constexpr int kAttentionOperands = 8;
/// The operands `direction` reads or writes: the first 4 or all 8.
inline int attentionOperandCount(AttentionDirection direction) {
  return direction == AttentionDirection::Forward ? 4 : kAttentionOperands;
}
/// "q", "k", ..., "dO", ... as dcrt.h names the buffers.
const char *attentionOperandName(AttentionOperand operand);
/// Whether `operand` has k's batch (k, v, dk, dv).
inline bool isKVOperand(AttentionOperand operand) {
  return operand == AttentionOperand::K || operand == AttentionOperand::V ||
         operand == AttentionOperand::DK || operand == AttentionOperand::DV;
}
/// The descriptor's stride field of `operand` ({outer, head, seq}).
const int64_t *attentionStrideField(const dcrt_attention_desc &desc,
                                    AttentionOperand operand);

/// k's batch (batch_kv, or batch where it is 0: no grouping).
inline int64_t attentionKVBatch(const dcrt_attention_desc &desc) {
  return desc.batch_kv ? desc.batch_kv : desc.batch;
}
/// Query batch entries per k/v batch entry (1 without grouping).
inline int64_t attentionKVGroup(const dcrt_attention_desc &desc) {
  return desc.batch / attentionKVBatch(desc);
}

/// Where an operand's rows lie: entry n (of batch, or batch_kv for k, v, dk,
/// dv) is [n / heads, n % heads] of [outer, heads], and its row i starts at
/// element offset(n, i) (head_dim is contiguous).
struct AttentionLayout {
  int64_t heads;      // entries per outer index (heads_kv for k's side)
  int64_t strides[3]; // of outer, head and seq, in elements
  int64_t offset(int64_t n, int64_t i) const {
    return n / heads * strides[0] + n % heads * strides[1] + i * strides[2];
  }
};
/// `operand`'s layout: the descriptor's strides when heads > 0, else the
/// dense one as [batch_kv, group] query entries and [batch_kv, 1] key/value
/// entries (what the cuda backend's graphs view). `desc` must have passed
/// checkAttentionDesc.
AttentionLayout attentionLayout(const dcrt_attention_desc &desc,
                                AttentionOperand operand);

/// "bf16, batch 64 (kv 16), seq_q 2048 seq_k 2048 head_dim 128, causal,
/// scale 0.0883883", then with heads > 0 the heads and each operand's
/// strides: every field, for error messages.
std::string describeAttention(const dcrt_attention_desc &desc);

/// Fatal (through dcrt::fatal, naming `caller` and the descriptor) unless
/// `desc` is one dcrt_attention_* accepts: struct_size at least
/// kAttentionDescV1Size; dtype f32, bf16 or f16; positive batch, seq_q,
/// seq_k, head_dim; batch_kv 0 or a positive divisor of batch; causal 0 or
/// 1, and seq_q == seq_k when 1; a finite scale with the upper 32 bits of
/// scale_f32_bits zero; heads 0, or positive, dividing batch, with
/// batch / heads dividing batch_kv and positive strides for every operand
/// `direction` uses. Returns the descriptor with the fields an older caller
/// (smaller struct_size) lacks zeroed, batch_kv set (batch where it was 0)
/// and the stride fields the call ignores zeroed (all of them when heads is
/// 0): what the backends take, and key plans on.
dcrt_attention_desc checkAttentionDesc(const dcrt_attention_desc *desc,
                                       const char *caller,
                                       AttentionDirection direction);

/// checkAttentionDesc, then every buffer of `count` is non-null (`names`
/// names them for the message).
void checkAttentionBuffers(const dcrt_attention_desc &desc,
                           const void *const *buffers, const char *const *names,
                           int count, const char *caller);

/// The host backend's dcrt_attention_fwd: per batch and query row, the
/// scores in f32 (operands widened through dcrt::convert), max-shifted
/// softmax, lse = max + log(sum), o = p v accumulated in f32 and rounded
/// once. Every operand is read and written through attentionLayout (dense
/// or strided alike). `desc` must have passed checkAttentionDesc.
void hostAttentionForward(const dcrt_attention_desc &desc, const void *q,
                          const void *k, const void *v, void *o, float *lse);

/// The host backend's dcrt_attention_bwd: p recomputed from q, k and lse,
/// delta = sum_d dO o (f32 over the stored o), then dv, dq, dk accumulated
/// in f32 and rounded once.
void hostAttentionBackward(const dcrt_attention_desc &desc, const void *q,
                           const void *k, const void *v, const void *o,
                           const float *lse, const void *dO, void *dq, void *dk,
                           void *dv);

} // namespace dcrt::detail

#endif // DCRT_CORE_ATTENTION_H
