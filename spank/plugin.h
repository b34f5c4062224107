// State and helpers shared by the per-context files of spank_baton.so.
//
// One plugin instance lives in each process that loads it (srun, sbatch,
// salloc, slurmstepd); slurmstepd forks the tasks after user_init, so what
// user_init computes is inherited by every task_init.
#pragma once

#include "spank/spank_api.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/launch/safe_dir.h"
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
  // Remote: srun's hand-over as slurmstepd replayed its options
  // (hand_over_options.cc), variable -> tagged value.
  std::map<std::string, std::string> hand_over;

  // Remote context, filled by user_init for task_init and exit.
  bool active = false;
  // user_init's failure. Slurm starts no task when a required plugin's
  // user_init fails, and srun then exits 0 without a word; user_init
  // therefore keeps the failure and every task_init returns it, which
  // fails each task (exit 1) with the message on the user's terminal.
  Status init_error;
  launch::StepInfo step;
  launch::LaunchOptions options;
  launch::OpenDir hostfile_dir;  // made by user_init; removed at exit
  std::string hostfile_text;     // its content, for task_init (hostfile_view.h)
  // The job's node-local directory (local_root/<uid>/<jobid>), made by
  // init_post_opt as root when the site set local_root and the user gave
  // no --baton-local-dir; handed to the tasks as BATON_LOCAL_DIR. Never
  // removed by the step: the job epilog's sweep removes it once the job
  // has ended for good.
  std::string job_local_dir;
  uid_t uid = 0;
  gid_t gid = 0;
  // The batch script's MASTER_PORT, claimed by init_post_opt on this node
  // and held through port_fd until exit (port_claim.h).
  std::optional<int> allocation_port;
  int port_fd = -1;
};

PluginState& State();

// Registers the user options (in every context, so that sbatch, srun and
// slurmstepd all know them).
Status RegisterOptions(spank_t sp);

// hand_over_options.cc: srun's hand-over as hidden SPANK options. Register
// (slurmstepd only) and Forward (srun's local_user_init: the variables of
// launch::SrunHandOver become option values Slurm sends to every node).
Status RegisterHandOverOptions(spank_t sp);
Status ForwardHandOver(spank_t sp, const launch::EnvList& vars);

// Parses the plugstack.conf arguments into State().config.
Status ParseArguments(int ac, char** av);

// Per-context work, one file each. Return a Status; dispatch.cc logs a
// failure and turns it into the return code Slurm expects.
Status LocalInitPostOpt(spank_t sp);    // local_context.cc (srun)
Status LocalUserInit(spank_t sp);       // local_context.cc
Status AllocatorInitPostOpt(spank_t sp);  // allocator_context.cc (sbatch, salloc)
Status RemoteInitPostOpt(spank_t sp);   // remote_context.cc (slurmstepd, as root)
Status RemoteUserInit(spank_t sp);      // remote_context.cc (slurmstepd)
Status RemoteTaskInit(spank_t sp);      // remote_context.cc
Status RemoteExit(spank_t sp);          // remote_context.cc
// node_context.cc (the job epilog and slurmd's start, as root): sweep the
// node-local root. Never fail (a failed epilog drains the node, a failed
// slurmd init stops slurmd): problems are logged.
Status JobEpilog(spank_t sp, int ac, char** av);
Status SlurmdInit(int ac, char** av);

// On the submitting side (srun, sbatch, salloc): resolves the user's
// options (launch::ResolveSubmitOptions) and writes the result into the
// environment as BATON_* variables, which the job (and slurmstepd) inherit.
Status ExportResolvedOptions();

// setenv(3) in the plugin's own process (srun, sbatch, salloc), as a Status.
Status SetProcessEnv(const std::string& name, const std::string& value);

// A failed Status through Slurm's logger (srun's stderr, slurmd's log, or
// in task_init the task's stderr, which is the user's terminal).
void LogError(const Status& s);

}  // namespace baton::spank
