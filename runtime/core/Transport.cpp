//===- Transport.cpp - choosing how the ranks of a job reach each other ---===//
#include "Transport.h"

#include "dcrt/core.hpp"
#include "dcrt/error.hpp"

#include <mpi.h>

#include <cstdlib>
#include <cstring>

using namespace dcrt;
using namespace dcrt::detail;

int64_t dcrt::detail::elementSize(ElementType type) {
  switch (type) {
  case ElementType::Byte:
    return 1;
  case ElementType::F32:
  case ElementType::I32:
    return 4;
  case ElementType::F64:
  case ElementType::I64:
    return 8;
  }
  return 1;
}

const char *dcrt::detail::elementTypeName(ElementType type) {
  switch (type) {
  case ElementType::Byte:
    return "bytes";
  case ElementType::F32:
    return "f32";
  case ElementType::F64:
    return "f64";
  case ElementType::I32:
    return "i32";
  case ElementType::I64:
    return "i64";
  }
  return "?";
}

static bool isSet(const char *name) {
  const char *value = std::getenv(name);
  return value && *value;
}

std::string dcrt::detail::chooseTransport() {
  if (const char *asked = std::getenv("DCRT_TRANSPORT"); asked && *asked) {
    if (std::strcmp(asked, "mpi") != 0 && std::strcmp(asked, "tcp") != 0)
      fatal("DCRT_TRANSPORT='%s' is not a transport (mpi or tcp)", asked);
    return asked;
  }
  // A launcher that starts MPI jobs: Open MPI, PMI (MPICH, srun --mpi=pmi2),
  // PMIx (srun --mpi=pmix, prterun).
  for (const char *name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK",
                           "PMIX_RANK", "MPI_LOCALNRANKS"})
    if (isSet(name))
      return "mpi";
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized)
    return "mpi"; // the host program joined an MPI job itself
  if (isSet("RANK") && isSet("WORLD_SIZE") && isSet("MASTER_ADDR") &&
      isSet("MASTER_PORT"))
    return "tcp"; // torchrun, or dc-run --launcher tcp
  if (isSet("SLURM_STEP_ID") && isSet("SLURM_PROCID") && isSet("SLURM_NTASKS"))
    return "tcp"; // srun without an MPI plugin
  return "mpi";   // one rank on its own: an MPI singleton
}

std::string dcrt::transportFromEnvironment() { return chooseTransport(); }
