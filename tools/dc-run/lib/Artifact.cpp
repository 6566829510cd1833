//===- Artifact.cpp - the compiled step, loaded and checked ---------------===//
#include "Artifact.h"
#include "ElfCheck.h"

#include "dcrt/error.hpp"

#include <cstdlib>
#include <dlfcn.h>
#include <optional>

using namespace dcrun;

void *Artifact::symbol(const std::string &name, const std::string &path) const {
  void *address = dlsym(handle, name.c_str());
  if (!address)
    dcrt::fatal("artifact '%s' does not export '%s'", path.c_str(),
                name.c_str());
  return address;
}

Artifact dcrun::openArtifact(const std::string &path) {
  Artifact artifact;
  // A name without a slash would make dlopen search the library path, not
  // the current directory.
  std::string file = path.find('/') == std::string::npos ? "./" + path : path;
  // A truncated file would be a SIGBUS inside dlopen, without a word.
  std::string damage = checkSharedLibraryFile(file);
  if (!damage.empty())
    dcrt::fatal("cannot load artifact '%s': %s", path.c_str(), damage.c_str());
  artifact.handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!artifact.handle)
    dcrt::fatal("cannot load artifact '%s': %s", path.c_str(), dlerror());
  auto version = reinterpret_cast<int32_t (*)()>(
      artifact.symbol("dc_artifact_abi_version", path));
  if (version() != dcrt_abi_version())
    dcrt::fatal("artifact '%s' was compiled for dcrt ABI version %d, but "
                "this libdcrt implements version %d: recompile it with the "
                "dc that matches this runtime",
                path.c_str(), version(), dcrt_abi_version());
  auto manifestText = reinterpret_cast<const char *(*)()>(
      artifact.symbol("dc_artifact_manifest", path));
  std::string error = checkManifestSeal(manifestText());
  if (!error.empty())
    dcrt::fatal("artifact '%s' has a bad manifest: %s", path.c_str(),
                error.c_str());
  std::optional<Manifest> manifest = parseManifest(manifestText(), error);
  if (!manifest)
    dcrt::fatal("artifact '%s' has a bad manifest: %s", path.c_str(),
                error.c_str());
  if (manifest->abi != dcrt_abi_version())
    dcrt::fatal("artifact '%s': its manifest says ABI version %d, but it "
                "exports version %d",
                path.c_str(), manifest->abi, version());
  artifact.manifest = std::move(*manifest);
  return artifact;
}

int32_t dcrun::backendFor(const std::string &target) {
  const char *forced = std::getenv("DCRT_BACKEND");
  if (forced && *forced)
    return DCRT_BACKEND_AUTO;
  // "cpu" and "h200": the same lowerings, as dc spelt them before the
  // lowering kinds had names of their own (the same ABI).
  if (target.empty() || target == "host" || target == "cpu")
    return DCRT_BACKEND_HOST;
  if (target == "cuda_sm90" || target == "h200")
    return DCRT_BACKEND_CUDA;
  dcrt::fatal("the artifact targets '%s', which no backend of this libdcrt "
              "runs (host: host, cuda_sm90: cuda)",
              target.c_str());
}

dcrt_init_options dcrun::runtimeInitOptions(const Manifest &manifest,
                                            const Options &options) {
  dcrt_init_options init{};
  init.struct_size = sizeof(init);
  init.backend = backendFor(manifest.target);
  init.expected_world_size = manifest.worldSize;
  init.device = -1;
  init.grid_rank = static_cast<int32_t>(manifest.gridShape.size());
  init.grid_shape = manifest.gridShape.data();
  init.gather_arena_bytes =
      options.gatherArenaBytes.value_or(manifest.gatherArenaBytes);
  init.host_pool_bytes = options.hostPoolBytes.value_or(manifest.hostPoolBytes);
  init.step_arena_bytes = manifest.stepArenaBytes;
  init.step_buffer_bytes = manifest.stepBufferBytes;
  init.staging_bytes = manifest.stagingBytes;
  init.flags = (options.deterministic ? DCRT_INIT_DETERMINISTIC : 0) |
               (options.checkFinite ? DCRT_INIT_CHECK_FINITE : 0);
  return init;
}

const StepSpec &dcrun::pickStep(const Manifest &manifest,
                                const std::string &name) {
  // An accumulating form runs only as part of its final form's step.
  for (const StepSpec &step : manifest.steps)
    if ((name.empty() || step.name == name) && step.accumulatesFor.empty())
      return step;
  for (const StepSpec &step : manifest.steps)
    if (step.name == name)
      dcrt::fatal("step '%s' is the accumulating form of '%s'; run '%s' with "
                  "--micro-batches N",
                  name.c_str(), step.accumulatesFor.c_str(),
                  step.accumulatesFor.c_str());
  std::string known;
  for (const StepSpec &step : manifest.steps)
    known += " " + step.name;
  dcrt::fatal("the artifact has no step '%s' (it has:%s)", name.c_str(),
              known.c_str());
}
