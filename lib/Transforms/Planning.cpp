//===- Planning.cpp - target, profile and budget for planning passes -------===//
#include "dc/Transforms/Planning.h"

#include "dc/Dialect/DC/IR/DCDialect.h"
#include "dc/Analysis/TargetDescription.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/LoopLikeInterface.h"

#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdlib>

using namespace mlir;
using namespace dc;

std::optional<int64_t> dc::parseByteSize(StringRef text) {
  text = text.trim();
  size_t unitAt = text.find_if([](char c) { return std::isalpha(c) && c != 'e' && c != 'E'; });
  StringRef number = text.take_front(unitAt).trim();
  StringRef unit = unitAt == StringRef::npos ? "" : text.drop_front(unitAt).trim();
  double scale = llvm::StringSwitch<double>(unit)
                     .Cases({"", "B"}, 1.0)
                     .Case("KB", 1e3)
                     .Case("MB", 1e6)
                     .Case("GB", 1e9)
                     .Case("TB", 1e12)
                     .Case("KiB", 1024.0)
                     .Case("MiB", 1024.0 * 1024)
                     .Case("GiB", 1024.0 * 1024 * 1024)
                     .Case("TiB", 1024.0 * 1024 * 1024 * 1024)
                     .Default(-1);
  if (scale < 0 || number.empty())
    return std::nullopt;
  std::string digits = number.str();
  char *end = nullptr;
  double value = std::strtod(digits.c_str(), &end);
  if (end != digits.c_str() + digits.size() || !std::isfinite(value) ||
      value < 0)
    return std::nullopt;
  return static_cast<int64_t>(std::llround(value * scale));
}

FailureOr<std::optional<int64_t>>
dc::resolveMemoryBudget(Operation *errorAt, StringRef text, StringRef target) {
  text = text.trim();
  if (text.empty())
    return std::optional<int64_t>();
  // A fraction of the target's memory: "0.9" or "90%".
  std::optional<double> fraction;
  double value = 0;
  if (text.consume_back("%")) {
    if (!text.getAsDouble(value))
      fraction = value / 100.0;
  } else if (!text.getAsDouble(value) && value > 0 && value <= 1.0) {
    fraction = value;
  }
  if (fraction) {
    if (*fraction <= 0 || *fraction > 1)
      return errorAt->emitError()
             << "memory budget fraction must be in (0, 1], got " << *fraction;
    llvm::Expected<TargetDescription> desc = TargetDescription::load(target);
    if (!desc)
      return errorAt->emitError()
             << "cannot load target '" << target
             << "': " << llvm::toString(desc.takeError());
    return std::optional<int64_t>(static_cast<int64_t>(
        std::floor(*fraction * static_cast<double>(desc->deviceMemoryBytes))));
  }
  std::optional<int64_t> bytes = parseByteSize(text);
  if (!bytes)
    return errorAt->emitError()
           << "cannot parse memory budget '" << text
           << "': give bytes (e.g. 16GiB, 2.5e9) or a fraction (0.9, 90%)";
  return std::optional<int64_t>(*bytes);
}

