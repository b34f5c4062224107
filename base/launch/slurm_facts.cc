#include "base/launch/slurm_facts.h"

#include <algorithm>
#include <set>

#include "base/launch/component.h"
#include "base/launch/decimal.h"
#include "base/launch/hand_over.h"
#include "base/launch/het_step.h"
#include "base/launch/quote.h"

namespace baton::launch {
namespace {

// Slurm's special step ids (slurm.h; slurm_queries.cc checks them against it).
constexpr uint32_t kMaxNormalStep = 0xfffffff0u;
constexpr uint32_t kInteractiveStep = 0xfffffffau;
constexpr uint32_t kBatchStep = 0xfffffffbu;

std::string Get(const Env& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() ? std::string() : it->second;
}

Status Need(const Env& env, const char* name, std::string* value) {
  auto it = env.find(name);
  if (it == env.end() || it->second.empty())
    return Status::NotFound(kComponent, std::string(name) + " is not set (not inside a Slurm job?)");
  *value = it->second;
  return Status::OK();
}

Status NeedNumber(const Env& env, const char* name, long long lo, long long hi, long long* value) {
  std::string text;
  BATON_RETURN_IF_ERROR(Need(env, name, &text));
  if (!ParseDecimal(text, lo, hi, value))
    return Status::InvalidArgument(kComponent, std::string(name) + "=" + Quoted(text) + " is not a number in " +
                                                   std::to_string(lo) + ".." + std::to_string(hi));
  return Status::OK();
}

// A host name or address that is about to be written into a hostfile line
// or the environment: one word, no control character, nothing a hostfile
// grammar or a host list reads as syntax.
Status CheckHost(const std::string& source, const std::string& host) {
  if (host.empty() || HasControlOrBlank(host) || host.find_first_of("#,[]=") != std::string::npos)
    return Status::InvalidArgument(kComponent, source + ": " + Quoted(host) +
                                                   " is not a host name (control characters, blanks and #,[]= are refused)");
  return Status::OK();
}

// A node name: a host name, and never a ':' (which an address may hold):
// the mpich format writes "name:N", and Hydra cuts at the first ':', so
// "a:99" would come out as "a:99:2", 99 processes on host "a".
Status CheckNodeName(const std::string& source, const std::string& node) {
  BATON_RETURN_IF_ERROR(CheckHost(source, node));
  if (node.find(':') != std::string::npos)
    return Status::InvalidArgument(kComponent, source + ": " + Quoted(node) + " is not a node name (it holds a ':')");
  return Status::OK();
}

// The hosts of `list_var`, at most `count_var` of them when Slurm stated
// the count (and then exactly that many), else at most kMaxNodes.
Status Hosts(const Env& env, const char* list_var, std::vector<const char*> count_vars, SlurmQueries& queries,
             std::vector<std::string>* hosts) {
  std::string list;
  BATON_RETURN_IF_ERROR(Need(env, list_var, &list));
  long long expected = 0;
  const char* count_var = nullptr;
  for (const char* v : count_vars) {
    if (Get(env, v).empty()) continue;
    BATON_RETURN_IF_ERROR(NeedNumber(env, v, 1, static_cast<long long>(kMaxNodes), &expected));
    count_var = v;
    break;
  }
  const std::string what = std::string(list_var) + "=" + Quoted(list);
  // Slurm never writes a blank or a control character into a node list;
  // libslurm would read them as separators and make hosts of the rest.
  if (HasControlOrBlank(list))
    return Status::InvalidArgument(kComponent, what + " holds a blank or a control character");
  const size_t max = count_var ? static_cast<size_t>(expected) : kMaxNodes;
  Status s = queries.ExpandHostlist(list, max, hosts);
  if (!s.ok()) {
    return s.Annotate(what + (count_var ? " (" + std::string(count_var) + "=" + std::to_string(expected) + ")"
                                        : " (at most " + std::to_string(kMaxNodes) + " nodes)"));
  }
  if (count_var && hosts->size() != static_cast<size_t>(expected)) {
    return Status::InvalidArgument(kComponent, what + " names " + std::to_string(hosts->size()) + " hosts but " +
                                                   count_var + "=" + std::to_string(expected));
  }
  std::set<std::string_view> seen;
  for (const std::string& h : *hosts) {
    BATON_RETURN_IF_ERROR(CheckNodeName(what, h));
    if (!seen.insert(h).second) return Status::InvalidArgument(kComponent, what + " names " + Quoted(h) + " twice");
  }
  return Status::OK();
}

// `base` itself for an ordinary job, else component k's copy of it
// (base_HET_GROUP_k, or base_PACK_GROUP_k as Slurm 22.05 also writes).
std::string HetVar(const Env& env, const std::string& base, bool ordinary, size_t k) {
  if (ordinary) return base;
  const std::string het = base + "_HET_GROUP_" + std::to_string(k);
  return Get(env, het.c_str()).empty() ? base + "_PACK_GROUP_" + std::to_string(k) : het;
}

int IndexOf(const std::vector<std::string>& nodes, const std::string& node) {
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i] == node) return static_cast<int>(i);
  return -1;
}

