//===- SetKernelOccupancy.cpp - blocks per SM onto outlined kernels -------===//
//
// dc-map-to-gpu may ask that a kernel fit a number of its blocks on an SM
// (folded-blocks-per-sm), which caps its registers. Outlining drops a
// gpu.launch's own attributes, so the request rides on an op of the body;
// this pass moves it onto the outlined gpu.func as nvvm.minctasm, which the
// NVVM lowering makes PTX's .minnctapersm.
//
//===----------------------------------------------------------------------===//
#include "dc/GPU/Passes.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace dc {
#define GEN_PASS_DEF_DCSETKERNELOCCUPANCY
#include "dc/GPU/Passes.h.inc"
} // namespace dc

using namespace mlir;

namespace {

struct SetKernelOccupancyPass
    : public dc::impl::DCSetKernelOccupancyBase<SetKernelOccupancyPass> {
  void runOnOperation() override {
    WalkResult result = getOperation().walk([&](gpu::GPUFuncOp kernel) {
      if (!kernel.isKernel())
        return WalkResult::advance();
      int64_t most = 0;
      WalkResult inner = kernel.walk([&](Operation *op) {
        Attribute attr = op->getAttr(dc::kMinBlocksPerSMAttr);
        if (!attr)
          return WalkResult::advance();
        auto count = dyn_cast<IntegerAttr>(attr);
        if (!count || count.getInt() < 1 ||
            count.getInt() > std::numeric_limits<int32_t>::max()) {
          op->emitError() << "dc-set-kernel-occupancy: "
                          << dc::kMinBlocksPerSMAttr
                          << " must be a positive 32-bit integer, got " << attr;
          return WalkResult::interrupt();
        }
        most = std::max(most, count.getInt());
        op->removeAttr(dc::kMinBlocksPerSMAttr);
        return WalkResult::advance();
      });
      if (inner.wasInterrupted())
        return WalkResult::interrupt();
      if (most > 0)
        kernel->setAttr(
            NVVM::NVVMDialect::getMinctasmAttrName(),
            IntegerAttr::get(IntegerType::get(&getContext(), 32), most));
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
