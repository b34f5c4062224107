// State and helpers shared by the per-context files of spank_baton.so.
//
// One plugin instance lives in each process that loads it (srun, sbatch,
// salloc, slurmstepd); slurmstepd forks the tasks after user_init, so what
// user_init computes is inherited by every task_init.
#pragma once

#include "spank/spank_api.h"

#include <optional>
#include <string>
#include <vector>

#include "base/launch/launch_env.h"
#include "base/launch/options.h"
#include "baton/status.h"

namespace baton::spank {

struct PluginState {
  launch::PluginConfig config;
  // Values the option callbacks received, in order: from the environment
  // Slurm propagates (SLURM_SPANK_*), #SBATCH lines, the command line, or
  // (remote) as srun sent them.
  launch::LaunchOptions from_callbacks;
  std::vector<launch::Occurrence> callback_log;

  // Remote context, filled by user_init for task_init and exit.
  bool active = false;
  Status init_error;  // user_init's failure, repeated by every task_init
  launch::StepInfo step;
  launch::LaunchOptions options;
  std::string hostfile_dir;  // created by user_init; removed at exit
  bool created_dir = false;
  uid_t uid = 0;
  gid_t gid = 0;
};

PluginState& State();

// Registers the user options (in every context, so that sbatch, srun and
// slurmstepd all know them).
Status RegisterOptions(spank_t sp);

// Parses the plugstack.conf arguments into State().config.
Status ParseArguments(int ac, char** av);

// Per-context work, one file each. Return a Status; dispatch.cc logs a
// failure and turns it into the return code Slurm expects.
Status LocalInitPostOpt(spank_t sp);    // local_context.cc (srun)
Status LocalUserInit(spank_t sp);       // local_context.cc
Status AllocatorInitPostOpt(spank_t sp);  // allocator_context.cc (sbatch, salloc)
Status RemoteUserInit(spank_t sp);      // remote_context.cc (slurmstepd)
Status RemoteTaskInit(spank_t sp);      // remote_context.cc
Status RemoteExit(spank_t sp);          // remote_context.cc

// On the submitting side (srun, sbatch, salloc): resolves the user's
// options, the command line first, then BATON_* variables, then the values
// the callbacks saw (#SBATCH lines, options inherited from the batch job),
// then the plugstack.conf default, and writes the result into the
// environment as BATON_* variables, which the job (and slurmstepd) inherit.
Status ExportResolvedOptions();

// A failed Status through Slurm's logger (srun's stderr, slurmd's log).
void LogError(const Status& s);

}  // namespace baton::spank
