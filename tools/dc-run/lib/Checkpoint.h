//===- Checkpoint.h - safetensors checkpoints of full tensors ---*- C++ -*-===//
//
// A checkpoint holds FULL tensors, so it loads onto any world size:
//   "<name>"             the parameter, in its dtype
//   "<name>.master"      its fp32 master copy (only for non-f32 parameters)
//   "<name>.exp_avg"     AdamW's first moment (fp32)
//   "<name>.exp_avg_sq"  AdamW's second moment (fp32)
// and the metadata {"format": "dc", "step": "<n>", "optimizer": "adamw",
// "world_size": "<saving world>"}.
//
//===----------------------------------------------------------------------===//
#ifndef DC_RUN_CHECKPOINT_H
#define DC_RUN_CHECKPOINT_H

#include "Params.h"

#include <string>

namespace dcrun {

/// Collective: every rank sends its slices, rank 0 writes `path` (through a
/// temporary file and a rename, so a crash leaves no half-written file).
void saveCheckpoint(const std::string &path, const ParamRegistry &registry,
                    int64_t step);

/// Every rank reads its own slices. A checkpoint without optimizer state
/// (any safetensors file with the parameters' names) starts the moments at
/// zero. Returns the saved step (0 if absent). Fatal, naming the file and
/// tensor, on a missing file, a corrupt header, a missing tensor or a shape
/// mismatch.
int64_t loadCheckpoint(const std::string &path, ParamRegistry &registry);

} // namespace dcrun

#endif // DC_RUN_CHECKPOINT_H
