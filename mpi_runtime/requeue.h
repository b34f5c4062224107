// Asking Slurm to requeue the job this process belongs to, through
// libslurm (slurm_requeue), not by running scontrol. Used by
// Runtime::Requeue and by ExitForRequeue (deadline.h), so that a job
// whose ranks exit 75 is requeued even when a stuck rank keeps srun from
// ever reporting 75 (it is SIGKILLed: 137, or waited for for ever).
#pragma once

#include <string>

#include "baton/status.h"

namespace baton {

// Requeues the job of SLURM_JOB_ID (SLURM_JOBID on old Slurm). *what
// says what was asked. Unavailable outside a Slurm job (SLURM_JOB_ID
// unset or not a job id) or when Slurm refuses (--no-requeue, not a batch
// job), with Slurm's reason.
Status RequeueJob(std::string* what);

}  // namespace baton
