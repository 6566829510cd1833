//===- Launcher.cpp - joining a job, or starting one (mpirun or TCP) ------===//
#include "Launcher.h"

#include "dcrt/core.hpp"
#include "dcrt/error.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <netinet/in.h>
#include <string>
#include <sys/socket.h>
#include <sys/wait.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <thread>
#include <unistd.h>
#include <vector>

using namespace dcrun;

namespace {
/// The environment variable naming the status directory of a job dc-run
/// started, and the fixed size of a rank's record in it.
constexpr const char *kStatusDirVariable = "DC_RUN_STATUS_DIR";
constexpr size_t kStatusRecordBytes = 48;

/// The launcher dc-run waits for, and the handler passing signals on to it.
volatile pid_t launcherPid = 0;
void forwardToLauncher(int signal) {
  if (launcherPid > 0)
    kill(launcherPid, signal);
}

/// The ranks of a local TCP job, and the handler passing signals on to them.
constexpr int kMaxLocalRanks = 1024;
volatile pid_t rankPids[kMaxLocalRanks];
volatile int rankCount = 0;
void forwardToRanks(int signal) {
  for (int i = 0; i < rankCount; ++i)
    if (rankPids[i] > 0)
      kill(rankPids[i], signal);
}

/// In a child just forked by dc-run's launcher `parent`: the child gets
/// `signal` when the launcher dies, however it dies (kill -9 included), so
/// that no job outlives the dc-run that started it. mpirun passes a SIGTERM
/// on to every rank of its job; a TCP rank ends on it. The signal survives
/// exec. If the launcher is already gone, the child ends at once.
void dieWithLauncher(pid_t parent, int signal) {
#ifdef __linux__
  if (prctl(PR_SET_PDEATHSIG, signal) != 0 || getppid() != parent)
    _exit(128 + signal);
#else
  (void)parent;
  (void)signal;
#endif
}

std::string selfPath() {
  char self[PATH_MAX];
  ssize_t length = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (length <= 0)
    dcrt::fatal("cannot find this program's path: %s", std::strerror(errno));
  self[length] = '\0';
  return self;
}

/// A fresh directory the ranks report their progress in (recordRankStatus),
/// named to them through the environment.
std::string makeStatusDirectory() {
  std::string statusDir = (std::getenv("TMPDIR") && *std::getenv("TMPDIR")
                               ? std::string(std::getenv("TMPDIR"))
                               : std::string("/tmp")) +
                          "/dc-run-XXXXXX";
  if (!mkdtemp(statusDir.data()))
    dcrt::fatal("cannot create a status directory '%s': %s", statusDir.c_str(),
                std::strerror(errno));
  setenv(kStatusDirVariable, statusDir.c_str(), 1);
  return statusDir;
}

void removeStatusDirectory(const std::string &statusDir, int nproc) {
  for (int rank = 0; rank < nproc; ++rank)
    unlink((statusDir + "/rank." + std::to_string(rank)).c_str());
  rmdir(statusDir.c_str());
}

/// A port of this machine's loopback that nobody listens on now.
int freeLocalPort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (fd < 0 ||
      bind(fd, reinterpret_cast<sockaddr *>(&address), sizeof(address)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr *>(&address), &length) != 0)
    dcrt::fatal("cannot find a free port for the rendezvous: %s",
                std::strerror(errno));
  close(fd);
  return ntohs(address.sin_port);
}

/// 128 random bits in hex: the job's DCRT_TCP_TOKEN. The rendezvous lets
/// only hellos carrying it join, so that nothing else on the port (another
/// job's rank, a scanner) can take a rank's place or end the job.
std::string newJobToken() {
  unsigned char bytes[16];
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  bool got = fd >= 0 && read(fd, bytes, sizeof(bytes)) ==
                            static_cast<ssize_t>(sizeof(bytes));
  if (fd >= 0)
    close(fd);
  if (!got)
    dcrt::fatal("cannot read /dev/urandom for the job's token: %s",
                std::strerror(errno));
  std::string token;
  for (unsigned char byte : bytes) {
    token.push_back("0123456789abcdef"[byte >> 4]);
    token.push_back("0123456789abcdef"[byte & 15]);
  }
  return token;
}
} // namespace

