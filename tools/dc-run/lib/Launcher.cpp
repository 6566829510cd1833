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

void dcrun::relaunchUnderMpirun(int nproc, const std::string &mpirun, int argc,
                                char **argv) {
  std::vector<std::string> launchers;
  if (!mpirun.empty())
    launchers = {mpirun};
  else if (const char *fromEnvironment = std::getenv("DCRT_MPIRUN");
           fromEnvironment && *fromEnvironment)
    launchers = {fromEnvironment};
  else
    launchers = {"mpirun", "mpiexec"};

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
  // NVLink multicast (NCCL's NVLS) stays off unless the user set
  // NCCL_NVLS_ENABLE; -x forwards the value to every rank.
  setenv("NCCL_NVLS_ENABLE", "0", 0);

  std::string count = std::to_string(nproc);
  for (std::string &launcher : launchers) {
    std::vector<char *> args = {launcher.data(),
                                const_cast<char *>("-x"),
                                const_cast<char *>("NCCL_NVLS_ENABLE"),
                                const_cast<char *>("-n"),
                                count.data(),
                                self};
    for (int i = 1; i < argc; ++i)
      args.push_back(argv[i]);
    args.push_back(nullptr);
    // Searches PATH for a name without a slash; returns only on failure.
    execvp(launcher.c_str(), args.data());
    if (errno != ENOENT || launchers.size() == 1)
      dcrt::fatal("cannot run '%s': %s", launcher.c_str(),
                  std::strerror(errno));
  }
  dcrt::fatal("--nproc %d needs mpirun, which is not on PATH (install "
              "openmpi-bin, or name a launcher with --mpirun)",
              nproc);
}
