//===- Moe.cpp - the mixture-of-experts calls' checks and messages --------===//
#include "Moe.h"

#include "Descriptor.h"

#include "dcrt/dtype.hpp"
#include "dcrt/error.hpp"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>

using namespace dcrt;
using namespace dcrt::detail;

namespace {

const char *nameOf(int64_t dtype) { return descriptorDTypeName(dtype); }

bool isFloat(int64_t dtype) {
  return dtype == DCRT_F32 || dtype == DCRT_BF16 || dtype == DCRT_F16;
}

bool isIndex(int64_t dtype) { return dtype == DCRT_I32 || dtype == DCRT_I64; }

long long ll(int64_t value) { return static_cast<long long>(value); }

/// The largest value an index of `dtype` holds.
int64_t indexLimit(int64_t dtype) {
  return dtype == DCRT_I32 ? INT32_MAX : INT64_MAX;
}

} // namespace

//===----------------------------------------------------------------------===//
// Messages
//===----------------------------------------------------------------------===//

std::string dcrt::detail::describeTopk(const dcrt_topk_desc &d) {
  char text[320];
  std::snprintf(text, sizeof(text),
                "%s scores, %s indices, rows %lld, experts %lld, k %lld, "
                "scores_ld %lld, values_ld %lld, indices_ld %lld, "
                "struct_size %lld",
                nameOf(d.dtype), nameOf(d.index_dtype), ll(d.rows),
                ll(d.experts), ll(d.k), ll(d.scores_ld), ll(d.values_ld),
                ll(d.indices_ld), ll(d.struct_size));
  return text;
}

std::string
dcrt::detail::describeGroupByExpert(const dcrt_group_by_expert_desc &d) {
  char text[256];
  std::snprintf(text, sizeof(text),
                "%s ids, %s order, %s ends, assignments %lld, experts %lld, "
                "struct_size %lld",
                nameOf(d.ids_dtype), nameOf(d.order_dtype),
                nameOf(d.ends_dtype), ll(d.assignments), ll(d.experts),
                ll(d.struct_size));
  return text;
}

std::string dcrt::detail::describeRowMap(const dcrt_row_map_desc &d) {
  char text[320];
  std::snprintf(text, sizeof(text),
                "%s rows, %s index, indexed_rows %lld, table_rows %lld, "
                "width %lld, source_ld %lld, result_ld %lld, struct_size %lld",
                nameOf(d.dtype), nameOf(d.index_dtype), ll(d.indexed_rows),
                ll(d.table_rows), ll(d.width), ll(d.source_ld), ll(d.result_ld),
                ll(d.struct_size));
  return text;
}

std::string
dcrt::detail::describeGroupedMatmul(const dcrt_grouped_matmul_desc &d) {
  char text[448];
  std::snprintf(
      text, sizeof(text),
      "%s, %s ends, rows %lld, experts %lld, k %lld, p %lld, transpose_rhs "
      "%lld, accumulate %lld, lhs_ld %lld, rhs_ld %lld, out_ld %lld, "
      "rhs_expert_stride %lld, out_expert_stride %lld, struct_size %lld",
      nameOf(d.dtype), nameOf(d.ends_dtype), ll(d.rows), ll(d.experts), ll(d.k),
      ll(d.p), ll(d.transpose_rhs), ll(d.accumulate), ll(d.lhs_ld),
      ll(d.rhs_ld), ll(d.out_ld), ll(d.rhs_expert_stride),
      ll(d.out_expert_stride), ll(d.struct_size));
  return text;
}

//===----------------------------------------------------------------------===//
// Checks
//===----------------------------------------------------------------------===//

dcrt_topk_desc dcrt::detail::checkTopk(const dcrt_topk_desc *desc,
                                       const void *scores, const void *values,
                                       const void *indices,
                                       const char *caller) {
  dcrt_topk_desc d = readDescriptor(desc, kTopkDescV1Size, caller);
  auto bad = [&](const char *why) {
    fatal("%s: bad descriptor: %s (%s)", caller, why, describeTopk(d).c_str());
  };
  if (!isFloat(d.dtype))
    bad("dtype must be f32, bf16 or f16");
  if (!isIndex(d.index_dtype))
    bad("index_dtype must be i32 or i64");
  if (d.rows <= 0 || d.experts <= 0)
    bad("rows and experts must be positive");
  if (d.k < 1 || d.k > d.experts)
    bad("k must be in [1, experts]");
  if (d.scores_ld < d.experts)
    bad("scores_ld must be at least experts");
  if (d.values_ld < d.k || d.indices_ld < d.k)
    bad("values_ld and indices_ld must be at least k");
  if (!scores || !values || !indices)
    fatal("%s: null buffer (scores %p, values %p, indices %p) for %s", caller,
          scores, values, indices, describeTopk(d).c_str());
  return d;
}

dcrt_group_by_expert_desc
dcrt::detail::checkGroupByExpert(const dcrt_group_by_expert_desc *desc,
                                 const void *ids, const void *order,
                                 const void *ends, const char *caller) {
  dcrt_group_by_expert_desc d =
      readDescriptor(desc, kGroupByExpertDescV1Size, caller);
  auto bad = [&](const char *why) {
    fatal("%s: bad descriptor: %s (%s)", caller, why,
          describeGroupByExpert(d).c_str());
  };
  if (!isIndex(d.ids_dtype) || !isIndex(d.order_dtype) ||
      !isIndex(d.ends_dtype))
    bad("ids_dtype, order_dtype and ends_dtype must be i32 or i64");
  if (d.assignments <= 0 || d.experts <= 0)
    bad("assignments and experts must be positive");
  if (d.assignments > indexLimit(d.order_dtype) ||
      d.assignments > indexLimit(d.ends_dtype))
    bad("assignments must fit order_dtype and ends_dtype");
  if (!ids || !order || !ends)
    fatal("%s: null buffer (ids %p, order %p, ends %p) for %s", caller, ids,
          order, ends, describeGroupByExpert(d).c_str());
  return d;
}

