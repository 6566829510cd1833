//===- MarkCoresidentLaunches.cpp - launches whose blocks wait ------------===//
//
// A kernel whose last blocks wait for the others (a finishing pass,
// dc-map-to-gpu) hangs on a GPU that cannot hold those blocks at once, and
// only the runtime knows the GPU (a MIG slice has few SMs). dc-map-to-gpu
// records the count on the kernel's ticket counter, the one thing of the
// launch that outlining carries into the kernel module (a gpu.launch's own
// attributes are dropped); this pass moves it onto each gpu.launch_func of
// the kernel, where dc-to-dcrt makes the launch dcrt_launch_kernel_coresident
// and the runtime checks it against the occupancy before launching.
//
//===----------------------------------------------------------------------===//
#include "dc/GPU/Passes.h"

#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/SymbolTable.h"

namespace dc {
#define GEN_PASS_DEF_DCMARKCORESIDENTLAUNCHES
#include "dc/GPU/Passes.h.inc"
} // namespace dc

using namespace mlir;

namespace {

/// The most blocks of `kernel` that must be resident at once: the largest
/// count on a global it reads (0: none).
FailureOr<int64_t> coresidentBlocks(gpu::GPUFuncOp kernel) {
  int64_t most = 0;
  WalkResult walk = kernel.walk([&](memref::GetGlobalOp get) {
    auto global = SymbolTable::lookupNearestSymbolFrom<memref::GlobalOp>(
        get, get.getNameAttr());
    if (!global)
      return WalkResult::advance();
    Attribute attr = global->getAttr(dc::kCoresidentBlocksAttr);
    if (!attr)
      return WalkResult::advance();
    auto count = dyn_cast<IntegerAttr>(attr);
    if (!count || count.getInt() < 1) {
      global.emitError() << "dc-mark-coresident-launches: "
                         << dc::kCoresidentBlocksAttr
                         << " must be a positive integer, got " << attr;
      return WalkResult::interrupt();
    }
    most = std::max(most, count.getInt());
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  return most;
}

struct MarkCoresidentLaunchesPass
    : public dc::impl::DCMarkCoresidentLaunchesBase<
          MarkCoresidentLaunchesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    llvm::DenseMap<Operation *, int64_t> counts;
    WalkResult walk = module.walk([&](gpu::LaunchFuncOp launch) {
      auto kernel = SymbolTable::lookupNearestSymbolFrom<gpu::GPUFuncOp>(
          launch, launch.getKernel());
      if (!kernel)
        return WalkResult::advance(); // compiled already, or not ours
      auto found = counts.find(kernel);
      if (found == counts.end()) {
        FailureOr<int64_t> count = coresidentBlocks(kernel);
        if (failed(count))
          return WalkResult::interrupt();
        found = counts.try_emplace(kernel, *count).first;
      }
      if (found->second == 0)
        return WalkResult::advance();
      // The waiting blocks are the launch's last ones: a constant grid
      // must have as many.
      std::optional<int64_t> x = getConstantIntValue(launch.getGridSizeX()),
                             y = getConstantIntValue(launch.getGridSizeY()),
                             z = getConstantIntValue(launch.getGridSizeZ());
      if (x && y && z && *x * *y * *z < found->second) {
        launch.emitError() << "dc-mark-coresident-launches: kernel "
                           << launch.getKernelName().getValue() << " has "
                           << found->second
                           << " blocks that wait for the others, but this "
                              "launch has "
                           << *x * *y * *z << " blocks";
        return WalkResult::interrupt();
      }
      launch->setAttr(
          dc::kCoresidentBlocksAttr,
          IntegerAttr::get(IntegerType::get(&getContext(), 64), found->second));
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
