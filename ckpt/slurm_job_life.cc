#include "ckpt/slurm_job_life.h"

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "base/launch/decimal.h"

namespace baton::ckpt {

JobLife SlurmJobLife(const std::string& job) {
  long long id = 0;
  if (!launch::ParseDecimal(job.c_str(), 1, 0xfffffff0LL, &id)) return JobLife::kUnknown;
  job_info_msg_t* info = nullptr;
  if (slurm_load_job(&info, static_cast<uint32_t>(id), SHOW_ALL) != SLURM_SUCCESS) {
    // A job purged from slurmctld's memory (MinJobAge after its end).
    return slurm_get_errno() == ESLURM_INVALID_JOB_ID ? JobLife::kEnded : JobLife::kUnknown;
  }
  JobLife life = JobLife::kUnknown;
  if (info != nullptr && info->record_count > 0) {
    const uint32_t state = info->job_array[0].job_state;
    const uint32_t base = state & JOB_STATE_BASE;
    const bool live = base == JOB_PENDING || base == JOB_RUNNING || base == JOB_SUSPENDED ||
                      (state & JOB_COMPLETING) != 0;
    life = live ? JobLife::kRunning : JobLife::kEnded;
  }
  slurm_free_job_info_msg(info);
  return life;
}

}  // namespace baton::ckpt
