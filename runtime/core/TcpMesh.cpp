//===- TcpMesh.cpp - one connection per pair of a tcp job's ranks ---------===//
#include "TcpMesh.h"

#include "TcpSocket.h"
#include "TcpWire.h"

#include "dcrt/error.hpp"

#include <algorithm>
#include <poll.h>
#include <unistd.h>

using namespace dcrt;
using namespace dcrt::detail;
using namespace dcrt::detail::tcp;

namespace {
/// Mesh hello: magic, rank, token.
constexpr size_t kMeshHelloBytes = 16;
} // namespace

TcpMesh::TcpMesh(const TcpConfig &config) {
  sockets.assign(config.worldSize, -1);
  if (config.worldSize == 1)
    return;
  // The data listener's family follows MASTER_ADDR's: the address peers
  // reach rank 0 by is the kind of address they reach each other by.
  socklen_t length = 0;
  sockaddr_storage master =
      resolve(config.masterAddr, config.masterPort, length, "MASTER_ADDR");
  int dataListener = listenOn(master.ss_family, 0, "the job's mesh");
  JobAddresses job = rendezvous(config, boundPort(dataListener));
  addresses = job.table;
  connectPeers(config, dataListener, job);
  close(dataListener);
  // Collectives move many sockets at once with poll().
  for (int fd : sockets)
    if (fd >= 0) {
      setNonBlocking(fd);
      setNoDelay(fd);
    }
}

TcpMesh::~TcpMesh() {
  for (int fd : sockets)
    if (fd >= 0)
      close(fd);
}

void TcpMesh::connectPeers(const TcpConfig &config, int dataListener,
                           const JobAddresses &job) {
  int rank = config.rank, worldSize = config.worldSize;
  Clock::time_point deadline = deadlineIn(config.timeoutSeconds);
  std::string error;
  // Lower ranks listen already: the kernel completes these connections
  // before anyone accepts them.
  for (int r = 0; r < rank; ++r) {
    const PeerAddress &peer = job.table[r];
    socklen_t length = 0;
    sockaddr_storage address =
        resolve(peer.host, peer.port, length, "a rank's address");
    int fd = connectBefore(address, length, deadline, error);
    std::string hello;
    put32(hello, kMagic);
    put32(hello, static_cast<uint32_t>(rank));
    put64(hello, job.token);
    if (fd < 0 || !writeBefore(fd, hello, deadline, error))
      fatal("tcp transport: cannot connect to rank %d at %s:%d: %s", r,
            peer.host.c_str(), peer.port, error.c_str());
    sockets[r] = fd;
  }
  for (int accepted = rank + 1; accepted < worldSize;) {
    pollfd entry = {dataListener, POLLIN, 0};
    if (poll(&entry, 1, pollMillis(deadline)) <= 0) {
      if (secondsLeft(deadline) > 0)
        continue;
      std::vector<int> missing;
      for (int r = rank + 1; r < worldSize; ++r)
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
        get32(hello.data()) != kMagic || get64(hello.data() + 8) != job.token) {
      close(fd); // not a rank of this job
      continue;
    }
    int peer = static_cast<int>(get32(hello.data() + 4));
    if (peer <= rank || peer >= worldSize || sockets[peer] >= 0)
      fatal("tcp transport: a second connection claims to be rank %d", peer);
    sockets[peer] = fd;
    ++accepted;
  }
}
