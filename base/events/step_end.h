#pragma once
// The batch script's word on how a step ended (`baton step-end`,
// docs/events.md "step_end"): srun's exit status and error lines, and which
// of the step's nodes Slurm no longer lets run a step (a node that died).
// A rank's log cannot say this: a killed node writes nothing, and its peers
// only see a silent peer. `baton report` names the interruption's cause
// from it. MPI-free, pure: the node facts come from launch::AskLostNodes.
#include <string>
#include <vector>

#include "base/launch/lost_nodes.h"

namespace baton::events {

struct StepEnd {
  std::string job;
  int restart = 0;
  int exit = 0;                   // srun's exit status
  std::string nodes;              // the step's nodes, a Slurm host list
  std::string said;               // srun's error lines ("" if none)
  std::vector<launch::LostNode> lost;
  std::string slurm_error;        // the controller did not answer: the lost nodes are unknown
};

// The record's line, newline included, at `unix_seconds`.
std::string StepEndLine(const StepEnd& end, double unix_seconds);

}  // namespace baton::events