static int environmentInteger(const char *name) {
  const char *value = std::getenv(name);
  return value && *value ? std::atoi(value) : 0;
}

int dcrun::launchedWorldSize() {
  // torchrun, srun without MPI, dc-run --launcher tcp: libdcrt joins over
  // TCP.
  if (dcrt::transportFromEnvironment() == "tcp") {
    for (const char *name : {"WORLD_SIZE", "SLURM_NTASKS"})
      if (int size = environmentInteger(name))
        return size;
    return 0;
  }
  // Open MPI's mpirun, then PMI launchers (MPICH's mpiexec, srun --mpi).
  for (const char *name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (int size = environmentInteger(name))
      return size;
  if (std::getenv("SLURM_STEP_ID") && std::getenv("SLURM_NTASKS"))
    return environmentInteger("SLURM_NTASKS");
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

  std::string self = selfPath();

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

  // The ranks report their progress here (recordRankStatus).
  std::string statusDir = makeStatusDirectory();

  std::string count = std::to_string(nproc);
  // The launcher runs in a child, found on PATH as execvp does; the parent
  // waits for it (a signal to the terminal's group reaches both).
  int ready[2];
  if (pipe2(ready, O_CLOEXEC) != 0)
    dcrt::fatal("cannot create a pipe: %s", std::strerror(errno));
  pid_t parent = getpid();
  pid_t child = fork();
  if (child < 0)
    dcrt::fatal("cannot fork: %s", std::strerror(errno));
  if (child == 0) {
    dieWithLauncher(parent, SIGTERM);
    close(ready[0]);
    int failure[2] = {ENOENT, 0}; // errno, which launcher
    for (std::string &launcher : launchers) {
      std::vector<char *> args = {launcher.data(),
                                  const_cast<char *>("-x"),
                                  const_cast<char *>("NCCL_NVLS_ENABLE"),
                                  const_cast<char *>("-n"),
                                  count.data(),
                                  self.data()};
      for (int i = 1; i < argc; ++i)
        args.push_back(argv[i]);
      args.push_back(nullptr);
      // Returns only on failure.
      execvp(launcher.c_str(), args.data());
      failure[0] = errno;
      if (failure[0] != ENOENT)
        break;
      ++failure[1];
    }
    // Tell the parent why, through the pipe exec would have closed.
    ssize_t ignored = write(ready[1], failure, sizeof(failure));
    (void)ignored;
    _exit(127);
  }
  close(ready[1]);
  // The terminal's Ctrl-C reaches the launcher itself; a SIGTERM or SIGHUP
  // sent to dc-run alone is passed on to it.
  launcherPid = child;
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, forwardToLauncher);
  signal(SIGHUP, forwardToLauncher);
  int failure[2] = {0, 0};
  bool execFailed = read(ready[0], failure, sizeof(failure)) == sizeof(failure);
  int execError = failure[0];
  close(ready[0]);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  std::string report = execFailed || (WIFEXITED(status) && !WEXITSTATUS(status))
                           ? std::string()
                           : describeFailedRanks(statusDir, nproc);
  removeStatusDirectory(statusDir, nproc);
  if (execFailed) {
    if (execError != ENOENT || launchers.size() == 1)
      dcrt::fatal(
          "cannot run '%s': %s",
          launchers[std::min<size_t>(failure[1], launchers.size() - 1)].c_str(),
          std::strerror(execError));
    dcrt::fatal("--nproc %d needs mpirun, which is not on PATH (install "
                "openmpi-bin, or name a launcher with --mpirun)",
                nproc);
  }
  if (!report.empty())
    std::fprintf(stderr, "%s", report.c_str());
  if (WIFSIGNALED(status))
    std::_Exit(128 + WTERMSIG(status));
  std::_Exit(WEXITSTATUS(status));
}

//===----------------------------------------------------------------------===//
// A local job over TCP
//===----------------------------------------------------------------------===//

