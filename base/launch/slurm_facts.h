// Gathering a StepInfo from what Slurm tells a process: its SLURM_*
// variables, the plugin's hand-over (hand_over.h), and, only for what
// neither gives, a question to Slurm (slurm_queries.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/launch/launch_env.h"
#include "base/launch/slurm_queries.h"
#include "baton/status.h"

namespace baton::launch {

using Env = std::map<std::string, std::string>;

// What a Slurm step id stands for. The plugin and `baton env` decide alike.
enum class StepKind {
  kTasks,       // an ordinary step: srun's tasks, with ranks
  kAllocation,  // the batch script, or salloc's interactive step: the
                // allocation's hostfile and master, no ranks
  kNone,        // the extern step, a pending step: nothing of the user's runs
};
StepKind KindOfStep(uint32_t step_id);
// The step's name in hostfile paths (%s): the number, "batch" or "interactive".
std::string StepName(uint32_t step_id);

// Fills everything but hosts and hostfile_path from a task's, batch
// script's or allocation shell's environment.
//
// In a step (SLURM_STEP_ID set and an ordinary step): SLURM_JOB_ID,
// SLURM_STEP_ID, SLURM_STEP_NODELIST (at most SLURM_STEP_NUM_NODES hosts
// when set), SLURM_NODEID, SLURM_PROCID and SLURM_LOCALID (absent: a
// node-level call, no rank), the layout from the hand-over with
// SLURM_STEP_TASKS_PER_NODE, else from `queries`, the master address from
// the hand-over, else from `queries`; SLURM_STEP_RESV_PORTS when Slurm
// reserved ports.
//
// In the allocation (the batch script, salloc's shell, the interactive
// step): SLURM_JOB_NODELIST with SLURM_TASKS_PER_NODE (or
// SLURM_JOB_CPUS_PER_NODE), this node from SLURM_NODEID or SLURMD_NODENAME
// when either is set (neither on a login node), the master address from
// `queries`.
//
// Also SLURM_RESTART_COUNT, CUDA_VISIBLE_DEVICES, SLURM_GPUS_ON_NODE and the GPUs per node
// (SLURM_GPUS_PER_NODE, else a gpu count in SLURM_TRES_PER_NODE). A
// missing or malformed variable is an error naming it and its value.
Status StepInfoFromEnvironment(const Env& env, SlurmQueries& queries, StepInfo* info);

// Fills info->hosts, the name of each node in a hostfile (its NodeAddr),
// from the hand-over, else with one question to `queries`. Every name must
// be one a hostfile line can hold (no control character or blank).
Status ResolveHostfileHosts(const Env& env, SlurmQueries& queries, StepInfo* info);

// "17.0" for a step, "17" for the allocation.
std::string JobStepName(const StepInfo& info);

// The GPUs per node a job asked for, from SLURM_GPUS_PER_NODE
// (--gpus-per-node: "[type:]N[,[type:]N]") or the gpu entries of
// SLURM_TRES_PER_NODE ("gres:gpu[:type]:N,..."); none when neither names
// any (--gres=gpu:N sets neither: see ResolveHostfileGpus).
Status GpusPerNodeFromEnvironment(const Env& env, std::optional<int>* gpus);

// A GPU count from `text`: "[type:]N" items, or with `tres` Slurm's TRES
// items ("gres:gpu:2", "gres/gpu:a100:8"; others skipped). None when no
// item counts a GPU. `source` names the text in errors.
Status ParseGpuCount(const std::string& source, const std::string& text, bool tres, std::optional<int>* gpus);

// Fills info->gpus_per_node for DeepSpeed's hostfile when the variables
// did not: from the hand-over, else with one question to `queries` (the
// step's, else the job's, TresPerNode). Stays none for a request that is
// not per node (--gpus=N), whose nodes may hold different counts.
Status ResolveHostfileGpus(const Env& env, SlurmQueries& queries, StepInfo* info);

// Most components a heterogeneous job may have (Slurm's own bound is 128).
inline constexpr long long kMaxHetComponents = 1024;

// The component job ids of a heterogeneous job or step, in component order
// (SLURM_HET_SIZE or SLURM_PACK_SIZE, and SLURM_JOB_ID_HET_GROUP_k or
// SLURM_JOB_ID_PACK_GROUP_k); empty for an ordinary one. In a
// heterogeneous step StepInfoFromEnvironment builds one world of all
// components (ranks 0..N-1 in component order, one MASTER_ADDR, one
// hostfile), placing the components from srun's hand-over
// (BATON_STEP_HET_COMPONENTS, het_step.h), else asking Slurm for each
// component's layout.
Status HetComponentJobs(const Env& env, std::vector<std::string>* jobs);

// info->node_gpus and info->gpus_on_node from a task's CUDA_VISIBLE_DEVICES
// and SLURM_GPUS_ON_NODE (none: unset), see TaskGpus. The plugin (which
// reads slurmstepd's copy of the task's environment) and `baton env` both
// call it.
Status TaskGpusFromVariables(const std::optional<std::string>& cuda_visible_devices,
                             const std::optional<std::string>& gpus_on_node, StepInfo* info);

// SLURM_STEP_RESV_PORTS ("12000-12003", "12000,12005-12006") as ports.
Status ParsePortList(const std::string& name, const std::string& text, std::vector<int>* ports);

}  // namespace baton::launch
