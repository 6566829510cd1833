//===- Artifact.h - the compiled step, loaded and checked -------*- C++ -*-===//
//
// The artifact is a shared library dc-compile wrote: its ABI version and
// manifest are checked against this libdcrt before anything runs, and its
// manifest decides the runtime's backend, grid and plan.
//
//===----------------------------------------------------------------------===//
#ifndef DC_RUN_ARTIFACT_H
#define DC_RUN_ARTIFACT_H

#include "Manifest.h"
#include "Options.h"

#include "dcrt/dcrt.h"

#include <cstdint>
#include <string>

namespace dcrun {

/// A step function of the artifact: its buffers, arguments then results.
using EntryFunction = void (*)(void **);

struct Artifact {
  void *handle = nullptr;
  Manifest manifest;

  /// The address of `name`; fatal, naming the artifact `path`, when it does
  /// not export it.
  void *symbol(const std::string &name, const std::string &path) const;
};

/// Opens the artifact and checks that this runtime can run it: fatal on a
/// file that is no shared library, a missing export, another ABI version
/// or a bad manifest.
Artifact openArtifact(const std::string &path);

/// The backend an artifact's target runs on; DCRT_BACKEND, when set,
/// overrides it (dcrt_init reads it). Fatal on a target no backend runs.
int32_t backendFor(const std::string &target);

/// What dcrt_init takes for `manifest` run with `options`: its backend,
/// world size, grid and plan (the options' sizes overriding the plan's),
/// and the flags --deterministic and --check-finite ask for. `grid_shape`
/// points into `manifest`.
dcrt_init_options runtimeInitOptions(const Manifest &manifest,
                                     const Options &options);

/// The step of `manifest` named `name` (empty: the first that is not an
/// accumulating form). Fatal on an accumulating form (it runs only as part
/// of its final form's step) or a name the artifact does not have.
const StepSpec &pickStep(const Manifest &manifest, const std::string &name);

} // namespace dcrun

#endif // DC_RUN_ARTIFACT_H