Status MasterAddress(SlurmQueries& queries, const StepLayout& layout, std::string* addr) {
  std::vector<std::string> addrs;
  const std::string& node = layout.nodes[static_cast<size_t>(layout.MasterNode())];
  BATON_RETURN_IF_ERROR(queries.NodeAddresses({node}, &addrs));
  BATON_RETURN_IF_ERROR(CheckHost("the NodeAddr of " + node, addrs.at(0)));
  *addr = addrs[0];
  return Status::OK();
}

// A heterogeneous step (srun ... : ..., or srun --het-group over an
// sbatch hetjob) is one world: its tasks see the whole step's node list,
// tasks per node, SLURM_PROCID and SLURM_NODEID, but each component is its
// own job to Slurm, with its own step layout. Its layout is the
// components' in order: their nodes one after the other, their task ids
// shifted by the tasks before them.
struct HetStep {
  std::vector<std::string> jobs;     // each component's job id, component 0 (the leader) first
  std::vector<int> first_node;       // of each component, in the whole step
  std::vector<int> first_task;
};

Status HetLayout(const HetStep& het, long step, std::vector<std::string> nodes, SlurmQueries& queries,
                 StepLayout* layout, HetStep* placed) {
  *placed = het;
  placed->first_node.clear();
  placed->first_task.clear();
  std::vector<ComponentLayout> components;
  int node_count = 0, tasks = 0;
  for (const std::string& job : het.jobs) {
    ComponentLayout c;
    c.job = job;
    BATON_RETURN_IF_ERROR(queries.StepTasks(job, step, &c.nodes, &c.tids)
                              .Annotate("component job " + job + " of heterogeneous step " + het.jobs[0] + "." +
                                        std::to_string(step)));
    placed->first_node.push_back(node_count);
    placed->first_task.push_back(tasks);
    node_count += static_cast<int>(c.nodes.size());
    for (const auto& t : c.tids) tasks += static_cast<int>(t.size());
    components.push_back(std::move(c));
  }
  std::vector<std::string> all_nodes;
  std::vector<std::vector<int>> all_tids;
  JoinComponents(components, &all_nodes, &all_tids);
  // The components' nodes in order must be the node list every task sees:
  // Slurm lets components share a node only where a site allows it, and
  // then one node would hold two node ranks.
  if (all_nodes != nodes) {
    std::string list;
    for (const std::string& n : all_nodes) list += (list.empty() ? "" : ",") + n;
    return Status::InvalidArgument(kComponent, "heterogeneous step " + het.jobs[0] + "." + std::to_string(step) +
                                                   ": its components' nodes in order (" + list +
                                                   ") are not SLURM_STEP_NODELIST's; baton makes one world only of "
                                                   "components on distinct nodes");
  }
  return LayoutFromNodeTasks(std::move(all_nodes), all_tids, layout);
}

