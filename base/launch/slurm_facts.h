// Gathering a StepInfo from what Slurm tells a process: its SLURM_*
// variables, plus two questions only Slurm itself can answer (the exact
// task-to-node map of a step, and a node's address). The questions go
// through SlurmQueries so unit tests answer them without a cluster.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/launch/launch_env.h"
#include "baton/status.h"

namespace baton::launch {

class SlurmQueries {
 public:
  virtual ~SlurmQueries() = default;
  // "n[1-3,7],gpu-[01-04]" -> n1 n2 n3 n7 gpu-01 ... (libslurm's hostlist API).
  virtual Status ExpandHostlist(const std::string& hostlist, std::vector<std::string>* hosts) = 0;
  // The step layout Slurm made: its nodes and the global task ids on each.
  virtual Status StepTasks(const std::string& job_id, long step_id, std::vector<std::string>* nodes,
                           std::vector<std::vector<int>>* tids) = 0;
  // The address slurm.conf gives a node (NodeAddr), which every node of the
  // cluster can reach; node names need not resolve.
  virtual Status NodeAddress(const std::string& node, std::string* addr) = 0;
};

// The real answers, from libslurm (slurm_hostlist_*, slurm_job_step_layout_get,
// slurm_load_node_single). In the plugin these symbols come from the srun
// or slurmstepd that loaded it; the CLI links libslurm.
SlurmQueries& Libslurm();

// Hand-over variables: the plugin's srun side asks Slurm once per step and
// passes the answers to every task, tagged with the job.step they belong to
// so that a nested srun never trusts its parent's.
inline constexpr const char* kTaskMapVar = "BATON_STEP_TASK_MAP";      // "17.0:0*2,1*2"
inline constexpr const char* kMasterAddrVar = "BATON_STEP_MASTER_ADDR";  // "17.0:127.0.0.11"

// "17.0:" + value; Untag gives the value if the tag matches `job_step`.
std::string Tag(const std::string& job_step, const std::string& value);
bool Untag(const std::string& tagged, const std::string& job_step, std::string* value);

using Env = std::map<std::string, std::string>;

// Fills everything but hostfile_path from a task's or batch script's
// environment. In a step (SLURM_STEP_ID set and not the batch script):
// SLURM_JOB_ID, SLURM_STEP_ID, SLURM_STEP_NODELIST, SLURM_NODEID,
// SLURM_PROCID (absent: a node-level call, no rank), the task map and
// master address from the hand-over variables or else from `queries`.
// In a batch script: SLURM_JOB_NODELIST with SLURM_TASKS_PER_NODE (or
// SLURM_JOB_CPUS_PER_NODE) and SLURM_NODEID or SLURMD_NODENAME. A missing or malformed
// variable is an error naming it and its value.
Status StepInfoFromEnvironment(const Env& env, SlurmQueries& queries, StepInfo* info);

// "17.0" for a step, "17" for the batch script.
std::string JobStepName(const StepInfo& info);

}  // namespace baton::launch
