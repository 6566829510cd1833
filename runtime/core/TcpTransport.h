//===- TcpTransport.h - the job over a TCP rendezvous and a socket mesh ---===//
//
// For jobs without MPI (torchrun, srun without --mpi, dc-run --launcher tcp),
// in layers of one file each:
//
//  0. Where rank 0 is, from the launcher's environment (TcpConfig.h).
//  1. Rendezvous (TcpRendezvous.h): every rank says hello to rank 0, which
//     answers with every rank's address and a job token.
//  2. Mesh (TcpMesh.h): one socket between every pair of ranks.
//  3. Collectives (here) run on the communication thread, one at a time in
//     submission order (every rank submits the same order), with
//     nonblocking sockets and poll(): sends and receives of one step proceed
//     together, so two ranks sending each other GBs do not deadlock. Every
//     message has a header (kind, the op's sequence number, bytes) that the
//     receiver checks: ranks that issued different collectives fail, naming
//     both. Sums add the members' contributions in the order of their index
//     in the group, the same on every rank.
// All of them use blocking sockets with deadlines (TcpSocket.h) and the
// same little-endian messages (TcpWire.h).
//
// Failures are fatal errors naming the rank: a peer that never connects
// (DCRT_TIMEOUT_S), a peer whose connection ends (it died or failed), a
// collective that makes no progress for DCRT_TIMEOUT_S.
//
//===----------------------------------------------------------------------===//
#ifndef DCRT_CORE_TCPTRANSPORT_H
#define DCRT_CORE_TCPTRANSPORT_H

#include "TcpConfig.h"
#include "Transport.h"

#include <memory>

namespace dcrt::detail {

std::unique_ptr<Transport> createTcpTransport(const TcpConfig &config);

} // namespace dcrt::detail

#endif // DCRT_CORE_TCPTRANSPORT_H
