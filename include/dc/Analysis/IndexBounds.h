//===- IndexBounds.h - how far a step's integer data may index --*- C++ -*-===//
//
// Token ids and targets are data: the step reads tables at them
// (an embedding's rows, the logits' columns), and an id past a table's end
// reads or writes outside it. This analysis follows the values of an
// integer data argument of a tensor-level step (through views, element
// reads, linalg.generic's block arguments, casts, and selects against a
// constant) to every place one is used as an index, and gives the smallest
// extent indexed: ids must lie in [0, bound). The compiler checks dc.vocab
// against it, and the manifest carries it to dc-run when the step has no
// dc.vocab, so that no option can send ids outside the tables.
//
//===----------------------------------------------------------------------===//
#ifndef DC_ANALYSIS_INDEXBOUNDS_H
#define DC_ANALYSIS_INDEXBOUNDS_H

#include "mlir/IR/Location.h"
#include "mlir/IR/Value.h"

#include <cstdint>
#include <optional>

namespace mlir::func {
class FuncOp;
} // namespace mlir::func

namespace dc {

/// The smallest extent an argument's values index, and the op indexing it.
struct IndexBound {
  int64_t bound;
  mlir::Location where;
};

/// The bound of `argument`'s values as indices, or nullopt where none of
/// them reaches an index of a static extent.
std::optional<IndexBound> findIndexBound(mlir::BlockArgument argument);

} // namespace dc

#endif // DC_ANALYSIS_INDEXBOUNDS_H
