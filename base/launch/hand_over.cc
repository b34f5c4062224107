#include "base/launch/hand_over.h"

#include "base/launch/component.h"
#include "base/launch/het_step.h"
#include "base/launch/step_layout.h"

namespace baton::launch {
namespace {

// `value` tagged, or "=ask" when the variable would pass the bound.
std::string Bounded(const std::string& job_step, const char* name, const std::string& value) {
  std::string tagged = Tag(job_step, value);
  if (std::string(name).size() + 1 + tagged.size() > kMaxHandOverBytes) return Tag(job_step, kAsk);
  return tagged;
}

}  // namespace

std::string Tag(const std::string& job_step, const std::string& value) { return job_step + ":" + value; }

bool Untag(const std::string& tagged, const std::string& job_step, std::string* value) {
  if (tagged.size() <= job_step.size() || tagged.compare(0, job_step.size(), job_step) != 0 ||
      tagged[job_step.size()] != ':')
    return false;
  *value = tagged.substr(job_step.size() + 1);
  return true;
}

const std::vector<HandOverOption>& HandOverOptions() {
  // Names under 75 characters (SPANK_OPTION_MAXLEN) that no other
  // plugin would take: Slurm finds a forwarded option by its name alone.
  static const std::vector<HandOverOption> options = {
      {kTaskMapVar, "baton-hand-over-task-map"},
      {kMasterAddrVar, "baton-hand-over-master-addr"},
      {kNodeAddrsVar, "baton-hand-over-node-addrs"},
      {kGpusPerNodeVar, "baton-hand-over-gpus-per-node"},
      {kHetComponentsVar, "baton-hand-over-het-components"},
  };
  return options;
}

const HandOverOption* HandOverOptionFor(const std::string& var) {
  for (const HandOverOption& o : HandOverOptions())
    if (var == o.var) return &o;
  return nullptr;
}

void AddHandOverFromOptions(const Env& from_options, Env* env) {
  for (const HandOverOption& o : HandOverOptions()) {
    auto it = from_options.find(o.var);
    if (it != from_options.end()) (*env)[o.var] = it->second;
  }
}

namespace {

// The variables for a step laid out as `nodes` and `tids` (the whole step,
// a heterogeneous one's components joined), tagged `job_step`. The GPUs
// per node are asked of `gpu_job` (none: not asked).
Status HandOverOfLayout(const std::string& job_step, std::vector<std::string> nodes,
                        const std::vector<std::vector<int>>& tids, HostfileFormat format,
                        const std::optional<std::string>& gpu_job, long step_id, SlurmQueries& queries,
                        EnvList* vars) {
  StepLayout layout;
  BATON_RETURN_IF_ERROR(LayoutFromNodeTasks(std::move(nodes), tids, &layout));
  if (layout.num_tasks() == 0)
    return Status::InvalidArgument(kComponent, "step " + job_step + ": Slurm's layout has no tasks");

  std::vector<std::string> addrs;
  BATON_RETURN_IF_ERROR(queries.NodeAddresses(layout.nodes, &addrs));
  std::string addr_list = kSameAsNames;
  if (addrs != layout.nodes) BATON_RETURN_IF_ERROR(queries.CompressHostlist(addrs, &addr_list));

  const std::optional<std::string> distribution = DistributionOf(layout);
  vars->clear();
  vars->emplace_back(kTaskMapVar, Bounded(job_step, kTaskMapVar, distribution ? *distribution : EncodeTaskMap(layout.task_node)));
  vars->emplace_back(kNodeAddrsVar, Bounded(job_step, kNodeAddrsVar, addr_list));
  vars->emplace_back(kMasterAddrVar, Tag(job_step, addrs[static_cast<size_t>(layout.MasterNode())]));
  if (format == HostfileFormat::kDeepSpeed && gpu_job) {
    std::optional<int> gpus;
    BATON_RETURN_IF_ERROR(queries.GpusPerNode(*gpu_job, step_id, &gpus));
    vars->emplace_back(kGpusPerNodeVar, Tag(job_step, gpus ? std::to_string(*gpus) : kNoGpus));
  }
  return Status::OK();
}

}  // namespace

Status SrunHandOver(const std::string& job_id, long step_id, HostfileFormat format, SlurmQueries& queries,
                    EnvList* vars) {
  std::vector<std::string> nodes;
  std::vector<std::vector<int>> tids;
  BATON_RETURN_IF_ERROR(queries.StepTasks(job_id, step_id, &nodes, &tids));
  return HandOverOfLayout(job_id + "." + std::to_string(step_id), std::move(nodes), tids, format, job_id, step_id,
                          queries, vars);
}

Status SrunHetHandOver(const std::vector<std::string>& jobs, const std::string& own_job, long step_id,
                       HostfileFormat format, SlurmQueries& queries, EnvList* vars) {
  std::vector<ComponentLayout> components;
  BATON_RETURN_IF_ERROR(StepComponents(jobs, own_job, step_id, queries, &components));
  std::vector<HetComponent> counts;
  std::vector<std::string> nodes;
  std::vector<std::vector<int>> tids;
  JoinComponents(components, &nodes, &tids);
  for (const ComponentLayout& c : components) counts.push_back({c.job, static_cast<int>(c.nodes.size())});
  std::string hostlist;
  BATON_RETURN_IF_ERROR(queries.CompressHostlist(nodes, &hostlist));
  const std::string het_value = EncodeHetComponents(counts, hostlist);
  // One component (a plain srun in the batch script, --het-group=1): an
  // ordinary step of that component's job, which its slurmstepd knows as
  // its own (S_JOB_ID).
  if (components.size() == 1) {
    BATON_RETURN_IF_ERROR(HandOverOfLayout(components[0].job + "." + std::to_string(step_id), std::move(nodes), tids,
                                           format, components[0].job, step_id, queries, vars));
  } else {
    // The components may hold different GPUs per node: DeepSpeed's slots
    // are then the tasks (ResolveHostfileGpus), nothing is asked.
    BATON_RETURN_IF_ERROR(HandOverOfLayout(jobs[0] + "." + std::to_string(step_id), std::move(nodes), tids, format,
                                           std::nullopt, step_id, queries, vars));
  }
  vars->emplace_back(kHetComponentsVar, Bounded(jobs[0] + "." + std::to_string(step_id), kHetComponentsVar, het_value));
  return Status::OK();
}

}  // namespace baton::launch
