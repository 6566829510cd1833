//===- TcpTransportTest.cpp - the TCP transport on forked local ranks -----===//
//
// Each test forks its ranks: they meet at a rendezvous on 127.0.0.1, run
// collectives directly on the transport and check the results against
// values computed from the ranks' inputs; a failed check or a fatal error
// ends the child non-zero with a message the parent reads back.
//
//===----------------------------------------------------------------------===//
#include "TcpTransport.h"
#include "Streams.h"
#include "TcpRendezvous.h"
#include "TcpWire.h"
#include "dcrt/error.hpp"

#include <gtest/gtest.h>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace dcrt::detail;

namespace {

/// A port nobody listens on right now (the kernel's pick).
int freePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr *>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr *>(&address), &length);
  close(fd);
  return ntohs(address.sin_port);
}

/// In a child: report and end it.
[[noreturn]] void failChild(const char *format, ...) {
  va_list args;
  va_start(args, format);
  std::fprintf(stderr, "check failed: ");
  std::vfprintf(stderr, format, args);
  std::fprintf(stderr, "\n");
  va_end(args);
  std::fflush(stderr);
  _exit(2);
}

struct RankResult {
  int status = 0; // waitpid's
  bool hung = false;
  std::string log; // the rank's stderr
  bool exitedZero() const {
    return !hung && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
};

using RankBody = std::function<void(int rank)>;

/// Forks one child per entry of `ranks` running `body(rank)` (exit 0 when
/// it returns), waits at most `seconds` for all, and kills what is left.
std::vector<RankResult> forkRanks(const std::vector<int> &ranks,
                                  const RankBody &body, double seconds) {
  std::vector<pid_t> children;
  std::vector<std::string> logs;
  for (int rank : ranks) {
    char path[] = "/tmp/dcrt-tcp-test-XXXXXX";
    int fd = mkstemp(path);
    logs.push_back(path);
    std::fflush(nullptr);
    pid_t child = fork();
    if (child == 0) {
      dup2(fd, STDERR_FILENO);
      body(rank);
      std::fflush(nullptr);
      _exit(0);
    }
    close(fd);
    children.push_back(child);
  }
  std::vector<RankResult> results(children.size());
  std::vector<bool> reaped(children.size(), false);
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::milliseconds(static_cast<int>(seconds * 1e3));
  size_t left = children.size();
  while (left > 0 && std::chrono::steady_clock::now() < deadline) {
    for (size_t i = 0; i < children.size(); ++i)
      if (!reaped[i] &&
          waitpid(children[i], &results[i].status, WNOHANG) == children[i]) {
        reaped[i] = true;
        --left;
      }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (size_t i = 0; i < children.size(); ++i) {
    if (!reaped[i]) {
      results[i].hung = true;
      kill(children[i], SIGKILL);
      waitpid(children[i], &results[i].status, 0);
    }
    std::ifstream in(logs[i]);
    std::stringstream text;
    text << in.rdbuf();
    results[i].log = text.str();
    unlink(logs[i].c_str());
  }
  return results;
}

std::vector<int> allRanks(int n) {
  std::vector<int> ranks;
  for (int r = 0; r < n; ++r)
    ranks.push_back(r);
  return ranks;
}

TcpConfig localConfig(int rank, int world, int port, double timeout = 20) {
  TcpConfig config;
  config.rank = rank;
  config.worldSize = world;
  config.masterAddr = "127.0.0.1";
  config.masterPort = port;
  config.timeoutSeconds = timeout;
  config.source = "the test";
  return config;
}

/// Starts `op` and progresses the transport until it completes.
void runOp(Transport &transport, CommOp &op) {
  transport.start(op);
  std::vector<CommOp *> completed;
  while (completed.empty())
    transport.progress(completed);
  if (completed.size() != 1 || completed[0] != &op)
    failChild("%s completed as something else", op.name);
}

/// A collective described in one line.
struct TestOp : CommOp {
  TestOp(CommKind kind, const void *send, void *recv, int64_t count,
         ElementType type, int group = 0, int root = 0) {
    this->kind = kind;
    this->name = commKindName(kind);
    this->send = send;
    this->recv = recv;
    this->count = count;
    this->type = type;
    this->group = group;
    this->root = root;
  }
};

/// The value rank r contributes at index i: distinct per rank and index,
/// small integers so that float sums are exact in any order.
template <typename T> T contribution(int r, int64_t i) {
  return static_cast<T>((r + 1) * (i % 1000) - r);
}

template <typename T>
void checkAllReduce(Transport &t, int64_t count, ElementType type,
                    bool inPlace) {
  int n = t.worldSize(), r = t.rank();
  std::vector<T> send(count), recv(count, T(-7));
  for (int64_t i = 0; i < count; ++i)
    send[i] = contribution<T>(r, i);
  TestOp op(CommKind::AllReduce, send.data(),
            inPlace ? send.data() : recv.data(), count, type);
  runOp(t, op);
  const std::vector<T> &result = inPlace ? send : recv;
  for (int64_t i = 0; i < count; ++i) {
    T expected = 0;
    for (int q = 0; q < n; ++q)
      expected += contribution<T>(q, i);
    if (result[i] != expected)
      failChild("all-reduce of %lld %s (%s): [%lld] is %g, expected %g",
                static_cast<long long>(count), elementTypeName(type),
                inPlace ? "in place" : "out of place",
                static_cast<long long>(i), static_cast<double>(result[i]),
                static_cast<double>(expected));
  }
}

void checkReduceScatter(Transport &t, int64_t block) {
  int n = t.worldSize(), r = t.rank();
  std::vector<float> send(n * block), recv(block, -1.0f);
  for (int64_t i = 0; i < n * block; ++i)
    send[i] = contribution<float>(r, i);
  TestOp op(CommKind::ReduceScatter, send.data(), recv.data(), block,
            ElementType::F32);
  runOp(t, op);
  for (int64_t i = 0; i < block; ++i) {
    float expected = 0;
    for (int q = 0; q < n; ++q)
      expected += contribution<float>(q, r * block + i);
    if (recv[i] != expected)
      failChild("reduce-scatter of %lld per rank: [%lld] is %g, expected %g",
                static_cast<long long>(block), static_cast<long long>(i),
                recv[i], expected);
  }
}

/// Every collective kind on the world of `t`, checked against its inputs.
void checkEveryKind(Transport &t) {
  int n = t.worldSize(), r = t.rank();
  auto byte = [](int a, int b) { return static_cast<char>(a * 16 + b); };

  // All-gather: 5 bytes from each rank.
  std::vector<char> mine(5), gathered(5 * n, 0);
  for (int i = 0; i < 5; ++i)
    mine[i] = byte(r, i);
  TestOp allGather(CommKind::AllGather, mine.data(), gathered.data(), 5,
                   ElementType::Byte);
  runOp(t, allGather);
  for (int q = 0; q < n; ++q)
    for (int i = 0; i < 5; ++i)
      if (gathered[q * 5 + i] != byte(q, i))
        failChild("all-gather: byte %d of rank %d", i, q);

  checkReduceScatter(t, 7);
  // Larger than one piece (4 MiB) per peer: several exchanges.
  checkReduceScatter(t, (int64_t(5) << 20) / 4 + 3);

  for (int64_t count : {int64_t(1), int64_t(10), int64_t(1000)})
    for (bool inPlace : {false, true}) {
      checkAllReduce<float>(t, count, ElementType::F32, inPlace);
      checkAllReduce<double>(t, count, ElementType::F64, inPlace);
      checkAllReduce<int32_t>(t, count, ElementType::I32, inPlace);
      checkAllReduce<int64_t>(t, count, ElementType::I64, inPlace);
    }

  // All-to-all: piece j of rank q holds 3 bytes byte(q, j).
  std::vector<char> pieces(3 * n), received(3 * n, 0);
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < 3; ++i)
      pieces[j * 3 + i] = byte(r, j);
  TestOp allToAll(CommKind::AllToAll, pieces.data(), received.data(), 3,
                  ElementType::Byte);
  runOp(t, allToAll);
  for (int q = 0; q < n; ++q)
    for (int i = 0; i < 3; ++i)
      if (received[q * 3 + i] != byte(q, r))
        failChild("all-to-all: piece from rank %d", q);

  // Gather to the last rank: 4 bytes each.
  int root = n - 1;
  std::vector<char> atRoot(4 * n, 0);
  TestOp gather(CommKind::Gather, mine.data(), atRoot.data(), 4,
                ElementType::Byte, 0, root);
  runOp(t, gather);
  if (r == root)
    for (int q = 0; q < n; ++q)
      for (int i = 0; i < 4; ++i)
        if (atRoot[q * 4 + i] != byte(q, i))
          failChild("gather: byte %d of rank %d", i, q);

  // Gatherv to rank 0: rank q sends q + 1 bytes, packed in rank order.
  std::vector<int> counts(n), displacements(n);
  int total = 0;
  for (int q = 0; q < n; ++q) {
    counts[q] = q + 1;
    displacements[q] = total;
    total += q + 1;
  }
  std::vector<char> packed(total, 0);
  TestOp gatherv(CommKind::Gatherv, mine.data(), packed.data(), r + 1,
                 ElementType::Byte);
  gatherv.recvCounts = counts.data();
  gatherv.displacements = displacements.data();
  runOp(t, gatherv);
  if (r == 0)
    for (int q = 0; q < n; ++q)
      for (int i = 0; i <= q; ++i)
        if (packed[displacements[q] + i] != byte(q, i))
          failChild("gatherv: byte %d of rank %d", i, q);

  TestOp barrier(CommKind::Barrier, nullptr, nullptr, 0, ElementType::Byte);
  runOp(t, barrier);

  // Broadcasts: small (direct) and large (scatter, then all-gather), from
  // a root that is not rank 0 where there is one.
  for (int64_t bytes : {int64_t(13), int64_t(1) << 20 | 5}) {
    int from = n > 1 ? 1 : 0;
    std::vector<char> data(bytes, 0);
    if (r == from)
      for (int64_t i = 0; i < bytes; ++i)
        data[i] = static_cast<char>(i * 7 + 3);
    TestOp broadcast(CommKind::Broadcast, nullptr, data.data(), bytes,
                     ElementType::Byte, 0, from);
    runOp(t, broadcast);
    for (int64_t i = 0; i < bytes; ++i)
      if (data[i] != static_cast<char>(i * 7 + 3))
        failChild("broadcast of %lld bytes: byte %lld",
                  static_cast<long long>(bytes), static_cast<long long>(i));
  }

  // Three ops in flight at once complete in order.
  std::vector<int64_t> a(3), b(3), c(3);
  for (int i = 0; i < 3; ++i) {
    a[i] = r;
    b[i] = 10 * r;
    c[i] = 100 * r;
  }
  TestOp opA(CommKind::AllReduce, a.data(), a.data(), 3, ElementType::I64);
  TestOp opB(CommKind::AllReduce, b.data(), b.data(), 3, ElementType::I64);
  TestOp opC(CommKind::AllReduce, c.data(), c.data(), 3, ElementType::I64);
  t.start(opA);
  t.start(opB);
  t.start(opC);
  std::vector<CommOp *> completed;
  while (completed.size() < 3)
    t.progress(completed);
  if (completed[0] != &opA || completed[1] != &opB || completed[2] != &opC)
    failChild("ops completed out of order");
  int64_t sum = int64_t(n) * (n - 1) / 2;
  if (a[2] != sum || b[2] != 10 * sum || c[2] != 100 * sum)
    failChild("ops in flight: %lld %lld %lld", static_cast<long long>(a[2]),
              static_cast<long long>(b[2]), static_cast<long long>(c[2]));
}

std::string describe(const std::vector<RankResult> &results) {
  std::string text;
  for (size_t i = 0; i < results.size(); ++i)
    text += "rank " + std::to_string(i) + ": " +
            (results[i].hung ? "hung"
                             : "status " + std::to_string(results[i].status)) +
            "\n" + results[i].log;
  return text;
}

} // namespace

