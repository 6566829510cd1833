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
#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

namespace dc {

/// The operand whose buffer `op`'s result is a view of once bufferized, or
/// null. This is the one rule for views: the memory timeline (a view
/// allocates nothing), the cost model (a view is free), the offload pass
/// (a viewed buffer is not the value's alone to free) and the schedule
/// verifier all ask here. tensor.expand_shape, collapse_shape, cast, bitcast
/// and extract_slice (a memref.subview) are views; so is any other op whose
/// One-Shot Bufferize model says its result aliases exactly one tensor
/// operand, which it neither reads nor writes.
mlir::OpOperand *getViewedOperand(mlir::Operation *op);

/// The value that allocates the buffer `value` names: `value` itself, or
/// what it views (getViewedOperand), transitively.
mlir::Value getViewedBuffer(mlir::Value value);

/// True if `use` hands its buffer on: it is returned, or is a
/// destination-style op's init (the op's result shares the buffer).
bool handsOnItsBuffer(mlir::OpOperand &use);

/// True if no other value names `value`'s buffer: it has no view and no use
/// hands it on (handsOnItsBuffer). Offloading such a value frees its
/// buffer.
bool ownsItsBuffer(mlir::Value value);

/// The values that name `value`'s buffer once bufferized: `value` itself
/// and, transitively, its views (getViewedOperand) and the results of loops
/// that carry one of them as an init (LoopLikeOpInterface). Destination-style
/// results are not followed: a later read of `value` (its dc.release) makes
/// One-Shot Bufferize write them into a copy.
llvm::SmallVector<mlir::Value> getBufferViews(mlir::Value value);

/// The uses of `value`'s buffer: those of `value` and of its views
/// (getViewedOperand, transitively), the view ops aside (their results'
/// uses are listed instead). A planner that offloads or recomputes the
/// buffer frees it once the uses before its gap are done, and serves the
/// uses after it through views of the new value (redirectBufferUses).
llvm::SmallVector<mlir::OpOperand *> getBufferUses(mlir::Value value);

/// Points the uses of `value`'s buffer that `redirect` selects at
/// `replacement` (a value of `value`'s type holding the same data): a use
/// of a view of `value` is pointed at a clone of that view (chain) on
/// `replacement`, made at `builder`'s insertion point; a view op selected
/// itself views `replacement` (its own uses follow it). Uses are offered
/// from `value` outwards, and a selected one's view is not followed.
/// Returns each clone's result with the view it copies (undo: point the
/// clone's uses back at the view, then erase the clones, newest first).
llvm::SmallVector<std::pair<mlir::Value, mlir::Value>>
redirectBufferUses(mlir::Value value, mlir::Value replacement,
                   llvm::function_ref<bool(mlir::OpOperand &)> redirect,
                   mlir::OpBuilder &builder);

/// The top-level op of `body` after which `value`'s buffer is no longer read
/// or written: the last use of it or of its views (getBufferViews; a use by
/// a start op lasts until that start's last dc.wait; its own dc.release is
/// not a use), or null if a view is returned (the caller's from there).
/// `index` is the body's op order; ops missing from it (inserted since)
/// count as before every indexed op.
mlir::Operation *
getLastBufferUse(mlir::Block &body, mlir::Value value,
                 const llvm::DenseMap<mlir::Operation *, size_t> &index);

/// True if `writer`, a top-level op of `init`'s block that takes `init` as a
/// destination-style init, writes its result into `init`'s buffer once
/// bufferized although `init` has other uses: `init` is a linalg op's
/// result (a buffer of the step's own, not an argument's or a transfer's)
/// and every other use of it and of its views (getBufferViews) is a read by
/// an op before `writer` in the block, none of them a dc op (a transfer
/// reads until its wait) nor an init. One-Shot Bufferize then finds no read
/// after the write and updates `init` in place.
bool isLastReadBeforeInPlaceWrite(mlir::Value init, mlir::Operation *writer);

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
