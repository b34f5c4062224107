// srun (local context): checks the options before anything runs, then asks
// Slurm once per step (in a heterogeneous job, once per component for its
// layout) for what every task needs to know about the others
// and Slurm does not tell each task (launch::SrunHandOver: how the tasks
// are laid out, rank 0's address, the nodes' addresses) and hands it to
// every slurmstepd in the launch request, as option values
// (hand_over_options.cc), and to the tasks through srun's environment.
#include "spank/spank_api.h"

#include <chrono>
#include <cstdlib>
#include <tuple>

#include "base/launch/component.h"
#include "base/launch/hand_over.h"
#include "base/launch/slurm_facts.h"
#include "baton/identity.h"
#include "spank/plugin.h"

namespace baton::spank {

// srun's environment becomes the tasks' environment: slurmstepd reads the
// resolved choice from there, whatever its source was.
Status LocalInitPostOpt(spank_t) { return ExportResolvedOptions(); }

Status LocalUserInit(spank_t sp) {
  // ExportResolvedOptions wrote the resolved choice here in init_post_opt.
  const char* enabled = std::getenv("BATON_ENABLE");
  if (enabled == nullptr || std::string(enabled) != "on") return Status::OK();
  uint32_t job = 0, step = 0;
  for (auto [item, name, value] : {std::tuple{S_JOB_ID, "S_JOB_ID", &job}, std::tuple{S_JOB_STEPID, "S_JOB_STEPID", &step}}) {
    spank_err_t rc = spank_get_item(sp, item, value);
    if (rc != ESPANK_SUCCESS)
      return Status::Internal(launch::kComponent, std::string("srun: spank_get_item(") + name + "): " + spank_strerror(rc));
  }
  std::vector<std::string> components;
  BATON_RETURN_IF_ERROR(launch::HetComponentJobs(ProcessEnvironment(), &components));
  launch::LaunchOptions resolved;
  BATON_RETURN_IF_ERROR(launch::OptionsFromEnvironment(ProcessEnvironment(), &resolved));
  const launch::HostfileFormat format = resolved.hostfile.value_or(launch::HostfileFormat::kOpenMpi);
  launch::EnvList vars;
  // Bounded like slurmstepd's questions: a controller failing over fails
  // the srun naming the question rather than holding it.
  auto slurm = launch::WithDeadline(launch::Libslurm(), std::chrono::seconds(10),
                                    "srun's hand-over to the step's tasks (spank_baton)");
  // A step of a heterogeneous job: srun runs local_user_init once for all
  // its components, and every component's launch request carries the
  // options set here (hand_over.h, SrunHetHandOver).
  if (components.empty()) {
    BATON_RETURN_IF_ERROR(launch::SrunHandOver(std::to_string(job), step, format, *slurm, &vars));
  } else {
    BATON_RETURN_IF_ERROR(launch::SrunHetHandOver(components, std::to_string(job), step, format, *slurm, &vars));
  }
  for (const auto& [name, value] : vars) BATON_RETURN_IF_ERROR(SetProcessEnv(name, value));
  return ForwardHandOver(sp, vars);
}

}  // namespace baton::spank