// The layout of an ordinary step: from the hand-over when srun's side of
// the plugin gave one for this very step, else from Slurm.
Status StepLayoutOf(const Env& env, const std::string& job_id, long step, std::vector<std::string> nodes,
                    SlurmQueries& queries, StepLayout* layout) {
  const std::string job_step = job_id + "." + std::to_string(step);
  const std::string tagged = Get(env, kTaskMapVar);
  std::string map;
  if (!Untag(tagged, job_step, &map) || map == kAsk) {
    std::vector<std::string> layout_nodes;
    std::vector<std::vector<int>> tids;
    BATON_RETURN_IF_ERROR(queries.StepTasks(job_id, step, &layout_nodes, &tids));
    return LayoutFromNodeTasks(std::move(layout_nodes), tids, layout);
  }
  const std::string what = std::string(kTaskMapVar) + "=" + Quoted(tagged);
  if (map.empty() || (map[0] >= '0' && map[0] <= '9')) {
    BATON_RETURN_IF_ERROR(DecodeTaskMap(map, static_cast<int>(nodes.size()), &layout->task_node).Annotate(what));
    layout->nodes = std::move(nodes);
    // The map must place as many tasks on each node as Slurm says the step
    // has there: a map of another step (or a hand-made one) would give
    // WORLD_SIZE and slots Slurm never started.
    const std::string counts_text = Get(env, "SLURM_STEP_TASKS_PER_NODE");
    if (!counts_text.empty()) {
      std::vector<int> counts;
      BATON_RETURN_IF_ERROR(ParseTasksPerNode(counts_text, &counts).Annotate("SLURM_STEP_TASKS_PER_NODE"));
      const std::vector<int> mapped = layout->TasksPerNode();
      if (counts != mapped) {
        const size_t n = std::min(counts.size(), mapped.size());
        size_t i = 0;
        while (i < n && counts[i] == mapped[i]) ++i;
        const std::string where =
            i < n ? layout->nodes[i] + ": " + std::to_string(mapped[i]) + " tasks against " + std::to_string(counts[i])
                  : std::to_string(mapped.size()) + " nodes against " + std::to_string(counts.size());
        return Status::InvalidArgument(kComponent, what + " disagrees with SLURM_STEP_TASKS_PER_NODE=" +
                                                       Quoted(counts_text) + " (" + where + ", " +
                                                       std::to_string(layout->num_tasks()) + " tasks in all)");
      }
    }
    return Status::OK();
  }
  std::string counts_text;
  BATON_RETURN_IF_ERROR(Need(env, "SLURM_STEP_TASKS_PER_NODE", &counts_text).Annotate(what + " needs it"));
  std::vector<int> counts;
  BATON_RETURN_IF_ERROR(ParseTasksPerNode(counts_text, &counts).Annotate("SLURM_STEP_TASKS_PER_NODE"));
  return LayoutFromDistribution(std::move(nodes), counts, map, layout)
      .Annotate(what + " with SLURM_STEP_TASKS_PER_NODE=" + Quoted(counts_text));
}

// Whether the hand-over holds `var` for `job_step` (not "=ask").
bool Handed(const Env& env, const char* var, const std::string& job_step) {
  std::string value;
  return Untag(Get(env, var), job_step, &value) && value != kAsk;
}

// Whether srun's hand-over speaks for the step of `info`: always for an
// ordinary step (each variable is tagged with it), for a heterogeneous one
// only with its components (het_step.h).
bool HandOverApplies(const Env& env, const StepInfo& info) {
  return !info.heterogeneous || Handed(env, kHetComponentsVar, JobStepName(info));
}

// The step's components as srun handed them over (`jobs`: the job's
// component job ids, the leader first); none when the hand-over holds
// none for this step. They must be the job's, and their nodes in order
// the step's node list (`nodes`, SLURM_STEP_NODELIST).
Status HandedComponents(const Env& env, const std::vector<std::string>& jobs, long step,
                        const std::vector<std::string>& nodes, SlurmQueries& queries,
                        std::vector<HetComponent>* handed) {
  handed->clear();
  const std::string job_step = jobs[0] + "." + std::to_string(step);
  const std::string tagged = Get(env, kHetComponentsVar);
  std::string value;
  if (!Untag(tagged, job_step, &value) || value == kAsk) return Status::OK();
  const std::string source = std::string(kHetComponentsVar) + "=" + Quoted(tagged);
  std::vector<std::string> order;
  BATON_RETURN_IF_ERROR(ParseHetComponents(source, value, queries, handed, &order));
  for (const HetComponent& c : *handed)
    if (std::find(jobs.begin(), jobs.end(), c.job) == jobs.end())
      return Status::InvalidArgument(kComponent, source + ": job " + c.job + " is not a component of job " + jobs[0]);
  if (order != nodes)
    return Status::InvalidArgument(kComponent, "heterogeneous step " + job_step + ": its components' nodes in order (" +
                                                   source + ") are not SLURM_STEP_NODELIST's (" +
                                                   Quoted(Get(env, "SLURM_STEP_NODELIST")) +
                                                   "); baton makes one world only of components on distinct nodes, "
                                                   "in Slurm's node order");
  return Status::OK();
}

}  // namespace

