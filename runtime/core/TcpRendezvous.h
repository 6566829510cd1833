//===- TcpRendezvous.h - how the ranks of a tcp job find each other -------===//
//
// Rank 0 listens on MASTER_PORT; every other rank connects to
// MASTER_ADDR:MASTER_PORT (retrying until rank 0 is up) and sends a hello
// (rank, world size, the port of its own data listener). Rank 0 checks them
// (world sizes agree, each rank once) and answers each with the address
// table: every rank's host and data port, and a random job token. Only rank
// 0's address has to be known in advance: the launcher's.
//
//===----------------------------------------------------------------------===//
#ifndef DCRT_CORE_TCPRENDEZVOUS_H
#define DCRT_CORE_TCPRENDEZVOUS_H

#include "TcpConfig.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dcrt::detail {

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

/// What the rendezvous tells every rank, the same on all of them.
struct JobAddresses {
  std::vector<PeerAddress> table; // every rank's data listener, by rank
  /// Rank 0's random number: a mesh connection that opens with it comes
  /// from a rank of this job, not of another on the same hosts.
  uint64_t token = 0;
};

/// Meets the other ranks of `config`'s job at rank 0, telling them this
/// rank's data listener is at `dataPort`. Fatal, naming the ranks, when one
/// does not come within config.timeoutSeconds or disagrees (world size,
/// protocol version, a rank claimed twice).
JobAddresses rendezvous(const TcpConfig &config, int dataPort);

} // namespace dcrt::detail

#endif // DCRT_CORE_TCPRENDEZVOUS_H
