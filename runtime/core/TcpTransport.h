//===- TcpTransport.h - the job over a TCP rendezvous and a socket mesh ---===//
//
// For jobs without MPI (torchrun, srun without --mpi, dc-run --launcher tcp):
//
//  1. Rendezvous. Rank 0 listens on MASTER_PORT; every other rank connects to
//     MASTER_ADDR:MASTER_PORT (retrying until rank 0 is up) and sends a hello
//     (rank, world size, the port of its own data listener). Rank 0 checks
//     them (world sizes agree, each rank once) and answers each with the
//     address table: every rank's host and data port, and a random job token.
//  2. Mesh. Rank i connects to the data listener of every rank j < i and
//     accepts one connection from every rank j > i, each opened with the
//     token and the rank: a full mesh, one socket per pair. Collectives talk
//     directly to the peers they need: a gather's GBs go straight to the
//     root, an all-gather or reduce-scatter sends (n-1)/n of the data per
//     rank, as a ring would, in one step instead of n-1.
//  3. Collectives run on the communication thread, one at a time in
//     submission order (every rank submits the same order), with
//     nonblocking sockets and poll(): sends and receives of one step proceed
//     together, so two ranks sending each other GBs do not deadlock. Every
//     message has a header (kind, the op's sequence number, bytes) that the
//     receiver checks: ranks that issued different collectives fail, naming
//     both. Sums add the members' contributions in the order of their index
//     in the group, the same on every rank.
//
// Failures are fatal errors naming the rank: a peer that never connects
// (DCRT_TIMEOUT_S), a peer whose connection ends (it died or failed), a
// collective that makes no progress for DCRT_TIMEOUT_S.
//
//===----------------------------------------------------------------------===//
#ifndef DCRT_CORE_TCPTRANSPORT_H
#define DCRT_CORE_TCPTRANSPORT_H

#include "Transport.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dcrt::detail {

struct TcpConfig {
  int rank = 0, worldSize = 1;
  std::string masterAddr = "127.0.0.1";
  int masterPort = 0;
  double timeoutSeconds = 300;
  /// Where the settings came from ("torchrun", "SLURM"), for messages.
  std::string source = "environment";
};

/// RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT (torchrun), else SLURM_PROCID/
/// SLURM_NTASKS with MASTER_ADDR or SLURM's first node and MASTER_PORT or
/// one derived from SLURM_JOB_ID. DCRT_MASTER_PORT, when set, is the port;
/// under torchrun with TORCHELASTIC_USE_AGENT_STORE=True (its agent serves
/// a store on MASTER_PORT) it is MASTER_PORT + 1. Fatal naming the variable
/// when one is missing or wrong.
TcpConfig tcpConfigFromEnvironment(double timeoutSeconds);

std::unique_ptr<Transport> createTcpTransport(const TcpConfig &config);

/// One entry of the address table rank 0 sends: where a rank's data
/// listener is.
struct PeerAddress {
  std::string host; // numeric address or a name getaddrinfo resolves
  int port = 0;
  bool operator==(const PeerAddress &other) const {
    return host == other.host && port == other.port;
  }
};
std::string encodeAddressTable(uint64_t token,
                               const std::vector<PeerAddress> &table);
/// False, with `error` set, when `bytes` is not a whole table.
bool decodeAddressTable(const std::string &bytes, uint64_t &token,
                        std::vector<PeerAddress> &table, std::string &error);

/// The first host of a SLURM node list ("gpu[07-09,12],cpu1" -> "gpu07").
std::string firstSlurmHost(const std::string &nodeList);

} // namespace dcrt::detail

#endif // DCRT_CORE_TCPTRANSPORT_H
