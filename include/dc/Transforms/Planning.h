//===- Planning.h - what every planning pass loads ---------------*- C++
//-*-===//
#ifndef DC_TRANSFORMS_PLANNING_H
#define DC_TRANSFORMS_PLANNING_H

#include "dc/Analysis/CostModel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Operation.h"

#include <optional>
#include <string>

namespace dc {

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
mlir::FailureOr<PlanningSetup> loadPlanningSetup(mlir::Operation *errorAt,
                                                 llvm::StringRef budgetText,
                                                 llvm::StringRef target,
                                                 llvm::StringRef profilePath);

/// Loads the setup once, then plans every step function with a body in
/// turn, stopping at the first failure: what each planning pass's
/// runOnOperation does around its own planner.
mlir::LogicalResult
planEachStep(mlir::ModuleOp module, llvm::StringRef budgetText,
             llvm::StringRef target, llvm::StringRef profilePath,
             llvm::function_ref<mlir::LogicalResult(
                 mlir::func::FuncOp, const PlanningSetup &, const CostModel &)>
                 plan);

} // namespace dc

#endif // DC_TRANSFORMS_PLANNING_H