//===----------------------------------------------------------------------===//
// Settings
//===----------------------------------------------------------------------===//

TEST(TcpSlurm, FirstHostOfANodeList) {
  EXPECT_EQ(firstSlurmHost("gpu[07-09,12],cpu1"), "gpu07");
  EXPECT_EQ(firstSlurmHost("node1,node2"), "node1");
  EXPECT_EQ(firstSlurmHost("a[3]"), "a3");
  EXPECT_EQ(firstSlurmHost("x[01-02]-ib,y"), "x01-ib");
  EXPECT_EQ(firstSlurmHost("solo"), "solo");
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

class TcpCollectives : public ::testing::TestWithParam<int> {};

TEST_P(TcpCollectives, EveryKindOnTheWorld) {
  int n = GetParam();
  int port = freePort();
  auto results = forkRanks(
      allRanks(n),
      [&](int rank) {
        auto transport = createTcpTransport(localConfig(rank, n, port));
        transport->barrier(20);
        checkEveryKind(*transport);
      },
      120);
  for (const RankResult &result : results)
    EXPECT_TRUE(result.exitedZero()) << describe(results);
}

INSTANTIATE_TEST_SUITE_P(Worlds, TcpCollectives, ::testing::Values(1, 2, 3, 4),
                         [](const auto &info) {
                           return std::to_string(info.param) + "ranks";
                         });

TEST(TcpGroups, AxesOfATwoByThreeGrid) {
  // Rank r = 3 * x + y: axis 0 groups {y, 3 + y}, axis 1 groups
  // {3x, 3x + 1, 3x + 2}, added in that order as the job does.
  int port = freePort();
  auto results = forkRanks(
      allRanks(6),
      [&](int rank) {
        auto t = createTcpTransport(localConfig(rank, 6, port));
        int x = rank / 3, y = rank % 3;
        int axis0 = t->addGroup({y, 3 + y});
        int axis1 = t->addGroup({3 * x, 3 * x + 1, 3 * x + 2});
        t->barrier(20);
        // Sums over each axis, and an all-gather by index in the group.
        int64_t value[2] = {rank, 100 + rank};
        TestOp sum0(CommKind::AllReduce, value, value, 2, ElementType::I64,
                    axis0);
        runOp(*t, sum0);
        if (value[0] != y + 3 + y || value[1] != 200 + 2 * y + 3)
          failChild("axis 0 sum: %lld", static_cast<long long>(value[0]));
        float f = static_cast<float>(rank), sums = 0;
        TestOp sum1(CommKind::AllReduce, &f, &sums, 1, ElementType::F32, axis1);
        runOp(*t, sum1);
        if (sums != static_cast<float>(9 * x + 3))
          failChild("axis 1 sum: %g", sums);
        char me = static_cast<char>(rank), all[3] = {};
        TestOp gather(CommKind::AllGather, &me, all, 1, ElementType::Byte,
                      axis1);
        runOp(*t, gather);
        for (int i = 0; i < 3; ++i)
          if (all[i] != 3 * x + i)
            failChild("axis 1 all-gather: [%d] is %d", i, all[i]);
        // A broadcast from index 1 of axis 0 (rank 3 + y).
        int64_t fromRoot = rank == 3 + y ? 1000 + rank : -1;
        TestOp broadcast(CommKind::Broadcast, nullptr, &fromRoot, 8,
                         ElementType::Byte, axis0, 1);
        runOp(*t, broadcast);
        if (fromRoot != 1003 + y)
          failChild("axis 0 broadcast: %lld", static_cast<long long>(fromRoot));
      },
      120);
  for (const RankResult &result : results)
    EXPECT_TRUE(result.exitedZero()) << describe(results);
}

TEST(TcpRendezvous, IgnoresAStrayConnection) {
  // Something that is no rank (an HTTP client here) connects to the
  // rendezvous port first; the ranks still meet.
  int port = freePort();
  auto results = forkRanks(
      {-1, 0, 1},
      [&](int rank) {
        if (rank < 0) {
          for (int attempt = 0; attempt < 200; ++attempt) {
            int fd = socket(AF_INET, SOCK_STREAM, 0);
            sockaddr_in address = {};
            address.sin_family = AF_INET;
            address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            address.sin_port = htons(static_cast<uint16_t>(port));
            if (connect(fd, reinterpret_cast<sockaddr *>(&address),
                        sizeof(address)) == 0) {
              const char request[] = "GET / HTTP/1.0\r\n\r\n";
              if (write(fd, request, sizeof(request) - 1) < 0)
                failChild("write failed");
              std::this_thread::sleep_for(std::chrono::milliseconds(100));
              close(fd);
              return;
            }
            close(fd);
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
          }
          failChild("rank 0 never listened");
        }
        // Rank 1 comes late: the stray client is first in line.
        if (rank == 1)
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
        auto t = createTcpTransport(localConfig(rank, 2, port));
        t->barrier(20);
        int64_t value = rank + 1;
        TestOp sum(CommKind::AllReduce, &value, &value, 1, ElementType::I64);
        runOp(*t, sum);
        if (value != 3)
          failChild("sum %lld", static_cast<long long>(value));
      },
      60);
  for (const RankResult &result : results)
    EXPECT_TRUE(result.exitedZero()) << describe(results);
}

namespace {
/// In a stranger's child: a connection to the rendezvous at `port` once
/// rank 0 listens.
int connectToRendezvous(int port) {
  for (int attempt = 0; attempt < 500; ++attempt) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address = {};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(port));
    if (connect(fd, reinterpret_cast<sockaddr *>(&address), sizeof(address)) ==
        0)
      return fd;
    close(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  failChild("rank 0 never listened");
}

void sendAll(int fd, const std::string &bytes) {
  if (write(fd, bytes.data(), bytes.size()) !=
      static_cast<ssize_t>(bytes.size()))
    failChild("a stranger's write failed: %s", std::strerror(errno));
}

/// Everything `fd` receives until it is closed (or reset), within
/// `seconds`; a child failure if it stays open longer.
std::string readUntilClosed(int fd, double seconds) {
  std::string received;
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::milliseconds(static_cast<int>(seconds * 1e3));
  for (;;) {
    int left =
        static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                             deadline - std::chrono::steady_clock::now())
                             .count());
    pollfd entry = {fd, POLLIN, 0};
    if (left <= 0 || poll(&entry, 1, left) <= 0)
      failChild("the connection stayed open for %g s", seconds);
    char buffer[4096];
    ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0)
      return received;
    received.append(buffer, static_cast<size_t>(n));
  }
}