std::string dc::formatBytes(int64_t bytes) {
  std::string text;
  llvm::raw_string_ostream os(text);
  double value = static_cast<double>(bytes);
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (std::fabs(value) >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  if (unit == 0)
    os << bytes << " B";
  else
    os << llvm::format("%.2f", value) << " " << units[unit] << " (" << bytes
       << " B)";
  return text;
}

FailureOr<dc::PlanningSetup>
dc::loadPlanningSetup(Operation *errorAt, StringRef budgetText,
                      StringRef target, StringRef profilePath) {
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

LogicalResult dc::planEachStep(
    ModuleOp module, StringRef budgetText, StringRef target,
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

SmallVector<Value> dc::getBufferViews(Value value) {
  SmallVector<Value> views{value};
  llvm::DenseSet<Value> seen{value};
  for (size_t next = 0; next < views.size(); ++next) {
    for (OpOperand &use : views[next].getUses()) {
      Operation *user = use.getOwner();
      SmallVector<Value> aliases;
      if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp, tensor::CastOp,
              tensor::BitcastOp, tensor::ExtractSliceOp>(user) &&
          use.getOperandNumber() == 0)
        aliases.push_back(user->getResult(0));
      else if (auto loop = dyn_cast<LoopLikeOpInterface>(user))
        if (OpResult result = loop.getTiedLoopResult(&use))
          aliases.push_back(result);
      for (Value alias : aliases)
        if (seen.insert(alias).second)
          views.push_back(alias);
    }
  }
  return views;
}

SmallVector<ReleaseOp>
dc::getReleasesInOrder(Value value,
                       const llvm::DenseMap<Operation *, size_t> &index) {
  SmallVector<ReleaseOp> releases;
  for (Operation *user : value.getUsers())
    if (auto release = dyn_cast<ReleaseOp>(user))
      releases.push_back(release);
  llvm::sort(releases, [&](ReleaseOp a, ReleaseOp b) {
    return index.lookup(a) < index.lookup(b);
  });
  return releases;
}

bool dc::isReloadedValue(Value value) {
  auto wait = value.getDefiningOp<WaitOp>();
  return wait && wait.getFuture().getDefiningOp<ReloadStartOp>();
}

/// The top-level op after which `value`'s buffer is no longer read or
/// written (see insertReloadReleases), or null if it escapes the step.
Operation *
dc::getLastBufferUse(Block &body, Value value,
                     const llvm::DenseMap<Operation *, size_t> &index) {
  // The def comes before every use, indexed or not.
  Operation *last = value.getDefiningOp();
  int64_t lastIndex = -1;
  auto later = [&](Operation *op) {
    auto it = index.find(op);
    int64_t at = it == index.end() ? -1 : static_cast<int64_t>(it->second);
    if (at > lastIndex) {
      last = op;
      lastIndex = at;
    }
  };
  for (Value view : getBufferViews(value)) {
    for (OpOperand &use : view.getUses()) {
      Operation *user = use.getOwner();
      if (isa<ReleaseOp>(user) && view == value)
        continue;
      Operation *top = body.findAncestorOpInBlock(*user);
      if (!top)
        continue;
      if (top->hasTrait<OpTrait::IsTerminator>())
        return nullptr; // returned: the caller's from here
      later(top);
      // A start op reads its operands until its futures are waited.
      for (Value result : top->getResults())
        if (isa<FutureType>(result.getType()))
          for (Operation *waiter : result.getUsers())
            if (Operation *wait = body.findAncestorOpInBlock(*waiter))
              later(wait);
    }
  }
  return last;
}

void dc::insertReloadReleases(func::FuncOp fn) {
  if (fn.isExternal() || !fn.getBody().hasOneBlock())
    return;
  Block &body = fn.getBody().front();
  llvm::DenseMap<Operation *, size_t> index;
  for (auto [i, op] : llvm::enumerate(body))
    index[&op] = i;
  // Where each release goes, decided before any moves (moving releases
  // changes no other op's place).
  SmallVector<std::pair<Value, Operation *>> placements;
  for (auto wait : body.getOps<WaitOp>())
    if (isReloadedValue(wait.getResult()))
      placements.push_back(
          {wait.getResult(), getLastBufferUse(body, wait.getResult(), index)});
  // Releases after one op keep the order of their values' waits.
  llvm::DenseMap<Operation *, Operation *> lastPlacedAfter;
  for (auto [value, last] : placements) {
    SmallVector<ReleaseOp> releases = getReleasesInOrder(value, index);
    if (!last) {
      for (ReleaseOp release : releases)
        release.erase();
      continue;
    }
    Operation *after = lastPlacedAfter.lookup(last);
    if (!after)
      after = last;
    ReleaseOp release;
    if (releases.empty()) {
      OpBuilder builder(fn.getContext());
      builder.setInsertionPointAfter(after);
      release = ReleaseOp::create(builder, last->getLoc(), value);
    } else {
      release = releases.front();
      if (release != after)
        release->moveAfter(after);
      for (ReleaseOp extra : llvm::drop_begin(releases))
        extra.erase();
    }
    lastPlacedAfter[last] = release;
  }
}
