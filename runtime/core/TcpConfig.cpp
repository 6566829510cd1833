//===- TcpConfig.cpp - where a tcp job's rank 0 is, from the launcher -----===//
#include "TcpConfig.h"

#include "TcpWire.h"

#include "dcrt/error.hpp"

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

using namespace dcrt;
using namespace dcrt::detail;

namespace {
const char *environment(const char *name) {
  const char *value = std::getenv(name);
  return value && *value ? value : nullptr;
}

/// `name`'s value as an integer in [low, high]; fatal otherwise.
long long integerVariable(const char *name, long long low, long long high,
                          const char *expected) {
  const char *text = environment(name);
  char *end = nullptr;
  errno = 0;
  long long value = text ? std::strtoll(text, &end, 10) : 0;
  if (!text || *end || errno || value < low || value > high)
    fatal("%s='%s' is not %s", name, text ? text : "", expected);
  return value;
}
} // namespace

std::string dcrt::detail::firstSlurmHost(const std::string &nodeList) {
  // The first entry ends at a comma outside brackets; a bracket holds
  // ranges like 07-09 whose first number (zero padding kept) is the node.
  std::string host;
  for (size_t i = 0; i < nodeList.size(); ++i) {
    char c = nodeList[i];
    if (c == ',')
      break;
    if (c != '[') {
      host.push_back(c);
      continue;
    }
    size_t close = nodeList.find(']', i);
    if (close == std::string::npos)
      return host;
    std::string range = nodeList.substr(i + 1, close - i - 1);
    host += range.substr(0, range.find_first_of(",-"));
    i = close;
  }
  return host;
}

TcpConfig dcrt::detail::tcpConfigFromEnvironment(double timeoutSeconds) {
  TcpConfig config;
  config.timeoutSeconds = timeoutSeconds;
  bool torchrun = environment("RANK") && environment("WORLD_SIZE");
  bool slurm =
      !torchrun && environment("SLURM_PROCID") && environment("SLURM_NTASKS");
  if (!torchrun && !slurm)
    fatal("the tcp transport needs RANK and WORLD_SIZE (torchrun) or "
          "SLURM_PROCID and SLURM_NTASKS (srun) in the environment");
  config.source = torchrun ? "torchrun's environment" : "SLURM's environment";
  const char *worldName = torchrun ? "WORLD_SIZE" : "SLURM_NTASKS";
  const char *rankName = torchrun ? "RANK" : "SLURM_PROCID";
  config.worldSize = static_cast<int>(
      integerVariable(worldName, 1, 1 << 20, "a world size (>= 1)"));
  config.rank = static_cast<int>(
      integerVariable(rankName, 0, config.worldSize - 1,
                      ("a rank below " + std::string(worldName) + "=" +
                       std::to_string(config.worldSize))
                          .c_str()));
  if (const char *address = environment("MASTER_ADDR"))
    config.masterAddr = address;
  else if (slurm &&
           (environment("SLURM_JOB_NODELIST") || environment("SLURM_NODELIST")))
    config.masterAddr = firstSlurmHost(environment("SLURM_JOB_NODELIST")
                                           ? environment("SLURM_JOB_NODELIST")
                                           : environment("SLURM_NODELIST"));
  else if (config.worldSize > 1)
    fatal("the tcp transport needs MASTER_ADDR (the host of rank 0) in the "
          "environment");
  // Rank 0 sends it in the address table, whose hosts are bounded.
  if (config.masterAddr.size() > tcp::kMaxHostBytes)
    fatal("MASTER_ADDR='%.40s...' is not a host name (at most %zu "
          "characters)",
          config.masterAddr.c_str(), tcp::kMaxHostBytes);
  if (const char *token = environment("DCRT_TCP_TOKEN")) {
    config.token = token;
    if (config.token.size() > tcp::kMaxTokenBytes)
      fatal("DCRT_TCP_TOKEN is %zu characters long (at most %zu)",
            config.token.size(), tcp::kMaxTokenBytes);
  }
  const char *agentStore = environment("TORCHELASTIC_USE_AGENT_STORE");
  if (environment("DCRT_MASTER_PORT")) {
    config.masterPort = static_cast<int>(integerVariable(
        "DCRT_MASTER_PORT", 1, 65535, "a port number (1-65535)"));
  } else if (environment("MASTER_PORT")) {
    config.masterPort = static_cast<int>(
        integerVariable("MASTER_PORT", 1, 65535, "a port number (1-65535)"));
    // torchrun's agent serves its own store on MASTER_PORT: take the next.
    if (agentStore && std::strcmp(agentStore, "True") == 0) {
      if (config.masterPort == 65535)
        fatal("MASTER_PORT=65535 is torchrun's store, and the port after it "
              "(dcrt's rendezvous) does not exist: set DCRT_MASTER_PORT");
      ++config.masterPort;
      config.source += " (MASTER_PORT + 1: torchrun's agent has MASTER_PORT)";
    }
  } else if (slurm && environment("SLURM_JOB_ID"))
    // Distinct jobs sharing a node get distinct ports (mostly).
    config.masterPort = static_cast<int>(
        20000 +
        integerVariable("SLURM_JOB_ID", 0, INT64_MAX, "a job id") % 20000);
  else if (config.worldSize > 1)
    fatal("the tcp transport needs MASTER_PORT (rank 0's rendezvous port) "
          "in the environment");
  return config;
}