/// A stranger that sends `bytes` and expects rank 0 to refuse it with a
/// reply containing `why` (or, with `why` empty, to close it unanswered).
void strangerExpecting(int port, const std::string &bytes,
                       const std::string &why) {
  int fd = connectToRendezvous(port);
  sendAll(fd, bytes);
  std::string reply = readUntilClosed(fd, 20);
  close(fd);
  if (why.empty()) {
    if (!reply.empty())
      failChild("a stranger got %zu bytes back", reply.size());
    return;
  }
  if (reply.size() < tcp::kReplyHeaderBytes || tcp::get32(reply.data()) != 1 ||
      reply.find(why) == std::string::npos)
    failChild("expected a refusal saying '%s', got %zu bytes: %s", why.c_str(),
              reply.size(), tcp::printable(reply).c_str());
}

tcp::Hello helloOf(uint32_t rank, uint32_t world, const std::string &token) {
  tcp::Hello hello;
  hello.rank = rank;
  hello.worldSize = world;
  hello.dataPort = 9;
  hello.token = token;
  return hello;
}
} // namespace

TEST(TcpRendezvous, RefusesStrangersAndTheJobCompletes) {
  // Strangers reach the rendezvous of a job with a token before its ranks
  // 1 and 2 do: one that sends nothing, an HTTP client, hellos without the
  // token or with another job's (claiming real ranks, or another world
  // size), one announcing a 4 GiB token, one of another protocol version.
  // Each is refused and reported, none ends or holds up the job.
  int port = freePort();
  const std::string token = "the-job-token";
  auto start = std::chrono::steady_clock::now();
  auto results = forkRanks(
      {0, 1, 2, -1, -2, -3, -4, -5, -6},
      [&](int rank) {
        switch (rank) {
        case -1: {
          // Silent: closed when the job no longer needs the port, long
          // before its hello time (10 s) would have run out.
          int fd = connectToRendezvous(port);
          auto opened = std::chrono::steady_clock::now();
          readUntilClosed(fd, 20);
          double open = std::chrono::duration<double>(
                            std::chrono::steady_clock::now() - opened)
                            .count();
          if (open > 8)
            failChild("the silent connection stayed open %g s", open);
          return;
        }
        case -2:
          return strangerExpecting(port, "GET / HTTP/1.0\r\n\r\n", "");
        case -3:
          return strangerExpecting(port, encodeHello(helloOf(1, 3, "")),
                                   "a hello without the job token");
        case -4:
          return strangerExpecting(port,
                                   encodeHello(helloOf(2, 99, "other-job")),
                                   "a hello with another job's token");
        case -5: {
          std::string header = encodeHello(helloOf(1, 3, "")).substr(0, 20);
          tcp::put32(header, 0xffffffffu);
          return strangerExpecting(port, header,
                                   "a token of 4294967295 bytes (at most 256)");
        }
        case -6: {
          // Version 1's hello: magic, version, rank, world size, port.
          std::string old;
          for (uint32_t word : {tcp::kMagic, 1u, 1u, 3u, 9u})
            tcp::put32(old, word);
          return strangerExpecting(port, old, "a hello of another libdcrt");
        }
        }
        // The real ranks 1 and 2 come once the strangers are in line.
        if (rank > 0)
          std::this_thread::sleep_for(std::chrono::milliseconds(1000));
        TcpConfig config = localConfig(rank, 3, port);
        config.token = token;
        auto t = createTcpTransport(config);
        t->barrier(20);
        int64_t value = rank + 1;
        TestOp sum(CommKind::AllReduce, &value, &value, 1, ElementType::I64);
        runOp(*t, sum);
        if (value != 6)
          failChild("sum %lld", static_cast<long long>(value));
      },
      60);
  double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  for (const RankResult &result : results)
    EXPECT_TRUE(result.exitedZero()) << describe(results);
  EXPECT_LT(took, 9) << "a stranger held the rendezvous up";
  std::string refused = "refused a connection from 127.0.0.1: ";
  for (const char *why :
       {"no dcrt hello", "a hello without the job token",
        "a hello with another job's token",
        "a hello announcing a token of 4294967295 bytes (at most 256)",
        "a hello of another libdcrt (tcp protocol version 1, this is 2)"})
    EXPECT_NE(results[0].log.find(refused + why), std::string::npos)
        << why << "\n"
        << results[0].log;
}

