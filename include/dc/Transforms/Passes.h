//===- Passes.h - dc passes ---------------------------------------*- C++
//-*-===//
#ifndef DC_TRANSFORMS_PASSES_H
#define DC_TRANSFORMS_PASSES_H

#include "dc/Dialect/DC/IR/DCDialect.h"
#include "dc/Transforms/PassDefaults.h"

#include "mlir/Pass/Pass.h"

namespace dc {

#define GEN_PASS_DECL
#include "dc/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "dc/Transforms/Passes.h.inc"

} // namespace dc

#endif // DC_TRANSFORMS_PASSES_H
