// What the plugin's srun side learns from Slurm once per step and hands to
// every slurmstepd of the step, so that no slurmstepd and no task has to
// ask the controller again. Two routes carry it: the values of hidden
// SPANK options of the plugin, which Slurm puts in the launch request
// whatever --export says (pyxis passes its options the same way), and
// srun's environment (BATON_STEP_*), which the tasks inherit unless
// --export=NONE or --export=<list> drops it, kept for what reads it there
// (`baton env`, a nested srun's check of its parent's tag).
//
// Each value is tagged with the job.step it belongs to, so that a nested
// srun never trusts its parent's, and bounded: what Slurm already gives
// each task (the node list, the tasks per node, the task's own ids) is
// never repeated, and a value that would still grow with the step (the
// task map of an irregular layout, the addresses of nodes numbered
// without a pattern) is replaced by "=ask" past kMaxHandOverBytes. Every
// execve of the step carries these variables: Linux refuses a single
// variable over 128 KiB (E2BIG), and the whole environment counts against
// ARG_MAX.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "base/launch/launch_env.h"
#include "base/launch/slurm_facts.h"
#include "base/launch/slurm_queries.h"
#include "baton/status.h"

namespace baton::launch {

// "17.0:cyclic", "17.0:block", "17.0:plane=4" (rebuilt from
// SLURM_STEP_TASKS_PER_NODE), "17.0:1,0*2,2" (the map itself), "17.0:=ask".
inline constexpr const char* kTaskMapVar = "BATON_STEP_TASK_MAP";
// "17.0:10.0.0.12": the address of rank 0's node.
inline constexpr const char* kMasterAddrVar = "BATON_STEP_MASTER_ADDR";
// "17.0:=names" (every NodeAddr is the node name), "17.0:10.0.0.[11-14]"
// (the addresses in node order), "17.0:=ask".
inline constexpr const char* kNodeAddrsVar = "BATON_STEP_NODE_ADDRS";

// "17.0:4": the GPUs per node (DeepSpeed's slots), "17.0:=none" when the
// request is not per node. Only for --baton-hostfile-format=deepspeed.
inline constexpr const char* kGpusPerNodeVar = "BATON_STEP_GPUS_PER_NODE";

// "17:61234": the port the batch script's slurmstepd claimed on its node
// (port_claim.h), set in the batch script for `baton env` there.
inline constexpr const char* kAllocationPortVar = "BATON_ALLOCATION_PORT";

inline constexpr size_t kMaxHandOverBytes = 16 * 1024;
inline constexpr const char* kAsk = "=ask";
inline constexpr const char* kSameAsNames = "=names";
inline constexpr const char* kNoGpus = "=none";

// "17.0:" + value; Untag gives the value if the tag matches `job_step`.
std::string Tag(const std::string& job_step, const std::string& value);
bool Untag(const std::string& tagged, const std::string& job_step, std::string* value);

// The hidden SPANK option that carries each variable above. Registered in
// slurmstepd only (remote context): srun must not offer them to users,
// and a registered option srun has not seen cannot be given a value
// later (spank/hand_over_options.cc).
struct HandOverOption {
  const char* var;     // kTaskMapVar, ...
  const char* option;  // its option's name, "baton-hand-over-task-map", ...
};
const std::vector<HandOverOption>& HandOverOptions();

// The option for `var`; none for a variable the hand-over does not carry.
const HandOverOption* HandOverOptionFor(const std::string& var);

// Adds to `env` (the job's variables, as slurmstepd read them) what the
// options carried (`from_options`: variable -> value). An option's value
// replaces the variable's: both are tagged with their step, and the
// launch request is the step's own, where the environment may be an
// enclosing step's.
void AddHandOverFromOptions(const Env& from_options, Env* env);

// srun's side: asks Slurm for the step's layout and its nodes' addresses
// (one query each), and for a deepspeed hostfile its GPUs per node, and
// returns the variables above.
Status SrunHandOver(const std::string& job_id, long step_id, HostfileFormat format, SlurmQueries& queries,
                    EnvList* vars);

// The same for a step of a heterogeneous job (`jobs`: its component job
// ids, the leader first; `own_job`: srun's S_JOB_ID, the component whose
// launch ran local_user_init). srun runs local_user_init once for all the
// step's components (srun.c, _launch_one_app: "Run pre-launch once for
// entire hetjob") and every component's launch request then carries the
// options it set (slurm_step_launch calls spank_set_remote_options, whose
// option cache is the process's). The hand-over is the whole step's,
// tagged with the leader's job id, plus BATON_STEP_HET_COMPONENTS
// (het_step.h); one StepTasks question per component of the job and one
// NodeAddresses for all nodes. A step of one component is that
// component's ordinary step, tagged with its own job id.
Status SrunHetHandOver(const std::vector<std::string>& jobs, const std::string& own_job, long step_id,
                       HostfileFormat format, SlurmQueries& queries, EnvList* vars);

}  // namespace baton::launch