TEST(TcpRendezvous, ARankWithoutTheTokenIsRefused) {
  // Rank 0 has the job's token, rank 1 none: rank 1 ends saying why, rank
  // 0 waits on for a rank 1 with the token and names the refusal when it
  // gives up.
  int port = freePort();
  auto results = forkRanks(
      {0, 1},
      [&](int rank) {
        TcpConfig config = localConfig(rank, 2, port, 3);
        if (rank == 0)
          config.token = "the-job-token";
        createTcpTransport(config)->barrier(3);
      },
      30);
  for (const RankResult &result : results)
    EXPECT_FALSE(result.exitedZero() || result.hung) << describe(results);
  std::string where = "127.0.0.1:" + std::to_string(port);
  EXPECT_NE(results[1].log.find("rank 0 refused this rank: rank 0 at " + where +
                                ": a hello without the job token "
                                "(DCRT_TCP_TOKEN): no rank of this job"),
            std::string::npos)
      << results[1].log;
  EXPECT_NE(results[0].log.find("timed out after 3 s waiting for rank 1 of 2 "
                                "to connect to " +
                                where +
                                " (MASTER_ADDR:MASTER_PORT from the test); it "
                                "refused 1 connection, the last from "
                                "127.0.0.1: a hello without the job token"),
            std::string::npos)
      << results[0].log;
}

