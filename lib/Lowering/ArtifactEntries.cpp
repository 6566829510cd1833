//===- ArtifactEntries.cpp - dc_entry_<step>(void **buffers) --------------===//
#include "dc/Lowering/Passes.h"

#include "RuntimeFunctions.h"

#include "mlir/Interfaces/FunctionInterfaces.h"

#include <functional>

namespace dc {
#define GEN_PASS_DEF_DCARTIFACTENTRIES
#include "dc/Lowering/Passes.h.inc"
} // namespace dc

using namespace mlir;

namespace {

struct ArtifactEntriesPass
    : public dc::impl::DCArtifactEntriesBase<ArtifactEntriesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *context = &getContext();
    auto ptr = LLVM::LLVMPointerType::get(context);
    auto voidType = LLVM::LLVMVoidType::get(context);
    SmallVector<std::pair<LLVM::LLVMFuncOp, StringAttr>> steps;
    for (auto fn : module.getOps<LLVM::LLVMFuncOp>())
      if (auto entry = fn->getAttrOfType<StringAttr>("dc.entry"))
        steps.push_back({fn, entry});

    for (auto [step, entry] : steps) {
      LLVM::LLVMFunctionType type = step.getFunctionType();
      if (!isa<LLVM::LLVMVoidType>(type.getReturnType()) ||
          llvm::any_of(type.getParams(),
                       [&](Type param) { return param != ptr; })) {
        step.emitError() << "step @" << step.getName()
                         << " must take one pointer per argument and result "
                            "and return nothing (results as out-parameters, "
                            "bare-pointer calling convention), got "
                         << type;
        return signalPassFailure();
      }
      if (module.lookupSymbol(entry)) {
        step.emitError() << "@" << entry.getValue()
                         << " exists already; it is the entry of @"
                         << step.getName();
        return signalPassFailure();
      }
      Location loc = step.getLoc();
      OpBuilder builder = OpBuilder::atBlockEnd(module.getBody());
      auto entryFn = LLVM::LLVMFuncOp::create(
          builder, loc, entry, LLVM::LLVMFunctionType::get(voidType, {ptr}));
      OpBuilder body = OpBuilder::atBlockBegin(entryFn.addEntryBlock(builder));
      Value buffers = entryFn.getArgument(0);
      SmallVector<Value> pointers;
      for (unsigned i = 0, e = type.getNumParams(); i < e; ++i) {
        Value slot = LLVM::GEPOp::create(
            body, loc, ptr, ptr, buffers,
            ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(i)});
        pointers.push_back(LLVM::LoadOp::create(body, loc, ptr, slot));
      }
      LLVM::CallOp::create(body, loc, step, pointers);
      FailureOr<LLVM::LLVMFuncOp> endStep =
          dc::lookupOrCreateRuntimeFunction(body, module, "dcrt_end_step");
      if (failed(endStep))
        return signalPassFailure();
      LLVM::CallOp::create(body, loc, *endStep, ValueRange{});
      LLVM::ReturnOp::create(body, loc, ValueRange{});

      // Only the entries are exported, and the dc attributes are spent (the
      // manifest holds what they said).
      step.setLinkage(LLVM::Linkage::Internal);
      step->removeAttr("dc.entry");
      auto isDCAttr = [](NamedAttribute attr) {
        return attr.getName().getValue().starts_with("dc.");
      };
      auto function = cast<FunctionOpInterface>(step.getOperation());
      for (unsigned i = 0, e = step.getNumArguments(); i < e; ++i)
        function.setArgAttrs(
            i, llvm::to_vector(llvm::make_filter_range(function.getArgAttrs(i),
                                                       std::not_fn(isDCAttr))));
    }
  }
};

} // namespace