void dcrun::startLocalTcpJob(int nproc, int argc, char **argv) {
  if (nproc > kMaxLocalRanks)
    dcrt::fatal("--launcher tcp starts at most %d ranks", kMaxLocalRanks);
  std::string self = selfPath();
  setenv("NCCL_NVLS_ENABLE", "0", 0); // as under mpirun: off unless set
  std::string statusDir = makeStatusDirectory();
  std::string port = std::to_string(freeLocalPort());
  std::string world = std::to_string(nproc);
  // Fresh for every job, whatever dc-run's environment holds: two jobs
  // never share one.
  std::string token = newJobToken();

  // Ctrl-C reaches every rank (the terminal's group); a SIGTERM or SIGHUP
  // sent to dc-run alone is passed on to them.
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, forwardToRanks);
  signal(SIGHUP, forwardToRanks);
  std::vector<pid_t> children;
  pid_t launcher = getpid();
  for (int rank = 0; rank < nproc; ++rank) {
    std::fflush(nullptr);
    pid_t child = fork();
    if (child < 0)
      dcrt::fatal("cannot fork rank %d: %s", rank, std::strerror(errno));
    if (child == 0) {
      dieWithLauncher(launcher, SIGTERM);
      signal(SIGINT, SIG_DFL);
      signal(SIGTERM, SIG_DFL);
      signal(SIGHUP, SIG_DFL);
      std::string number = std::to_string(rank);
      setenv("RANK", number.c_str(), 1);
      setenv("LOCAL_RANK", number.c_str(), 1);
      setenv("WORLD_SIZE", world.c_str(), 1);
      setenv("LOCAL_WORLD_SIZE", world.c_str(), 1);
      setenv("MASTER_ADDR", "127.0.0.1", 1);
      setenv("MASTER_PORT", port.c_str(), 1);
      setenv("DCRT_TRANSPORT", "tcp", 1);
      setenv("DCRT_TCP_TOKEN", token.c_str(), 1);
      std::vector<char *> args = {self.data()};
      for (int i = 1; i < argc; ++i)
        args.push_back(argv[i]);
      args.push_back(nullptr);
      execv(self.c_str(), args.data());
      std::fprintf(stderr, "dc-run: error: cannot run '%s' for rank %d: %s\n",
                   self.c_str(), rank, std::strerror(errno));
      _exit(127);
    }
    children.push_back(child);
    rankPids[rank] = child;
    rankCount = rank + 1;
  }

  // When a rank ends badly, the others get a moment to notice the lost
  // connection and say so themselves before they are stopped. The rank to
  // name is the first seen killed by a signal (nobody else sent one yet),
  // else the first seen failing for its own reason, else the first seen
  // failing because another rank ended (dcrt::kPeerEndedExitStatus):
  // waitpid reaps ranks that ended close together in rank order, not in
  // the order they ended.
  using Clock = std::chrono::steady_clock;
  constexpr auto grace = std::chrono::seconds(2);
  int first = -1, firstStatus = 0, firstPriority = 0, left = nproc;
  bool stopped = false;
  Clock::time_point stopAt = Clock::time_point::max();
  while (left > 0) {
    int status = 0;
    bool waiting = first >= 0 && !stopped;
    pid_t pid = waitpid(-1, &status, waiting ? WNOHANG : 0);
    if (pid == 0 || (pid < 0 && errno == EINTR)) {
      if (Clock::now() >= stopAt) {
        stopped = true;
        forwardToRanks(SIGTERM);
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      continue;
    }
    if (pid < 0)
      break;
    auto found = std::find(children.begin(), children.end(), pid);
    if (found == children.end())
      continue;
    int rank = static_cast<int>(found - children.begin());
    rankPids[rank] = 0;
    --left;
    int priority = 0; // ended well, or stopped by this launcher
    if (WIFSIGNALED(status))
      priority = stopped ? 0 : 3;
    else if (WEXITSTATUS(status) == dcrt::kPeerEndedExitStatus)
      priority = 1;
    else if (WEXITSTATUS(status) != 0)
      priority = 2;
    if (priority > firstPriority) {
      if (first < 0)
        stopAt = Clock::now() + grace;
      first = rank;
      firstStatus = status;
      firstPriority = priority;
    }
  }
  std::string report;
  if (first >= 0) {
    std::string how;
    if (WIFSIGNALED(firstStatus)) {
      int number = WTERMSIG(firstStatus);
      how = "killed by signal " + std::to_string(number) + " (" +
            strsignal(number) + ")";
    } else {
      how = "exited with status " + std::to_string(WEXITSTATUS(firstStatus)) +
            " (see its error above)";
    }
    report = describeEndedRank(statusDir, first, nproc, how);
  }
  removeStatusDirectory(statusDir, nproc);
  if (!report.empty())
    std::fprintf(stderr, "%s", report.c_str());
  if (first < 0)
    std::_Exit(0);
  if (WIFSIGNALED(firstStatus))
    std::_Exit(128 + WTERMSIG(firstStatus));
  std::_Exit(WEXITSTATUS(firstStatus));
}

