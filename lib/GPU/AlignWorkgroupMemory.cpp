//===- AlignWorkgroupMemory.cpp - 16-byte aligned shared buffers ----------===//
//
// The kernels read and write their workgroup buffers 16 bytes at a time
// (cp.async copies, st.shared.v4 of four f32 partials), but the NVVM
// lowering declares each buffer with its element's alignment, and ptxas
// places them by it: a buffer after an 8-byte one started 8 bytes off and
// a finishing pass's vector stores faulted (compute-sanitizer: misaligned
// __shared__ write). Every shared global gets 16.
//
//===----------------------------------------------------------------------===//
#include "dc/GPU/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace dc {
#define GEN_PASS_DEF_DCALIGNWORKGROUPMEMORY
#include "dc/GPU/Passes.h.inc"
} // namespace dc

using namespace mlir;

namespace {

/// The widest access a kernel makes (a 16-byte vector).
constexpr uint64_t kWorkgroupAlignment = 16;

struct AlignWorkgroupMemoryPass
    : public dc::impl::DCAlignWorkgroupMemoryBase<AlignWorkgroupMemoryPass> {
  void runOnOperation() override {
    getOperation()->walk([](LLVM::GlobalOp global) {
      if (global.getAddrSpace() !=
          static_cast<unsigned>(NVVM::NVVMMemorySpace::Shared))
        return;
      if (global.getAlignment().value_or(0) < kWorkgroupAlignment)
        global.setAlignment(kWorkgroupAlignment);
    });
  }
};

} // namespace
