//===- Moe.h - the mixture-of-experts calls: checks, host loops -----------===//
//
// What every backend shares about dcrt_topk, dcrt_group_by_expert,
// dcrt_gather_rows, dcrt_scatter_add_rows, dcrt_grouped_matmul and
// dcrt_grouped_weight_grad (dcrt.h): the descriptor checks core/Runtime.cpp
// runs before forwarding, the one-line descriptions error messages print,
// the rows of each expert as every backend reads `ends`, and the host
// backend's loops (host/HostMoe.cpp), declared here so that unit tests call
// them without a job.
//
//===----------------------------------------------------------------------===//
#ifndef DCRT_CORE_MOE_H
#define DCRT_CORE_MOE_H

#include "dcrt/dcrt.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dcrt::detail {

/// The struct_size of each descriptor's first version (the smallest
/// accepted).
constexpr int64_t kTopkDescV1Size = 72;
constexpr int64_t kGroupByExpertDescV1Size = 48;
constexpr int64_t kRowMapDescV1Size = 64;
constexpr int64_t kGroupedMatmulDescV1Size = 112;

/// Which grouped product a dcrt_grouped_matmul_desc is checked for.
enum class GroupedProduct { Forward, WeightGrad };

/// "bf16, i64 indices, rows 4096, experts 8, k 2, scores_ld 8, ...": every
/// field, for error messages.
std::string describeTopk(const dcrt_topk_desc &desc);
std::string describeGroupByExpert(const dcrt_group_by_expert_desc &desc);
std::string describeRowMap(const dcrt_row_map_desc &desc);
std::string describeGroupedMatmul(const dcrt_grouped_matmul_desc &desc);

/// Fatal (through dcrt::fatal, naming `caller` and the descriptor) unless
/// the descriptor is one the call accepts: struct_size at least the first
/// version's; float dtypes among f32, bf16, f16 and index dtypes among i32,
/// i64; positive sizes; row strides at least the row's length; for top-k
/// 1 <= k <= experts; for the grouped products 0/1 flags, transpose_rhs 0
/// for the weight gradient, expert strides >= 0 and out's experts not
/// overlapping; non-null buffers. Each returns the descriptor with the
/// fields the caller's struct_size lacks zeroed and those the call ignores
/// zeroed (what the backends take, and key plans on).
dcrt_topk_desc checkTopk(const dcrt_topk_desc *desc, const void *scores,
                         const void *values, const void *indices,
                         const char *caller);
dcrt_group_by_expert_desc
checkGroupByExpert(const dcrt_group_by_expert_desc *desc, const void *ids,
                   const void *order, const void *ends, const char *caller);
dcrt_row_map_desc checkRowMap(const dcrt_row_map_desc *desc, const void *source,
                              const void *index, const void *result,
                              const char *caller);
dcrt_grouped_matmul_desc
checkGroupedMatmul(const dcrt_grouped_matmul_desc *desc, GroupedProduct product,
                   const void *lhs, const void *rhs, const void *ends,
                   const void *out, const char *caller);

/// The experts' rows as every backend reads `ends` (E entries of
/// `endsDtype` over `rows` rows): E + 1 ranges, range e = [lo, hi) with lo
/// the previous range's hi (0 for e = 0) and hi = max(lo, min(max(ends[e],
/// 0), rows)), the running maximum of the clamped ends, so that the ranges
/// never overlap nor leave the buffer whatever `ends` holds; range E is
/// the rows past the last expert, [hi of E - 1, rows). Nondecreasing ends
/// within [0, rows] (what dc.group_by_expert makes) are read as they are.
struct RowRange {
  int64_t lo, hi;
};
std::vector<RowRange> expertRowRanges(const void *ends, int32_t endsDtype,
                                      int64_t experts, int64_t rows);
/// Element i of an i32 or i64 array.
int64_t readIndex(const void *data, int32_t dtype, int64_t i);

/// The host backend's loops: plain, in f32 where the op accumulates
/// (operands widened through dcrt::convert), each output rounded once.
/// Descriptors must have passed the checks above.
void hostTopk(const dcrt_topk_desc &desc, const void *scores, void *values,
              void *indices);
void hostGroupByExpert(const dcrt_group_by_expert_desc &desc, const void *ids,
                       void *order, void *ends);
void hostGatherRows(const dcrt_row_map_desc &desc, const void *source,
                    const void *index, void *result);
void hostScatterAddRows(const dcrt_row_map_desc &desc, const void *source,
                        const void *index, void *result);
void hostGroupedMatmul(const dcrt_grouped_matmul_desc &desc, const void *lhs,
                       const void *rhs, const void *ends, void *out);
void hostGroupedWeightGrad(const dcrt_grouped_matmul_desc &desc,
                           const void *lhs, const void *rhs, const void *ends,
                           void *out);

/// Whether score `a` at position `ai` comes before score `b` at `bi` in
/// top-k's order: larger first, a NaN before every number, ties (NaNs
/// among themselves too) to the lower position.
inline bool topkBefore(float a, int64_t ai, float b, int64_t bi) {
  bool aNaN = a != a, bNaN = b != b;
  if (aNaN || bNaN)
    return aNaN && (!bNaN || ai < bi);
  return a > b || (a == b && ai < bi);
}

} // namespace dcrt::detail

#endif // DCRT_CORE_MOE_H