Status HetComponentJobs(const Env& env, std::vector<std::string>* jobs) {
  jobs->clear();
  const char* size_var = !Get(env, "SLURM_HET_SIZE").empty() ? "SLURM_HET_SIZE"
                         : !Get(env, "SLURM_PACK_SIZE").empty() ? "SLURM_PACK_SIZE"
                                                                : nullptr;
  if (size_var == nullptr) return Status::OK();
  long long size = 0;
  BATON_RETURN_IF_ERROR(NeedNumber(env, size_var, 1, kMaxHetComponents, &size));
  if (size == 1) return Status::OK();
  for (long long k = 0; k < size; ++k) {
    // Slurm 22.05 writes SLURM_JOB_ID_PACK_GROUP_k; later releases _HET_GROUP_k.
    const std::string het_name = "SLURM_JOB_ID_HET_GROUP_" + std::to_string(k);
    const std::string pack_name = "SLURM_JOB_ID_PACK_GROUP_" + std::to_string(k);
    const std::string& name = Get(env, het_name.c_str()).empty() ? pack_name : het_name;
    long long job = 0;
    std::string text;
    BATON_RETURN_IF_ERROR(Need(env, name.c_str(), &text).Annotate(std::string(size_var) + "=" + std::to_string(size)));
    BATON_RETURN_IF_ERROR(NeedNumber(env, name.c_str(), 1, 0xffffffffLL, &job));
    jobs->push_back(std::to_string(job));
  }
  return Status::OK();
}

StepKind KindOfStep(uint32_t step_id) {
  if (step_id <= kMaxNormalStep) return StepKind::kTasks;
  if (step_id == kBatchStep || step_id == kInteractiveStep) return StepKind::kAllocation;
  return StepKind::kNone;
}

std::string StepName(uint32_t step_id) {
  if (step_id == kBatchStep) return "batch";
  if (step_id == kInteractiveStep) return "interactive";
  return std::to_string(step_id);
}

std::string JobStepName(const StepInfo& info) {
  return info.step_id ? info.job_id + "." + std::to_string(*info.step_id) : info.job_id;
}

Status ParsePortList(const std::string& name, const std::string& text, std::vector<int>* ports) {
  ports->clear();
  auto bad = [&] {
    return Status::InvalidArgument(kComponent, name + "=" + Quoted(text) + " is not a list of ports (\"12000-12003\")");
  };
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string_view item = std::string_view(text).substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t dash = item.find('-');
    long long lo = 0, hi = 0;
    if (!ParseDecimal(item.substr(0, dash), 1, 65535, &lo)) return bad();
    hi = lo;
    if (dash != std::string_view::npos && (!ParseDecimal(item.substr(dash + 1), lo, 65535, &hi))) return bad();
    if (ports->size() + static_cast<size_t>(hi - lo + 1) > 65535) return bad();
    for (long long p = lo; p <= hi; ++p) ports->push_back(static_cast<int>(p));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return Status::OK();
}

Status ParseGpuCount(const std::string& source, const std::string& text, bool tres, std::optional<int>* gpus) {
  gpus->reset();
  long long total = 0;
  bool any = false;
  size_t start = 0;
  while (start <= text.size() && !text.empty()) {
    // Items are separated by "," (or ";" in Slurm's TRES lists).
    size_t end = text.find_first_of(",;", start);
    std::string item = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    start = end == std::string::npos ? text.size() + 1 : end + 1;
    if (tres) {
      // "gres:gpu:2", "gres:gpu:a100:2", "gres/gpu:2"; other TRES are not GPUs.
      if (item.rfind("gres:gpu", 0) != 0 && item.rfind("gres/gpu", 0) != 0) continue;
      item = item.substr(8);
      if (item.empty() || item[0] != ':') continue;  // "gres:gpumem..." is not a GPU count
    }
    const size_t colon = item.rfind(':');
    const std::string count = colon == std::string::npos ? item : item.substr(colon + 1);
    long long n = 0;
    if (!ParseDecimal(count, 0, 1 << 16, &n))
      return Status::InvalidArgument(kComponent, source + "=" + Quoted(text) + ": " + Quoted(item) +
                                                     " does not end in a GPU count");
    total += n;
    any = true;
  }
  if (any && total > 0) *gpus = static_cast<int>(total);
  return Status::OK();
}

