//===- Planning.h - what every planning pass loads: target, budget  -*- C++ -*-===//
#ifndef DC_TRANSFORMS_PLANNING_H
#define DC_TRANSFORMS_PLANNING_H

#include "dc/Analysis/CostModel.h"

#include "dc/Dialect/DC/IR/DCDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Operation.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>

namespace dc {

/// Parses a byte size: a plain or scientific number of bytes ("2.5e9"), with
/// an optional unit (B, KB, MB, GB, KiB, MiB, GiB, TiB).
std::optional<int64_t> parseByteSize(llvm::StringRef text);

/// The budget a pass option names: bytes ("16GiB") or a fraction of the
/// target's device memory ("0.9", "90%"). Empty text: no budget (nullopt).
/// Errors (bad text, unknown target) are reported on `errorAt`.
mlir::FailureOr<std::optional<int64_t>>
resolveMemoryBudget(mlir::Operation *errorAt, llvm::StringRef text,
                    llvm::StringRef target);

/// The inputs every planning pass shares: one target, an optional measured
/// profile, and the one device-memory budget.
struct PlanningSetup {
  TargetDescription target;
  std::optional<Profile> profile;
  int64_t budgetBytes = 0;
  CostModel makeCostModel() const {
    return CostModel(target, profile ? &*profile : nullptr);
  }
};

/// Loads the target and profile and resolves the budget (empty text: the
/// target's whole device memory). Errors are reported on `errorAt`.
mlir::FailureOr<PlanningSetup>
loadPlanningSetup(mlir::Operation *errorAt, llvm::StringRef budgetText,
                  llvm::StringRef target, llvm::StringRef profilePath);

/// Loads the setup once, then plans every step function with a body in
/// turn, stopping at the first failure: what each planning pass's
/// runOnOperation does around its own planner.
mlir::LogicalResult planEachStep(
    mlir::ModuleOp module, llvm::StringRef budgetText, llvm::StringRef target,
    llvm::StringRef profilePath,
    llvm::function_ref<mlir::LogicalResult(mlir::func::FuncOp,
                                           const PlanningSetup &,
                                           const CostModel &)>
        plan);

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

/// Gives every reloaded value of `fn`'s body exactly one dc.release, right
/// after the top-level op of its last use: of it or of its views (a use
/// inside a nested region counts at its top-level op; a use by a start op,
/// e.g. the dc.gather_start of an uploaded shard, lasts until that start's
/// last dc.wait). A reloaded value with no use is released right after its
/// dc.wait; one that is returned is not released. Idempotent: an existing
/// release moves there (extra ones are erased), so planning passes that
/// move ops may call it again. The memory timeline frees the buffer at the
/// release, and the runtime does too (dcrt_release).
void insertReloadReleases(mlir::func::FuncOp fn);

/// "1.50 GiB (1610612736 B)"-style text for diagnostics and reports.
std::string formatBytes(int64_t bytes);

} // namespace dc

#endif // DC_TRANSFORMS_PLANNING_H
