//===- TcpConfig.h - where a tcp job's rank 0 is, from the launcher -------===//
//
// torchrun and srun (without --mpi) tell each rank its rank, the world size
// and, directly or through the node list, where rank 0 is; this reads that
// into the settings the rendezvous needs.
//
//===----------------------------------------------------------------------===//
#ifndef DCRT_CORE_TCPCONFIG_H
#define DCRT_CORE_TCPCONFIG_H

#include <string>

namespace dcrt::detail {

struct TcpConfig {
  int rank = 0, worldSize = 1;
  std::string masterAddr = "127.0.0.1";
  int masterPort = 0;
  double timeoutSeconds = 300;
  /// DCRT_TCP_TOKEN, the same on every rank of a job (empty: none): rank 0
  /// lets only a hello that carries it join the rendezvous.
  std::string token;
  /// Where the settings came from ("torchrun", "SLURM"), for messages.
  std::string source = "environment";
};

/// RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT (torchrun), else SLURM_PROCID/
/// SLURM_NTASKS with MASTER_ADDR or SLURM's first node and MASTER_PORT or
/// one derived from SLURM_JOB_ID. DCRT_MASTER_PORT, when set, is the port;
/// under torchrun with TORCHELASTIC_USE_AGENT_STORE=True (its agent serves
/// a store on MASTER_PORT) it is MASTER_PORT + 1. DCRT_TCP_TOKEN, when set,
/// is the job's token. Fatal naming the variable when one is missing or
/// wrong.
TcpConfig tcpConfigFromEnvironment(double timeoutSeconds);

/// The first host of a SLURM node list ("gpu[07-09,12],cpu1" -> "gpu07").
std::string firstSlurmHost(const std::string &nodeList);

} // namespace dcrt::detail

#endif // DCRT_CORE_TCPCONFIG_H
