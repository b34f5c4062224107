// The one derivation of a task's launch environment from Slurm's facts.
//
// Pure: no Slurm calls, no environment reads. The SPANK plugin (in
// slurmstepd) and `baton env` (in a task or batch script) both gather a
// StepInfo their own way and call DeriveLaunchEnv, so the two can never
// disagree, and every rule here is unit-tested without Slurm.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/launch/options.h"
#include "base/launch/step_layout.h"
#include "baton/status.h"

namespace baton::launch {

using EnvList = std::vector<std::pair<std::string, std::string>>;

struct StepInfo {
  std::string job_id;
  // None: the allocation itself (the batch script, salloc's shell or its
  // interactive step), which has a hostfile and a master but no ranks.
  std::optional<long> step_id;
  int restart_count = 0;        // SLURM_RESTART_COUNT
  StepLayout layout;            // the step's, or the allocation's
  // This node's index in layout.nodes; none where the caller runs on no
  // node of the allocation (salloc's shell on a login node).
  std::optional<int> node_index;
  std::string master_addr;      // the address of rank 0's node
  std::optional<int> rank;      // this task's global rank; none for the allocation
  // This task's index among its node's tasks as Slurm numbers them
  // (SLURM_LOCALID, S_TASK_ID); none: its position among the node's ranks.
  std::optional<int> local_rank;
  // The GPUs this task sees, as its CUDA_VISIBLE_DEVICES lists them: the
  // step's on this node, or fewer where Slurm bound GPUs per task
  // (--gpus-per-task, --gpu-bind) or baton's local-rank already did (a
  // `baton env` inside such a task). See TaskGpus.
  std::vector<std::string> node_gpus;
  // SLURM_GPUS_ON_NODE: how many GPUs the step has on this node, before any
  // per-task binding; none where Slurm did not say (node_gpus is then the
  // step's own).
  std::optional<int> gpus_on_node;
  // GPUs on every node when the job asked for the same number on each
  // (--gpus-per-node, --gres=gpu:N); DeepSpeed's hostfile slots.
  std::optional<int> gpus_per_node;
  // The ports Slurm reserved for the step on its nodes (SLURM_STEP_RESV_PORTS).
  std::vector<int> resv_ports;
  // Per node, the name a launcher reaches it by (its NodeAddr); empty: the
  // node names themselves.
  std::vector<std::string> hosts;
  std::string hostfile_path;    // where this node's hostfile is; empty: none
};

// The environment a task (or the batch script) gets. `opts` are the
// resolved options; unset ones take their defaults (hostfile openmpi,
// gpu-bind from the plugin config).
Status DeriveLaunchEnv(const StepInfo& info, const LaunchOptions& opts, const PluginConfig& config,
                       EnvList* env);

// MASTER_PORT when neither the user nor Slurm's port reservation gives one:
// a pure function of job and step within [lo, hi]. The batch script and
// each step of one job get different ports; two jobs may draw the same one
// (see MasterPortFor).
int MasterPort(const std::string& job_id, std::optional<long> step_id, int lo, int hi);

// MASTER_PORT of a step: --baton-master-port, else the first port Slurm
// reserved for the step (no other step on its nodes holds it at the same
// time), else MasterPort's hash.
int MasterPortFor(const StepInfo& info, const LaunchOptions& opts, const PluginConfig& config);

// The hostfile of a step. openmpi and mpich name each node by its node
// name (their launchers start daemons through srun inside the allocation);
// deepspeed, horovod and plain by info.hosts, the address ssh reaches it by
// (else the node name; horovod: the node name where the address is IPv6,
// which its parser cannot read). openmpi: "host slots=N" (N: tasks on the node); deepspeed: "host
// slots=N" with N the GPUs per node when Slurm gave the same on every node,
// else the tasks; horovod: "host slots=N" (horovodrun --hostfile); mpich:
// "host:N"; plain: one line per rank in rank order.
std::string FormatHostfile(HostfileFormat format, const StepInfo& info);

// Expands a hostfile_dir template (%u %j %s %n %t %%).
std::string ExpandHostfileDir(const std::string& tmpl, const std::string& user,
                              const std::string& job, const std::string& step,
                              const std::string& node, const std::string& tmpdir);

// Splits a CUDA_VISIBLE_DEVICES value ("0,1" or "GPU-uuid,...").
std::vector<std::string> SplitDeviceList(const std::string& text);

// The GPUs a task sees, from its CUDA_VISIBLE_DEVICES (none: unset) and
// SLURM_GPUS_ON_NODE. --gpu-bind=none leaves CUDA_VISIBLE_DEVICES unset:
// the task then sees the devices the node lets it open, numbered from 0 by
// CUDA, and the step's GPUs on the node are counted: "0".."N-1".
std::vector<std::string> TaskGpus(const std::optional<std::string>& cuda_visible_devices,
                                  std::optional<int> gpus_on_node);

}  // namespace baton::launch
