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
    if (fd < 0 ||
        !writeBefore(fd,
                     encodeMeshHello(static_cast<uint32_t>(rank), job.token),
                     deadline, error))
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
    sockaddr_storage from = {};
    socklen_t fromLength = sizeof(from);
    int fd = accept4(dataListener, reinterpret_cast<sockaddr *>(&from),
                     &fromLength, SOCK_CLOEXEC);
    if (fd < 0)
      continue;
    std::string hello;
    uint32_t peer = 0;
    if (!readBefore(fd, hello, kMeshHelloBytes,
                    std::min(deadline, deadlineIn(kHelloSeconds)), error) ||
        !parseMeshHello(hello, job.token, peer, error)) {
      // Not a rank of this job: the mesh waits on for the real ones.
      warn("tcp transport: this rank's mesh listener refused a connection "
           "from %s: %s",
           numericHost(from, fromLength).c_str(), error.c_str());
      close(fd);
      continue;
    }
    // The token says it is a rank of this job: a wrong rank is the job's
    // error.
    if (peer <= static_cast<uint32_t>(rank) ||
        peer >= static_cast<uint32_t>(worldSize) || sockets[peer] >= 0)
      fatal("tcp transport: a second connection claims to be rank %u", peer);
    sockets[peer] = fd;
    ++accepted;
  }
}
