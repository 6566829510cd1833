//===- BufferAliasing.h - which values name one buffer ----------*- C++ -*-===//
//
// What the planning passes and the schedule verifier ask about a value's
// buffer once bufferized: its views, its last use, its releases.
//
//===----------------------------------------------------------------------===//
#ifndef DC_ANALYSIS_BUFFERALIASING_H
#define DC_ANALYSIS_BUFFERALIASING_H

#include "dc/Dialect/DC/IR/DCDialect.h"

#include "mlir/IR/Block.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

namespace dc {

/// The values that name `value`'s buffer once bufferized: `value` itself
/// and, transitively, its views (tensor.expand_shape, collapse_shape, cast,
/// bitcast, extract_slice) and the results of loops that carry one of them
/// as an init (LoopLikeOpInterface). Destination-style results are not
/// followed: a later read of `value` (its dc.release) makes One-Shot
/// Bufferize write them into a copy.
llvm::SmallVector<mlir::Value> getBufferViews(mlir::Value value);

/// The top-level op of `body` after which `value`'s buffer is no longer read
/// or written: the last use of it or of its views (getBufferViews; a use by
/// a start op lasts until that start's last dc.wait; its own dc.release is
/// not a use), or null if a view is returned (the caller's from there).
/// `index` is the body's op order; ops missing from it (inserted since)
/// count as before every indexed op.
mlir::Operation *
getLastBufferUse(mlir::Block &body, mlir::Value value,
                 const llvm::DenseMap<mlir::Operation *, size_t> &index);

/// The dc.release ops of `value`, in the block order `index` gives.
llvm::SmallVector<ReleaseOp>
getReleasesInOrder(mlir::Value value,
                   const llvm::DenseMap<mlir::Operation *, size_t> &index);

/// True if `value` is a reloaded value: the result of a dc.wait on a
/// dc.reload_start future (an activation reloaded by dc-offload-activations,
/// or a parameter shard uploaded by dc-offload-params).
bool isReloadedValue(mlir::Value value);

} // namespace dc

#endif // DC_ANALYSIS_BUFFERALIASING_H
