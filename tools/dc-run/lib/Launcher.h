//===- Launcher.h - joining a job, or starting one under mpirun -----------===//
#ifndef DC_RUN_LAUNCHER_H
#define DC_RUN_LAUNCHER_H

#include <string>

namespace dcrun {

/// The world size a launcher (mpirun, mpiexec, srun) started this process
/// with, or 0 when it runs on its own. Fatal for a launcher the host backend
/// cannot join (torchrun: no MPI).
int launchedWorldSize();

/// Replaces this process with `<mpirun> -x NCCL_NVLS_ENABLE -n <nproc>
/// <this program> <args>` (NCCL_NVLS_ENABLE=0 unless set): every rank then
/// finds the launcher's environment and joins. Never returns.
[[noreturn]] void relaunchUnderMpirun(int nproc, const std::string &mpirun,
                                      int argc, char **argv);

} // namespace dcrun

#endif // DC_RUN_LAUNCHER_H
