//===- AttachTarget.cpp - the module's #dc.target
//--------------------------===//
//
// The one place a target is loaded and a budget parsed: every pass after
// this reads the attribute, so a pipeline loads its target once and the
// planners, the report and the manifest cannot disagree about it.
//
//===----------------------------------------------------------------------===//
#include "dc/Schedule/Passes.h"
#include "dc/Schedule/Planning.h"

#include "dc/Dialect/DC/IR/DCDialect.h"

namespace dc {
#define GEN_PASS_DEF_DCATTACHTARGET
#include "dc/Schedule/Passes.h.inc"
} // namespace dc

using namespace mlir;
using namespace dc;

namespace {

struct AttachTargetPass
    : public dc::impl::DCAttachTargetBase<AttachTargetPass> {
  using DCAttachTargetBase::DCAttachTargetBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<Lowering> kind;
    if (!lowering.empty()) {
      kind = symbolizeLowering(lowering);
      if (!kind) {
        module.emitError() << "dc-attach-target: unknown lowering '" << lowering
                           << "' (host, cuda_sm90)";
        return signalPassFailure();
      }
    }
    if (TargetAttr existing = findTargetAttr(module);
        existing && keepExisting) {
      if (kind)
        module->setAttr(kTargetAttrName,
                        TargetAttr::get(&getContext(), existing.getName(),
                                        *kind, existing.getMemoryBudget(),
                                        existing.getNumbers()));
      return;
    }
    llvm::Expected<TargetDescription> description =
        TargetDescription::load(target);
    if (!description) {
      module.emitError() << "cannot load target '" << target
                         << "': " << llvm::toString(description.takeError());
      return signalPassFailure();
    }
    if (kind)
      description->lowering = *kind;
    FailureOr<std::optional<int64_t>> budget = resolveMemoryBudget(
        module, memoryBudget, description->deviceMemoryBytes);
    if (failed(budget))
      return signalPassFailure();
    module->setAttr(
        kTargetAttrName,
        TargetAttr::get(&getContext(), *description,
                        budget->value_or(description->deviceMemoryBytes)));
  }
};

} // namespace
