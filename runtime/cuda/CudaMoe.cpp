//===- CudaMoe.cpp - the cuda backend's mixture-of-experts calls ----------===//
//
// Not on the cuda backend yet: every call is a fatal error naming it (the
// host backend runs them; dc-compile still expands the ops for GPUs).
//
//===----------------------------------------------------------------------===//
#include "CudaBackend.h"

#include "Moe.h"

#include "dcrt/error.hpp"

using namespace dcrt;
using namespace dcrt::detail;

namespace {
[[noreturn]] void notYet(const char *caller, const std::string &what) {
  fatal("%s: not implemented on the cuda backend yet (%s)", caller,
        what.c_str());
}
} // namespace

void CudaBackend::topk(const dcrt_topk_desc &d, const void *, void *, void *) {
  notYet("dcrt_topk", describeTopk(d));
}

void CudaBackend::groupByExpert(const dcrt_group_by_expert_desc &d,
                                const void *, void *, void *) {
  notYet("dcrt_group_by_expert", describeGroupByExpert(d));
}

void CudaBackend::gatherRows(const dcrt_row_map_desc &d, const void *,
                             const void *, void *) {
  notYet("dcrt_gather_rows", describeRowMap(d));
}

void CudaBackend::scatterAddRows(const dcrt_row_map_desc &d, const void *,
                                 const void *, void *) {
  notYet("dcrt_scatter_add_rows", describeRowMap(d));
}

void CudaBackend::groupedMatmul(const dcrt_grouped_matmul_desc &d, const void *,
                                const void *, const void *, void *) {
  notYet("dcrt_grouped_matmul", describeGroupedMatmul(d));
}

void CudaBackend::groupedWeightGrad(const dcrt_grouped_matmul_desc &d,
                                    const void *, const void *, const void *,
                                    void *) {
  notYet("dcrt_grouped_weight_grad", describeGroupedMatmul(d));
}