Status GpusPerNodeFromEnvironment(const Env& env, std::optional<int>* gpus) {
  gpus->reset();
  BATON_RETURN_IF_ERROR(ParseGpuCount("SLURM_GPUS_PER_NODE", Get(env, "SLURM_GPUS_PER_NODE"), false, gpus));
  if (*gpus) return Status::OK();
  return ParseGpuCount("SLURM_TRES_PER_NODE", Get(env, "SLURM_TRES_PER_NODE"), true, gpus);
}

Status ResolveHostfileGpus(const Env& env, SlurmQueries& queries, StepInfo* info) {
  if (info->gpus_per_node) return Status::OK();  // the job's own variable said
  const std::string tagged = Get(env, kGpusPerNodeVar);
  std::string value;
  // A heterogeneous step's components may hold different GPUs per node:
  // DeepSpeed's slots are then its tasks.
  if (info->heterogeneous) return Status::OK();
  if (info->step_id && Untag(tagged, JobStepName(*info), &value)) {
    if (value == kNoGpus) return Status::OK();
    long long n = 0;
    if (!ParseDecimal(value, 1, 1 << 16, &n))
      return Status::InvalidArgument(kComponent, std::string(kGpusPerNodeVar) + "=" + Quoted(tagged) +
                                                     " is not a GPU count");
    info->gpus_per_node = static_cast<int>(n);
    return Status::OK();
  }
  return queries.GpusPerNode(info->job_id, info->step_id, &info->gpus_per_node);
}

Status TaskGpusFromVariables(const std::optional<std::string>& cuda_visible_devices,
                             const std::optional<std::string>& gpus_on_node, StepInfo* info) {
  info->gpus_on_node.reset();
  if (gpus_on_node) {
    long long n = 0;
    if (!ParseDecimal(*gpus_on_node, 0, 1 << 16, &n))
      return Status::InvalidArgument(kComponent, "SLURM_GPUS_ON_NODE=" + Quoted(*gpus_on_node) +
                                                     " is not a GPU count");
    info->gpus_on_node = static_cast<int>(n);
  }
  info->node_gpus = TaskGpus(cuda_visible_devices, info->gpus_on_node);
  return Status::OK();
}

