#include "base/launch/het_step.h"

#include "base/launch/component.h"
#include "base/launch/decimal.h"
#include "base/launch/quote.h"
#include "base/launch/slurm_facts.h"

namespace baton::launch {

void JoinComponents(const std::vector<ComponentLayout>& components, std::vector<std::string>* nodes,
                    std::vector<std::vector<int>>* tids) {
  nodes->clear();
  tids->clear();
  int tasks = 0;
  for (const ComponentLayout& c : components) {
    int own = 0;
    for (std::vector<int> node_tids : c.tids) {
      own += static_cast<int>(node_tids.size());
      for (int& id : node_tids) id += tasks;
      tids->push_back(std::move(node_tids));
    }
    nodes->insert(nodes->end(), c.nodes.begin(), c.nodes.end());
    tasks += own;
  }
}

Status PlaceComponents(const StepLayout& layout, const std::vector<HetComponent>& components,
                       std::vector<int>* first_node, std::vector<int>* first_task) {
  first_node->clear();
  first_task->clear();
  // The component of each node.
  std::vector<int> node_component;
  for (size_t k = 0; k < components.size(); ++k) {
    first_node->push_back(static_cast<int>(node_component.size()));
    node_component.insert(node_component.end(), static_cast<size_t>(components[k].nodes), static_cast<int>(k));
  }
  if (node_component.size() != layout.nodes.size())
    return Status::InvalidArgument(kComponent, "the components count " + std::to_string(node_component.size()) +
                                                   " nodes but the step has " + std::to_string(layout.nodes.size()));
  // Task ids rise with the component: component k's tasks come after
  // component k-1's, and the first of each is where it starts.
  first_task->assign(components.size(), -1);
  int last = 0;
  for (int t = 0; t < layout.num_tasks(); ++t) {
    const int k = node_component[static_cast<size_t>(layout.task_node[static_cast<size_t>(t)])];
    if (k < last)
      return Status::InvalidArgument(kComponent, "task " + std::to_string(t) + " runs in component " +
                                                     std::to_string(k) + " (job " + components[static_cast<size_t>(k)].job +
                                                     ") after a task of component " + std::to_string(last) +
                                                     ": the components' tasks are not numbered in order");
    if ((*first_task)[static_cast<size_t>(k)] < 0) (*first_task)[static_cast<size_t>(k)] = t;
    last = k;
  }
  for (size_t k = 0; k < components.size(); ++k)
    if ((*first_task)[k] < 0)
      return Status::InvalidArgument(kComponent, "component " + std::to_string(k) + " (job " + components[k].job +
                                                     ") runs no task of the step");
  return Status::OK();
}

std::string EncodeHetComponents(const std::vector<HetComponent>& components, const std::string& hostlist) {
  std::string value;
  for (const HetComponent& c : components)
    value += (value.empty() ? "" : ",") + c.job + "=" + std::to_string(c.nodes);
  return value + ";" + hostlist;
}

Status ParseHetComponents(const std::string& source, const std::string& value, SlurmQueries& queries,
                          std::vector<HetComponent>* components, std::vector<std::string>* nodes) {
  components->clear();
  nodes->clear();
  const size_t semi = value.find(';');
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument(kComponent, source + ": " + why + " (\"JOB=NODES,...;HOSTLIST\")");
  };
  if (semi == std::string::npos) return bad("no ';' before the node list");
  const std::string list = value.substr(0, semi);
  long long total = 0;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = list.find(',', start);
    const std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t eq = item.find('=');
    long long job = 0, count = 0;
    if (eq == std::string::npos || !ParseDecimal(std::string_view(item).substr(0, eq), 1, 0xffffffffLL, &job) ||
        !ParseDecimal(std::string_view(item).substr(eq + 1), 1, static_cast<long long>(kMaxNodes), &count))
      return bad(Quoted(item) + " is not a component job id and its node count");
    if (components->size() >= static_cast<size_t>(kMaxHetComponents))
      return bad("more than " + std::to_string(kMaxHetComponents) + " components");
    components->push_back({std::to_string(job), static_cast<int>(count)});
    total += count;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (total > static_cast<long long>(kMaxNodes)) return bad("more than " + std::to_string(kMaxNodes) + " nodes");
  BATON_RETURN_IF_ERROR(queries.ExpandHostlist(value.substr(semi + 1), static_cast<size_t>(total), nodes).Annotate(source));
  if (nodes->size() != static_cast<size_t>(total))
    return bad("the components count " + std::to_string(total) + " nodes, the list names " +
               std::to_string(nodes->size()));
  return Status::OK();
}

Status StepComponents(const std::vector<std::string>& jobs, const std::string& own, long step,
                      SlurmQueries& queries, std::vector<ComponentLayout>* components) {
  components->clear();
  bool own_found = false;
  for (const std::string& job : jobs) {
    ComponentLayout c;
    c.job = job;
    Status s = queries.StepTasks(job, step, &c.nodes, &c.tids);
    if (s.code() == Code::kNotFound) continue;  // a component this step does not run on
    BATON_RETURN_IF_ERROR(s.Annotate("component job " + job + " of heterogeneous step " + jobs[0] + "." +
                                     std::to_string(step)));
    own_found = own_found || job == own;
    components->push_back(std::move(c));
  }
  if (!own_found)
    return Status::InvalidArgument(kComponent, "srun's job " + own + " has no step " + std::to_string(step) +
                                                   " among the heterogeneous job's components");
  return Status::OK();
}

}  // namespace baton::launch
