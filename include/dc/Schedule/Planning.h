//===- Planning.h - what every planning pass loads --------------*- C++ -*-===//
#ifndef DC_SCHEDULE_PLANNING_H
#define DC_SCHEDULE_PLANNING_H

#include "dc/Analysis/CostModel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Operation.h"

#include <cstdint>
#include <optional>
#include <string>

namespace dc {

/// The budget a user names: bytes ("16GiB") or a fraction of the target's
/// `deviceMemoryBytes` ("0.9", "90%"). Empty text: no budget (nullopt).
/// Errors are reported on `errorAt`.
mlir::FailureOr<std::optional<int64_t>>
resolveMemoryBudget(mlir::Operation *errorAt, llvm::StringRef text,
                    int64_t deviceMemoryBytes);

/// The inputs every planning pass shares: one target, an optional measured
/// profile, and the one device-memory budget.
struct PlanningSetup {
  TargetDescription target;
  std::optional<Profile> profile;
  int64_t budgetBytes = 0;
  /// The model predictions use (dc-report).
  CostModel makeCostModel() const {
    return CostModel(target, profile ? &*profile : nullptr);
  }
  /// The model planners choose with: copies at the target's planning rate
  /// (TargetDescription::forPlanning), so that what they hide stays hidden
  /// when the host link runs slower than usual.
  CostModel makePlanningCostModel() const {
    return CostModel(target.forPlanning(), profile ? &*profile : nullptr);
  }
};

/// The target and budget of the module around `at` (its #dc.target, see
/// getModuleTarget) and the profile at `profilePath` (none when empty).
/// Errors are reported on `at`.
mlir::FailureOr<PlanningSetup> loadPlanningSetup(mlir::Operation *at,
                                                 llvm::StringRef profilePath);

/// The invariants of a schedule that dc-verify-schedule proves and every
/// planning pass checks before it plans (so that no planner or analysis
/// assumes what nothing checked). Each reports a located error; a non-empty
/// `who` (the pass) begins it with "<who> cannot plan this step: ".
///
/// Each future is taken exactly once, by dc.wait or dc.end_backward.
mlir::LogicalResult verifyFutures(mlir::Block &body, llvm::StringRef who);
/// No gathered or reloaded value is used after its dc.release or released
/// twice, and every gather is released unless persistent. With
/// `reloads` false, the releases of reloaded values are not checked (a pass
/// that re-places them, insertReloadReleases, takes them as they are).
mlir::LogicalResult verifyReleases(mlir::Block &body, llvm::StringRef who,
                                   bool reloads = true);
/// The step is in tensor form (no argument or dc op is a memref: planning
/// comes before bufferization) of static shapes (arguments and the body's
/// results), and every transfer, wait and release is an op of the body
/// itself, not nested in a region.
mlir::LogicalResult verifyTensorForm(mlir::func::FuncOp fn,
                                     llvm::StringRef who);
/// All of the above on a function with a body, which must be one block
/// (`reloads` as for verifyReleases).
mlir::LogicalResult checkPlanningPreconditions(mlir::func::FuncOp fn,
                                               llvm::StringRef who,
                                               bool reloads = true);

/// Most ranks a grid axis may have: more is a typo, not a job (a
/// documented limit, docs/design.md).
constexpr int64_t kMaxWorldSize = 65536;

/// Fails, with "<pass>: option <option>=<value> must be ...", on `errorAt`
/// unless min <= value <= max.
mlir::LogicalResult checkOptionRange(mlir::Operation *errorAt,
                                     llvm::StringRef pass,
                                     llvm::StringRef option, int64_t value,
                                     int64_t min, int64_t max = INT64_MAX);

/// Device bytes the trainer keeps for `fn`'s parameters beside the step:
/// `bytesPerElement` per element of each parameter argument as the step
/// sees it (a sharded one's local slice). The step's own timeline does not
/// hold them: dc-run's AdamW keeps an fp32 master and two fp32 moments per
/// element (12 bytes), on the device, for every parameter.
int64_t trainerStateBytes(mlir::func::FuncOp fn, int64_t bytesPerElement);

/// Device bytes one optimizer step moves for `fn`'s parameters: for each
/// element of each parameter argument (a shard's local slice) it reads the
/// gradient and the state (`stateBytesPerElement`) and writes the state and
/// the parameter, as dc-run's device AdamW does after the step.
int64_t optimizerStepBytes(mlir::func::FuncOp fn, int64_t stateBytesPerElement);

/// Fails, with "<who>: optimizer-state-bytes must be >= 0, got N" on
/// `errorAt`, for a negative `bytesPerElement`.
mlir::LogicalResult checkOptimizerStateBytes(mlir::Operation *errorAt,
                                             int64_t bytesPerElement,
                                             llvm::StringRef who);

/// The part of `budget` left to `fn`'s step once the trainer's state
/// (trainerStateBytes) is set aside. A located error, beginning with
/// "<who>: ", when the state alone does not fit, or for a negative
/// `bytesPerElement`.
mlir::FailureOr<int64_t> stepBudget(mlir::func::FuncOp fn, int64_t budget,
                                    int64_t bytesPerElement,
                                    llvm::StringRef who);

/// Loads the setup once (the module's target and budget), checks every step
/// function with a body
/// (checkPlanningPreconditions, naming `passName`), then plans each in turn,
/// stopping at the first failure: what each planning pass's runOnOperation
/// does around its own planner. `replacesReloadReleases`: the pass places
/// the releases of reloaded values anew (the offload passes).
///
/// Each step is planned against what the budget leaves beside the
/// trainer's state (stepBudget with `optimizerStateBytes`).
mlir::LogicalResult
planEachStep(mlir::ModuleOp module, llvm::StringRef passName,
             llvm::StringRef profilePath, int64_t optimizerStateBytes,
             llvm::function_ref<mlir::LogicalResult(
                 mlir::func::FuncOp, const PlanningSetup &, const CostModel &)>
                 plan,
             bool replacesReloadReleases = false);

} // namespace dc

#endif // DC_SCHEDULE_PLANNING_H
