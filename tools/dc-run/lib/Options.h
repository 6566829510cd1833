//===- Options.h - dc-run's command line ----------------------------------===//
#ifndef DC_RUN_OPTIONS_H
#define DC_RUN_OPTIONS_H

#include "Params.h"

#include <cstdint>
#include <optional>
#include <string>

namespace dcrun {

struct Options {
  std::string artifact;
  int nproc = 0;    // 0: the artifact's world size
  std::string step; // empty: the manifest's first step
  int64_t steps = 1;
  dcrun::AdamWConfig adamw;
  uint64_t seed = 0;
  double initStd = 0.02;
  std::string dataFile;
  int64_t vocab = 0; // 0: from the manifest
  std::string save;
  int64_t saveStep = 0; // 0: after the last step
  std::string load;
  std::string trace;
  std::string profileOut;
  std::string mpirun;
  std::optional<int64_t> gatherArenaBytes, hostPoolBytes;
};

extern const char *usage;

/// Parses argv; on failure returns false and sets `error`. `help` is set
/// when -h/--help was given.
bool parseOptions(int argc, char **argv, Options &options, bool &help,
                  std::string &error);

} // namespace dcrun

#endif // DC_RUN_OPTIONS_H