dcrt_row_map_desc dcrt::detail::checkRowMap(const dcrt_row_map_desc *desc,
                                            const void *source,
                                            const void *index,
                                            const void *result,
                                            const char *caller) {
  dcrt_row_map_desc d = readDescriptor(desc, kRowMapDescV1Size, caller);
  auto bad = [&](const char *why) {
    fatal("%s: bad descriptor: %s (%s)", caller, why,
          describeRowMap(d).c_str());
  };
  if (!isFloat(d.dtype))
    bad("dtype must be f32, bf16 or f16");
  if (!isIndex(d.index_dtype))
    bad("index_dtype must be i32 or i64");
  if (d.indexed_rows <= 0 || d.table_rows <= 0 || d.width <= 0)
    bad("indexed_rows, table_rows and width must be positive");
  if (d.source_ld < d.width || d.result_ld < d.width)
    bad("source_ld and result_ld must be at least width");
  if (!source || !index || !result)
    fatal("%s: null buffer (source %p, index %p, result %p) for %s", caller,
          source, index, result, describeRowMap(d).c_str());
  return d;
}

dcrt_grouped_matmul_desc
dcrt::detail::checkGroupedMatmul(const dcrt_grouped_matmul_desc *desc,
                                 GroupedProduct product, const void *lhs,
                                 const void *rhs, const void *ends,
                                 const void *out, const char *caller) {
  dcrt_grouped_matmul_desc d =
      readDescriptor(desc, kGroupedMatmulDescV1Size, caller);
  auto bad = [&](const char *why) {
    fatal("%s: bad descriptor: %s (%s)", caller, why,
          describeGroupedMatmul(d).c_str());
  };
  bool forward = product == GroupedProduct::Forward;
  if (!isFloat(d.dtype))
    bad("dtype must be f32, bf16 or f16");
  if (!isIndex(d.ends_dtype))
    bad("ends_dtype must be i32 or i64");
  if (d.rows <= 0 || d.experts <= 0 || d.k <= 0 || d.p <= 0)
    bad("rows, experts, k and p must be positive");
  if (d.transpose_rhs != 0 && d.transpose_rhs != 1)
    bad("transpose_rhs must be 0 or 1");
  if (!forward && d.transpose_rhs)
    bad("transpose_rhs must be 0 for the weight gradient (swap lhs and rhs "
        "for a transposed weight)");
  if (d.accumulate != 0 && d.accumulate != 1)
    bad("accumulate must be 0 or 1");
  if (d.lhs_ld < d.k)
    bad("lhs_ld must be at least k (lhs is [rows, k])");
  if (forward) {
    if (d.rhs_ld < (d.transpose_rhs ? d.k : d.p))
      bad(d.transpose_rhs ? "rhs_ld must be at least k (rhs is [experts, p, "
                            "k])"
                          : "rhs_ld must be at least p (rhs is [experts, k, "
                            "p])");
    if (d.out_ld < d.p)
      bad("out_ld must be at least p (out is [rows, p])");
    if (d.rhs_expert_stride < 0)
      bad("rhs_expert_stride must not be negative");
    d.out_expert_stride = 0;
  } else {
    if (d.rhs_ld < d.p)
      bad("rhs_ld must be at least p (rhs is [rows, p])");
    if (d.out_ld < d.p)
      bad("out_ld must be at least p (out is [experts, k, p])");
    if (d.out_expert_stride < 0 ||
        (d.experts > 1 && d.out_expert_stride < (d.k - 1) * d.out_ld + d.p))
      bad("out_expert_stride must be at least one expert's matrix ((k - 1) * "
          "out_ld + p): the experts' outputs would overlap");
    d.rhs_expert_stride = 0;
  }
  if (!lhs || !rhs || !ends || !out)
    fatal("%s: null buffer (lhs %p, rhs %p, ends %p, out %p) for %s", caller,
          lhs, rhs, ends, out, describeGroupedMatmul(d).c_str());
  return d;
}

//===----------------------------------------------------------------------===//
// Routing as every backend reads it
//===----------------------------------------------------------------------===//

int64_t dcrt::detail::readIndex(const void *data, int32_t dtype, int64_t i) {
  return dtype == DCRT_I64 ? static_cast<const int64_t *>(data)[i]
                           : static_cast<const int32_t *>(data)[i];
}

std::vector<RowRange> dcrt::detail::expertRowRanges(const void *ends,
                                                    int32_t endsDtype,
                                                    int64_t experts,
                                                    int64_t rows) {
  std::vector<RowRange> ranges(static_cast<size_t>(experts + 1));
  int64_t hi = 0;
  for (int64_t e = 0; e < experts; ++e) {
    int64_t end =
        std::min(std::max<int64_t>(readIndex(ends, endsDtype, e), 0), rows);
    int64_t lo = hi;
    hi = std::max(lo, end);
    ranges[static_cast<size_t>(e)] = {lo, hi};
  }
  ranges[static_cast<size_t>(experts)] = {hi, rows};
  return ranges;
}
