// The questions only Slurm itself can answer (a host list's hosts, the
// exact task-to-node map of a step, the nodes' addresses), behind an
// interface so that unit tests answer them without a cluster.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/launch/allocation_nodes.h"
#include "base/launch/sweep_decision.h"
#include "baton/status.h"

namespace baton::launch {

// More nodes than any Slurm cluster has: the bound of a host list whose
// node count Slurm did not state (SLURM_STEP_NUM_NODES, SLURM_JOB_NUM_NODES).
inline constexpr size_t kMaxNodes = 1 << 17;

class SlurmQueries {
 public:
  virtual ~SlurmQueries() = default;
  // "n[1-3,7],gpu-[01-04]" -> n1 n2 n3 n7 gpu-01 ... (libslurm's hostlist
  // API). A list naming more than `max_hosts` hosts is refused before any
  // host is expanded (4 KB of ranges can name millions).
  virtual Status ExpandHostlist(const std::string& hostlist, size_t max_hosts, std::vector<std::string>* hosts) = 0;
  // The reverse, keeping the order: 10.0.0.11 ... 10.0.0.14 -> "10.0.0.[11-14]".
  virtual Status CompressHostlist(const std::vector<std::string>& hosts, std::string* hostlist) = 0;
  // The step layout Slurm made: its nodes and the global task ids on each.
  // NotFound when the controller holds no such job or step.
  virtual Status StepTasks(const std::string& job_id, long step_id, std::vector<std::string>* nodes,
                           std::vector<std::vector<int>>* tids) = 0;
  // The address slurm.conf gives each node (NodeAddr: the node name unless
  // the administrator set another), in the order of `nodes`. Every node of
  // the cluster reaches it; node names need not resolve. Where the
  // controller refuses node records to the caller (slurm.conf
  // PrivateData=nodes, ESLURM_ACCESS_DENIED), the node names themselves.
  virtual Status NodeAddresses(const std::vector<std::string>& nodes, std::vector<std::string>* addrs) = 0;
  // The GPUs per node of a step (its TresPerNode; a step that asked for
  // none has the job's) or, without a step, of the job; none when the
  // request is not per node.
  virtual Status GpusPerNode(const std::string& job_id, std::optional<long> step_id, std::optional<int>* gpus) = 0;
  // Whether the controller knows job `job` and, if so, its job_state
  // (slurm_load_job). A job it does not know (ESLURM_INVALID_JOB_ID: ended
  // more than MinJobAge ago) is record->known = false and OK; any other
  // failure is an error.
  virtual Status JobState(uint32_t job, JobRecord* record) = 0;
  // Every job of user `uid` the controller knows, with its job_state
  // (slurm_load_job_user: one request, whatever the number of jobs).
  virtual Status UserJobs(uint32_t uid, std::map<uint32_t, uint32_t>* states) = 0;
  // The nodes job `job` holds now (slurm_load_job: with --no-kill a failed
  // node leaves the list) and each one's state and reason (slurm_load_node),
  // in the job's order. A job the controller does not know, or one that
  // holds no nodes (pending, ended), is an error naming it.
  virtual Status AllocationNodes(uint32_t job, Allocation* allocation) = 0;
};

// The real answers, from libslurm (slurm_hostlist_*, slurm_job_step_layout_get,
// slurm_load_node*). In the plugin these symbols come from the srun or
// slurmstepd that loaded it; the CLI links libslurm.
SlurmQueries& Libslurm();

// `inner`'s questions to the controller (StepTasks, NodeAddresses,
// GpusPerNode, JobState, UserJobs, AllocationNodes), each given up after `limit` with a Timeout that names the
// call and `context` (what the caller lacks that would have spared the
// question); a failed answer is annotated with both as well. For a
// one-shot process (the CLI): libslurm waits up to a minute for a missing
// slurm.conf or an unreachable controller, and the abandoned call keeps its
// thread until the process exits.
std::unique_ptr<SlurmQueries> WithDeadline(SlurmQueries& inner, std::chrono::milliseconds limit,
                                           std::string context);

}  // namespace baton::launch
