//===- Passes.h - dc gpu passes ---------------------------------*- C++ -*-===//
//
// The GPU target's compute: kernels formed from the step's ops (dc-map-to-
// gpu), their memory and occupancy, one kernel module.
//
//===----------------------------------------------------------------------===//
#ifndef DC_GPU_PASSES_H
#define DC_GPU_PASSES_H

#include "dc/Dialect/DC/IR/DCDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"

namespace dc {

/// How many blocks of a kernel wait for the others and so must be resident
/// at once: set by dc-map-to-gpu on a finishing pass's ticket counter,
/// carried to the kernel's launches by dc-mark-coresident-launches, read by
/// dc-to-dcrt (dcrt_launch_kernel_coresident).
inline constexpr llvm::StringLiteral kCoresidentBlocksAttr =
    "dc.coresident_blocks";

/// How many blocks of a kernel should fit on an SM: set by dc-map-to-gpu
/// (folded-blocks-per-sm) on an op inside a gpu.launch, which outlining
/// keeps (it drops the launch's own attributes); dc-set-kernel-occupancy
/// moves it onto the outlined gpu.func as nvvm.minctasm.
inline constexpr llvm::StringLiteral kMinBlocksPerSMAttr =
    "dc.min_blocks_per_sm";

#define GEN_PASS_DECL
#define GEN_PASS_REGISTRATION
#include "dc/GPU/Passes.h.inc"

} // namespace dc

#endif // DC_GPU_PASSES_H
