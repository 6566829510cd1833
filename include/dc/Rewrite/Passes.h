//===- Passes.h - dc rewrite passes -----------------------------*- C++ -*-===//
//
// Rewrites of the step's compute on tensors: attention raised to dc.attention
// and expanded where the target has no fused kernel, head transposes folded,
// wide products in row chunks, math simplified.
//
//===----------------------------------------------------------------------===//
#ifndef DC_REWRITE_PASSES_H
#define DC_REWRITE_PASSES_H

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

#define GEN_PASS_DECL
#define GEN_PASS_REGISTRATION
#include "dc/Rewrite/Passes.h.inc"

} // namespace dc

#endif // DC_REWRITE_PASSES_H
