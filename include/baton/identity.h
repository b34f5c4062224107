// Who this process is: rank, host and job, for log lines and error messages.
//
// Read once from the environment that Slurm, the baton SPANK plugin or
// mpirun gives a task; the MPI runtime overrides the rank with the one
// MPI_COMM_WORLD reports. Thread-safe: readers get a consistent copy.
#pragma once

#include <map>
#include <string>

namespace baton {

struct Identity {
  int rank = -1;        // -1: not known (a login-node command, the batch script)
  std::string host;     // gethostname(); on the local cluster n1..nN
  std::string job;      // "17" or "17.3" (job.step); empty outside Slurm

  // "rank 3 on n2, job 17.0", "host n2" when rank and job are unknown.
  std::string Describe() const;
};

// Derives an identity from an environment (name -> value) and a host name.
// Rank: RANK, then SLURM_PROCID, then OMPI_COMM_WORLD_RANK, then PMIX_RANK;
// a value that is not a non-negative integer is ignored (it is someone
// else's variable; the SPANK plugin and the runtime validate their own).
Identity IdentityFromEnvironment(const std::map<std::string, std::string>& env,
                                 const std::string& host);

// The process-wide identity, read from the real environment on first use.
Identity CurrentIdentity();

// Called by the MPI runtime once MPI_COMM_WORLD knows the rank.
void SetIdentityRank(int rank);

// The process environment as a map (for IdentityFromEnvironment and tests).
std::map<std::string, std::string> ProcessEnvironment();

}  // namespace baton
