//===- Launcher.h - joining a job, or starting one under mpirun -----------===//
#ifndef DC_RUN_LAUNCHER_H
#define DC_RUN_LAUNCHER_H

#include <cstdint>
#include <string>

namespace dcrun {

/// The world size a launcher (mpirun, mpiexec, srun) started this process
/// with, or 0 when it runs on its own. Fatal for a launcher the host backend
/// cannot join (torchrun: no MPI).
int launchedWorldSize();

/// Runs `<mpirun> -x NCCL_NVLS_ENABLE -n <nproc> <this program> <args>`
/// (NCCL_NVLS_ENABLE=0 unless set): every rank then finds the launcher's
/// environment and joins. Waits for it and exits with its status; when the
/// job fails, first says which ranks ended early and at which step (from
/// the ranks' status files, recordRankStatus). Never returns.
[[noreturn]] void relaunchUnderMpirun(int nproc, const std::string &mpirun,
                                      int argc, char **argv);

/// What a rank of a job dc-run started is doing, for the dc-run that waits
/// for the launcher: the rank writes it to its status file (one small
/// pwrite; nothing when dc-run did not start the job). A rank that the
/// launcher stops with SIGTERM records that too, so that a rank that ended
/// on its own (SIGKILL, a crash, an error) is the one still "in step K".
enum class RankState { Starting, InStep, Done, Stopped };
void openRankStatus(int rank);
void recordRankStatus(RankState state, int64_t step);

/// The report of a failed job from its ranks' status files in `directory`
/// (one line per rank that ended on its own; "" if none did): what
/// relaunchUnderMpirun prints.
std::string describeFailedRanks(const std::string &directory, int nproc);

} // namespace dcrun

#endif // DC_RUN_LAUNCHER_H
