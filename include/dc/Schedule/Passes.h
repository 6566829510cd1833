//===- Passes.h - dc schedule passes ----------------------------*- C++ -*-===//
//
// The schedule: ZeRO-3 sharding, sequence parallelism, and the planners that
// fit the step into one memory budget (prefetch, keep, offload, recompute),
// with its verifier and report.
//
//===----------------------------------------------------------------------===//
#ifndef DC_SCHEDULE_PASSES_H
#define DC_SCHEDULE_PASSES_H

#include "dc/Dialect/DC/IR/DCDialect.h"
#include "dc/Schedule/PassDefaults.h"

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
#include "dc/Schedule/Passes.h.inc"

} // namespace dc

#endif // DC_SCHEDULE_PASSES_H
