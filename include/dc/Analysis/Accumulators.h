//===- Accumulators.h - gradient accumulators of a step ---------*- C++ -*-===//
//
// dc-accumulate-gradients gives a step an fp32 accumulator argument per
// parameter whose gradient it sums locally over the micro-batches; the
// accumulating form returns the updated accumulator in the same buffer
// (the caller passes one buffer for the argument and the result). The
// names of the attributes that say so, for the passes, the memory timeline
// and the manifest.
//
//===----------------------------------------------------------------------===//
#ifndef DC_ANALYSIS_ACCUMULATORS_H
#define DC_ANALYSIS_ACCUMULATORS_H

#include "dc/Dialect/DC/IR/DCDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringRef.h"

#include <optional>

namespace dc {

/// On an accumulator argument and on the accumulating form's result that
/// updates it: the id (i64) of the parameter whose gradient it sums.
constexpr llvm::StringLiteral kAccumulatorAttrName = "dc.accumulator";
/// On the accumulating form: the symbol of the final form it belongs to.
constexpr llvm::StringLiteral kAccumulatesForAttrName = "dc.accumulates_for";
/// On the final form: the symbol of its accumulating form.
constexpr llvm::StringLiteral kAccumulatingStepAttrName =
    "dc.accumulating_step";
/// On both forms (and on a step the planner left alone): the micro-batches
/// the plan was made for (i64).
constexpr llvm::StringLiteral kMicroBatchesAttrName = "dc.micro_batches";
/// On the step: one dictionary per candidate parameter, the planner's
/// decision (name, id, bytes, saved_s, choice), for dc-report.
constexpr llvm::StringLiteral kAccumulationPlanAttrName =
    "dc.accumulation_plan";

/// The parameter id an argument or result accumulates, if it is an
/// accumulator.
inline std::optional<int64_t> getAccumulatedParam(mlir::func::FuncOp fn,
                                                  unsigned argument) {
  if (auto id = fn.getArgAttrOfType<mlir::IntegerAttr>(argument,
                                                       kAccumulatorAttrName))
    return id.getInt();
  return std::nullopt;
}
inline std::optional<int64_t> getAccumulatingResultParam(mlir::func::FuncOp fn,
                                                         unsigned result) {
  if (auto id = fn.getResultAttrOfType<mlir::IntegerAttr>(result,
                                                          kAccumulatorAttrName))
    return id.getInt();
  return std::nullopt;
}

/// Appends to `fn` an accumulator argument of `type` for parameter `id`
/// (`dc.accumulator`), named `<paramName>.grad_accum` (dc.name, the
/// manifest's name, and its location).
inline mlir::BlockArgument addAccumulatorArgument(mlir::func::FuncOp fn,
                                                  int64_t id,
                                                  llvm::StringRef paramName,
                                                  mlir::Type type) {
  mlir::MLIRContext *context = fn.getContext();
  unsigned index = fn.getNumArguments();
  auto name = mlir::StringAttr::get(context, paramName + ".grad_accum");
  mlir::NamedAttrList attrs;
  attrs.set(kAccumulatorAttrName,
            mlir::IntegerAttr::get(mlir::IntegerType::get(context, 64), id));
  attrs.set(kNameAttrName, name);
  (void)fn.insertArgument(index, type, attrs.getDictionary(context),
                          mlir::NameLoc::get(name, fn.getLoc()));
  return fn.getArgument(index);
}

/// Makes `fn`'s accumulating form: a clone named `<fn>_accumulate`
/// (`dc.accumulates_for = @fn`, without the plan) right after it, which `fn`
/// names (`dc.accumulating_step`). A located error, beginning with
/// "<passName>: ", where the name is taken.
inline mlir::FailureOr<mlir::func::FuncOp>
makeAccumulatingForm(mlir::func::FuncOp fn, llvm::StringRef passName) {
  mlir::MLIRContext *context = fn.getContext();
  std::string name = (fn.getSymName() + "_accumulate").str();
  auto module = fn->getParentOfType<mlir::ModuleOp>();
  if (module.lookupSymbol(name))
    return fn.emitError() << passName << ": @" << name
                          << " exists already; it would be the "
                             "accumulating form of @"
                          << fn.getSymName();
  auto clone = mlir::cast<mlir::func::FuncOp>(fn->clone());
  clone.setSymName(name);
  clone->removeAttr(kAccumulationPlanAttrName);
  clone->setAttr(kAccumulatesForAttrName,
                 mlir::FlatSymbolRefAttr::get(context, fn.getSymName()));
  module.getBody()->getOperations().insertAfter(fn->getIterator(), clone);
  fn->setAttr(kAccumulatingStepAttrName,
              mlir::FlatSymbolRefAttr::get(context, name));
  return clone;
}

} // namespace dc

#endif // DC_ANALYSIS_ACCUMULATORS_H
