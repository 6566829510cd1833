//===- Launcher.cpp - joining a job, or starting one under mpirun ---------===//
#include "Launcher.h"

#include "dcrt/error.hpp"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

using namespace dcrun;

static int environmentInteger(const char *name) {
  const char *value = std::getenv(name);
  return value && *value ? std::atoi(value) : 0;
}

int dcrun::launchedWorldSize() {
  // Open MPI's mpirun, then PMI launchers (MPICH's mpiexec, srun --mpi).
  for (const char *name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (int size = environmentInteger(name))
      return size;
  if (std::getenv("SLURM_STEP_ID") && std::getenv("SLURM_NTASKS"))
    return environmentInteger("SLURM_NTASKS");
  if (std::getenv("WORLD_SIZE") && std::getenv("TORCHELASTIC_RUN_ID"))
    dcrt::fatal("started by torchrun (WORLD_SIZE=%s), but the host backend "
                "communicates through MPI: start dc-run with mpirun or srun, "
                "or let it start itself with --nproc",
                std::getenv("WORLD_SIZE"));
  return 0;
}

/// `name` found on PATH, or empty.
static std::string findOnPath(const std::string &name) {
  const char *path = std::getenv("PATH");
  std::string directories = path ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= directories.size()) {
    size_t end = directories.find(':', start);
    if (end == std::string::npos)
      end = directories.size();
    std::string candidate = directories.substr(start, end - start) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0)
      return candidate;
    start = end + 1;
  }
  return {};
}

void dcrun::relaunchUnderMpirun(int nproc, const std::string &mpirun, int argc,
                                char **argv) {
  std::string launcher = mpirun;
  if (launcher.empty())
    if (const char *fromEnvironment = std::getenv("DCRT_MPIRUN"))
      launcher = fromEnvironment;
  if (launcher.empty())
    for (const char *name : {"mpirun", "mpiexec"})
      if (launcher.empty())
        launcher = findOnPath(name);
  if (launcher.empty())
    dcrt::fatal("--nproc %d needs mpirun, which is not on PATH (install "
                "openmpi-bin, or name a launcher with --mpirun)",
                nproc);

  char self[PATH_MAX];
  ssize_t length = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (length <= 0)
    dcrt::fatal("cannot find this program's path: %s", std::strerror(errno));
  self[length] = '\0';

  // Open MPI's equivalents of --oversubscribe (more ranks than cores is
  // fine for a local job) and --allow-run-as-root, as environment so that
  // other launchers ignore them; a user's own setting wins.
  setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", /*overwrite=*/0);
  if (geteuid() == 0) {
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  }

  std::string count = std::to_string(nproc);
  std::vector<char *> args = {launcher.data(), const_cast<char *>("-n"),
                              count.data(), self};
  for (int i = 1; i < argc; ++i)
    args.push_back(argv[i]);
  args.push_back(nullptr);
  execv(launcher.c_str(), args.data());
  dcrt::fatal("cannot run '%s': %s", launcher.c_str(), std::strerror(errno));
}
