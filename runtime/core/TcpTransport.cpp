//===- TcpTransport.cpp - the job over a TCP rendezvous and a socket mesh -===//
#include "TcpTransport.h"

#include "Streams.h"

#include "dcrt/error.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <random>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

using namespace dcrt;
using namespace dcrt::detail;

namespace {
using Clock = std::chrono::steady_clock;

constexpr uint32_t kMagic = 0x54524344; // "DCRT"
constexpr uint32_t kVersion = 1;
/// Rendezvous hello: magic, version, rank, world size, data port.
constexpr size_t kHelloBytes = 20;
/// Mesh hello: magic, rank, token.
constexpr size_t kMeshHelloBytes = 16;
/// How long a new connection may take to send its hello.
constexpr double kHelloSeconds = 10;
/// Every collective message: kind, sequence number, payload bytes.
constexpr size_t kHeaderBytes = 16;
/// A reduction goes in pieces of at most this many bytes per peer, which
/// bounds its scratch memory to (n-1) pieces.
constexpr int64_t kReducePieceBytes = int64_t(4) << 20;
/// Broadcasts above this size go as a scatter and an all-gather, so that
/// the root sends the payload about once instead of n-1 times.
constexpr int64_t kScatterBroadcastBytes = int64_t(256) << 10;

//===----------------------------------------------------------------------===//
// Little-endian encoding
//===----------------------------------------------------------------------===//

void put32(std::string &out, uint32_t value) {
  for (int i = 0; i < 4; ++i)
    out.push_back(static_cast<char>(value >> (8 * i)));
}

void put64(std::string &out, uint64_t value) {
  put32(out, static_cast<uint32_t>(value));
  put32(out, static_cast<uint32_t>(value >> 32));
}

uint32_t get32(const char *in) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i)
    value |= uint32_t(static_cast<unsigned char>(in[i])) << (8 * i);
  return value;
}

uint64_t get64(const char *in) {
  return get32(in) | uint64_t(get32(in + 4)) << 32;
}

//===----------------------------------------------------------------------===//
// Environment
//===----------------------------------------------------------------------===//

const char *environment(const char *name) {
  const char *value = std::getenv(name);
  return value && *value ? value : nullptr;
}

/// `name`'s value as an integer in [low, high]; fatal otherwise.
long long integerVariable(const char *name, long long low, long long high,
                          const char *expected) {
  const char *text = environment(name);
  char *end = nullptr;
  errno = 0;
  long long value = text ? std::strtoll(text, &end, 10) : 0;
  if (!text || *end || errno || value < low || value > high)
    fatal("%s='%s' is not %s", name, text ? text : "", expected);
  return value;
}

//===----------------------------------------------------------------------===//
// Sockets
//===----------------------------------------------------------------------===//

Clock::time_point deadlineIn(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(seconds));
}

double secondsLeft(Clock::time_point deadline) {
  return std::chrono::duration<double>(deadline - Clock::now()).count();
}

int pollMillis(Clock::time_point deadline, int most = 1000) {
  double left = secondsLeft(deadline);
  return left <= 0 ? 0
                   : static_cast<int>(std::min<double>(most, left * 1e3) + 1);
}

void setNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
    fatal("tcp transport: fcntl failed: %s", std::strerror(errno));
}

void setNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

std::string numericHost(const sockaddr_storage &address, socklen_t length) {
  char host[NI_MAXHOST];
  if (getnameinfo(reinterpret_cast<const sockaddr *>(&address), length, host,
                  sizeof(host), nullptr, 0, NI_NUMERICHOST) != 0)
    return "?";
  return host;
}

bool isLoopback(const sockaddr_storage &address) {
  if (address.ss_family == AF_INET6) {
    const auto &in6 = reinterpret_cast<const sockaddr_in6 &>(address);
    if (IN6_IS_ADDR_V4MAPPED(&in6.sin6_addr))
      return in6.sin6_addr.s6_addr[12] == 127;
    return IN6_IS_ADDR_LOOPBACK(&in6.sin6_addr);
  }
  const auto &in = reinterpret_cast<const sockaddr_in &>(address);
  return (ntohl(in.sin_addr.s_addr) >> 24) == 127;
}

int portOf(const sockaddr_storage &address) {
  if (address.ss_family == AF_INET6)
    return ntohs(reinterpret_cast<const sockaddr_in6 &>(address).sin6_port);
  return ntohs(reinterpret_cast<const sockaddr_in &>(address).sin_port);
}

