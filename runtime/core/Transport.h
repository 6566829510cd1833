//===- Transport.h - how the ranks of a job reach each other --------------===//
//
// The seam between the job (Job, CommEngine) and the library that moves
// host bytes between ranks. Two implementations:
//   - mpi: the job mpirun, mpiexec or srun --mpi started (MpiTransport.cpp);
//   - tcp: a job torchrun, SLURM without MPI, or `dc-run --launcher tcp`
//     started: a rendezvous at MASTER_ADDR:MASTER_PORT, then a full mesh of
//     sockets (TcpTransport.h and the Tcp*.cpp beside it).
// Shared code describes a collective with neutral types (CommOp); only an
// implementation knows MPI or sockets.
//
//===----------------------------------------------------------------------===//
#ifndef DCRT_CORE_TRANSPORT_H
#define DCRT_CORE_TRANSPORT_H

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dcrt::detail {

struct CommOp;

/// The element types a collective moves; sums exist for all but Byte.
enum class ElementType { Byte, F32, F64, I32, I64 };
int64_t elementSize(ElementType type);
const char *elementTypeName(ElementType type);

/// The only reduction the runtime issues (averages divide afterwards).
enum class ReduceOp { Sum };

class Transport {
public:
  virtual ~Transport() = default;
  /// "mpi" or "tcp", for messages.
  virtual const char *name() const = 0;
  int rank() const { return rank_; }
  int worldSize() const { return worldSize_; }

  /// Adds a group of world ranks (in the order of their index in it) that
  /// includes this rank, and returns its id for CommOp::group; the world is
  /// group 0. Collective: every rank calls it, the groups of one call
  /// partitioning the world.
  virtual int addGroup(const std::vector<int> &members) = 0;
  /// Waits until every rank got here, fatal after `seconds`. Only before
  /// the communication thread starts.
  virtual void barrier(double seconds) = 0;

  // The communication thread alone calls these two.
  /// Issues a collective; ops complete in the order they were started.
  virtual void start(CommOp &op) = 0;
  /// Moves the ops that completed since the last call into `completed`
  /// (appended); may block up to a short pause for progress.
  virtual void progress(std::vector<CommOp *> &completed) = 0;

protected:
  int rank_ = 0, worldSize_ = 1;
};

/// Which transport this process joins through, from the environment:
/// DCRT_TRANSPORT=mpi|tcp when set; else mpi under an MPI launcher
/// (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK, ...) or when MPI is already
/// initialized; else tcp under torchrun (RANK, WORLD_SIZE, MASTER_ADDR,
/// MASTER_PORT) or SLURM (SLURM_PROCID, SLURM_NTASKS); else mpi (one rank,
/// an MPI singleton).
std::string chooseTransport();

std::unique_ptr<Transport> createMpiTransport(double timeoutSeconds);
/// Fatal with a clear message when the environment is incomplete or wrong.
std::unique_ptr<Transport> createTcpTransport(double timeoutSeconds);

} // namespace dcrt::detail

#endif // DCRT_CORE_TRANSPORT_H
