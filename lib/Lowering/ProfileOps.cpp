//===- ProfileOps.cpp - dcrt_op_begin / dcrt_op_end around compute ops ----===//
#include "dc/Lowering/Passes.h"

#include "RuntimeFunctions.h"
#include "dc/Analysis/CostModel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace dc {
#define GEN_PASS_DEF_DCPROFILEOPS
#include "dc/Lowering/Passes.h.inc"
} // namespace dc

using namespace mlir;

namespace {

struct ProfileOpsPass : public dc::impl::DCProfileOpsBase<ProfileOpsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *context = &getContext();
    OpBuilder builder(context);
    FailureOr<LLVM::LLVMFuncOp> begin =
        dc::lookupOrCreateRuntimeFunction(builder, module, "dcrt_op_begin");
    FailureOr<LLVM::LLVMFuncOp> end =
        dc::lookupOrCreateRuntimeFunction(builder, module, "dcrt_op_end");
    if (failed(begin) || failed(end))
      return signalPassFailure();

    // Keys first: the calls added below would shift the ordinals.
    SmallVector<std::pair<Operation *, std::string>> keyed;
    for (auto fn : module.getOps<func::FuncOp>()) {
      if (fn.isExternal() || !fn.isPublic())
        continue;
      for (Operation &op : fn.getBody().getOps()) {
        std::string key = dc::getProfileKey(&op);
        if (!key.empty() && !op.hasTrait<OpTrait::IsTerminator>() &&
            !op.hasTrait<OpTrait::ConstantLike>())
          keyed.push_back({&op, std::move(key)});
      }
    }
    for (auto [i, entry] : llvm::enumerate(keyed)) {
      auto [op, key] = entry;
      Location loc = op->getLoc();
      builder.setInsertionPoint(op);
      Value start =
          LLVM::CallOp::create(builder, loc, *begin, ValueRange{}).getResult();
      builder.setInsertionPointAfter(op);
      // The key is a C string that lives as long as the artifact.
      Value name = LLVM::createGlobalString(
          loc, builder, ("dc_profile_key_" + Twine(i)).str(),
          key + std::string(1, '\0'), LLVM::Linkage::Internal);
      LLVM::CallOp::create(builder, loc, *end, ValueRange{name, start});
    }
  }
};

} // namespace
