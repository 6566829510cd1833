//===- TcpRendezvous.cpp - how the ranks of a tcp job find each other -----===//
#include "TcpRendezvous.h"

#include "TcpSocket.h"
#include "TcpWire.h"

#include "dcrt/error.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <random>
#include <unistd.h>

using namespace dcrt;
using namespace dcrt::detail;
using namespace dcrt::detail::tcp;

namespace {
/// Connections that may be sending their hellos at once; more wait in the
/// listen backlog until one is done.
constexpr size_t kMaxPendingHellos = 256;
/// Refused connections that rank 0 reports one by one (a port scanner may
/// knock many times); the rest only count.
constexpr int kReportedRefusals = 8;

/// A rank other than 0: hello to rank 0, then its answer.
JobAddresses joinRankZero(const TcpConfig &config, int dataPort,
                          Clock::time_point deadline,
                          const std::string &where) {
  std::string error;
  socklen_t length = 0;
  sockaddr_storage master =
      resolve(config.masterAddr, config.masterPort, length, "MASTER_ADDR");
  int fd = connectBefore(master, length, deadline, error);
  if (fd < 0)
    fatal("tcp transport: timed out after %g s connecting to rank 0 at %s "
          "(MASTER_ADDR:MASTER_PORT from %s; last error: %s): rank 0 did "
          "not start, or listens elsewhere",
          config.timeoutSeconds, where.c_str(), config.source.c_str(),
          error.c_str());
  Hello hello;
  hello.rank = static_cast<uint32_t>(config.rank);
  hello.worldSize = static_cast<uint32_t>(config.worldSize);
  hello.dataPort = static_cast<uint32_t>(dataPort);
  hello.token = config.token;
  std::string header, body;
  if (!writeBefore(fd, encodeHello(hello), deadline, error) ||
      !readBefore(fd, header, kReplyHeaderBytes, deadline, error))
    fatal("tcp transport: the rendezvous with rank 0 at %s failed: %s "
          "(waited up to %g s for every rank to join)",
          where.c_str(), error.c_str(), config.timeoutSeconds);
  bool accepted = false;
  size_t bodyBytes = 0;
  if (!parseReplyHeader(header, config.worldSize, accepted, bodyBytes, error))
    fatal("tcp transport: what answered at %s (MASTER_ADDR:MASTER_PORT from "
          "%s) is not dcrt's rank 0: %s",
          where.c_str(), config.source.c_str(), error.c_str());
  if (!readBefore(fd, body, bodyBytes, deadline, error))
    fatal("tcp transport: the rendezvous with rank 0 at %s failed: %s",
          where.c_str(), error.c_str());
  close(fd);
  if (!accepted)
    fatal("tcp transport: rank 0 refused this rank: %s",
          printable(body).c_str());
  JobAddresses job;
  if (!decodeAddressTable(body, job.token, job.table, error) ||
      static_cast<int>(job.table.size()) != config.worldSize)
    fatal("tcp transport: a bad address table from rank 0 at %s: %s",
          where.c_str(), error.empty() ? "wrong size" : error.c_str());
  return job;
}

/// Whether two tokens are equal, in a time that does not tell how much of
/// a guess was right.
bool sameToken(const std::string &a, const std::string &b) {
  if (a.size() != b.size())
    return false;
  unsigned char differ = 0;
  for (size_t i = 0; i < a.size(); ++i)
    differ |= static_cast<unsigned char>(a[i] ^ b[i]);
  return differ == 0;
}

/// A connection to the rendezvous port that has not sent a whole hello.
struct Pending {
  int fd = -1;
  std::string from; // its numeric host
  bool loopback = false;
  std::string bytes; // what it sent so far
  Clock::time_point deadline;
};

/// Rank 0's side: one hello from every other rank, then the table to each.
/// Hellos are read from every connection at once, so that one that sends
/// nothing, or slowly, holds up no rank; one that is no rank of this job is
/// refused, reported and closed, and the rendezvous goes on.
class Gathering {
public:
  Gathering(const TcpConfig &config, int dataPort, Clock::time_point deadline,
            const std::string &where)
      : config(config), deadline(deadline), where(where) {
    job.table.assign(config.worldSize, PeerAddress());
    job.table[0] = {config.masterAddr, dataPort};
    connections.assign(config.worldSize, -1);
  }
  JobAddresses run();

private:
  void acceptOne(int listener);
  /// Reads what `p` sent and judges it; true when `p` is done with (joined
  /// or closed).
  bool readFrom(Pending &p);
  bool judge(Pending &p, const Hello &hello);
  /// Tells `p` why (when it speaks dcrt), reports it and closes it.
  void refuse(Pending &p, const std::string &why, bool reply);
  /// A rank of this job that disagrees: tells it why, then ends the job.
  [[noreturn]] void reject(Pending &p, const std::string &why);
  [[noreturn]] void timedOut();

