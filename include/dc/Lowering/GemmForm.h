//===- GemmForm.h - which linalg ops are library matrix products -*- C++
//-*-===//
//
// One rule, asked by dc-map-to-gpu (what stays a library call) and by
// dc-to-dcrt (how the call is made): a linalg.matmul, batch_matmul, or a
// linalg.generic computing out + a * b (inputs of one type, widened to the
// output's), on buffers whose maps are the plain or transposed forms of a
// (batched) product and whose rows are contiguous.
//
//===----------------------------------------------------------------------===//
#ifndef DC_LOWERING_GEMMFORM_H
#define DC_LOWERING_GEMMFORM_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"

#include <optional>

namespace dc {

/// A row-major matrix product C (+)= op(A) op(B), batched or not.
struct GemmForm {
  bool batched = false;
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool transA = false, transB = false;
};

/// The form of `op`, or nullopt when it is not a library matrix product
/// (another op, other maps, element types the library lacks, a
/// non-contiguous row).
std::optional<GemmForm> getGemmForm(mlir::Operation *op);

/// The attribute dc-map-to-gpu sets on a matrix product whose output it
/// proved all zeros before it (the fill it removed): C = op(A) op(B).
constexpr llvm::StringLiteral kGemmOverwriteAttr = "dc.gemm_overwrite";

} // namespace dc

#endif // DC_LOWERING_GEMMFORM_H
