// srun (local context): checks the options before anything runs, then asks
// Slurm once per step for what every task needs to know about the others
// (the task-to-node map and the first node's address) and hands it to the
// tasks through srun's environment.
#include "spank/spank_api.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <tuple>

#include "base/launch/component.h"
#include "base/launch/slurm_facts.h"
#include "spank/plugin.h"

namespace baton::spank {
namespace {

bool Enabled() {
  const char* v = std::getenv("BATON_ENABLE");
  return v != nullptr && std::string(v) == "on";
}

Status SetEnv(const std::string& name, const std::string& value) {
  if (setenv(name.c_str(), value.c_str(), 1) != 0)
    return Status::IOError(launch::kComponent, "setenv(" + name + "): " + std::strerror(errno));
  return Status::OK();
}

}  // namespace

// srun's environment becomes the tasks' environment: slurmstepd reads the
// resolved choice from there, whatever its source was.
Status LocalInitPostOpt(spank_t) { return ExportResolvedOptions(); }

Status LocalUserInit(spank_t sp) {
  if (!Enabled()) return Status::OK();
  uint32_t job = 0, step = 0;
  for (auto [item, name, value] : {std::tuple{S_JOB_ID, "S_JOB_ID", &job}, std::tuple{S_JOB_STEPID, "S_JOB_STEPID", &step}}) {
    spank_err_t rc = spank_get_item(sp, item, value);
    if (rc != ESPANK_SUCCESS)
      return Status::Internal(launch::kComponent, std::string("srun: spank_get_item(") + name + "): " + spank_strerror(rc));
  }
  const std::string job_id = std::to_string(job);
  const std::string job_step = job_id + "." + std::to_string(step);

  // One query for the layout and one for the address, here in srun rather
  // than in every slurmstepd: the launch benchmark counts what they cost.
  std::vector<std::string> nodes;
  std::vector<std::vector<int>> tids;
  BATON_RETURN_IF_ERROR(launch::Libslurm().StepTasks(job_id, step, &nodes, &tids));
  launch::StepLayout layout;
  BATON_RETURN_IF_ERROR(launch::LayoutFromNodeTasks(nodes, tids, &layout));
  std::string addr;
  BATON_RETURN_IF_ERROR(launch::Libslurm().NodeAddress(layout.nodes[0], &addr));

  BATON_RETURN_IF_ERROR(SetEnv(launch::kTaskMapVar, launch::Tag(job_step, launch::EncodeTaskMap(layout.task_node))));
  return SetEnv(launch::kMasterAddrVar, launch::Tag(job_step, addr));
}

}  // namespace baton::spank
