// The job epilog (S_CTX_JOB_SCRIPT: "slurmstepd spank epilog", as root, on
// every node of a job as it ends there): sweeps the node-local root of the
// directories of jobs that have ended for good (base/launch/local_sweep.h).
// Every job's end on a node sweeps the whole root, so a directory a job
// left on a node by a requeue, or on a node that died and came back, goes
// at the next end of any job there.
#include "spank/spank_api.h"

#include <chrono>
#include <string>
#include <vector>

#include "base/launch/component.h"
#include "base/launch/local_sweep.h"
#include "base/launch/options.h"
#include "base/launch/slurm_queries.h"
#include "spank/plugin.h"

namespace baton::spank {
namespace {

// Each question to the controller; slurmd gives the whole epilog
// max(PrologEpilogTimeout, 120 s), and the sweep stays well inside it.
constexpr std::chrono::seconds kQueryLimit(5);
constexpr launch::SweepLimits kLimits{std::chrono::seconds(30), std::chrono::seconds(10)};

}  // namespace

Status JobEpilog(spank_t, int ac, char** av) {
  // No slurm_spank_init in this context: the arguments come with the call.
  launch::PluginConfig config;
  Status s = launch::ParsePluginConfig(std::vector<std::string>(av, av + ac), &config);
  if (!s.ok()) {
    LogError(s.Annotate("job_epilog (no sweep)"));
    return Status::OK();
  }
  if (config.local_root.empty()) return Status::OK();
  auto slurm = launch::WithDeadline(launch::Libslurm(), kQueryLimit,
                                    "the node-local sweep asks whether each job there has ended; its "
                                    "directories stay until a sweep gets an answer");
  launch::SweepReport report;
  s = launch::SweepLocalRoot(
      config.local_root, [&](uint32_t job, launch::JobRecord* r) { return slurm->JobState(job, r); }, kLimits,
      &report);
  if (!s.ok()) {
    LogError(s.Annotate("job_epilog: sweeping local_root"));
    return Status::OK();
  }
  for (const auto& path : report.removed) slurm_info("baton: removed node-local directory %s (its job has ended)", path.c_str());
  for (const auto& what : report.left) slurm_info("baton: node-local sweep left %s", what.c_str());
  if (report.out_of_time)
    slurm_info("baton: node-local sweep of %s stopped at its time limit; the next job's end goes on",
               config.local_root.c_str());
  return Status::OK();
}

}  // namespace baton::spank
