//===- Planning.cpp - target, profile and budget for planning passes ------===//
#include "dc/Transforms/Planning.h"

#include "dc/Analysis/TargetDescription.h"
#include "dc/Support/ByteSize.h"

#include <cmath>

using namespace mlir;
using namespace dc;

FailureOr<std::optional<int64_t>>
dc::resolveMemoryBudget(Operation *errorAt, StringRef text, StringRef target) {
  text = text.trim();
  if (text.empty())
    return std::optional<int64_t>();
  StringRef original = text;
  auto unparsable = [&] {
    return errorAt->emitError()
           << "cannot parse memory budget '" << original
           << "': give bytes (e.g. 16GiB, 2.5e9) or a fraction (0.9, 90%)";
  };
  // A fraction of the target's memory: "0.9" or "90%". A plain number is a
  // fraction in (0, 1] or a whole number of bytes (2.5e9).
  std::optional<double> fraction;
  double value = 0;
  if (text.consume_back("%")) {
    if (text.getAsDouble(value))
      return unparsable();
    fraction = value / 100.0;
  } else if (!text.getAsDouble(value)) {
    if (value > 0 && value <= 1.0)
      fraction = value;
    else if (!(value >= 1) || value != std::floor(value))
      return errorAt->emitError()
             << "memory budget '" << original
             << "' is neither a fraction in (0, 1] nor a whole number of "
                "bytes";
  }
  if (fraction) {
    // Written so that NaN fails too.
    if (!(*fraction > 0 && *fraction <= 1))
      return errorAt->emitError()
             << "memory budget fraction must be in (0, 1], got " << *fraction;
    llvm::Expected<TargetDescription> desc = TargetDescription::load(target);
    if (!desc)
      return errorAt->emitError() << "cannot load target '" << target
                                  << "': " << llvm::toString(desc.takeError());
    return std::optional<int64_t>(static_cast<int64_t>(
        std::floor(*fraction * static_cast<double>(desc->deviceMemoryBytes))));
  }
  std::optional<int64_t> bytes = parseByteSize(text);
  if (!bytes)
    return unparsable();
  return std::optional<int64_t>(*bytes);
}

FailureOr<dc::PlanningSetup> dc::loadPlanningSetup(Operation *errorAt,
                                                   StringRef budgetText,
                                                   StringRef target,
                                                   StringRef profilePath) {
  PlanningSetup setup;
  llvm::Expected<TargetDescription> desc = TargetDescription::load(target);
  if (!desc)
    return errorAt->emitError() << "cannot load target '" << target
                                << "': " << llvm::toString(desc.takeError());
  setup.target = std::move(*desc);
  if (!profilePath.empty()) {
    llvm::Expected<Profile> profile = Profile::load(profilePath);
    if (!profile)
      return errorAt->emitError()
             << "cannot load profile '" << profilePath
             << "': " << llvm::toString(profile.takeError());
    setup.profile = std::move(*profile);
  }
  FailureOr<std::optional<int64_t>> budget =
      resolveMemoryBudget(errorAt, budgetText, target);
  if (failed(budget))
    return failure();
  setup.budgetBytes = budget->value_or(setup.target.deviceMemoryBytes);
  return setup;
}

LogicalResult
dc::planEachStep(ModuleOp module, StringRef budgetText, StringRef target,
                 StringRef profilePath,
                 function_ref<LogicalResult(func::FuncOp, const PlanningSetup &,
                                            const CostModel &)>
                     plan) {
  FailureOr<PlanningSetup> setup =
      loadPlanningSetup(module, budgetText, target, profilePath);
  if (failed(setup))
    return failure();
  CostModel costModel = setup->makeCostModel();
  for (auto fn : module.getOps<func::FuncOp>())
    if (!fn.isExternal() && failed(plan(fn, *setup, costModel)))
      return failure();
  return success();
}
