//===- TcpRendezvous.h - how the ranks of a tcp job find each other -------===//
//
// Rank 0 listens on MASTER_PORT; every other rank connects to
// MASTER_ADDR:MASTER_PORT (retrying until rank 0 is up) and sends a hello
// (rank, world size, the port of its own data listener, the job token of
// DCRT_TCP_TOKEN). Rank 0 refuses, and reports, a connection that is no rank
// of this job (no dcrt hello, another token, another protocol version) and
// goes on waiting; it checks the rest (world sizes agree, each rank once)
// and answers each with the address table: every rank's host and data
// port, and a random mesh token. Only rank 0's address has to be known in
// advance: the launcher's.
//
//===----------------------------------------------------------------------===//
#ifndef DCRT_CORE_TCPRENDEZVOUS_H
#define DCRT_CORE_TCPRENDEZVOUS_H

#include "TcpConfig.h"
#include "TcpWire.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dcrt::detail {

/// What the rendezvous tells every rank, the same on all of them.
struct JobAddresses {
  std::vector<PeerAddress> table; // every rank's data listener, by rank
  /// Rank 0's random number: a mesh connection that opens with it comes
  /// from a rank of this job, not of another on the same hosts.
  uint64_t token = 0;
};

/// Meets the other ranks of `config`'s job at rank 0, telling them this
/// rank's data listener is at `dataPort`. Fatal, naming the ranks, when one
/// does not come within config.timeoutSeconds or one with this job's token
/// disagrees (world size, a rank claimed twice).
JobAddresses rendezvous(const TcpConfig &config, int dataPort);

} // namespace dcrt::detail

#endif // DCRT_CORE_TCPRENDEZVOUS_H