TEST(TcpRendezvous, ARankDoesNotTrustWhatAnswers) {
  // Something else listens at MASTER_PORT and answers with a header
  // announcing 4 GiB: the rank refuses it at once, allocating nothing.
  int port = freePort();
  auto start = std::chrono::steady_clock::now();
  auto results = forkRanks(
      {-1, 1},
      [&](int rank) {
        if (rank == 1) {
          createTcpTransport(localConfig(1, 2, port, 20));
          return;
        }
        int listener = socket(AF_INET, SOCK_STREAM, 0);
        int one = 1;
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        sockaddr_in address = {};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        address.sin_port = htons(static_cast<uint16_t>(port));
        if (bind(listener, reinterpret_cast<sockaddr *>(&address),
                 sizeof(address)) != 0 ||
            listen(listener, 4) != 0)
          failChild("cannot listen: %s", std::strerror(errno));
        int fd = accept(listener, nullptr, nullptr);
        char hello[64];
        if (recv(fd, hello, sizeof(hello), 0) <= 0)
          failChild("no hello");
        std::string reply;
        tcp::put32(reply, 0);
        tcp::put32(reply, 0xffffffffu);
        sendAll(fd, reply);
        readUntilClosed(fd, 20);
      },
      30);
  double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  EXPECT_TRUE(results[0].exitedZero()) << describe(results);
  EXPECT_FALSE(results[1].exitedZero() || results[1].hung) << describe(results);
  EXPECT_LT(took, 10);
  EXPECT_NE(results[1].log.find("is not dcrt's rank 0: a reply announcing "
                                "4294967295 bytes, more than an address table "
                                "of 2 ranks can hold"),
            std::string::npos)
      << results[1].log;
}

