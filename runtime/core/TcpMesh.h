//===- TcpMesh.h - one connection per pair of a tcp job's ranks -----------===//
//
// After the rendezvous, rank i connects to the data listener of every rank
// j < i and accepts one connection from every rank j > i, each opened with
// the job token and the rank: a full mesh, one socket per pair. Collectives
// talk directly to the peers they need: a gather's GBs go straight to the
// root, an all-gather or reduce-scatter sends (n-1)/n of the data per rank,
// as a ring would, in one step instead of n-1.
//
//===----------------------------------------------------------------------===//
#ifndef DCRT_CORE_TCPMESH_H
#define DCRT_CORE_TCPMESH_H

#include "TcpConfig.h"
#include "TcpRendezvous.h"

#include <vector>

namespace dcrt::detail {

/// The connections of this rank to every other rank of the job.
class TcpMesh {
public:
  /// Runs the rendezvous and connects; a job of one rank has no
  /// connections. Fatal, naming the ranks, when one does not connect within
  /// config.timeoutSeconds.
  explicit TcpMesh(const TcpConfig &config);
  ~TcpMesh();
  TcpMesh(const TcpMesh &) = delete;
  TcpMesh &operator=(const TcpMesh &) = delete;

  /// The nonblocking socket to world rank `rank` (not this one).
  int socketTo(int rank) const { return sockets[rank]; }
  /// Where `rank` listened, for messages about it.
  const PeerAddress &addressOf(int rank) const { return addresses[rank]; }

private:
  void connectPeers(const TcpConfig &config, int dataListener,
                    const JobAddresses &job);

  std::vector<int> sockets; // by world rank; -1 for this rank
  std::vector<PeerAddress> addresses;
};

} // namespace dcrt::detail

#endif // DCRT_CORE_TCPMESH_H
