#include "base/launch/step_layout.h"

#include "base/launch/component.h"
#include "base/launch/decimal.h"

namespace baton::launch {
namespace {

std::vector<std::string_view> Split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t pos = text.find(sep, start);
    parts.push_back(text.substr(start, pos == std::string_view::npos ? pos : pos - start));
    if (pos == std::string_view::npos) return parts;
    start = pos + 1;
  }
}

// Deals `counts` out `chunk` tasks at a time per node and round (chunk 0:
// all of a node's tasks at once, which is block).
std::vector<int> Deal(const std::vector<int>& counts, long long chunk) {
  long long total = 0;
  for (int c : counts) total += c;
  std::vector<int> task_node;
  task_node.reserve(static_cast<size_t>(total));
  std::vector<int> left = counts;
  while (static_cast<long long>(task_node.size()) < total) {
    for (size_t n = 0; n < left.size(); ++n) {
      const long long take = chunk == 0 ? left[n] : std::min<long long>(chunk, left[n]);
      task_node.insert(task_node.end(), static_cast<size_t>(take), static_cast<int>(n));
      left[n] -= static_cast<int>(take);
    }
  }
  return task_node;
}

}  // namespace

std::vector<int> StepLayout::TasksPerNode() const {
  std::vector<int> counts(nodes.size(), 0);
  for (int n : task_node) ++counts[n];
  return counts;
}

Status ParseTasksPerNode(std::string_view text, std::vector<int>* counts) {
  counts->clear();
  long long nodes = 0, total = 0;
  for (std::string_view item : Split(text, ',')) {
    long long count = 0, repeat = 1;
    std::string_view count_text = item;
    if (auto open = item.find('('); open != std::string_view::npos) {
      count_text = item.substr(0, open);
      std::string_view rest = item.substr(open);
      if (rest.size() < 4 || rest.substr(0, 2) != "(x" || rest.back() != ')' ||
          !ParseDecimal(rest.substr(2, rest.size() - 3), 1, kMaxTasks, &repeat)) {
        return Status::InvalidArgument(kComponent, "tasks per node '" + std::string(text) +
                                                       "': bad repeat in '" + std::string(item) + "'");
      }
    }
    if (!ParseDecimal(count_text, 0, kMaxTasks, &count)) {
      return Status::InvalidArgument(kComponent, "tasks per node '" + std::string(text) +
                                                     "': '" + std::string(item) +
                                                     "' is not a count or count(xN)");
    }
    nodes += repeat;
    total += count * repeat;
    if (nodes > kMaxTasks || total > kMaxTasks)
      return Status::InvalidArgument(kComponent, "tasks per node '" + std::string(text) + "': more than " +
                                                     std::to_string(kMaxTasks) + " nodes or tasks");
    counts->insert(counts->end(), static_cast<size_t>(repeat), static_cast<int>(count));
  }
  return Status::OK();
}

Status LayoutFromNodeTasks(std::vector<std::string> nodes,
                           const std::vector<std::vector<int>>& tids, StepLayout* out) {
  if (tids.size() != nodes.size()) {
    return Status::InvalidArgument(kComponent, "step layout has " + std::to_string(nodes.size()) +
                                                   " nodes but task ids for " +
                                                   std::to_string(tids.size()));
  }
  size_t total = 0;
  for (const auto& t : tids) total += t.size();
  std::vector<int> task_node(total, -1);
  for (size_t n = 0; n < tids.size(); ++n) {
    for (int rank : tids[n]) {
      if (rank < 0 || static_cast<size_t>(rank) >= total) {
        return Status::InvalidArgument(kComponent, "task id " + std::to_string(rank) + " on node " +
                                                       nodes[n] + " is outside 0.." +
                                                       std::to_string(total - 1));
      }
      // Slurm's own layouts repeat a task id in one case only: a
      // heterogeneous step (srun A : B) inside an allocation that is not a
      // heterogeneous job, whose merged layout numbers each component's
      // tasks from 0 with nothing to tell the components apart. Say so.
      if (task_node[rank] != -1) {
        return Status::InvalidArgument(
            kComponent, "task id " + std::to_string(rank) + " appears on both " + nodes[task_node[rank]] + " and " +
                            nodes[n] +
                            " (a heterogeneous step 'srun A : B' inside an allocation that is not a heterogeneous "
                            "job, which Slurm numbers from 0 in each component, is not supported: allocate a "
                            "heterogeneous job, 'salloc/sbatch ... : ...', and run 'srun --het-group=...' in it)");
      }
      task_node[rank] = static_cast<int>(n);
    }
  }
  out->nodes = std::move(nodes);
  out->task_node = std::move(task_node);
  return Status::OK();
}

