// The node's own contexts, as root and outside any job step: the job
// epilog (S_CTX_JOB_SCRIPT: "slurmstepd spank epilog", on every node of a
// job as it ends there) and slurmd's start (S_CTX_SLURMD). Both sweep the
// node-local root of the directories of jobs that have ended for good
// (base/launch/local_sweep.h). Every job's end on a node sweeps the whole
// root, so a directory a job left on a node by a requeue goes at the next
// end of any job there; a node that died and came back sweeps when its
// slurmd starts, before it takes a job. What it costs the controller:
// nothing for the ending job's own directory when it is empty, one
// single-job question (slurm_load_job) when it holds data, and one
// per-user question (slurm_load_job_user) per user with another job's
// directory on the node.
#include "spank/spank_api.h"

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <utility>
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
constexpr launch::SweepLimits kEpilogLimits{std::chrono::seconds(30), std::chrono::seconds(10)};
// slurmd does not serve its node until its init returns: a shorter bound.
constexpr launch::SweepLimits kSlurmdLimits{std::chrono::seconds(10), std::chrono::seconds(5)};

// `ending`: the job whose epilog this is (its uid and id), none at
// slurmd's start.
Status Sweep(const char* where, int ac, char** av, const launch::SweepLimits& limits,
             std::optional<std::pair<uid_t, uint32_t>> ending) {
  // Neither context calls slurm_spank_init's parsing: the arguments come
  // with each call.
  launch::PluginConfig config;
  Status s = launch::ParsePluginConfig(std::vector<std::string>(av, av + ac), &config);
  if (!s.ok()) {
    LogError(s.Annotate(std::string(where) + " (no sweep)"));
    return Status::OK();
  }
  if (config.local_root.empty()) return Status::OK();
  auto slurm = launch::WithDeadline(launch::Libslurm(), kQueryLimit,
                                    "the node-local sweep asks whether the jobs with a directory there have ended; their "
                                    "directories stay until a sweep gets an answer");
  launch::EndingJob own;
  if (ending) {
    own.uid = ending->first;
    own.job = ending->second;
    own.ask = [&slurm](uint32_t job, launch::JobRecord* record) { return slurm->JobState(job, record); };
  }
  launch::SweepReport report;
  s = launch::SweepLocalRoot(
      config.local_root,
      launch::LookupByUser([&slurm](uid_t user, std::map<uint32_t, uint32_t>* states) {
        return slurm->UserJobs(static_cast<uint32_t>(user), states);
      }),
      limits, &report, ending ? &own : nullptr);
  if (!s.ok()) {
    LogError(s.Annotate(std::string(where) + ": sweeping local_root"));
    return Status::OK();
  }
  for (const auto& path : report.removed) slurm_info("baton: removed node-local directory %s (its job has ended)", path.c_str());
  for (const auto& what : report.left) slurm_info("baton: node-local sweep left %s", what.c_str());
  if (report.out_of_time)
    slurm_info("baton: node-local sweep of %s stopped at its time limit; the next sweep goes on",
               config.local_root.c_str());
  return Status::OK();
}

}  // namespace

Status JobEpilog(spank_t sp, int ac, char** av) {
  // The ending job's own directory is decided from what slurmd gives the
  // epilog (local_sweep.h's EndingJob); without its ids, as any other.
  uint32_t job = 0;
  uid_t uid = 0;
  std::optional<std::pair<uid_t, uint32_t>> ending;
  spank_err_t rc = spank_get_item(sp, S_JOB_ID, &job);
  if (rc == ESPANK_SUCCESS) rc = spank_get_item(sp, S_JOB_UID, &uid);
  if (rc == ESPANK_SUCCESS) ending.emplace(uid, job);
  else slurm_info("baton: job_epilog: no job id or uid (%s); the job's directory is swept as any other", spank_strerror(rc));
  return Sweep("job_epilog", ac, av, kEpilogLimits, ending);
}

Status SlurmdInit(int ac, char** av) { return Sweep("slurmd init", ac, av, kSlurmdLimits, std::nullopt); }

}  // namespace baton::spank
