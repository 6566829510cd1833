//===- Passes.h - dc lowering passes ----------------------------*- C++ -*-===//
//
// From a scheduled step to an artifact: its manifest, the step arena, dc ops
// and library calls as dcrt runtime calls, finite-value checks and profiling,
// and the exported entries.
//
//===----------------------------------------------------------------------===//
#ifndef DC_LOWERING_PASSES_H
#define DC_LOWERING_PASSES_H

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
#include "dc/Lowering/Passes.h.inc"

} // namespace dc

#endif // DC_LOWERING_PASSES_H
