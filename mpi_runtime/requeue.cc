// Runtime::Requeue: asks Slurm, through libslurm (not by running
// scontrol), to requeue the job this process belongs to.
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include <cstdlib>
#include <string>

#include "base/launch/decimal.h"
#include "baton/log.h"
#include "baton/runtime.h"
#include "mpi_runtime/requeue.h"

namespace baton {
namespace {

constexpr const char* kComponent = "runtime";

// The job to requeue: SLURM_JOB_ID (SLURM_JOBID on old Slurm). 0 if unset.
bool JobIdFromEnv(uint32_t* id, std::string* text) {
  for (const char* name : {"SLURM_JOB_ID", "SLURM_JOBID"}) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') continue;
    long long n = 0;
    *text = std::string(name) + "=" + v;
    // Slurm's NO_VAL and above are not job ids.
    if (!launch::ParseDecimal(v, 1, 0xfffffff0LL, &n)) return false;
    *id = static_cast<uint32_t>(n);
    return true;
  }
  text->clear();
  return false;
}

}  // namespace

Status RequeueJob(std::string* what) {
  uint32_t job = 0;
  std::string env;
  if (!JobIdFromEnv(&job, &env))
    return Status::Unavailable(kComponent, env.empty() ? "requeue: not in a Slurm job (SLURM_JOB_ID is not set)"
                                                       : "requeue: " + env + " is not a job id");
  // libslurm reads slurm.conf (SLURM_CONF or the default path) on first use.
  if (slurm_requeue(job, 0) != SLURM_SUCCESS) {
    const int err = slurm_get_errno();
    return Status::Unavailable(kComponent, "requeue: slurm_requeue of job " + std::to_string(job) + " failed: " +
                                               slurm_strerror(err) + " (errno " + std::to_string(err) + ")");
  }
  *what = "asked Slurm to requeue job " + std::to_string(job);
  return Status::OK();
}

Status Runtime::Requeue(std::string* what) {
  std::lock_guard<std::mutex> lock(requeue_mu_);
  std::string said;
  if (what == nullptr) what = &said;
  if (requeue_asked_) {
    *what = "requeue already asked (" + requeue_what_ + "); not asked again";
    return Status::OK();
  }
  std::string asked;
  BATON_RETURN_IF_ERROR(RequeueJob(&asked));
  requeue_asked_ = true;
  requeue_what_ = asked + " at step " + std::to_string(step()) + " by rank " + std::to_string(rank_);
  *what = requeue_what_;
  BATON_LOG(kRuntime, warning) << requeue_what_;
  return Status::OK();
}

}  // namespace baton