  const TcpConfig &config;
  Clock::time_point deadline;
  std::string where;
  JobAddresses job;
  std::vector<int> connections; // by rank, once its hello is accepted
  int joined = 1;
  std::vector<Pending> pending;
  int refused = 0;
  std::string lastRefusal;
};

JobAddresses Gathering::run() {
  int listener = listenOn(
      [&] {
        socklen_t length = 0;
        return static_cast<int>(
            resolve(config.masterAddr, config.masterPort, length, "MASTER_ADDR")
                .ss_family);
      }(),
      config.masterPort,
      "the rendezvous (MASTER_PORT from " + config.source + ")");
  while (joined < config.worldSize) {
    std::vector<pollfd> entries;
    bool listening = pending.size() < kMaxPendingHellos;
    if (listening)
      entries.push_back({listener, POLLIN, 0});
    Clock::time_point wake = deadline;
    for (const Pending &p : pending) {
      entries.push_back({p.fd, POLLIN, 0});
      wake = std::min(wake, p.deadline);
    }
    int ready = poll(entries.data(), entries.size(), pollMillis(wake));
    if (ready < 0 && errno != EINTR)
      fatal("tcp transport: poll failed in the rendezvous: %s",
            std::strerror(errno));
    std::vector<Pending> still;
    for (size_t i = 0; i < pending.size(); ++i) {
      Pending &p = pending[i];
      short revents = ready > 0 ? entries[i + listening].revents : 0;
      if (revents && readFrom(p))
        continue;
      if (Clock::now() >= p.deadline) {
        refuse(p,
               "sent no whole hello within " +
                   std::to_string(static_cast<int>(kHelloSeconds)) + " s",
               false);
        continue;
      }
      still.push_back(std::move(p));
    }
    pending = std::move(still);
    if (listening && ready > 0 && entries[0].revents)
      acceptOne(listener);
    if (joined < config.worldSize && secondsLeft(deadline) <= 0)
      timedOut();
  }
  close(listener);
  for (Pending &p : pending)
    close(p.fd); // strangers still talking: the job does not wait for them
  std::random_device entropy;
  job.token = uint64_t(entropy()) << 32 ^ entropy() ^
              static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  std::string reply =
      encodeReply(true, encodeAddressTable(job.token, job.table));
  std::string error;
  for (int r = 1; r < config.worldSize; ++r) {
    if (!writeBefore(connections[r], reply, deadline, error))
      fatal("tcp transport: cannot send the address table to rank %d: %s", r,
            error.c_str());
    close(connections[r]);
  }
  return job;
}

void Gathering::acceptOne(int listener) {
  sockaddr_storage peer = {};
  socklen_t length = sizeof(peer);
  int fd = accept4(listener, reinterpret_cast<sockaddr *>(&peer), &length,
                   SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0)
    return;
  Pending p;
  p.fd = fd;
  p.from = numericHost(peer, length);
  p.loopback = isLoopback(peer);
  // A rank sends its hello at once; something that does not is no rank of
  // ours and may not keep its connection long.
  p.deadline = std::min(deadline, deadlineIn(kHelloSeconds));
  pending.push_back(std::move(p));
}

bool Gathering::readFrom(Pending &p) {
  Hello hello;
  size_t more = 0;
  std::string error;
  HelloState state = parseHello(p.bytes, hello, more, error);
  if (state == HelloState::Partial) {
    // Never more than the hello still lacks: what follows is not read.
    char buffer[kHelloHeaderBytes + kMaxTokenBytes];
    ssize_t n = recv(p.fd, buffer, std::min(more, sizeof(buffer)), 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
      return false;
    if (n <= 0) {
      refuse(p,
             n == 0
                 ? "closed before a whole hello"
                 : std::string(std::strerror(errno)) + " before a whole hello",
             false);
      return true;
    }
    p.bytes.append(buffer, static_cast<size_t>(n));
    state = parseHello(p.bytes, hello, more, error);
  }
  switch (state) {
  case HelloState::Partial:
    return false;
  case HelloState::Foreign:
    refuse(p, "no dcrt hello (not a rank: a port scan, another program)",
           false);
    return true;
  case HelloState::Malformed:
    refuse(p, error, true);
    return true;
  case HelloState::Whole:
    return judge(p, hello);
  }
  return true;
}

bool Gathering::judge(Pending &p, const Hello &hello) {
  if (hello.version != kVersion) {
    refuse(p,
           "a hello of another libdcrt (tcp protocol version " +
               std::to_string(hello.version) + ", this is " +
               std::to_string(kVersion) + ")",
           true);
    return true;
  }
  if (!sameToken(hello.token, config.token)) {
    refuse(p,
           std::string(config.token.empty()
                           ? "a hello with a job token, but rank 0 has none"
                       : hello.token.empty()
                           ? "a hello without the job token"
                           : "a hello with another job's token") +
               " (DCRT_TCP_TOKEN): no rank of this job",
           true);
    return true;
  }
  // The token (or, without one, the magic and version) says it is a rank
  // of this job: a disagreement is the job's error.
  int worldSize = config.worldSize;
  int theirRank = static_cast<int>(std::min<uint32_t>(hello.rank, INT32_MAX));
  if (hello.worldSize != static_cast<uint32_t>(worldSize))
    reject(p, "rank " + std::to_string(hello.rank) + " (at " + p.from +
                  ") has a world size of " + std::to_string(hello.worldSize) +
                  ", but rank 0 has " + std::to_string(worldSize) +
                  " (WORLD_SIZE differs between the ranks)");
  if (theirRank <= 0 || theirRank >= worldSize || connections[theirRank] >= 0)
    reject(p, "two ranks claim rank " + std::to_string(hello.rank) +
                  " (the second at " + p.from + ")");
  // Replies go out with blocking writes once every rank has come.
  int flags = fcntl(p.fd, F_GETFL);
  fcntl(p.fd, F_SETFL, flags & ~O_NONBLOCK);
  connections[theirRank] = p.fd;
  // A rank that reached rank 0 over loopback shares its host, which the
  // others reach as MASTER_ADDR.
  job.table[theirRank] = {p.loopback ? config.masterAddr : p.from,
                          static_cast<int>(hello.dataPort)};
  ++joined;
  return true;
}

void Gathering::refuse(Pending &p, const std::string &why, bool reply) {
  ++refused;
  lastRefusal = "from " + p.from + ": " + why;
  if (refused <= kReportedRefusals)
    warn("tcp transport: the rendezvous at %s refused a connection %s%s",
         where.c_str(), lastRefusal.c_str(),
         refused == kReportedRefusals ? " (further refusals are only counted)"
                                      : "");
  if (reply) {
    std::string error;
    writeBefore(p.fd, encodeReply(false, "rank 0 at " + where + ": " + why),
                deadlineIn(1), error);
  }
  close(p.fd);
}

void Gathering::reject(Pending &p, const std::string &why) {
  std::string error;
  writeBefore(p.fd, encodeReply(false, why), deadlineIn(2), error);
  fatal("tcp transport: %s", why.c_str());
}

void Gathering::timedOut() {
  std::vector<int> missing;
  for (int r = 1; r < config.worldSize; ++r)
    if (connections[r] < 0)
      missing.push_back(r);
  std::string refusals;
  if (refused > 0)
    refusals = "; it refused " + std::to_string(refused) +
               (refused == 1 ? " connection" : " connections") + ", the last " +
               lastRefusal;
  fatal("tcp transport: timed out after %g s waiting for %s of %d to "
        "connect to %s (MASTER_ADDR:MASTER_PORT from %s)%s",
        config.timeoutSeconds, nameRanks(missing).c_str(), config.worldSize,
        where.c_str(), config.source.c_str(), refusals.c_str());
}
} // namespace

JobAddresses dcrt::detail::rendezvous(const TcpConfig &config, int dataPort) {
  Clock::time_point deadline = deadlineIn(config.timeoutSeconds);
  std::string where =
      config.masterAddr + ":" + std::to_string(config.masterPort);
  return config.rank == 0 ? Gathering(config, dataPort, deadline, where).run()
                          : joinRankZero(config, dataPort, deadline, where);
}
