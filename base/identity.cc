#include "baton/identity.h"

#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <mutex>

extern char** environ;

namespace baton {
namespace {

// A rank variable is trusted only if it is a plain non-negative decimal.
bool ParseRank(const std::string& text, int* rank) {
  if (text.empty() || text.size() > 9) return false;
  for (char c : text)
    if (c < '0' || c > '9') return false;
  *rank = std::atoi(text.c_str());
  return true;
}

std::string HostName() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
  return buf;
}

std::mutex g_mu;
bool g_loaded = false;
Identity g_identity;

}  // namespace

std::string Identity::Describe() const {
  std::string out;
  if (rank >= 0) out = "rank " + std::to_string(rank) + " on " + host;
  else out = "host " + host;
  if (!job.empty()) out += ", job " + job;
  return out;
}

Identity IdentityFromEnvironment(const std::map<std::string, std::string>& env,
                                 const std::string& host) {
  Identity id;
  id.host = host;
  // The MPI library's own rank first: a process an MPI launcher started
  // inside a Slurm step (mpirun's daemons run as one) inherits that step's
  // RANK and SLURM_PROCID, which number the daemons, not the processes.
  // PMI_RANK: MPICH's Hydra.
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "RANK", "SLURM_PROCID"}) {
    auto it = env.find(name);
    if (it != env.end() && ParseRank(it->second, &id.rank)) break;
  }
  auto job = env.find("SLURM_JOB_ID");
  if (job != env.end() && !job->second.empty()) {
    id.job = job->second;
    auto step = env.find("SLURM_STEP_ID");
    if (step != env.end() && !step->second.empty()) id.job += "." + step->second;
  }
  return id;
}

std::map<std::string, std::string> ProcessEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string entry(*e);
    auto eq = entry.find('=');
    if (eq == std::string::npos) continue;
    env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

Identity CurrentIdentity() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_loaded) {
    g_identity = IdentityFromEnvironment(ProcessEnvironment(), HostName());
    g_loaded = true;
  }
  return g_identity;
}

void SetIdentityRank(int rank) {
  CurrentIdentity();  // load host and job first
  std::lock_guard<std::mutex> lock(g_mu);
  g_identity.rank = rank;
}

}  // namespace baton
