//===- Checkpoint.h - safetensors checkpoints of full tensors ---*- C++ -*-===//
//
// A checkpoint holds FULL tensors, so it loads onto any world size:
//   "<name>"             the parameter, in its dtype
//   "<name>.master"      its fp32 master copy (only for non-f32 parameters)
//   "<name>.exp_avg"     AdamW's first moment (fp32)
//   "<name>.exp_avg_sq"  AdamW's second moment (fp32)
// and the metadata {"format": "dc", "step": "<n>", "optimizer": "adamw",
// "world_size": "<saving world>", "fnv1a64:<tensor>": "<16 hex digits>"
// for every tensor}: the FNV-1a 64-bit checksum of its bytes, verified on
// load.
//
//===----------------------------------------------------------------------===//
#ifndef DC_RUN_CHECKPOINT_H
#define DC_RUN_CHECKPOINT_H

#include "Params.h"

#include "dcrt/checksum.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace dcrun {

/// FNV-1a (64-bit) over `bytes` more bytes, continuing from `checksum`;
/// start from kChecksumSeed.
constexpr uint64_t kChecksumSeed = DCRT_FNV1A64_SEED;
uint64_t checksumBytes(uint64_t checksum, const void *data, size_t bytes);
/// A checksum as 16 lowercase hex digits (checkpoints' metadata, manifests'
/// seals).
std::string checksumText(uint64_t checksum);

/// Collective: every rank sends its slices, rank 0 writes `path` (through a
/// temporary file and a rename, so a crash leaves no half-written file).
/// Non-finite weights are a fatal error unless `allowNonFinite`.
void saveCheckpoint(const std::string &path, const ParamRegistry &registry,
                    int64_t step, bool allowNonFinite = false);

/// Collective, like saveCheckpoint: the gradients the step just wrote
/// (before the optimizer reads them), one full tensor "<name>" per
/// parameter with a gradient, in its gradient dtype, with the metadata
/// {"format": "dc-gradients", "step", "world_size", checksums}. For
/// comparing a compiled step with another framework's gradients.
void saveGradients(const std::string &path, const ParamRegistry &registry,
                   int64_t step);

/// Every rank reads its own slices, and verifies the checksums of every
/// W-th tensor (rank r: tensors r, r + W, ...) in full. A dc checkpoint
/// ("format": "dc") must name its step and its optimizer (adamw); any other
/// safetensors file with the parameters' names loads as plain weights
/// (step 0, the moments at zero). Returns the saved step. Fatal, naming the
/// file and tensor, on a missing file, a corrupt header, overlapping
/// tensors, a tensor the model does not have, a missing tensor, a shape
/// mismatch or a checksum that does not match.
int64_t loadCheckpoint(const std::string &path, ParamRegistry &registry);

/// `dir`/step-<step>.safetensors: the periodic checkpoint of a step
/// (dc-run --save-every).
std::string periodicCheckpoint(const std::string &dir, int64_t step);

/// The periodic checkpoint of the highest step in `dir`, or "" where it
/// holds none (or does not exist). Only complete checkpoints carry that
/// name: a save writes a temporary file and renames it when it is whole.
std::string latestCheckpoint(const std::string &dir);

/// Removes the temporary files of periodic checkpoints in `dir` whose save
/// did not finish (a job killed mid-save).
void removeUnfinishedCheckpoints(const std::string &dir);

/// The initial weights of a run (dc-run --init): every parameter's full
/// tensor `<name>` (its fp32 `<name>.master` when stored) from a safetensors
/// file, each rank reading only its own slices; the step count and any
/// optimizer state in the file are ignored (training starts at step 1 with
/// zero moments). Fatal, naming the file and tensor, on the errors
/// loadCheckpoint reports.
void loadInitialWeights(const std::string &path, ParamRegistry &registry);

} // namespace dcrun

#endif // DC_RUN_CHECKPOINT_H
