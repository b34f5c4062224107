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
  std::optional<long> step_id;  // none: the batch script (or an allocation's shell)
  int restart_count = 0;        // SLURM_RESTART_COUNT
  StepLayout layout;            // the step's, or the allocation's for the batch script
  int node_index = 0;           // this node's index in layout.nodes
  std::string master_addr;      // the address of layout.nodes[0]
  std::optional<int> rank;      // this task's global rank; none for the batch script
  // The GPUs Slurm gave this step on this node (its CUDA_VISIBLE_DEVICES).
  std::vector<std::string> node_gpus;
  std::string hostfile_path;    // where this node's hostfile is; empty: none
};

// The environment a task (or the batch script) gets. `opts` are the
// resolved options; unset ones take their defaults (hostfile openmpi,
// gpu-bind from the plugin config).
Status DeriveLaunchEnv(const StepInfo& info, const LaunchOptions& opts, const PluginConfig& config,
                       EnvList* env);

// MASTER_PORT: a pure function of job and step within [lo, hi]. The batch
// script and each step of one job get different ports, so launchers of two
// steps running at once do not collide.
int MasterPort(const std::string& job_id, std::optional<long> step_id, int lo, int hi);

// The hostfile of a layout. openmpi and deepspeed: "host slots=N"; mpich:
// "host:N"; horovod: one line "host:N,host:N"; plain: one line per rank in
// rank order.
std::string FormatHostfile(HostfileFormat format, const StepLayout& layout);

// Expands a hostfile_dir template (%u %j %s %n %t %%).
std::string ExpandHostfileDir(const std::string& tmpl, const std::string& user,
                              const std::string& job, const std::string& step,
                              const std::string& node, const std::string& tmpdir);

// Splits a CUDA_VISIBLE_DEVICES value ("0,1" or "GPU-uuid,...").
std::vector<std::string> SplitDeviceList(const std::string& text);

}  // namespace baton::launch
