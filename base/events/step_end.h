#pragma once
// The batch script's word on how a step ended (`baton step-end`,
// docs/events.md "step_end"): srun's exit status and error lines, and which
// of the step's nodes Slurm no longer lets run a step (a node that died).
// A rank's log cannot say this: a killed node writes nothing, and its peers
// only see a silent peer. `baton report` names the interruption's cause
// from it. MPI-free, pure: the node facts come from
// SlurmQueries::AllocationNodes.
#include <string>
#include <utility>
#include <vector>

#include "base/launch/allocation_nodes.h"

namespace baton::events {

// The nodes of `step_nodes` that cannot run a step now, with why: Slurm's
// state (Unusable), or "left the allocation" for a node Slurm took out of
// the job (with --no-kill a failed node leaves the job's node list).
std::vector<std::pair<std::string, std::string>> LostNodes(const launch::Allocation& allocation,
                                                           const std::vector<std::string>& step_nodes);

struct StepEnd {
  std::string job;
  int restart = 0;
  int exit = 0;                   // srun's exit status
  std::string nodes;              // the step's nodes, a Slurm host list
  std::string said;               // srun's error lines ("" if none)
  std::vector<std::pair<std::string, std::string>> lost;
  std::string slurm_error;        // the controller did not answer: the lost nodes are unknown
};

// The record's line, newline included, at `unix_seconds`.
std::string StepEndLine(const StepEnd& end, double unix_seconds);

}  // namespace baton::events
