//===- FuzzManifest.cpp - libFuzzer target: the artifact manifest ---------===//
//
// Any text given to dc-run's manifest parser is a manifest or an error
// message, never a crash.
//
//===----------------------------------------------------------------------===//
#include "Manifest.h"

#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string error;
  std::optional<dcrun::Manifest> manifest = dcrun::parseManifest(
      std::string_view(reinterpret_cast<const char *>(data), size), error);
  // A rejected manifest always says why.
  if (!manifest && error.empty())
    __builtin_trap();
  return 0;
}