/// A listening socket on every interface of `family`, at `port` (0: any).
int listenOn(int family, int port, const std::string &what) {
  int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    fatal("tcp transport: cannot create a socket: %s", std::strerror(errno));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_storage address = {};
  socklen_t length;
  if (family == AF_INET6) {
    auto &in6 = reinterpret_cast<sockaddr_in6 &>(address);
    in6.sin6_family = AF_INET6;
    in6.sin6_addr = in6addr_any;
    in6.sin6_port = htons(static_cast<uint16_t>(port));
    length = sizeof(in6);
  } else {
    auto &in = reinterpret_cast<sockaddr_in &>(address);
    in.sin_family = AF_INET;
    in.sin_addr.s_addr = htonl(INADDR_ANY);
    in.sin_port = htons(static_cast<uint16_t>(port));
    length = sizeof(in);
  }
  if (bind(fd, reinterpret_cast<sockaddr *>(&address), length) != 0 ||
      listen(fd, SOMAXCONN) != 0)
    fatal("tcp transport: cannot listen on port %d for %s: %s", port,
          what.c_str(), std::strerror(errno));
  return fd;
}

int boundPort(int fd) {
  sockaddr_storage address = {};
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr *>(&address), &length);
  return portOf(address);
}

/// The first address of host:port, fatal when it does not resolve.
sockaddr_storage resolve(const std::string &host, int port, socklen_t &length,
                         const char *what) {
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo *found = nullptr;
  std::string service = std::to_string(port);
  int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  if (rc != 0 || !found)
    fatal("tcp transport: cannot resolve %s '%s': %s", what, host.c_str(),
          gai_strerror(rc));
  sockaddr_storage address = {};
  std::memcpy(&address, found->ai_addr, found->ai_addrlen);
  length = found->ai_addrlen;
  freeaddrinfo(found);
  return address;
}

