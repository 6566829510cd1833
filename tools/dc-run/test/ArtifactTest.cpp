//===- ArtifactTest.cpp - loading and checking the artifact ---------------===//
//
// On the hand-written artifacts of runtime/test (tiny_linear.c): one built
// for one rank, one that claims another ABI version.
//
//===----------------------------------------------------------------------===//
#include "Artifact.h"

#include "dcrt/dcrt.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <unistd.h>

using namespace dcrun;

namespace {
/// DCRT_BACKEND unset for the life of the object, then restored.
class WithoutBackendVariable {
public:
  WithoutBackendVariable() {
    if (const char *value = std::getenv("DCRT_BACKEND"))
      saved = value;
    unsetenv("DCRT_BACKEND");
  }
  ~WithoutBackendVariable() {
    if (saved)
      setenv("DCRT_BACKEND", saved->c_str(), 1);
    else
      unsetenv("DCRT_BACKEND");
  }

private:
  std::optional<std::string> saved;
};

Manifest parsed(const std::string &text) {
  std::string error;
  std::optional<Manifest> manifest = parseManifest(text, error);
  EXPECT_TRUE(manifest) << error;
  return manifest ? *manifest : Manifest();
}

/// A step "s" that accumulates one of its gradients itself, and its
/// accumulating form "s_accumulate" (as ManifestTest's).
const char *accumulatingManifest = R"({"abi": 4, "world_size": 1,
  "steps": [
  {"name": "s", "entry": "dc_entry_s", "micro_batches": 2,
   "accumulating_step": "s_accumulate",
   "args": [{"kind": "param", "id": 0, "name": "w", "shape": [4],
             "dtype": "f32"},
            {"kind": "grad_accum", "param": 0, "name": "w.grad_accum",
             "shape": [4], "dtype": "f32"}],
   "results": [{"kind": "loss", "shape": [], "dtype": "f32"},
               {"kind": "grad", "param": 0, "shape": [4], "dtype": "f32"}]},
  {"name": "s_accumulate", "entry": "dc_entry_s_accumulate",
   "accumulates_for": "s",
   "args": [{"kind": "param", "id": 0, "name": "w", "shape": [4],
             "dtype": "f32"},
            {"kind": "grad_accum", "param": 0, "name": "w.grad_accum",
             "shape": [4], "dtype": "f32"}],
   "results": [{"kind": "loss", "shape": [], "dtype": "f32"},
               {"kind": "grad_accum", "param": 0, "shape": [4],
                "dtype": "f32"}]}]})";
} // namespace

TEST(Artifact, OpensAnArtifactOfThisAbi) {
  Artifact artifact = openArtifact(TINY_LINEAR_W1);
  EXPECT_EQ(artifact.manifest.abi, dcrt_abi_version());
  EXPECT_EQ(artifact.manifest.worldSize, 1);
  ASSERT_EQ(artifact.manifest.steps.size(), 1u);
  EXPECT_EQ(artifact.manifest.steps[0].name, "train_step");
  EXPECT_NE(artifact.symbol("dc_entry_train_step", TINY_LINEAR_W1), nullptr);
  EXPECT_EXIT(artifact.symbol("dc_entry_nothing", "tiny.so"),
              testing::ExitedWithCode(1),
              "artifact 'tiny.so' does not export 'dc_entry_nothing'");
}

TEST(Artifact, RefusesAnotherAbiVersion) {
  EXPECT_EXIT(openArtifact(TINY_LINEAR_BAD_ABI), testing::ExitedWithCode(1),
              "artifact '.*tiny-linear-bad-abi.so' was compiled for dcrt ABI "
              "version 999, but this libdcrt implements version " +
                  std::to_string(dcrt_abi_version()) +
                  ": recompile it with the dc that matches this runtime");
}

TEST(Artifact, RefusesAFileThatIsNoSharedLibrary) {
  std::string path =
      testing::TempDir() + "dcrun-not-elf-" + std::to_string(getpid()) + ".so";
  std::ofstream(path) << "not a shared library";
  EXPECT_EXIT(openArtifact(path), testing::ExitedWithCode(1),
              "cannot load artifact '.*dcrun-not-elf-[0-9]+.so': ");
  std::remove(path.c_str());
  EXPECT_EXIT(openArtifact("/nonexistent/step.so"), testing::ExitedWithCode(1),
              "cannot load artifact '/nonexistent/step.so'");
}

