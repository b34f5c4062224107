#include "base/launch/step_layout.h"

#include <charconv>

#include "base/launch/component.h"

namespace baton::launch {
namespace {

// Parses a non-negative decimal that fills `text` exactly.
bool ParseCount(std::string_view text, long long max, long long* value) {
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *value);
  return ec == std::errc() && end == text.data() + text.size() && *value >= 0 && *value <= max;
}

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

// Far above any real job; keeps a hostile value from allocating the machine.
constexpr long long kMaxTasks = 1 << 24;

}  // namespace

std::vector<int> StepLayout::TasksPerNode() const {
  std::vector<int> counts(nodes.size(), 0);
  for (int n : task_node) ++counts[n];
  return counts;
}

std::vector<int> StepLayout::RanksOn(int node) const {
  std::vector<int> ranks;
  for (int r = 0; r < num_tasks(); ++r)
    if (task_node[r] == node) ranks.push_back(r);
  return ranks;
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
          !ParseCount(rest.substr(2, rest.size() - 3), kMaxTasks, &repeat) || repeat == 0) {
        return Status::InvalidArgument(kComponent, "tasks per node '" + std::string(text) +
                                                       "': bad repeat in '" + std::string(item) + "'");
      }
    }
    if (!ParseCount(count_text, kMaxTasks, &count)) {
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
      if (task_node[rank] != -1) {
        return Status::InvalidArgument(kComponent, "task id " + std::to_string(rank) +
                                                       " appears on both " + nodes[task_node[rank]] +
                                                       " and " + nodes[n]);
      }
      task_node[rank] = static_cast<int>(n);
    }
  }
  out->nodes = std::move(nodes);
  out->task_node = std::move(task_node);
  return Status::OK();
}

Status LayoutFromCounts(std::vector<std::string> nodes, const std::vector<int>& counts,
                        StepLayout* out) {
  if (counts.size() != nodes.size()) {
    return Status::InvalidArgument(kComponent, std::to_string(nodes.size()) + " nodes but " +
                                                   std::to_string(counts.size()) + " task counts");
  }
  out->task_node.clear();
  for (size_t n = 0; n < counts.size(); ++n)
    out->task_node.insert(out->task_node.end(), static_cast<size_t>(counts[n]), static_cast<int>(n));
  out->nodes = std::move(nodes);
  return Status::OK();
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
  if (text.empty()) return Status::OK();
  for (std::string_view item : Split(text, ',')) {
    long long node = 0, run = 1;
    auto star = item.find('*');
    bool ok = ParseCount(item.substr(0, star), num_nodes - 1, &node);
    if (ok && star != std::string_view::npos) ok = ParseCount(item.substr(star + 1), kMaxTasks, &run) && run > 0;
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
