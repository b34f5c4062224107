// Which nodes of a job's allocation can run its next step: the answer the
// batch script needs to launch a step again inside the allocation after a
// node died (`baton run`, `baton nodes`), from Slurm's own view
// of the allocation and of each node's state. Pure: the facts come from
// SlurmQueries::AllocationNodes, so unit tests need no cluster.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "baton/status.h"

namespace baton::launch {

// slurm.h's node_state values the choice reads (slurm_queries.cc checks
// them against Slurm's header, which base/ does not include).
inline constexpr uint32_t kNodeStateBase = 0xf;
inline constexpr uint32_t kNodeUnknown = 0, kNodeDown = 1, kNodeIdle = 2, kNodeAllocated = 3, kNodeError = 4,
                          kNodeMixed = 5, kNodeFuture = 6;
inline constexpr uint32_t kNodeDrainFlag = 1u << 9, kNodeNoRespondFlag = 1u << 11, kNodePoweredDownFlag = 1u << 12,
                          kNodeFailFlag = 1u << 13, kNodeMaintFlag = 1u << 15, kNodeRebootIssuedFlag = 1u << 20,
                          kNodePowerDownFlag = 1u << 23;

// One node of the job's allocation as the controller sees it now.
struct NodeHealth {
  std::string name;
  uint32_t state = 0;   // node_state (base | flags)
  std::string reason;   // the node's Reason, when an administrator or Slurm set one
};

// A job's allocation now: with --no-kill Slurm takes a failed node out of
// the job's node list and the job goes on on the others.
struct Allocation {
  uint32_t job = 0;
  std::vector<NodeHealth> nodes;  // in Slurm's order
};

struct StepNodeRequest {
  std::set<std::string> exclude;  // nodes the caller will not use (a node it suspects)
  std::optional<size_t> count;    // how many to choose: the first `count` usable ones
  std::optional<size_t> min;      // fewer usable than this is an error (default: count, or 1)
};

// Why a node cannot run a step ("" when it can): DOWN, DRAIN, FAIL,
// NOT_RESPONDING, powered down, ...
std::string Unusable(const NodeHealth& node);

// The nodes of `allocation` that can run the next step, in Slurm's order,
// the first `count` of them when given. Fewer usable nodes than `min` is
// Unavailable naming the job, how many it has, and each node left out
// with why; `unusable` gets the ones left out as "n3 (DOWN)" either way.
Status ChooseStepNodes(const Allocation& allocation, const StepNodeRequest& request, std::vector<std::string>* nodes,
                       std::vector<std::string>* unusable);

}  // namespace baton::launch