//===----------------------------------------------------------------------===//
// Failures: each ends every rank with a message, never a hang
//===----------------------------------------------------------------------===//

TEST(TcpFailures, ARankThatNeverComes) {
  // World of 3; rank 2 is never started.
  int port = freePort();
  auto start = std::chrono::steady_clock::now();
  auto results = forkRanks(
      {0, 1},
      [&](int rank) {
        auto t = createTcpTransport(localConfig(rank, 3, port, 2));
        t->barrier(2);
      },
      30);
  double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  EXPECT_LT(took, 20);
  for (const RankResult &result : results)
    EXPECT_FALSE(result.exitedZero() || result.hung) << describe(results);
  EXPECT_NE(results[0].log.find("timed out after 2 s waiting for rank 2 of 3 "
                                "to connect to 127.0.0.1:" +
                                std::to_string(port)),
            std::string::npos)
      << results[0].log;
}

TEST(TcpFailures, APeerDyingMidCollective) {
  // Rank 2 is killed while the others all-reduce 32 MB with it.
  int port = freePort();
  auto results = forkRanks(
      allRanks(3),
      [&](int rank) {
        auto t = createTcpTransport(localConfig(rank, 3, port, 60));
        t->barrier(60);
        std::vector<float> data(8 << 20, 1.0f);
        if (rank == 2) {
          // Once the others are blocked in the all-reduce with it.
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          raise(SIGKILL);
        }
        TestOp op(CommKind::AllReduce, data.data(), data.data(),
                  static_cast<int64_t>(data.size()), ElementType::F32);
        runOp(*t, op);
      },
      30);
  EXPECT_TRUE(WIFSIGNALED(results[2].status)) << describe(results);
  bool named = false;
  for (int r = 0; r < 2; ++r) {
    EXPECT_FALSE(results[r].exitedZero() || results[r].hung)
        << describe(results);
    EXPECT_NE(results[r].log.find("lost the connection to rank"),
              std::string::npos)
        << results[r].log;
    named |= results[r].log.find("lost the connection to rank 2 (") !=
             std::string::npos;
    // Ended because another rank did: the status a launcher ranks last.
    EXPECT_TRUE(WIFEXITED(results[r].status) &&
                WEXITSTATUS(results[r].status) == dcrt::kPeerEndedExitStatus)
        << describe(results);
  }
  EXPECT_TRUE(named) << describe(results);
}

