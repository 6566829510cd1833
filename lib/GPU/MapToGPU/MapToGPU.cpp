//===- MapToGPU.cpp - a bufferized step's compute as GPU kernels ----------===//
//
// Dispatch formation for the GPU target (see Passes.td): library matrix
// products stay for dc-to-dcrt; a reduction over rows (norms, softmax,
// cross-entropy) becomes one block per row whose threads stride the row and
// combine through gpu.all_reduce, fused with the ops beside it that work on
// the same rows (a norm's scale) into one kernel, or a warp per row (xor
// shuffles, 8 rows per block) when 32 lanes cover the row in a few 16-byte
// steps; a reduction over columns (a norm's weight gradient) one block per
// 64 columns whose row lanes combine in shared memory in a fixed order;
// every other linalg op one parallel kernel (a thread per point of its
// parallel iteration space); any other op that touches memory a one-thread
// kernel. The host keeps only what enqueues work.
//
//===----------------------------------------------------------------------===//
#include "dc/GPU/Passes.h"

#include "MapToGPUInternals.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"

namespace dc {
#define GEN_PASS_DEF_DCMAPTOGPU
#include "dc/GPU/Passes.h.inc"
} // namespace dc

using namespace mlir;
using namespace dc;

namespace {

class MapToGPUPass : public dc::impl::DCMapToGPUBase<MapToGPUPass> {
public:
  using DCMapToGPUBase::DCMapToGPUBase;

  // A warp per row synchronizes with nvvm.bar.warp.sync (the GPU dialect
  // has no warp barrier).
  void getDependentDialects(DialectRegistry &registry) const override {
    DCMapToGPUBase::getDependentDialects(registry);
    registry.insert<NVVM::NVVMDialect, nvgpu::NVGPUDialect>();
  }

  void runOnOperation() override {
    if (cudaToolkit.empty()) {
      getOperation().emitError()
          << "the GPU lowering (cuda_sm90) compiles kernels with the CUDA "
             "toolkit's "
             "ptxas, and this dc was configured without a CUDA toolkit "
             "(reconfigure with CUDAToolkit_ROOT set)";
      return signalPassFailure();
    }
    if (finishingBlocks < 1) {
      getOperation().emitError()
          << "dc-map-to-gpu: finishing-blocks must be at least 1, got "
          << finishingBlocks.getValue();
      return signalPassFailure();
    }
    if (foldedBlocksPerSM < 0) {
      getOperation().emitError()
          << "dc-map-to-gpu: folded-blocks-per-sm must be at least 0, got "
          << foldedBlocksPerSM.getValue();
      return signalPassFailure();
    }
    // The kernels are sized for the module's target (its #dc.target, else
    // the default preset).
    TargetDescription target = getModuleTarget(getOperation()).description;
    if (target.multiprocessors < 1 ||
        target.sharedMemoryPerBlock <= map_to_gpu::kReductionSharedBytes) {
      getOperation().emitError()
          << "dc-map-to-gpu: target '" << target.name
          << "' describes no GPU to size kernels for (multiprocessors "
          << target.multiprocessors << ", sharedMemoryPerBlock "
          << target.sharedMemoryPerBlock << "; needed: at least 1, and more "
          << "than " << map_to_gpu::kReductionSharedBytes << " bytes)";
      return signalPassFailure();
    }
    map_to_gpu::KernelMapper mapper(
        {target.multiprocessors, target.sharedMemoryPerBlock}, finishingPasses,
        finishingBlocks, singleBarrierReductions, foldedBlocksPerSM);
    for (auto fn : getOperation().getOps<func::FuncOp>())
      if (!fn.isExternal() && failed(mapper.mapFunction(fn)))
        return signalPassFailure();
    if (approximateMath)
      approximateKernelMath(getOperation());
  }

  /// Marks the transcendental functions and f32 divisions in the kernels
  /// `afn`, which the NVVM lowering takes to the approximate hardware
  /// versions (__nv_fast_expf, div.approx.f32): the accurate ones made the
  /// step's exponential-heavy kernels (cross-entropy, SwiGLU)
  /// instruction-bound, well short of the DRAM bandwidth (docs/lowering.md,
  /// "Why the GPU kernels' constants"). Deterministic all the same:
  /// every run, and a recomputed op, computes the same bits. Not sine and
  /// cosine: the hardware's are accurate only near [-pi, pi], and a rotary
  /// embedding's angles reach the sequence length (its tables are small).
  /// Not powers: the fast one is exp2(y * log2(x)), NaN for every negative
  /// base, where a power by an integer is defined (PyTorch's backward of
  /// `x.pow(2)` raises the activations to 1.0); those by constants are
  /// multiplications by now (dc-simplify-math), the rest stay accurate.
  static void approximateKernelMath(ModuleOp module) {
    module.walk([](gpu::LaunchOp launch) {
      launch.getBody().walk([](Operation *op) {
        auto fastMath = dyn_cast<arith::ArithFastMathInterface>(op);
        if (!fastMath || isa<math::SinOp, math::CosOp, math::PowFOp>(op) ||
            !(isa<math::MathDialect>(op->getDialect()) ||
              (isa<arith::DivFOp>(op) &&
               getElementTypeOrSelf(op->getResult(0)).isF32())))
          return;
        op->setAttr(
            fastMath.getFastMathAttrName(),
            arith::FastMathFlagsAttr::get(
                op->getContext(), fastMath.getFastMathFlagsAttr().getValue() |
                                      arith::FastMathFlags::afn));
      });
    });
  }
};

} // namespace
