#include "base/launch/slurm_facts.h"

#include <charconv>

#include "base/launch/component.h"

namespace baton::launch {
namespace {

// Slurm's step id of the batch script (SLURM_BATCH_SCRIPT in slurm.h).
constexpr long kBatchStep = 0xfffffffbL;

Status Need(const Env& env, const char* name, std::string* value) {
  auto it = env.find(name);
  if (it == env.end() || it->second.empty())
    return Status::NotFound(kComponent, std::string(name) + " is not set (not inside a Slurm job?)");
  *value = it->second;
  return Status::OK();
}

Status NeedNumber(const Env& env, const char* name, long max, long* value) {
  std::string text;
  BATON_RETURN_IF_ERROR(Need(env, name, &text));
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *value);
  if (ec != std::errc() || end != text.data() + text.size() || *value < 0 || *value > max)
    return Status::InvalidArgument(kComponent, std::string(name) + "='" + text + "' is not a number in 0.." +
                                                   std::to_string(max));
  return Status::OK();
}

std::string Get(const Env& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() ? std::string() : it->second;
}

int IndexOf(const std::vector<std::string>& nodes, const std::string& node) {
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i] == node) return static_cast<int>(i);
  return -1;
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

std::string JobStepName(const StepInfo& info) {
  return info.step_id ? info.job_id + "." + std::to_string(*info.step_id) : info.job_id;
}

Status StepInfoFromEnvironment(const Env& env, SlurmQueries& queries, StepInfo* info) {
  StepInfo out;
  BATON_RETURN_IF_ERROR(Need(env, "SLURM_JOB_ID", &out.job_id));
  if (std::string restarts = Get(env, "SLURM_RESTART_COUNT"); !restarts.empty()) {
    long n = 0;
    BATON_RETURN_IF_ERROR(NeedNumber(env, "SLURM_RESTART_COUNT", 1 << 30, &n));
    out.restart_count = static_cast<int>(n);
  }
  out.node_gpus = SplitDeviceList(Get(env, "CUDA_VISIBLE_DEVICES"));

  long step = kBatchStep;
  if (!Get(env, "SLURM_STEP_ID").empty()) BATON_RETURN_IF_ERROR(NeedNumber(env, "SLURM_STEP_ID", 0xffffffffL, &step));

  if (step != kBatchStep) {
    out.step_id = step;
    const std::string job_step = JobStepName(out);
    std::string nodelist, map_text;
    BATON_RETURN_IF_ERROR(Need(env, "SLURM_STEP_NODELIST", &nodelist));
    std::vector<std::string> nodes;
    BATON_RETURN_IF_ERROR(queries.ExpandHostlist(nodelist, &nodes));
    if (Untag(Get(env, kTaskMapVar), job_step, &map_text)) {
      out.layout.nodes = nodes;
      BATON_RETURN_IF_ERROR(DecodeTaskMap(map_text, static_cast<int>(nodes.size()), &out.layout.task_node));
    } else {
      std::vector<std::string> layout_nodes;
      std::vector<std::vector<int>> tids;
      BATON_RETURN_IF_ERROR(queries.StepTasks(out.job_id, step, &layout_nodes, &tids));
      BATON_RETURN_IF_ERROR(LayoutFromNodeTasks(layout_nodes, tids, &out.layout));
    }
    long node_id = 0;
    BATON_RETURN_IF_ERROR(NeedNumber(env, "SLURM_NODEID", out.layout.num_nodes() - 1, &node_id));
    out.node_index = static_cast<int>(node_id);
    if (!Get(env, "SLURM_PROCID").empty()) {
      long rank = 0;
      BATON_RETURN_IF_ERROR(NeedNumber(env, "SLURM_PROCID", out.layout.num_tasks() - 1, &rank));
      out.rank = static_cast<int>(rank);
    }
    if (!Untag(Get(env, kMasterAddrVar), job_step, &out.master_addr))
      BATON_RETURN_IF_ERROR(queries.NodeAddress(out.layout.nodes[0], &out.master_addr));
  } else {
    // The batch script: the whole allocation, slots from the task counts
    // when the job asked for tasks, else from its CPUs.
    std::string nodelist, counts_text, self;
    BATON_RETURN_IF_ERROR(Need(env, "SLURM_JOB_NODELIST", &nodelist));
    std::vector<std::string> nodes;
    BATON_RETURN_IF_ERROR(queries.ExpandHostlist(nodelist, &nodes));
    const char* counts_var = Get(env, "SLURM_TASKS_PER_NODE").empty() ? "SLURM_JOB_CPUS_PER_NODE"
                                                                      : "SLURM_TASKS_PER_NODE";
    BATON_RETURN_IF_ERROR(Need(env, counts_var, &counts_text));
    std::vector<int> counts;
    BATON_RETURN_IF_ERROR(ParseTasksPerNode(counts_text, &counts).Annotate(counts_var));
    BATON_RETURN_IF_ERROR(LayoutFromCounts(nodes, counts, &out.layout).Annotate(counts_var));
    if (!Get(env, "SLURM_NODEID").empty()) {
      long node_id = 0;
      BATON_RETURN_IF_ERROR(NeedNumber(env, "SLURM_NODEID", out.layout.num_nodes() - 1, &node_id));
      out.node_index = static_cast<int>(node_id);
    } else {
      BATON_RETURN_IF_ERROR(Need(env, "SLURMD_NODENAME", &self));
      out.node_index = IndexOf(nodes, self);
      if (out.node_index < 0)
        return Status::InvalidArgument(kComponent, "SLURMD_NODENAME='" + self +
                                                       "' is not in SLURM_JOB_NODELIST='" + nodelist + "'");
    }
    BATON_RETURN_IF_ERROR(queries.NodeAddress(nodes[0], &out.master_addr));
  }
  *info = std::move(out);
  return Status::OK();
}

}  // namespace baton::launch
