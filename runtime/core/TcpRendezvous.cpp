//===- TcpRendezvous.cpp - how the ranks of a tcp job find each other -----===//
#include "TcpRendezvous.h"

#include "TcpSocket.h"
#include "TcpWire.h"

#include "dcrt/error.hpp"

#include <algorithm>
#include <netdb.h>
#include <poll.h>
#include <random>
#include <unistd.h>

using namespace dcrt;
using namespace dcrt::detail;
using namespace dcrt::detail::tcp;

namespace {
/// Raised when the hello changes, so that ranks of different libdcrt
/// builds fail with a message instead of misreading each other.
constexpr uint32_t kVersion = 1;
/// Rendezvous hello: magic, version, rank, world size, data port.
constexpr size_t kHelloBytes = 20;

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
  std::string hello;
  put32(hello, kMagic);
  put32(hello, kVersion);
  put32(hello, static_cast<uint32_t>(config.rank));
  put32(hello, static_cast<uint32_t>(config.worldSize));
  put32(hello, static_cast<uint32_t>(dataPort));
  // The answer: status (0: accepted), then the table or why not.
  std::string status, body;
  if (!writeBefore(fd, hello, deadline, error) ||
      !readBefore(fd, status, 8, deadline, error) ||
      !readBefore(fd, body, get32(status.data() + 4), deadline, error))
    fatal("tcp transport: the rendezvous with rank 0 at %s failed: %s "
          "(waited up to %g s for every rank to join)",
          where.c_str(), error.c_str(), config.timeoutSeconds);
  close(fd);
  if (get32(status.data()) != 0)
    fatal("tcp transport: rank 0 refused this rank: %s", body.c_str());
  JobAddresses job;
  if (!decodeAddressTable(body, job.token, job.table, error) ||
      static_cast<int>(job.table.size()) != config.worldSize)
    fatal("tcp transport: a bad address table from rank 0 at %s: %s",
          where.c_str(), error.empty() ? "wrong size" : error.c_str());
  return job;
}

/// Rank 0: one hello from every other rank, then the table to each.
JobAddresses gatherRanks(const TcpConfig &config, int dataPort,
                         Clock::time_point deadline, const std::string &where) {
  int worldSize = config.worldSize;
  std::string error;
  int listener = listenOn(
      [&] {
        socklen_t length = 0;
        return static_cast<int>(
            resolve(config.masterAddr, config.masterPort, length, "MASTER_ADDR")
                .ss_family);
      }(),
      config.masterPort,
      "the rendezvous (MASTER_PORT from " + config.source + ")");
  JobAddresses job;
  job.table.assign(worldSize, PeerAddress());
  job.table[0] = {config.masterAddr, dataPort};
  std::vector<int> connections(worldSize, -1);
  int joined = 1;
  // Tell the rank why before ending the job, so that its message says too.
  auto refuse = [&](int fd, const std::string &message) {
    std::string reply;
    put32(reply, 1);
    put32(reply, static_cast<uint32_t>(message.size()));
    reply += message;
    std::string ignored;
    writeBefore(fd, reply, Clock::now() + std::chrono::seconds(2), ignored);
    fatal("tcp transport: %s", message.c_str());
  };
  while (joined < worldSize) {
    pollfd entry = {listener, POLLIN, 0};
    if (poll(&entry, 1, pollMillis(deadline)) <= 0) {
      if (secondsLeft(deadline) > 0)
        continue;
      std::vector<int> missing;
      for (int r = 1; r < worldSize; ++r)
        if (connections[r] < 0)
          missing.push_back(r);
      fatal("tcp transport: timed out after %g s waiting for %s of %d to "
            "connect to %s (MASTER_ADDR:MASTER_PORT from %s)",
            config.timeoutSeconds, nameRanks(missing).c_str(), worldSize,
            where.c_str(), config.source.c_str());
    }
    sockaddr_storage peer = {};
    socklen_t length = sizeof(peer);
    int fd = accept4(listener, reinterpret_cast<sockaddr *>(&peer), &length,
                     SOCK_CLOEXEC);
    if (fd < 0)
      continue;
    // A rank sends its hello at once; something that does not is no rank
    // of ours and may not hold the rendezvous up for long.
    std::string hello;
    if (!readBefore(fd, hello, kHelloBytes,
                    std::min(deadline, deadlineIn(kHelloSeconds)), error) ||
        get32(hello.data()) != kMagic) {
      // Not a rank of ours (a port scan, a stray client): ignore it.
      close(fd);
      continue;
    }
    int theirRank = static_cast<int>(get32(hello.data() + 8));
    int theirWorld = static_cast<int>(get32(hello.data() + 12));
    int theirPort = static_cast<int>(get32(hello.data() + 16));
    std::string from = numericHost(peer, length);
    if (get32(hello.data() + 4) != kVersion)
      refuse(fd, "a rank at " + from +
                     " runs another libdcrt (tcp protocol version " +
                     std::to_string(get32(hello.data() + 4)) + ", this is " +
                     std::to_string(kVersion) + ")");
    if (theirWorld != worldSize)
      refuse(fd, "rank " + std::to_string(theirRank) + " (at " + from +
                     ") has a world size of " + std::to_string(theirWorld) +
                     ", but rank 0 has " + std::to_string(worldSize) +
                     " (WORLD_SIZE differs between the ranks)");
    if (theirRank <= 0 || theirRank >= worldSize || connections[theirRank] >= 0)
      refuse(fd, "two ranks claim rank " + std::to_string(theirRank) +
                     " (the second at " + from + ")");
    connections[theirRank] = fd;
    // A rank that reached rank 0 over loopback shares its host, which the
    // others reach as MASTER_ADDR.
    job.table[theirRank] = {isLoopback(peer) ? config.masterAddr : from,
                            theirPort};
    ++joined;
  }
  close(listener);
  std::random_device entropy;
  job.token = uint64_t(entropy()) << 32 ^ entropy() ^
              static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  std::string body = encodeAddressTable(job.token, job.table);
  std::string reply;
  put32(reply, 0);
  put32(reply, static_cast<uint32_t>(body.size()));
  reply += body;
  for (int r = 1; r < worldSize; ++r) {
    if (!writeBefore(connections[r], reply, deadline, error))
      fatal("tcp transport: cannot send the address table to rank %d: %s", r,
            error.c_str());
    close(connections[r]);
  }
  return job;
}
} // namespace

