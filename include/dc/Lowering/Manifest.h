//===- Manifest.h - the artifact's manifest, after it is written -*- C++
//-*-===//
//
// dc-artifact-manifest writes the manifest JSON on the tensor-level module;
// passes that plan later (dc-assign-step-arena) fill in their fields here.
//
//===----------------------------------------------------------------------===//
#ifndef DC_LOWERING_MANIFEST_H
#define DC_LOWERING_MANIFEST_H

#include "mlir/IR/BuiltinOps.h"

namespace dc {

/// On a step, set by dc-artifact-manifest: the indices (i64 array) of the
/// results the caller writes into an argument's buffer (an updated
/// parameter, optimizer state or gradient accumulator). dc-assign-step-arena
/// gives them no arena bytes, and removes the attribute.
constexpr llvm::StringLiteral kResultsInArgumentsAttrName =
    "dc.results_in_arguments";

/// Sets the manifest's `plan.<field>` (written as 0 by dc-artifact-manifest)
/// to `bytes` in `module`'s manifest global. Does nothing when the module
/// has no manifest (a pass run on its own); fails, with an error, when the
/// manifest lacks the field.
mlir::LogicalResult setManifestPlanBytes(mlir::ModuleOp module,
                                         llvm::StringRef field, int64_t bytes);

/// Gives result #i of step `step` in `module`'s manifest the field
/// `"arena_offset": offsets[i]` (the bytes into the step arena where the step
/// keeps that result, a caller may pass as its buffer; -1: none). Does
/// nothing when the module has no manifest; fails, with an error, when the
/// manifest has no such step or fewer results.
mlir::LogicalResult
setManifestResultArenaOffsets(mlir::ModuleOp module, llvm::StringRef step,
                              llvm::ArrayRef<int64_t> offsets);

} // namespace dc

#endif // DC_LOWERING_MANIFEST_H
