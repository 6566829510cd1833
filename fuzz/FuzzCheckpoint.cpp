//===- FuzzCheckpoint.cpp - libFuzzer target: checkpoints and artifacts ---===//
//
// Any bytes given to dc-run's checkpoint loader (as a file, loaded into the
// two f32 parameters of the test artifact) load or end in dc-run's fatal
// error, never a crash; the same bytes given to the artifact check
// (ElfCheck) are judged without reading outside them. A fatal error throws
// out of the runtime's abort hook back to here.
//
//===----------------------------------------------------------------------===//
#include "Checkpoint.h"
#include "ElfCheck.h"
#include "Internal.h"

#include "dcrt/dcrt.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <unistd.h>

using namespace dcrun;

namespace {
struct Rejected {};
void throwRejected() { throw Rejected(); }

std::string path;

ParamSpec spec(int32_t id, std::string name, std::vector<int64_t> shape,
               dcrt_dtype dtype) {
  ParamSpec result;
  result.id = id;
  result.name = std::move(name);
  result.shape = std::move(shape);
  result.dtype = dtype;
  return result;
}
} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  dcrt_init_options options{};
  options.struct_size = sizeof(options); // a one-rank job, no plan
  dcrt_init(&options);
  dcrt::detail::setAbortHook(throwRejected);
  path = "/tmp/dc-fuzz-checkpoint-" + std::to_string(getpid());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  (void)checkSharedLibraryBytes(data, size);
  FILE *file = std::fopen(path.c_str(), "wb");
  if (!file)
    return 0;
  std::fwrite(data, 1, size, file);
  std::fclose(file);
  ParamRegistry registry(0, 1);
  // The test artifact's model (tiny-linear), so that the checkpoints it
  // saves, the seeds, load whole.
  registry.add(spec(0, "fc.weight", {4, 3}, DCRT_F32));
  registry.add(spec(1, "fc.bias", {3}, DCRT_F32));
  try {
    loadCheckpoint(path, registry);
  } catch (const Rejected &) {
  }
  return 0;
}