JobAddresses dcrt::detail::rendezvous(const TcpConfig &config, int dataPort) {
  Clock::time_point deadline = deadlineIn(config.timeoutSeconds);
  std::string where =
      config.masterAddr + ":" + std::to_string(config.masterPort);
  return config.rank == 0 ? gatherRanks(config, dataPort, deadline, where)
                          : joinRankZero(config, dataPort, deadline, where);
}

std::string
dcrt::detail::encodeAddressTable(uint64_t token,
                                 const std::vector<PeerAddress> &table) {
  std::string out;
  put32(out, kMagic);
  put64(out, token);
  put32(out, static_cast<uint32_t>(table.size()));
  for (const PeerAddress &entry : table) {
    put32(out, static_cast<uint32_t>(entry.port));
    put32(out, static_cast<uint32_t>(entry.host.size()));
    out += entry.host;
  }
  return out;
}

bool dcrt::detail::decodeAddressTable(const std::string &bytes, uint64_t &token,
                                      std::vector<PeerAddress> &table,
                                      std::string &error) {
  table.clear();
  size_t at = 16;
  if (bytes.size() < at || get32(bytes.data()) != kMagic) {
    error = "no table header";
    return false;
  }
  token = get64(bytes.data() + 4);
  uint32_t count = get32(bytes.data() + 12);
  for (uint32_t i = 0; i < count; ++i) {
    if (bytes.size() - at < 8) {
      error = "entry " + std::to_string(i) + " of " + std::to_string(count) +
              " is cut short";
      return false;
    }
    PeerAddress entry;
    entry.port = static_cast<int>(get32(bytes.data() + at));
    uint32_t length = get32(bytes.data() + at + 4);
    at += 8;
    if (bytes.size() - at < length || entry.port < 1 || entry.port > 65535 ||
        length == 0 || length > NI_MAXHOST) {
      error = "entry " + std::to_string(i) + " is malformed";
      return false;
    }
    entry.host = bytes.substr(at, length);
    at += length;
    table.push_back(entry);
  }
  if (at != bytes.size()) {
    error = std::to_string(bytes.size() - at) + " bytes after the table";
    return false;
  }
  return true;
}