Status StepInfoFromEnvironment(const Env& env, SlurmQueries& queries, StepInfo* info) {
  StepInfo out;
  long long job = 0;
  BATON_RETURN_IF_ERROR(NeedNumber(env, "SLURM_JOB_ID", 1, 0xffffffffLL, &job));
  out.job_id = std::to_string(job);
  if (!Get(env, "SLURM_RESTART_COUNT").empty()) {
    long long n = 0;
    BATON_RETURN_IF_ERROR(NeedNumber(env, "SLURM_RESTART_COUNT", 0, 1 << 30, &n));
    out.restart_count = static_cast<int>(n);
  }
  auto cvd = env.find("CUDA_VISIBLE_DEVICES");
  const std::optional<std::string> devices =
      cvd == env.end() ? std::nullopt : std::optional<std::string>(cvd->second);
  const std::string on_node = Get(env, "SLURM_GPUS_ON_NODE");
  BATON_RETURN_IF_ERROR(TaskGpusFromVariables(devices, on_node.empty() ? std::nullopt : std::optional(on_node), &out));
  BATON_RETURN_IF_ERROR(GpusPerNodeFromEnvironment(env, &out.gpus_per_node));

  long long step = kBatchStep;
  if (!Get(env, "SLURM_STEP_ID").empty()) BATON_RETURN_IF_ERROR(NeedNumber(env, "SLURM_STEP_ID", 0, 0xffffffffLL, &step));
  const StepKind kind = KindOfStep(static_cast<uint32_t>(step));
  if (kind == StepKind::kNone) {
    return Status::InvalidArgument(kComponent, "SLURM_STEP_ID=" + std::to_string(step) +
                                                   " is a step that runs none of the user's tasks");
  }

  if (kind == StepKind::kTasks) {
    out.step_id = static_cast<long>(step);
    std::vector<std::string> nodes;
    BATON_RETURN_IF_ERROR(Hosts(env, "SLURM_STEP_NODELIST", {"SLURM_STEP_NUM_NODES"}, queries, &nodes));
    HetStep het;
    BATON_RETURN_IF_ERROR(HetComponentJobs(env, &het.jobs));
    const std::string leader = het.jobs.empty() ? std::string() : het.jobs[0];
    // srun's hand-over names the step's components (het_step.h); without
    // it (an older srun, a list past the bound) every question is asked.
    std::vector<HetComponent> handed;
    if (!het.jobs.empty())
      BATON_RETURN_IF_ERROR(HandedComponents(env, het.jobs, static_cast<long>(step), nodes, queries, &handed));
    const std::string own_job = out.job_id;
    // Which component this process belongs to: slurmstepd knows each
    // component as its own job (S_JOB_ID) and numbers its nodes from 0
    // (S_JOB_NODEID); a task's SLURM_JOB_ID is the leader's and its
    // SLURM_NODEID counts over the whole step.
    size_t component = 0;
    if (handed.size() == 1) {
      // A step of one component (a plain srun in the batch script, srun
      // --het-group=1) is that component's ordinary step.
      if (own_job != handed[0].job && own_job != leader)
        return Status::InvalidArgument(kComponent, "SLURM_JOB_ID=" + own_job + " is neither the leader " +
                                                       leader + " nor the step's component job " + handed[0].job);
      out.job_id = handed[0].job;
      het.jobs.clear();
    } else if (!handed.empty()) {
      het.jobs.clear();
      for (const HetComponent& c : handed) het.jobs.push_back(c.job);
    } else if (!het.jobs.empty()) {
      // A step of one component (a plain srun inside a heterogeneous
      // batch job inherits the job's SLURM_HET_SIZE) is an ordinary step:
      // its own job's layout covers the whole step.
      std::vector<std::string> own_nodes;
      std::vector<std::vector<int>> own_tids;
      Status own = queries.StepTasks(out.job_id, static_cast<long>(step), &own_nodes, &own_tids);
      // A step of one later component alone (srun --het-group=1): its
      // tasks carry the leader's SLURM_JOB_ID, the step is the component's.
      for (size_t k = 1; !own.ok() && k < het.jobs.size(); ++k) {
        if (het.jobs[k] == out.job_id) continue;
        if (queries.StepTasks(het.jobs[k], static_cast<long>(step), &own_nodes, &own_tids).ok() && own_nodes == nodes) {
          out.job_id = het.jobs[k];
          own = Status::OK();
        }
      }
      BATON_RETURN_IF_ERROR(own);
      if (own_nodes == nodes) {
        het.jobs.clear();
        BATON_RETURN_IF_ERROR(LayoutFromNodeTasks(std::move(own_nodes), own_tids, &out.layout));
      }
    }
    if (!het.jobs.empty()) {
      while (component < het.jobs.size() && het.jobs[component] != own_job) ++component;
      // A task of a step without the leader's component still carries the
      // leader's job id: whole-step ids, as component 0's.
      if (component == het.jobs.size() && !handed.empty() && own_job == leader) component = 0;
      if (component == het.jobs.size())
        return Status::InvalidArgument(kComponent, "SLURM_JOB_ID=" + own_job +
                                                       " is none of the heterogeneous step's component jobs");
      out.job_id = leader;
      out.heterogeneous = true;
      if (!handed.empty() && Handed(env, kTaskMapVar, JobStepName(out))) {
        BATON_RETURN_IF_ERROR(StepLayoutOf(env, out.job_id, static_cast<long>(step), nodes, queries, &out.layout));
        BATON_RETURN_IF_ERROR(PlaceComponents(out.layout, handed, &het.first_node, &het.first_task)
                                  .Annotate("heterogeneous step " + JobStepName(out) + " (" + kHetComponentsVar + ")"));
      } else {
        BATON_RETURN_IF_ERROR(HetLayout(het, static_cast<long>(step), std::move(nodes), queries, &out.layout, &het));
      }
      const std::string counts_text = Get(env, "SLURM_STEP_TASKS_PER_NODE");
      std::vector<int> counts;
      if (!counts_text.empty()) {
        BATON_RETURN_IF_ERROR(ParseTasksPerNode(counts_text, &counts).Annotate("SLURM_STEP_TASKS_PER_NODE"));
        if (counts != out.layout.TasksPerNode())
          return Status::InvalidArgument(kComponent, "heterogeneous step " + JobStepName(out) +
                                                         ": its components' layouts disagree with "
                                                         "SLURM_STEP_TASKS_PER_NODE=" + Quoted(counts_text));
      }
      out.component_first_rank = het.first_task[component];
    } else if (out.layout.num_nodes() == 0) {
      BATON_RETURN_IF_ERROR(StepLayoutOf(env, out.job_id, static_cast<long>(step), std::move(nodes), queries, &out.layout));
    }
    if (out.layout.num_tasks() == 0 || out.layout.num_nodes() == 0)
      return Status::InvalidArgument(kComponent, "step " + JobStepName(out) + " has no tasks");
    long long v = 0;
    // The leader's id is also every task's SLURM_JOB_ID, whose
    // SLURM_NODEID counts over the whole step; only slurmstepd of a later
    // component (S_JOB_ID its own job) counts from its first node.
    const bool local_ids = !het.jobs.empty() && own_job != out.job_id;
    const long long first_node = local_ids ? het.first_node[component] : 0;
    const long long component_nodes =
        local_ids ? (component + 1 < het.jobs.size() ? het.first_node[component + 1] : out.layout.num_nodes()) -
                        first_node
                  : out.layout.num_nodes();
    BATON_RETURN_IF_ERROR(NeedNumber(env, "SLURM_NODEID", 0, component_nodes - 1, &v));
    out.node_index = static_cast<int>(first_node + v);
    if (!Get(env, "SLURM_PROCID").empty()) {
      BATON_RETURN_IF_ERROR(NeedNumber(env, "SLURM_PROCID", 0, out.layout.num_tasks() - 1LL, &v));
      out.rank = static_cast<int>(v);
    }
    if (!Get(env, "SLURM_LOCALID").empty()) {
      BATON_RETURN_IF_ERROR(NeedNumber(env, "SLURM_LOCALID", 0, out.layout.num_tasks() - 1LL, &v));
      out.local_rank = static_cast<int>(v);
    }
    const std::string tagged = Get(env, kMasterAddrVar);
    // A heterogeneous step's hand-over is trusted with its components only
    // (srun's BATON_STEP_* variables reach one component's tasks).
    if (HandOverApplies(env, out) && Untag(tagged, JobStepName(out), &out.master_addr)) {
      BATON_RETURN_IF_ERROR(CheckHost(std::string(kMasterAddrVar) + "=" + Quoted(tagged), out.master_addr));
    } else {
      BATON_RETURN_IF_ERROR(MasterAddress(queries, out.layout, &out.master_addr));
    }
    if (std::string ports = Get(env, "SLURM_STEP_RESV_PORTS"); !ports.empty())
      BATON_RETURN_IF_ERROR(ParsePortList("SLURM_STEP_RESV_PORTS", ports, &out.resv_ports));
  } else {
    // The allocation: slots from the task counts when the job asked for
    // tasks, else from its CPUs; a heterogeneous job's is all its
    // components' nodes in order (the batch script runs on the first).
    std::vector<std::string> het_jobs;
    BATON_RETURN_IF_ERROR(HetComponentJobs(env, &het_jobs));
    if (!het_jobs.empty()) out.job_id = het_jobs[0];
    std::vector<std::string> nodes;
    std::vector<int> counts;
    for (size_t k = 0; k < std::max<size_t>(het_jobs.size(), 1); ++k) {
      const std::string list_var = HetVar(env, "SLURM_JOB_NODELIST", het_jobs.empty(), k);
      const std::string num_var = HetVar(env, "SLURM_JOB_NUM_NODES", het_jobs.empty(), k);
      const std::string tasks_var = HetVar(env, "SLURM_TASKS_PER_NODE", het_jobs.empty(), k);
      const std::string cpus_var = HetVar(env, "SLURM_JOB_CPUS_PER_NODE", het_jobs.empty(), k);
      std::vector<std::string> part;
      std::vector<const char*> count_vars = {num_var.c_str()};
      if (het_jobs.empty()) count_vars.push_back("SLURM_NNODES");
      BATON_RETURN_IF_ERROR(Hosts(env, list_var.c_str(), count_vars, queries, &part));
      const std::string& counts_var = Get(env, tasks_var.c_str()).empty() ? cpus_var : tasks_var;
      std::string counts_text;
      BATON_RETURN_IF_ERROR(Need(env, counts_var.c_str(), &counts_text));
      std::vector<int> part_counts;
      BATON_RETURN_IF_ERROR(ParseTasksPerNode(counts_text, &part_counts).Annotate(counts_var));
      if (part_counts.size() != part.size())
        return Status::InvalidArgument(kComponent, counts_var + "=" + Quoted(counts_text) + " counts " +
                                                       std::to_string(part_counts.size()) + " nodes but " + list_var +
                                                       " names " + std::to_string(part.size()));
      for (const std::string& n : part)
        if (std::find(nodes.begin(), nodes.end(), n) != nodes.end())
          return Status::InvalidArgument(kComponent, "heterogeneous job " + out.job_id + ": node " + Quoted(n) +
                                                         " is in two components; baton makes one world only of "
                                                         "components on distinct nodes");
      nodes.insert(nodes.end(), part.begin(), part.end());
      counts.insert(counts.end(), part_counts.begin(), part_counts.end());
    }
    BATON_RETURN_IF_ERROR(LayoutFromCounts(nodes, counts, &out.layout));
    if (out.layout.num_tasks() == 0)
      return Status::InvalidArgument(kComponent, "the allocation of job " + out.job_id + " counts no task");
    if (!Get(env, "SLURM_NODEID").empty()) {
      long long v = 0;
      BATON_RETURN_IF_ERROR(NeedNumber(env, "SLURM_NODEID", 0, out.layout.num_nodes() - 1LL, &v));
      out.node_index = static_cast<int>(v);
    } else if (std::string self = Get(env, "SLURMD_NODENAME"); !self.empty()) {
      const int index = IndexOf(out.layout.nodes, self);
      if (index < 0)
        return Status::InvalidArgument(kComponent, "SLURMD_NODENAME=" + Quoted(self) +
                                                       " is not in SLURM_JOB_NODELIST=" + Quoted(Get(env, "SLURM_JOB_NODELIST")));
      out.node_index = index;
    }  // else: salloc's shell on a login node, on no node of the allocation
    const std::string tagged_port = Get(env, kAllocationPortVar);
    std::string port_text;
    if (Untag(tagged_port, out.job_id, &port_text)) {
      long long port = 0;
      if (!ParseDecimal(port_text, 1, 65535, &port))
        return Status::InvalidArgument(kComponent, std::string(kAllocationPortVar) + "=" + Quoted(tagged_port) +
                                                       " is not a port");
      out.allocation_port = static_cast<int>(port);
    }
    BATON_RETURN_IF_ERROR(MasterAddress(queries, out.layout, &out.master_addr));
  }
  *info = std::move(out);
  return Status::OK();
}

