// Which of a step's nodes Slurm no longer lets run a step (a node that died,
// one drained, one Slurm took out of the job), asked after the step ended:
// `baton run` decides a relaunch by it and both `baton run` and `baton
// step-end` record it in the step_end event (docs/events.md). MPI-free: the
// answers come through SlurmQueries, faked in tests/unit/lost_nodes_test.cc.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/launch/allocation_nodes.h"
#include "base/launch/slurm_queries.h"
#include "baton/status.h"

namespace baton::launch {

// A lost node: its name, and why (Slurm's state and reason, e.g.
// "DOWN+NOT_RESPONDING: Not responding", or "left the allocation").
using LostNode = std::pair<std::string, std::string>;

// The nodes of `step_nodes` that cannot run a step now, in the step's order:
// Slurm's state (Unusable), or "left the allocation" for a node Slurm took
// out of the job (with --no-kill a failed node leaves the job's node list).
std::vector<LostNode> LostNodes(const Allocation& allocation, const std::vector<std::string>& step_nodes);

// Unavailable (from `component`) naming `slurm_conf`, SLURM_CONF's value,
// when it is set and names no file: libslurm without its configuration ends
// the process or retries for a minute instead of answering, so it must not
// be asked. OK when SLURM_CONF is unset ("") or names a file.
Status SlurmConfPresent(const std::string& slurm_conf, std::string_view component);

// LostNodes of job `job`'s allocation as Slurm answers now. Not OK, with
// *lost left empty (the lost nodes unknown, never "none"): SlurmConfPresent's
// Status, or the AllocationNodes question's (a controller that does not
// answer, a job it no longer knows).
Status AskLostNodes(SlurmQueries& slurm, const std::string& slurm_conf, std::string_view component, uint32_t job,
                    const std::vector<std::string>& step_nodes, std::vector<LostNode>* lost);

}  // namespace baton::launch
