//===- dc-run.cpp - run a training step compiled by dc --------------------===//
//
// Loads the artifact (a shared library dc-compile wrote), checks it against
// this libdcrt, starts or joins the ranks, brings the runtime up and runs
// the trainer (lib/Trainer.h) on every rank.
//
//===----------------------------------------------------------------------===//
#include "Artifact.h"
#include "Launcher.h"
#include "Manifest.h"
#include "Options.h"
#include "Trainer.h"

#include "dcrt/dcrt.h"
#include "dcrt/error.hpp"

#include <cstdio>
#include <string>

using namespace dcrun;

int main(int argc, char **argv) {
  secondsSinceStart(); // the clock starts here
  dcrt::setErrorPrefix("dc-run");
  Options options;
  std::string help, error;
  if (!parseOptions(argc, argv, options, help, error)) {
    std::fprintf(stderr,
                 "dc-run: error: %s\n%s\nRun 'dc-run --help' for the "
                 "options.\n",
                 error.c_str(), usageLine);
    return 2;
  }
  if (!help.empty()) {
    std::fputs(help.c_str(), stdout);
    return 0;
  }

  Artifact artifact = openArtifact(options.artifact);
  const Manifest &manifest = artifact.manifest;
  // Without the checks compiled in there is nothing to run: a run that
  // found nothing would look like one that checked.
  if (options.checkFinite && !manifest.checkFinite)
    dcrt::fatal("--check-finite: %s was compiled without finite-value "
                "checks; compile it with dc-compile --check-finite",
                options.artifact.c_str());
  int launched = launchedWorldSize();
  if (launched == 0) {
    int nproc = options.nproc ? options.nproc : manifest.worldSize;
    if (nproc != manifest.worldSize)
      dcrt::fatal("--nproc %d, but artifact '%s' was compiled for %d ranks",
                  nproc, options.artifact.c_str(), manifest.worldSize);
    if (nproc > 1 && options.launcher == "tcp")
      startLocalTcpJob(nproc, argc, argv);
    if (nproc > 1)
      relaunchUnderMpirun(nproc, options.mpirun, argc, argv);
  } else if (options.nproc && options.nproc != launched) {
    dcrt::fatal("--nproc %d, but the launcher started %d ranks", options.nproc,
                launched);
  }

  dcrt_init_options init = runtimeInitOptions(manifest, options);
  dcrt_init(&init);
  // In a job dc-run started, it reports a rank that ends early.
  if (launched > 0)
    openRankStatus(dcrt_rank());
  int status = 0;
  try {
    Trainer trainer(options, artifact);
    trainer.run();
  } catch (const StopTraining &) {
    status = 1;
  }
  dcrt_finalize();
  recordRankStatus(status ? RankState::Stopped : RankState::Done, 0);
  return status;
}