//===----------------------------------------------------------------------===//
// Rank status
//===----------------------------------------------------------------------===//

namespace {
/// The file this rank records its state in, or -1.
int statusFd = -1;
/// The record a SIGTERM leaves: prepared outside the handler, which may
/// only write it.
char terminatedRecord[kStatusRecordBytes];

void writeRecord(const char *record) {
  ssize_t ignored = pwrite(statusFd, record, kStatusRecordBytes, 0);
  (void)ignored;
}

void onTerminate(int signal) {
  if (statusFd >= 0)
    writeRecord(terminatedRecord);
  ::signal(signal, SIG_DFL);
  raise(signal);
}

void formatRecord(char *record, const char *state, int64_t step) {
  std::memset(record, ' ', kStatusRecordBytes);
  int length = std::snprintf(record, kStatusRecordBytes, "%s %lld", state,
                             static_cast<long long>(step));
  record[length] = ' ';
  record[kStatusRecordBytes - 1] = '\n';
}
} // namespace

void dcrun::openRankStatus(int rank) {
  const char *directory = std::getenv(kStatusDirVariable);
  if (!directory || !*directory)
    return;
  std::string path = std::string(directory) + "/rank." + std::to_string(rank);
  statusFd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (statusFd < 0)
    return; // a report is a courtesy, not a reason to fail the job
  recordRankStatus(RankState::Starting, 0);
  struct sigaction action = {};
  action.sa_handler = onTerminate;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
}

void dcrun::recordRankStatus(RankState state, int64_t step) {
  if (statusFd < 0)
    return;
  const char *name = state == RankState::Starting ? "starting"
                     : state == RankState::InStep ? "step"
                     : state == RankState::Done   ? "done"
                                                  : "stopped";
  char record[kStatusRecordBytes];
  formatRecord(record, name, step);
  formatRecord(terminatedRecord, "terminated", step);
  writeRecord(record);
}

std::string dcrun::describeEndedRank(const std::string &directory, int rank,
                                     int nproc, const std::string &how) {
  std::string path = directory + "/rank." + std::to_string(rank);
  char record[kStatusRecordBytes + 1] = {};
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ssize_t got = fd < 0 ? -1 : pread(fd, record, kStatusRecordBytes, 0);
  if (fd >= 0)
    close(fd);
  char state[32] = {};
  long long step = 0;
  std::string line;
  if (got <= 0 || std::sscanf(record, "%31s %lld", state, &step) != 2)
    line = "did not start";
  else if (std::strcmp(state, "starting") == 0)
    line = "ended during start-up (before step 1)";
  else if (std::strcmp(state, "step") == 0)
    line = "ended during step " + std::to_string(step);
  else
    return ""; // done, stopped with its own message, or by the launcher
  return "dc-run: error: rank " + std::to_string(rank) + "/" +
         std::to_string(nproc) + " " + line + " (" + how +
         "); the launcher stopped the job\n";
}

std::string dcrun::describeFailedRanks(const std::string &directory,
                                       int nproc) {
  std::string report;
  for (int rank = 0; rank < nproc; ++rank)
    report += describeEndedRank(directory, rank, nproc,
                                "killed by a signal such as SIGKILL, crashed, "
                                "or failed with the error above");
  return report;
}