Status LayoutFromDistribution(std::vector<std::string> nodes, const std::vector<int>& counts,
                              std::string_view distribution, StepLayout* out) {
  if (counts.size() != nodes.size()) {
    return Status::InvalidArgument(kComponent, std::to_string(nodes.size()) + " nodes but " +
                                                   std::to_string(counts.size()) + " task counts");
  }
  long long chunk = 0;
  if (distribution == "cyclic") {
    chunk = 1;
  } else if (distribution.substr(0, 6) == "plane=") {
    if (!ParseDecimal(distribution.substr(6), 1, kMaxTasks, &chunk))
      return Status::InvalidArgument(kComponent, "distribution '" + std::string(distribution) +
                                                     "': the plane size is not a number in 1.." +
                                                     std::to_string(kMaxTasks));
  } else if (distribution != "block") {
    return Status::InvalidArgument(kComponent, "distribution '" + std::string(distribution) +
                                                   "' is not block, cyclic or plane=P");
  }
  long long total = 0;
  for (int c : counts) total += c;
  if (total > kMaxTasks)
    return Status::InvalidArgument(kComponent, "more than " + std::to_string(kMaxTasks) + " tasks");
  // Counts of 0 on some nodes are fine; none at all is no step, and its
  // task map would be the empty one DecodeTaskMap refuses (found by
  // fuzz_layout: tasks per node "0,0" was laid out, then not read back).
  if (total == 0)
    return Status::InvalidArgument(kComponent, "the task counts add up to 0 tasks (a step has at least one task)");
  out->task_node = Deal(counts, chunk);
  out->nodes = std::move(nodes);
  return Status::OK();
}

Status LayoutFromCounts(std::vector<std::string> nodes, const std::vector<int>& counts,
                        StepLayout* out) {
  return LayoutFromDistribution(std::move(nodes), counts, "block", out);
}

std::optional<std::string> DistributionOf(const StepLayout& layout) {
  const std::vector<int> counts = layout.TasksPerNode();
  // Plane's size is the length of the first node's first run of ranks.
  long long plane = 0;
  while (plane < layout.num_tasks() && layout.task_node[static_cast<size_t>(plane)] == layout.MasterNode()) ++plane;
  std::vector<std::string> candidates = {"block", "cyclic"};
  if (plane > 1) candidates.push_back("plane=" + std::to_string(plane));
  for (const std::string& d : candidates) {
    if (Deal(counts, d == "block" ? 0 : d == "cyclic" ? 1 : plane) == layout.task_node) return d;
  }
  return std::nullopt;
}

std::string EncodeTaskMap(const std::vector<int>& task_node) {
  std::string out;
  for (size_t i = 0; i < task_node.size();) {
    size_t j = i;
    while (j < task_node.size() && task_node[j] == task_node[i]) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(task_node[i]);
    if (j - i > 1) out += '*' + std::to_string(j - i);
    i = j;
  }
  return out;
}

Status DecodeTaskMap(std::string_view text, int num_nodes, std::vector<int>* task_node) {
  task_node->clear();
  if (text.empty()) return Status::InvalidArgument(kComponent, "the task map is empty (a step has at least one task)");
  for (std::string_view item : Split(text, ',')) {
    long long node = 0, run = 1;
    auto star = item.find('*');
    bool ok = ParseDecimal(item.substr(0, star), 0, num_nodes - 1LL, &node);
    if (ok && star != std::string_view::npos) ok = ParseDecimal(item.substr(star + 1), 1, kMaxTasks, &run);
    if (!ok || static_cast<long long>(task_node->size()) + run > kMaxTasks) {
      return Status::InvalidArgument(kComponent, "task map item '" + std::string(item) +
                                                     "' is not node[*count] with node < " +
                                                     std::to_string(num_nodes));
    }
    task_node->insert(task_node->end(), static_cast<size_t>(run), static_cast<int>(node));
  }
  return Status::OK();
}

}  // namespace baton::launch