TEST(TcpFailures, WorldSizesThatDiffer) {
  int port = freePort();
  auto results = forkRanks(
      {0, 1},
      [&](int rank) {
        auto t = createTcpTransport(localConfig(rank, rank == 0 ? 2 : 3, port));
        t->barrier(20);
      },
      30);
  for (const RankResult &result : results)
    EXPECT_FALSE(result.exitedZero() || result.hung) << describe(results);
  EXPECT_NE(results[0].log.find("rank 1 (at 127.0.0.1) has a world size of 3, "
                                "but rank 0 has 2"),
            std::string::npos)
      << results[0].log;
  EXPECT_NE(results[1].log.find("rank 0 refused this rank: rank 1"),
            std::string::npos)
      << results[1].log;
}

TEST(TcpFailures, DifferentCollectives) {
  int port = freePort();
  auto results = forkRanks(
      allRanks(2),
      [&](int rank) {
        auto t = createTcpTransport(localConfig(rank, 2, port));
        t->barrier(20);
        std::vector<int32_t> data(8, 1);
        TestOp op(rank == 0 ? CommKind::AllReduce : CommKind::AllGather,
                  data.data(), data.data(), rank == 0 ? 8 : 1,
                  rank == 0 ? ElementType::I32 : ElementType::Byte);
        runOp(*t, op);
      },
      30);
  for (const RankResult &result : results)
    EXPECT_FALSE(result.exitedZero() || result.hung) << describe(results);
  EXPECT_NE(describe(results).find("the ranks issued different collectives"),
            std::string::npos)
      << describe(results);
}

//===----------------------------------------------------------------------===//
// The environment
//===----------------------------------------------------------------------===//

namespace {
/// Runs `body` in a child with `variables` set (and the launchers' cleared).
RankResult inEnvironment(
    const std::vector<std::pair<const char *, const char *>> &variables,
    const std::function<void()> &body) {
  return forkRanks(
      {0},
      [&](int) {
        for (const char *name :
             {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
              "SLURM_PROCID", "SLURM_NTASKS", "SLURM_STEP_ID", "SLURM_JOB_ID",
              "SLURM_JOB_NODELIST", "SLURM_NODELIST", "OMPI_COMM_WORLD_SIZE",
              "PMI_SIZE", "PMI_RANK", "PMIX_RANK", "DCRT_TRANSPORT",
              "DCRT_MASTER_PORT", "TORCHELASTIC_USE_AGENT_STORE",
              "DCRT_TCP_TOKEN"})
          unsetenv(name);
        for (const auto &[name, value] : variables)
          setenv(name, value, 1);
        body();
      },
      30)[0];
}

const std::vector<std::pair<const char *, const char *>> torchrun = {
    {"RANK", "1"},
    {"WORLD_SIZE", "4"},
    {"MASTER_ADDR", "10.1.2.3"},
    {"MASTER_PORT", "29500"}};
} // namespace

