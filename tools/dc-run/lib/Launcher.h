//===- Launcher.h - joining a job, or starting one (mpirun or TCP) --------===//
#ifndef DC_RUN_LAUNCHER_H
#define DC_RUN_LAUNCHER_H

#include <cstdint>
#include <string>

namespace dcrun {

/// The world size a launcher (mpirun, mpiexec, srun, torchrun, dc-run
/// --launcher tcp) started this process with, or 0 when it runs on its own.
int launchedWorldSize();

/// Runs `<mpirun> -x NCCL_NVLS_ENABLE -n <nproc> <this program> <args>`
/// (NCCL_NVLS_ENABLE=0 unless set): every rank then finds the launcher's
/// environment and joins. Waits for it and exits with its status; when the
/// job fails, first says which ranks ended early and at which step (from
/// the ranks' status files, recordRankStatus). Never returns.
[[noreturn]] void relaunchUnderMpirun(int nproc, const std::string &mpirun,
                                      int argc, char **argv);

/// Starts `nproc` copies of this program on this machine without MPI: each
/// gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR
/// (127.0.0.1), MASTER_PORT (a free port) and DCRT_TRANSPORT=tcp, and joins
/// through libdcrt's TCP rendezvous. Waits for them; when one ends badly,
/// stops the others (SIGTERM, as mpirun does) and says which rank ended
/// first, how, and at which step. Exits with that rank's status. Never
/// returns.
[[noreturn]] void startLocalTcpJob(int nproc, int argc, char **argv);

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

/// The line for one rank that ended on its own ("" if its status file says
/// it finished, or was stopped): where it was from its status file, and
/// `how` it ended.
std::string describeEndedRank(const std::string &directory, int rank, int nproc,
                              const std::string &how);

} // namespace dcrun

#endif // DC_RUN_LAUNCHER_H
