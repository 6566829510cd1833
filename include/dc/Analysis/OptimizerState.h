//===- OptimizerState.h - the optimizer inside a step -----------*- C++ -*-===//
//
// dc-optimizer-in-step gives a step the optimizer's state as arguments
// (the AdamW moments and masters, the learning rate, the step count) and
// returns the updated parameters and state, each in its argument's buffer
// (the caller passes one buffer for the argument and its result), with the
// squared global gradient norm. The names of the attributes that say so,
// for the passes, the manifest and dc-report.
//
//===----------------------------------------------------------------------===//
#ifndef DC_ANALYSIS_OPTIMIZERSTATE_H
#define DC_ANALYSIS_OPTIMIZERSTATE_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringRef.h"

#include <optional>

namespace dc {

/// On a state argument and on the result that updates it: {param = <id>
/// (i64), state = "exp_avg" | "exp_avg_sq" | "master"}.
constexpr llvm::StringLiteral kOptimizerStateAttrName = "dc.optimizer_state";
/// On a result: the id (i64) of the parameter it updates, written into
/// that parameter's buffer.
constexpr llvm::StringLiteral kParamUpdateAttrName = "dc.param_update";
/// Unit attributes on the scalar arguments (f64 learning rate, i64 step
/// counting from 1) and on the f64 result holding the squared global
/// gradient norm.
constexpr llvm::StringLiteral kLearningRateAttrName = "dc.learning_rate";
constexpr llvm::StringLiteral kStepCountAttrName = "dc.step_count";
constexpr llvm::StringLiteral kGradSquaresAttrName = "dc.grad_squares";
/// On the step: the optimizer it runs, {name = "adamw", beta1, beta2, eps,
/// weight_decay, max_grad_norm (f64), master_dtype, moment_dtype
/// ("f32" | "bf16")}.
constexpr llvm::StringLiteral kOptimizerAttrName = "dc.optimizer";
/// On the step (dc-offload-optimizer-state): the ids (i64 array) of the
/// parameters whose state the caller keeps in host memory.
constexpr llvm::StringLiteral kStateInHostAttrName = "dc.state_in_host";

/// A state argument's or result's parameter and state name.
struct OptimizerStateRef {
  int64_t param = 0;
  llvm::StringRef state;
};

inline std::optional<OptimizerStateRef>
getOptimizerState(mlir::DictionaryAttr attrs) {
  if (!attrs)
    return std::nullopt;
  auto dict = attrs.getAs<mlir::DictionaryAttr>(kOptimizerStateAttrName);
  if (!dict)
    return std::nullopt;
  auto param = dict.getAs<mlir::IntegerAttr>("param");
  auto state = dict.getAs<mlir::StringAttr>("state");
  if (!param || !state)
    return std::nullopt;
  return OptimizerStateRef{param.getInt(), state.getValue()};
}

} // namespace dc

#endif // DC_ANALYSIS_OPTIMIZERSTATE_H