TEST(TcpEnvironment, ChoosesTheTransport) {
  auto expect = [](std::vector<std::pair<const char *, const char *>> env,
                   const char *expected) {
    RankResult result = inEnvironment(env, [&] {
      std::string chosen = chooseTransport();
      if (chosen != expected)
        failChild("chose %s, expected %s", chosen.c_str(), expected);
    });
    EXPECT_TRUE(result.exitedZero()) << result.log;
  };
  expect({}, "mpi");
  expect(torchrun, "tcp");
  auto underMpirun = torchrun;
  underMpirun.push_back({"OMPI_COMM_WORLD_SIZE", "4"});
  expect(underMpirun, "mpi");
  expect({{"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}},
         "tcp");
  expect({{"SLURM_STEP_ID", "0"},
          {"SLURM_PROCID", "0"},
          {"SLURM_NTASKS", "2"},
          {"PMIX_RANK", "0"}},
         "mpi");
  expect({{"DCRT_TRANSPORT", "tcp"}}, "tcp");
  auto forced = torchrun;
  forced.push_back({"DCRT_TRANSPORT", "mpi"});
  expect(forced, "mpi");
}

TEST(TcpEnvironment, ReadsTorchrunAndSlurm) {
  RankResult fromTorchrun = inEnvironment(torchrun, [] {
    TcpConfig c = tcpConfigFromEnvironment(5);
    if (c.rank != 1 || c.worldSize != 4 || c.masterAddr != "10.1.2.3" ||
        c.masterPort != 29500)
      failChild("torchrun: %d/%d %s:%d", c.rank, c.worldSize,
                c.masterAddr.c_str(), c.masterPort);
  });
  EXPECT_TRUE(fromTorchrun.exitedZero()) << fromTorchrun.log;
  // torchrun's agent keeps MASTER_PORT for its store; DCRT_MASTER_PORT wins.
  auto agent = torchrun;
  agent.push_back({"TORCHELASTIC_USE_AGENT_STORE", "True"});
  RankResult nextPort = inEnvironment(agent, [] {
    TcpConfig c = tcpConfigFromEnvironment(5);
    if (c.masterPort != 29501)
      failChild("with the agent's store: port %d", c.masterPort);
  });
  EXPECT_TRUE(nextPort.exitedZero()) << nextPort.log;
  agent.push_back({"DCRT_MASTER_PORT", "4000"});
  RankResult ownPort = inEnvironment(agent, [] {
    TcpConfig c = tcpConfigFromEnvironment(5);
    if (c.masterPort != 4000)
      failChild("DCRT_MASTER_PORT: port %d", c.masterPort);
  });
  EXPECT_TRUE(ownPort.exitedZero()) << ownPort.log;
  RankResult fromSlurm = inEnvironment(
      {{"SLURM_STEP_ID", "0"},
       {"SLURM_PROCID", "2"},
       {"SLURM_NTASKS", "3"},
       {"SLURM_JOB_ID", "123456"},
       {"SLURM_JOB_NODELIST", "gpu[03-05]"}},
      [] {
        TcpConfig c = tcpConfigFromEnvironment(5);
        if (c.rank != 2 || c.worldSize != 3 || c.masterAddr != "gpu03" ||
            c.masterPort != 20000 + 123456 % 20000)
          failChild("slurm: %d/%d %s:%d", c.rank, c.worldSize,
                    c.masterAddr.c_str(), c.masterPort);
      });
  EXPECT_TRUE(fromSlurm.exitedZero()) << fromSlurm.log;
}

TEST(TcpEnvironment, ReadsTheJobToken) {
  auto withToken = torchrun;
  withToken.push_back({"DCRT_TCP_TOKEN", "3f2a"});
  RankResult set = inEnvironment(withToken, [] {
    TcpConfig c = tcpConfigFromEnvironment(5);
    if (c.token != "3f2a")
      failChild("token '%s'", c.token.c_str());
  });
  EXPECT_TRUE(set.exitedZero()) << set.log;
  RankResult unset = inEnvironment(torchrun, [] {
    if (!tcpConfigFromEnvironment(5).token.empty())
      failChild("a token without DCRT_TCP_TOKEN");
  });
  EXPECT_TRUE(unset.exitedZero()) << unset.log;
}

TEST(TcpEnvironment, BadValuesAreNamed) {
  auto fails = [](std::vector<std::pair<const char *, const char *>> env,
                  const std::string &message) {
    RankResult result = inEnvironment(env, [] { tcpConfigFromEnvironment(5); });
    EXPECT_FALSE(result.exitedZero());
    EXPECT_NE(result.log.find(message), std::string::npos) << result.log;
  };
  auto port = torchrun;
  port[3].second = "70000";
  fails(port, "MASTER_PORT='70000' is not a port number (1-65535)");
  port[3].second = "29500x";
  fails(port, "MASTER_PORT='29500x' is not a port number (1-65535)");
  auto rank = torchrun;
  rank[0].second = "4";
  fails(rank, "RANK='4' is not a rank below WORLD_SIZE=4");
  auto noAddress = torchrun;
  noAddress.erase(noAddress.begin() + 2);
  fails(noAddress, "needs MASTER_ADDR");
  auto longToken = torchrun;
  std::string token(257, 'k');
  longToken.push_back({"DCRT_TCP_TOKEN", token.c_str()});
  fails(longToken, "DCRT_TCP_TOKEN is 257 characters long (at most 256)");
  auto longAddress = torchrun;
  std::string host(256, 'h');
  longAddress[2].second = host.c_str();
  fails(longAddress, "is not a host name (at most 255 characters)");
}
