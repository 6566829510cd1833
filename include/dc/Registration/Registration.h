//===- Registration.h - one registration shared by every dc tool -*- C++
//-*-===//
//
// Every dc tool (dc-opt, dc-compile, ...) and every compiler that embeds dc
// calls these, so no tool drifts from the others.
//
//===----------------------------------------------------------------------===//
#ifndef DC_REGISTRATION_REGISTRATION_H
#define DC_REGISTRATION_REGISTRATION_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace dc {

/// Registers the dc dialect and the upstream dialects (and their interface
/// models) that dc pipelines read or produce.
void registerDCDialects(mlir::DialectRegistry &registry);

/// Registers dc's passes and pipelines plus the upstream passes the dc
/// pipelines use, so `dc-opt` can run each step on its own.
void registerDCPassesAndPipelines();

} // namespace dc

#endif // DC_REGISTRATION_REGISTRATION_H
