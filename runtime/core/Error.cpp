//===- Error.cpp - fatal errors that end every rank
//------------------------===//
#include "Internal.h"

#include "dcrt/error.hpp"

#include <mpi.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

namespace {
std::atomic<const char *> errorPrefix{"dcrt"};
std::atomic<int> knownRank{-1};
std::atomic<int> knownWorldSize{-1};
std::atomic<bool> failing{false};
std::atomic<void (*)()> abortHook{nullptr};

/// Seconds MPI_Abort may take before this process exits on its own.
constexpr unsigned abortGraceSeconds = 10;

/// The first of `names` set in the environment, as an integer, or -1.
int integerFromEnvironment(const char *const *names) {
  for (const char *const *name = names; *name; ++name)
    if (const char *value = std::getenv(*name))
      return std::atoi(value);
  return -1;
}

void printMessage(const char *kind, const char *format, va_list args) {
  int rank = knownRank.load(), world = knownWorldSize.load();
  if (rank < 0) { // before dcrt_init: ask the launcher's environment
    // torchrun's and srun's last: an MPI launcher's variables win.
    static const char *const rankNames[] = {
        "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "RANK",
        "SLURM_PROCID",         nullptr};
    static const char *const sizeNames[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                            "WORLD_SIZE", "SLURM_NTASKS",
                                            nullptr};
    rank = integerFromEnvironment(rankNames);
    world = integerFromEnvironment(sizeNames);
  }
  char message[4096];
  std::vsnprintf(message, sizeof(message), format, args);
  // One fprintf: lines of different ranks do not interleave mid-line.
  if (rank >= 0 && world > 0)
    std::fprintf(stderr, "%s: rank %d/%d: %s: %s\n", errorPrefix.load(), rank,
                 world, kind, message);
  else
    std::fprintf(stderr, "%s: %s: %s\n", errorPrefix.load(), kind, message);
  std::fflush(stderr);
}

bool mpiIsUp() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}
} // namespace

void dcrt::setErrorPrefix(const char *tool) { errorPrefix = tool; }

void dcrt::detail::setAbortHook(void (*hook)()) { abortHook = hook; }

void dcrt::detail::setErrorRank(int rank, int worldSize) {
  knownRank = rank;
  knownWorldSize = worldSize;
}

void dcrt::warn(const char *format, ...) {
  va_list args;
  va_start(args, format);
  printMessage("warning", format, args);
  va_end(args);
}

namespace {
/// What fatal() and fatalPeerEnded() share: print, then end the job with
/// `status`.
[[noreturn]] void endJob(int status, const char *format, va_list args) {
  // A second failing thread waits for the first one's abort to end us.
  if (failing.exchange(true))
    for (;;)
      pause();
  printMessage("error", format, args);
  std::fflush(stdout);
  // SIGALRM's default action ends the process if the abort hangs.
  alarm(abortGraceSeconds);
  if (void (*hook)() = abortHook.load()) {
    // A hook may throw to hand control back to a harness that survives
    // errors (the fuzzers): fatal() is then armed again.
    try {
      hook();
    } catch (...) {
      alarm(0);
      failing = false;
      throw;
    }
  }
  if (mpiIsUp()) {
    MPI_Abort(MPI_COMM_WORLD, status);
  }
  std::_Exit(status);
}
} // namespace

void dcrt::fatal(const char *format, ...) {
  va_list args;
  va_start(args, format);
  endJob(1, format, args);
}

void dcrt::fatalPeerEnded(const char *format, ...) {
  va_list args;
  va_start(args, format);
  endJob(kPeerEndedExitStatus, format, args);
}
