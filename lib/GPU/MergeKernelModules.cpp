//===- MergeKernelModules.cpp - every kernel in one gpu.module ------------===//
#include "dc/GPU/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/SymbolTable.h"

namespace dc {
#define GEN_PASS_DEF_DCMERGEKERNELMODULES
#include "dc/GPU/Passes.h.inc"
} // namespace dc

using namespace mlir;

namespace {

struct MergeKernelModulesPass
    : public dc::impl::DCMergeKernelModulesBase<MergeKernelModulesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto kernelModules = llvm::to_vector(module.getOps<gpu::GPUModuleOp>());
    if (kernelModules.size() < 2)
      return;
    gpu::GPUModuleOp merged = kernelModules.front();
    SymbolTable mergedSymbols(merged);
    // Old (module, kernel) -> new kernel name in `merged`.
    llvm::DenseMap<std::pair<StringAttr, StringAttr>, StringAttr> renamed;
    for (gpu::GPUModuleOp from : llvm::drop_begin(kernelModules)) {
      if (from.getTargetsAttr() != merged.getTargetsAttr()) {
        from.emitError() << "dc-merge-kernel-modules: kernel modules for "
                            "different targets";
        return signalPassFailure();
      }
      SymbolTable fromSymbols(from);
      for (Operation &op :
           llvm::make_early_inc_range(from.getBody()->getOperations())) {
        auto symbol = dyn_cast<SymbolOpInterface>(op);
        if (!symbol) {
          op.emitError() << "dc-merge-kernel-modules: a kernel module holds "
                            "an op that is not a symbol";
          return signalPassFailure();
        }
        StringAttr oldName = symbol.getNameAttr();
        // A clash is renamed in `from` first, with the uses there (a
        // kernel's device global, which every kernel module has its own
        // copy of under the same name).
        if (mergedSymbols.lookup(oldName) &&
            failed(fromSymbols.renameToUnique(&op, {&mergedSymbols}))) {
          op.emitError() << "dc-merge-kernel-modules: cannot rename "
                         << oldName;
          return signalPassFailure();
        }
        op.moveBefore(merged.getBody(), merged.getBody()->end());
        mergedSymbols.insert(&op);
        renamed[{from.getNameAttr(), oldName}] = symbol.getNameAttr();
      }
      from.erase();
    }
    module.walk([&](gpu::LaunchFuncOp launch) {
      auto found =
          renamed.find({launch.getKernelModuleName(), launch.getKernelName()});
      if (found == renamed.end())
        return;
      launch.setKernelAttr(SymbolRefAttr::get(
          merged.getNameAttr(), {FlatSymbolRefAttr::get(found->second)}));
    });
  }
};

} // namespace