TEST(Artifact, PicksTheFinalFormOfAStep) {
  Manifest manifest = parsed(accumulatingManifest);
  ASSERT_EQ(manifest.steps.size(), 2u);
  EXPECT_EQ(&pickStep(manifest, ""), &manifest.steps[0]);
  EXPECT_EQ(&pickStep(manifest, "s"), &manifest.steps[0]);
  EXPECT_EXIT(pickStep(manifest, "s_accumulate"), testing::ExitedWithCode(1),
              "step 's_accumulate' is the accumulating form of 's'; run 's' "
              "with --micro-batches N");
  EXPECT_EXIT(pickStep(manifest, "eval"), testing::ExitedWithCode(1),
              "the artifact has no step 'eval' \\(it has: s s_accumulate\\)");
}

TEST(Artifact, RuntimeOptionsFollowTheManifestAndTheOptions) {
  WithoutBackendVariable unset;
  Manifest manifest = parsed(R"({"abi": 4, "world_size": 4, "target": "h200",
    "grid_shape": [2, 2],
    "plan": {"gather_arena_bytes": 1, "host_pool_bytes": 2,
             "step_arena_bytes": 3, "step_buffer_bytes": 4,
             "staging_bytes": 5},
    "steps": [{"name": "s", "entry": "e", "args": [], "results": [
      {"kind": "loss", "shape": [], "dtype": "f32"}]}]})");
  Options options;
  dcrt_init_options init = runtimeInitOptions(manifest, options);
  EXPECT_EQ(init.struct_size, int64_t(sizeof(init)));
  EXPECT_EQ(init.backend, DCRT_BACKEND_CUDA);
  EXPECT_EQ(init.expected_world_size, 4);
  EXPECT_EQ(init.device, -1);
  ASSERT_EQ(init.grid_rank, 2);
  EXPECT_EQ(init.grid_shape, manifest.gridShape.data());
  EXPECT_EQ(init.gather_arena_bytes, 1);
  EXPECT_EQ(init.host_pool_bytes, 2);
  EXPECT_EQ(init.step_arena_bytes, 3);
  EXPECT_EQ(init.step_buffer_bytes, 4);
  EXPECT_EQ(init.staging_bytes, 5);
  EXPECT_EQ(init.flags, 0);

  // The options' sizes win over the plan's; the flags follow the options.
  options.gatherArenaBytes = 100;
  options.hostPoolBytes = 0;
  options.deterministic = true;
  options.checkFinite = true;
  init = runtimeInitOptions(manifest, options);
  EXPECT_EQ(init.gather_arena_bytes, 100);
  EXPECT_EQ(init.host_pool_bytes, 0);
  EXPECT_EQ(init.flags,
            int32_t(DCRT_INIT_DETERMINISTIC | DCRT_INIT_CHECK_FINITE));
}

TEST(Artifact, TheTargetPicksTheBackend) {
  WithoutBackendVariable unset;
  EXPECT_EQ(backendFor(""), DCRT_BACKEND_HOST);
  EXPECT_EQ(backendFor("host"), DCRT_BACKEND_HOST);
  EXPECT_EQ(backendFor("cuda_sm90"), DCRT_BACKEND_CUDA);
  // The same lowerings' earlier spellings (artifacts of the same ABI).
  EXPECT_EQ(backendFor("cpu"), DCRT_BACKEND_HOST);
  EXPECT_EQ(backendFor("h200"), DCRT_BACKEND_CUDA);
  EXPECT_EXIT(backendFor("tpu"), testing::ExitedWithCode(1),
              "the artifact targets 'tpu', which no backend of this libdcrt "
              "runs \\(host: host, cuda_sm90: cuda\\)");
  // DCRT_BACKEND overrides the target (dcrt_init reads it).
  setenv("DCRT_BACKEND", "host", 1);
  EXPECT_EQ(backendFor("h200"), DCRT_BACKEND_AUTO);
  EXPECT_EQ(backendFor("tpu"), DCRT_BACKEND_AUTO);
}