Status ResolveHostfileHosts(const Env& env, SlurmQueries& queries, StepInfo* info) {
  const std::vector<std::string>& nodes = info->layout.nodes;
  std::vector<std::string> hosts;
  std::string list;
  const std::string tagged = Get(env, kNodeAddrsVar);
  const bool handed = info->step_id && HandOverApplies(env, *info) && Untag(tagged, JobStepName(*info), &list) &&
                      list != kAsk;
  if (handed && list == kSameAsNames) {
    info->hosts.clear();
    return Status::OK();
  }
  std::string source;
  if (handed) {
    source = std::string(kNodeAddrsVar) + "=" + Quoted(tagged);
    BATON_RETURN_IF_ERROR(queries.ExpandHostlist(list, nodes.size(), &hosts).Annotate(source));
    if (hosts.size() != nodes.size())
      return Status::InvalidArgument(kComponent, source + " names " + std::to_string(hosts.size()) +
                                                     " addresses for " + std::to_string(nodes.size()) + " nodes");
  } else {
    source = "the NodeAddr of the step's nodes";
    BATON_RETURN_IF_ERROR(queries.NodeAddresses(nodes, &hosts));
  }
  for (const std::string& h : hosts) BATON_RETURN_IF_ERROR(CheckHost(source, h));
  info->hosts = hosts == nodes ? std::vector<std::string>() : std::move(hosts);
  return Status::OK();
}

}  // namespace baton::launch
