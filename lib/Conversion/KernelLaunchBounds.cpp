//===- KernelLaunchBounds.cpp - one wave for a kernel's small grid --------===//
//
// See DCKernelLaunchBounds in Passes.td.
//
//===----------------------------------------------------------------------===//
#include "dc/Conversion/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "llvm/ADT/STLExtras.h"

namespace dc {
#define GEN_PASS_DEF_DCKERNELLAUNCHBOUNDS
#include "dc/Conversion/Passes.h.inc"
} // namespace dc

using namespace mlir;

namespace {

struct KernelLaunchBoundsPass
    : public dc::impl::DCKernelLaunchBoundsBase<KernelLaunchBoundsPass> {
  using DCKernelLaunchBoundsBase::DCKernelLaunchBoundsBase;

  void runOnOperation() override {
    if (multiprocessors < 1 || registersPerMultiprocessor < 1 ||
        threadsPerMultiprocessor < 1 || minRegisters < 1) {
      getOperation().emitError()
          << "dc-kernel-launch-bounds: every option must be positive";
      return signalPassFailure();
    }
    for (auto kernel : getOperation().getOps<gpu::GPUFuncOp>()) {
      std::optional<ArrayRef<int32_t>> grid = kernel.getKnownGridSize();
      std::optional<ArrayRef<int32_t>> block = kernel.getKnownBlockSize();
      if (!kernel.isKernel() || !grid || !block)
        continue;
      auto product = [](ArrayRef<int32_t> sizes) {
        int64_t result = 1;
        for (int32_t size : sizes)
          result *= size;
        return result;
      };
      int64_t blocks = product(*grid);
      int64_t threads = product(*block);
      int64_t perMultiprocessor = llvm::divideCeil(blocks, multiprocessors);
      if (perMultiprocessor < 2 ||
          perMultiprocessor * threads > threadsPerMultiprocessor ||
          registersPerMultiprocessor / (perMultiprocessor * threads) <
              minRegisters)
        continue;
      kernel->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
                      IntegerAttr::get(IntegerType::get(&getContext(), 32),
                                       perMultiprocessor));
    }
  }
};

} // namespace