/// Connects to `address`, retrying refused connections (the listener may
/// not be up yet) until the deadline; -1 if it passed.
int connectBefore(const sockaddr_storage &address, socklen_t length,
                  Clock::time_point deadline, std::string &lastError) {
  for (;;) {
    int fd = socket(address.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
      fatal("tcp transport: cannot create a socket: %s", std::strerror(errno));
    setNonBlocking(fd);
    int rc = connect(fd, reinterpret_cast<const sockaddr *>(&address), length);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd entry = {fd, POLLOUT, 0};
      if (poll(&entry, 1, pollMillis(deadline)) == 1) {
        int error = 0;
        socklen_t size = sizeof(error);
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size);
        rc = error ? -1 : 0;
        errno = error;
      } else {
        errno = ETIMEDOUT;
      }
    }
    if (rc == 0) {
      int flags = fcntl(fd, F_GETFL);
      fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
      return fd;
    }
    lastError = std::strerror(errno);
    close(fd);
    if (secondsLeft(deadline) <= 0)
      return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

/// Reads or writes exactly `bytes` on a blocking socket before the deadline;
/// false on a timeout, an error or the end of the stream (`error` says
/// which).
bool transferBefore(int fd, char *data, size_t bytes, bool reading,
                    Clock::time_point deadline, std::string &error) {
  size_t done = 0;
  while (done < bytes) {
    pollfd entry = {fd, static_cast<short>(reading ? POLLIN : POLLOUT), 0};
    int ready = poll(&entry, 1, pollMillis(deadline));
    if (ready < 0 && errno == EINTR)
      continue;
    if (ready == 0) {
      if (secondsLeft(deadline) > 0)
        continue;
      error = "timed out";
      return false;
    }
    ssize_t n = reading ? recv(fd, data + done, bytes - done, 0)
                        : send(fd, data + done, bytes - done, MSG_NOSIGNAL);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (n <= 0) {
      error = n == 0 ? "the connection was closed" : std::strerror(errno);
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

bool readBefore(int fd, std::string &out, size_t bytes,
                Clock::time_point deadline, std::string &error) {
  out.assign(bytes, '\0');
  return transferBefore(fd, out.data(), bytes, true, deadline, error);
}

bool writeBefore(int fd, const std::string &data, Clock::time_point deadline,
                 std::string &error) {
  return transferBefore(fd, const_cast<char *>(data.data()), data.size(), false,
                        deadline, error);
}

/// "rank 2" or "ranks 2, 5 and 7" (at most 8 named).
std::string nameRanks(const std::vector<int> &ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size() && i < 8; ++i) {
    if (i > 0)
      text += i + 1 == ranks.size() ? " and " : ", ";
    text += std::to_string(ranks[i]);
  }
  if (ranks.size() > 8)
    text += " and " + std::to_string(ranks.size() - 8) + " more";
  return text;
}

//===----------------------------------------------------------------------===//
// Sums
//===----------------------------------------------------------------------===//

template <typename T>
void sumInto(void *out, const std::vector<const char *> &parts, int64_t count) {
  T *result = static_cast<T *>(out);
  for (int64_t i = 0; i < count; ++i) {
    T total = reinterpret_cast<const T *>(parts[0])[i];
    for (size_t p = 1; p < parts.size(); ++p)
      total += reinterpret_cast<const T *>(parts[p])[i];
    result[i] = total;
  }
}

/// out[i] = parts[0][i] + parts[1][i] + ..., added in that order (`out` may
/// be one of the parts).
void sumParts(ElementType type, void *out,
              const std::vector<const char *> &parts, int64_t count,
              const char *what) {
  switch (type) {
  case ElementType::F32:
    return sumInto<float>(out, parts, count);
  case ElementType::F64:
    return sumInto<double>(out, parts, count);
  case ElementType::I32:
    return sumInto<int32_t>(out, parts, count);
  case ElementType::I64:
    return sumInto<int64_t>(out, parts, count);
  case ElementType::Byte:
    break;
  }
  fatal("internal error: %s: no sum of %s", what, elementTypeName(type));
}

//===----------------------------------------------------------------------===//
// The transport
//===----------------------------------------------------------------------===//

struct Group {
  std::vector<int> members; // world ranks by index
  int me = 0;               // this rank's index
};

/// One message of a collective step: to or from a peer (a world rank).
struct Transfer {
  int peer = 0;
  bool sending = false;
  char *data = nullptr;
  int64_t bytes = 0;
  char header[kHeaderBytes];
  int64_t done = 0; // header and payload bytes moved
};

class TcpTransport final : public Transport {
public:
  explicit TcpTransport(const TcpConfig &config);
  ~TcpTransport() override;
  const char *name() const override { return "tcp"; }
  int addGroup(const std::vector<int> &members) override;
  void barrier(double seconds) override;
  void start(CommOp &op) override { pending.push_back(&op); }
  void progress(std::vector<CommOp *> &completed) override;

private:
  void rendezvous(int dataListener, std::vector<PeerAddress> &table,
                  uint64_t &token);
  void connectMesh(int dataListener, const std::vector<PeerAddress> &table,
                   uint64_t token);
  void run(CommOp &op);

  // Steps of collectives: `transfers` all proceed at once.
  void exchange(std::vector<Transfer> &transfers, const CommOp &op);
  void addSend(std::vector<Transfer> &transfers, int peer, const void *data,
               int64_t bytes, const CommOp &op);
  void addReceive(std::vector<Transfer> &transfers, int peer, void *data,
                  int64_t bytes, const CommOp &op);
  [[noreturn]] void peerLost(int peer, const CommOp &op,
                             const std::string &why);

  void allGatherv(const Group &group, char *buffer,
                  const std::vector<int64_t> &offsets,
                  const std::vector<int64_t> &sizes, const CommOp &op);
  void reduceScatter(const Group &group, const char *send, char *recv,
                     const std::vector<int64_t> &offsets,
                     const std::vector<int64_t> &counts, const CommOp &op);

  TcpConfig config;
  std::vector<int> sockets; // by world rank; -1 for this rank
  std::vector<PeerAddress> addresses;
  std::vector<Group> groups;
  std::vector<CommOp *> pending;
  uint32_t sequence = 0; // ops this rank issued: the same on every rank
  std::vector<std::vector<char>> scratch;
};

TcpTransport::TcpTransport(const TcpConfig &config) : config(config) {
  rank_ = config.rank;
  worldSize_ = config.worldSize;
  sockets.assign(worldSize_, -1);
  Group world;
  for (int r = 0; r < worldSize_; ++r)
    world.members.push_back(r);
  world.me = rank_;
  groups.push_back(world);
  if (worldSize_ == 1)
    return;

  // The data listener's family follows MASTER_ADDR's: the address peers
  // reach rank 0 by is the kind of address they reach each other by.
  socklen_t length = 0;
  sockaddr_storage master =
      resolve(config.masterAddr, config.masterPort, length, "MASTER_ADDR");
  int dataListener = listenOn(master.ss_family, 0, "the job's mesh");
  std::vector<PeerAddress> table;
  uint64_t token = 0;
  rendezvous(dataListener, table, token);
  addresses = table;
  connectMesh(dataListener, table, token);
  close(dataListener);
  for (int fd : sockets)
    if (fd >= 0) {
      setNonBlocking(fd);
      setNoDelay(fd);
    }
}

TcpTransport::~TcpTransport() {
  for (int fd : sockets)
    if (fd >= 0)
      close(fd);
}

void TcpTransport::rendezvous(int dataListener, std::vector<PeerAddress> &table,
                              uint64_t &token) {
  Clock::time_point deadline = deadlineIn(config.timeoutSeconds);
  std::string where =
      config.masterAddr + ":" + std::to_string(config.masterPort);
  std::string error;
  if (rank_ != 0) {
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
    put32(hello, static_cast<uint32_t>(rank_));
    put32(hello, static_cast<uint32_t>(worldSize_));
    put32(hello, static_cast<uint32_t>(boundPort(dataListener)));
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
    if (!decodeAddressTable(body, token, table, error) ||
        static_cast<int>(table.size()) != worldSize_)
      fatal("tcp transport: a bad address table from rank 0 at %s: %s",
            where.c_str(), error.empty() ? "wrong size" : error.c_str());
    return;
  }

  // Rank 0: one hello from every other rank, then the table to each.
  int listener = listenOn(
      [&] {
        socklen_t length = 0;
        return static_cast<int>(
            resolve(config.masterAddr, config.masterPort, length, "MASTER_ADDR")
                .ss_family);
      }(),
      config.masterPort,
      "the rendezvous (MASTER_PORT from " + config.source + ")");
  table.assign(worldSize_, PeerAddress());
  table[0] = {config.masterAddr, boundPort(dataListener)};
  std::vector<int> connections(worldSize_, -1);
  int joined = 1;
  auto refuse = [&](int fd, const std::string &message) {
    std::string reply;
    put32(reply, 1);
    put32(reply, static_cast<uint32_t>(message.size()));
    reply += message;
    std::string ignored;
    writeBefore(fd, reply, Clock::now() + std::chrono::seconds(2), ignored);
    fatal("tcp transport: %s", message.c_str());
  };
  while (joined < worldSize_) {
    pollfd entry = {listener, POLLIN, 0};
    if (poll(&entry, 1, pollMillis(deadline)) <= 0) {
      if (secondsLeft(deadline) > 0)
        continue;
      std::vector<int> missing;
      for (int r = 1; r < worldSize_; ++r)
        if (connections[r] < 0)
          missing.push_back(r);
      fatal("tcp transport: timed out after %g s waiting for %s of %d to "
            "connect to %s (MASTER_ADDR:MASTER_PORT from %s)",
            config.timeoutSeconds, nameRanks(missing).c_str(), worldSize_,
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
    if (theirWorld != worldSize_)
      refuse(fd, "rank " + std::to_string(theirRank) + " (at " + from +
                     ") has a world size of " + std::to_string(theirWorld) +
                     ", but rank 0 has " + std::to_string(worldSize_) +
                     " (WORLD_SIZE differs between the ranks)");
    if (theirRank <= 0 || theirRank >= worldSize_ ||
        connections[theirRank] >= 0)
      refuse(fd, "two ranks claim rank " + std::to_string(theirRank) +
                     " (the second at " + from + ")");
    connections[theirRank] = fd;
    // A rank that reached rank 0 over loopback shares its host, which the
    // others reach as MASTER_ADDR.
    table[theirRank] = {isLoopback(peer) ? config.masterAddr : from, theirPort};
    ++joined;
  }
  close(listener);
  std::random_device entropy;
  token = uint64_t(entropy()) << 32 ^ entropy() ^
          static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  std::string body = encodeAddressTable(token, table);
  std::string reply;
  put32(reply, 0);
  put32(reply, static_cast<uint32_t>(body.size()));
  reply += body;
  for (int r = 1; r < worldSize_; ++r) {
    if (!writeBefore(connections[r], reply, deadline, error))
      fatal("tcp transport: cannot send the address table to rank %d: %s", r,
            error.c_str());
    close(connections[r]);
  }
}

void TcpTransport::connectMesh(int dataListener,
                               const std::vector<PeerAddress> &table,
                               uint64_t token) {
  Clock::time_point deadline = deadlineIn(config.timeoutSeconds);
  std::string error;
  // Lower ranks listen already: the kernel completes these connections
  // before anyone accepts them.
  for (int r = 0; r < rank_; ++r) {
    socklen_t length = 0;
    sockaddr_storage address =
        resolve(table[r].host, table[r].port, length, "a rank's address");
    int fd = connectBefore(address, length, deadline, error);
    std::string hello;
    put32(hello, kMagic);
    put32(hello, static_cast<uint32_t>(rank_));
    put64(hello, token);
    if (fd < 0 || !writeBefore(fd, hello, deadline, error))
      fatal("tcp transport: cannot connect to rank %d at %s:%d: %s", r,
            table[r].host.c_str(), table[r].port, error.c_str());
    sockets[r] = fd;
  }
  for (int accepted = rank_ + 1; accepted < worldSize_;) {
    pollfd entry = {dataListener, POLLIN, 0};
    if (poll(&entry, 1, pollMillis(deadline)) <= 0) {
      if (secondsLeft(deadline) > 0)
        continue;
      std::vector<int> missing;
      for (int r = rank_ + 1; r < worldSize_; ++r)
        if (sockets[r] < 0)
          missing.push_back(r);
      fatal("tcp transport: timed out after %g s waiting for %s to connect "
            "to this rank",
            config.timeoutSeconds, nameRanks(missing).c_str());
    }
    int fd = accept4(dataListener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0)
      continue;
    std::string hello;
    if (!readBefore(fd, hello, kMeshHelloBytes,
                    std::min(deadline, deadlineIn(kHelloSeconds)), error) ||
        get32(hello.data()) != kMagic || get64(hello.data() + 8) != token) {
      close(fd); // not a rank of this job
      continue;
    }
    int peer = static_cast<int>(get32(hello.data() + 4));
    if (peer <= rank_ || peer >= worldSize_ || sockets[peer] >= 0)
      fatal("tcp transport: a second connection claims to be rank %d", peer);
    sockets[peer] = fd;
    ++accepted;
  }
}

int TcpTransport::addGroup(const std::vector<int> &members) {
  Group group;
  group.members = members;
  auto found = std::find(members.begin(), members.end(), rank_);
  if (found == members.end())
    fatal("internal error: a group without this rank");
  group.me = static_cast<int>(found - members.begin());
  groups.push_back(group);
  return static_cast<int>(groups.size()) - 1;
}

void TcpTransport::barrier(double seconds) {
  // The exchange's own deadline (no progress for the timeout) bounds it.
  CommOp op;
  op.kind = CommKind::Barrier;
  op.name = "dcrt_init's barrier";
  double saved = config.timeoutSeconds;
  config.timeoutSeconds = seconds;
  run(op);
  config.timeoutSeconds = saved;
}

void TcpTransport::progress(std::vector<CommOp *> &completed) {
  // Blocking: the thread has nothing else to do while a collective runs.
  for (CommOp *op : pending) {
    run(*op);
    completed.push_back(op);
  }
  pending.clear();
}

[[noreturn]] void TcpTransport::peerLost(int peer, const CommOp &op,
                                         const std::string &why) {
  fatalPeerEnded(
      "tcp transport: lost the connection to rank %d (%s:%d) during %s: "
      "%s; rank %d ended (killed, crashed, or failed with its own error)",
      peer, addresses[peer].host.c_str(), addresses[peer].port, op.name,
      why.c_str(), peer);
}

void TcpTransport::addSend(std::vector<Transfer> &transfers, int peer,
                           const void *data, int64_t bytes, const CommOp &op) {
  Transfer transfer;
  transfer.peer = peer;
  transfer.sending = true;
  transfer.data = const_cast<char *>(static_cast<const char *>(data));
  transfer.bytes = bytes;
  std::string header;
  put32(header, static_cast<uint32_t>(op.kind));
  put32(header, sequence);
  put64(header, static_cast<uint64_t>(bytes));
  std::memcpy(transfer.header, header.data(), kHeaderBytes);
  transfers.push_back(transfer);
}

void TcpTransport::addReceive(std::vector<Transfer> &transfers, int peer,
                              void *data, int64_t bytes, const CommOp &op) {
  Transfer transfer;
  transfer.peer = peer;
  transfer.data = static_cast<char *>(data);
  transfer.bytes = bytes;
  transfers.push_back(transfer); // `op` is what its header must match
}

void TcpTransport::exchange(std::vector<Transfer> &transfers,
                            const CommOp &op) {
  // At most one send and one receive per peer in a step.
  std::vector<pollfd> entries;
  std::vector<int> sendOf, receiveOf; // by entry
  for (size_t i = 0; i < transfers.size(); ++i) {
    int fd = sockets[transfers[i].peer];
    size_t e = 0;
    while (e < entries.size() && entries[e].fd != fd)
      ++e;
    if (e == entries.size()) {
      entries.push_back({fd, 0, 0});
      sendOf.push_back(-1);
      receiveOf.push_back(-1);
    }
    (transfers[i].sending ? sendOf : receiveOf)[e] = static_cast<int>(i);
  }
  auto finished = [](const Transfer &t) {
    return t.done == t.bytes + static_cast<int64_t>(kHeaderBytes);
  };
  size_t left = 0;
  for (Transfer &t : transfers)
    left += !finished(t);
  auto lastProgress = Clock::now();
  while (left > 0) {
    for (size_t e = 0; e < entries.size(); ++e) {
      entries[e].events = 0;
      if (sendOf[e] >= 0 && !finished(transfers[sendOf[e]]))
        entries[e].events |= POLLOUT;
      if (receiveOf[e] >= 0 && !finished(transfers[receiveOf[e]]))
        entries[e].events |= POLLIN;
    }
    int ready = poll(entries.data(), entries.size(), 1000);
    if (ready < 0 && errno != EINTR)
      fatal("tcp transport: poll failed in %s: %s", op.name,
            std::strerror(errno));
    if (ready <= 0) {
      double idle =
          std::chrono::duration<double>(Clock::now() - lastProgress).count();
      if (idle > config.timeoutSeconds) {
        std::vector<int> waiting;
        for (const Transfer &t : transfers)
          if (!finished(t) && std::find(waiting.begin(), waiting.end(),
                                        t.peer) == waiting.end())
            waiting.push_back(t.peer);
        std::sort(waiting.begin(), waiting.end());
        fatal("tcp transport: timed out after %g s in %s waiting for %s: a "
              "peer rank may have stalled or issued different collectives "
              "(DCRT_TIMEOUT_S sets the limit)",
              config.timeoutSeconds, op.name, nameRanks(waiting).c_str());
      }
      continue;
    }
    for (size_t e = 0; e < entries.size(); ++e) {
      short revents = entries[e].revents;
      if (!revents)
        continue;
      if (receiveOf[e] >= 0 && (revents & (POLLIN | POLLHUP | POLLERR))) {
        Transfer &t = transfers[receiveOf[e]];
        bool wasFinished = finished(t);
        while (!finished(t)) {
          ssize_t n;
          if (t.done < static_cast<int64_t>(kHeaderBytes))
            n = recv(entries[e].fd, t.header + t.done, kHeaderBytes - t.done,
                     0);
          else
            n = recv(entries[e].fd, t.data + (t.done - kHeaderBytes),
                     static_cast<size_t>(t.bytes + kHeaderBytes - t.done), 0);
          if (n < 0 && (errno == EAGAIN || errno == EINTR))
            break;
          if (n <= 0)
            peerLost(t.peer, op,
                     n == 0 ? "it closed the connection"
                            : std::string(std::strerror(errno)));
          bool hadHeader = t.done >= static_cast<int64_t>(kHeaderBytes);
          t.done += n;
          lastProgress = Clock::now();
          if (!hadHeader && t.done >= static_cast<int64_t>(kHeaderBytes)) {
            auto kind = static_cast<CommKind>(get32(t.header));
            uint32_t theirSequence = get32(t.header + 4);
            auto bytes = static_cast<int64_t>(get64(t.header + 8));
            if (kind != op.kind || theirSequence != sequence ||
                bytes != t.bytes)
              fatal("tcp transport: the ranks issued different collectives: "
                    "rank %d sent %lld bytes of its collective #%u (%s) "
                    "where this rank, in %s (#%u, %s), expected %lld",
                    t.peer, static_cast<long long>(bytes), theirSequence,
                    commKindName(kind), op.name, sequence,
                    commKindName(op.kind), static_cast<long long>(t.bytes));
          }
        }
        if (!wasFinished && finished(t))
          --left;
      }
      if (sendOf[e] >= 0 && (revents & (POLLOUT | POLLHUP | POLLERR))) {
        Transfer &t = transfers[sendOf[e]];
        bool wasFinished = finished(t);
        while (!finished(t)) {
          ssize_t n;
          if (t.done < static_cast<int64_t>(kHeaderBytes))
            n = send(entries[e].fd, t.header + t.done, kHeaderBytes - t.done,
                     MSG_NOSIGNAL | (t.bytes > 0 ? MSG_MORE : 0));
          else
            n = send(entries[e].fd, t.data + (t.done - kHeaderBytes),
                     static_cast<size_t>(t.bytes + kHeaderBytes - t.done),
                     MSG_NOSIGNAL);
          if (n < 0 && (errno == EAGAIN || errno == EINTR))
            break;
          if (n <= 0)
            peerLost(t.peer, op, std::strerror(errno));
          t.done += n;
          lastProgress = Clock::now();
        }
        if (!wasFinished && finished(t))
          --left;
      }
      // Hung up with nothing asked of it in this step: noticed when it is.
    }
  }
}

void TcpTransport::allGatherv(const Group &group, char *buffer,
                              const std::vector<int64_t> &offsets,
                              const std::vector<int64_t> &sizes,
                              const CommOp &op) {
  std::vector<Transfer> transfers;
  int n = static_cast<int>(group.members.size());
  for (int j = 0; j < n; ++j) {
    if (j == group.me)
      continue;
    addSend(transfers, group.members[j], buffer + offsets[group.me],
            sizes[group.me], op);
    addReceive(transfers, group.members[j], buffer + offsets[j], sizes[j], op);
  }
  exchange(transfers, op);
}

void TcpTransport::reduceScatter(const Group &group, const char *send,
                                 char *recv,
                                 const std::vector<int64_t> &offsets,
                                 const std::vector<int64_t> &counts,
                                 const CommOp &op) {
  // Block j (elements offsets[j] .. + counts[j] of `send`) goes to member
  // j; this rank sums the blocks it gets into `recv`, in member order, one
  // piece at a time. Pieces are at the same element positions on every
  // rank, so each piece is one message per pair.
  int n = static_cast<int>(group.members.size());
  int64_t size = elementSize(op.type);
  int64_t pieceCount = std::max<int64_t>(1, kReducePieceBytes / size);
  int64_t longest = *std::max_element(counts.begin(), counts.end());
  scratch.resize(n);
  std::vector<const char *> parts(n);
  for (int64_t begin = 0; begin < longest || begin == 0; begin += pieceCount) {
    std::vector<Transfer> transfers;
    int64_t mine = std::clamp<int64_t>(counts[group.me] - begin, 0, pieceCount);
    for (int j = 0; j < n; ++j) {
      if (j == group.me)
        continue;
      int64_t theirs = std::clamp<int64_t>(counts[j] - begin, 0, pieceCount);
      if (theirs > 0)
        addSend(transfers, group.members[j], send + (offsets[j] + begin) * size,
                theirs * size, op);
      if (mine > 0) {
        scratch[j].resize(static_cast<size_t>(mine * size));
        addReceive(transfers, group.members[j], scratch[j].data(), mine * size,
                   op);
      }
    }
    exchange(transfers, op);
    if (mine > 0) {
      for (int j = 0; j < n; ++j)
        parts[j] = j == group.me ? send + (offsets[j] + begin) * size
                                 : scratch[j].data();
      sumParts(op.type, recv + begin * size, parts, mine, op.name);
    }
    if (longest == 0)
      break;
  }
}

/// Splits `count` into `n` near-equal consecutive blocks.
void splitEvenly(int64_t count, int n, std::vector<int64_t> &offsets,
                 std::vector<int64_t> &sizes) {
  offsets.resize(n);
  sizes.resize(n);
  for (int j = 0; j < n; ++j) {
    offsets[j] = count * j / n;
    sizes[j] = count * (j + 1) / n - offsets[j];
  }
}

void TcpTransport::run(CommOp &op) {
  ++sequence;
  if (op.group < 0 || op.group >= static_cast<int>(groups.size()))
    fatal("internal error: %s has no group %d", op.name, op.group);
  const Group &group = groups[op.group];
  int n = static_cast<int>(group.members.size());
  bool rooted = op.kind == CommKind::Gather || op.kind == CommKind::Gatherv ||
                op.kind == CommKind::Broadcast;
  if (rooted && (op.root < 0 || op.root >= n))
    fatal("tcp transport: %s: root %d is not a rank of its group of %d",
          op.name, op.root, n);
  int64_t size = elementSize(op.type);
  int64_t block = op.count * size;
  const char *send = static_cast<const char *>(op.send);
  char *recv = static_cast<char *>(op.recv);
  std::vector<Transfer> transfers;
  std::vector<int64_t> offsets, sizes;
  switch (op.kind) {
  case CommKind::AllGather: {
    if (send != recv + group.me * block)
      std::memmove(recv + group.me * block, send, static_cast<size_t>(block));
    for (int j = 0; j < n; ++j) {
      offsets.push_back(j * block);
      sizes.push_back(block);
    }
    allGatherv(group, recv, offsets, sizes, op);
    return;
  }
  case CommKind::ReduceScatter: {
    for (int j = 0; j < n; ++j) {
      offsets.push_back(j * op.count);
      sizes.push_back(op.count);
    }
    reduceScatter(group, send, recv, offsets, sizes, op);
    return;
  }
  case CommKind::AllReduce: {
    // A reduce-scatter of near-equal blocks, then an all-gather of the
    // sums: every rank ends with the same bits.
    splitEvenly(op.count, n, offsets, sizes);
    reduceScatter(group, send, recv + offsets[group.me] * size, offsets, sizes,
                  op);
    for (int j = 0; j < n; ++j) {
      offsets[j] *= size;
      sizes[j] *= size;
    }
    allGatherv(group, recv, offsets, sizes, op);
    return;
  }
  case CommKind::AllToAll:
    for (int j = 0; j < n; ++j) {
      if (j == group.me) {
        std::memcpy(recv + j * block, send + j * block,
                    static_cast<size_t>(block));
        continue;
      }
      addSend(transfers, group.members[j], send + j * block, block, op);
      addReceive(transfers, group.members[j], recv + j * block, block, op);
    }
    exchange(transfers, op);
    return;
  case CommKind::Gather:
  case CommKind::Gatherv: {
    bool variable = op.kind == CommKind::Gatherv;
    if (group.me != op.root) {
      addSend(transfers, group.members[op.root], send, block, op);
    } else {
      for (int j = 0; j < n; ++j) {
        char *slot =
            variable ? recv + op.displacements[j] * size : recv + j * block;
        int64_t bytes = variable ? op.recvCounts[j] * size : block;
        if (j == group.me) {
          if (bytes != block)
            fatal("internal error: %s: the root's own count differs", op.name);
          if (slot != send)
            std::memmove(slot, send, static_cast<size_t>(block));
        } else {
          addReceive(transfers, group.members[j], slot, bytes, op);
        }
      }
    }
    exchange(transfers, op);
    return;
  }
  case CommKind::Barrier:
    for (int j = 0; j < n; ++j)
      if (j != group.me) {
        addSend(transfers, group.members[j], nullptr, 0, op);
        addReceive(transfers, group.members[j], nullptr, 0, op);
      }
    exchange(transfers, op);
    return;
  case CommKind::Broadcast: {
    if (block < kScatterBroadcastBytes || n <= 2) {
      if (group.me == op.root) {
        for (int j = 0; j < n; ++j)
          if (j != group.me)
            addSend(transfers, group.members[j], recv, block, op);
      } else {
        addReceive(transfers, group.members[op.root], recv, block, op);
      }
      exchange(transfers, op);
      return;
    }
    // Large: the root scatters near-equal pieces, then every member but
    // the root sends its piece to the others (the root has them all).
    splitEvenly(block, n, offsets, sizes);
    if (group.me == op.root) {
      for (int j = 0; j < n; ++j)
        if (j != group.me)
          addSend(transfers, group.members[j], recv + offsets[j], sizes[j], op);
    } else {
      addReceive(transfers, group.members[op.root], recv + offsets[group.me],
                 sizes[group.me], op);
    }
    exchange(transfers, op);
    transfers.clear();
    for (int j = 0; j < n; ++j) {
      if (j == group.me)
        continue;
      if (group.me == op.root) {
        // The root's own piece: nobody else has it yet.
        addSend(transfers, group.members[j], recv + offsets[group.me],
                sizes[group.me], op);
        continue;
      }
      addReceive(transfers, group.members[j], recv + offsets[j], sizes[j], op);
      if (j != op.root)
        addSend(transfers, group.members[j], recv + offsets[group.me],
                sizes[group.me], op);
    }
    exchange(transfers, op);
    return;
  }
  }
}
} // namespace

//===----------------------------------------------------------------------===//
// Address tables, SLURM node lists, the environment
//===----------------------------------------------------------------------===//

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

std::string dcrt::detail::firstSlurmHost(const std::string &nodeList) {
  // The first entry ends at a comma outside brackets; a bracket holds
  // ranges like 07-09 whose first number (zero padding kept) is the node.
  std::string host;
  for (size_t i = 0; i < nodeList.size(); ++i) {
    char c = nodeList[i];
    if (c == ',')
      break;
    if (c != '[') {
      host.push_back(c);
      continue;
    }
    size_t close = nodeList.find(']', i);
    if (close == std::string::npos)
      return host;
    std::string range = nodeList.substr(i + 1, close - i - 1);
    host += range.substr(0, range.find_first_of(",-"));
    i = close;
  }
  return host;
}

TcpConfig dcrt::detail::tcpConfigFromEnvironment(double timeoutSeconds) {
  TcpConfig config;
  config.timeoutSeconds = timeoutSeconds;
  bool torchrun = environment("RANK") && environment("WORLD_SIZE");
  bool slurm =
      !torchrun && environment("SLURM_PROCID") && environment("SLURM_NTASKS");
  if (!torchrun && !slurm)
    fatal("the tcp transport needs RANK and WORLD_SIZE (torchrun) or "
          "SLURM_PROCID and SLURM_NTASKS (srun) in the environment");
  config.source = torchrun ? "torchrun's environment" : "SLURM's environment";
  const char *worldName = torchrun ? "WORLD_SIZE" : "SLURM_NTASKS";
  const char *rankName = torchrun ? "RANK" : "SLURM_PROCID";
  config.worldSize = static_cast<int>(
      integerVariable(worldName, 1, 1 << 20, "a world size (>= 1)"));
  config.rank = static_cast<int>(
      integerVariable(rankName, 0, config.worldSize - 1,
                      ("a rank below " + std::string(worldName) + "=" +
                       std::to_string(config.worldSize))
                          .c_str()));
  if (const char *address = environment("MASTER_ADDR"))
    config.masterAddr = address;
  else if (slurm &&
           (environment("SLURM_JOB_NODELIST") || environment("SLURM_NODELIST")))
    config.masterAddr = firstSlurmHost(environment("SLURM_JOB_NODELIST")
                                           ? environment("SLURM_JOB_NODELIST")
                                           : environment("SLURM_NODELIST"));
  else if (config.worldSize > 1)
    fatal("the tcp transport needs MASTER_ADDR (the host of rank 0) in the "
          "environment");
  const char *agentStore = environment("TORCHELASTIC_USE_AGENT_STORE");
  if (environment("DCRT_MASTER_PORT")) {
    config.masterPort = static_cast<int>(integerVariable(
        "DCRT_MASTER_PORT", 1, 65535, "a port number (1-65535)"));
  } else if (environment("MASTER_PORT")) {
    config.masterPort = static_cast<int>(
        integerVariable("MASTER_PORT", 1, 65535, "a port number (1-65535)"));
    // torchrun's agent serves its own store on MASTER_PORT: take the next.
    if (agentStore && std::strcmp(agentStore, "True") == 0) {
      if (config.masterPort == 65535)
        fatal("MASTER_PORT=65535 is torchrun's store, and the port after it "
              "(dcrt's rendezvous) does not exist: set DCRT_MASTER_PORT");
      ++config.masterPort;
      config.source += " (MASTER_PORT + 1: torchrun's agent has MASTER_PORT)";
    }
  } else if (slurm && environment("SLURM_JOB_ID"))
    // Distinct jobs sharing a node get distinct ports (mostly).
    config.masterPort = static_cast<int>(
        20000 +
        integerVariable("SLURM_JOB_ID", 0, INT64_MAX, "a job id") % 20000);
  else if (config.worldSize > 1)
    fatal("the tcp transport needs MASTER_PORT (rank 0's rendezvous port) "
          "in the environment");
  return config;
}

std::unique_ptr<Transport>
dcrt::detail::createTcpTransport(const TcpConfig &config) {
  return std::make_unique<TcpTransport>(config);
}

std::unique_ptr<Transport>
dcrt::detail::createTcpTransport(double timeoutSeconds) {
  return createTcpTransport(tcpConfigFromEnvironment(timeoutSeconds));
}
