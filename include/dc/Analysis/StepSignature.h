//===- StepSignature.h - a training step's parameters and results -*- C++
//-*-===//
//
// What the runtime relies on in a step's signature, checked where the
// compiler can name the place: every dc.grad result is the gradient of a
// parameter an argument declares (dc.param), once, with that parameter's
// shape and sharding (its element type may differ: a bf16 parameter's
// gradient may be f32), both floating point.
// dc-verify-schedule and dc-artifact-manifest run it, so an edited
// `dc.grad<param = N>` is refused before dc-run would refuse it.
//
//===----------------------------------------------------------------------===//
#ifndef DC_ANALYSIS_STEPSIGNATURE_H
#define DC_ANALYSIS_STEPSIGNATURE_H

#include "mlir/Support/LogicalResult.h"

namespace mlir::func {
class FuncOp;
} // namespace mlir::func

namespace dc {

/// Checks the step's gradients against its parameters. Emits a located
/// error on the first mismatch.
mlir::LogicalResult verifyStepSignature(mlir::func::FuncOp fn);

} // namespace dc

#endif // DC_ANALYSIS_STEPSIGNATURE_H
