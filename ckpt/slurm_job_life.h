// The writer lock's question to Slurm (ckpt/writer_lock.h's JobLifeFn):
// whether a job still runs, asked through libslurm (slurm_load_job), as
// Runtime::Requeue asks for a requeue. In libbaton, not in the MPI-free
// core.
#pragma once

#include <string>

#include "ckpt/writer_lock.h"

namespace baton::ckpt {

// kRunning: pending, running, suspended or completing (its processes may
// still write); kEnded: in any final state, or no longer known to Slurm;
// kUnknown: the id is not a job id, or Slurm did not answer.
JobLife SlurmJobLife(const std::string& job);

}  // namespace baton::ckpt
