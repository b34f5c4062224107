// Which node each task of a Slurm step runs on.
//
// Built from what Slurm says (the step layout's task ids per node, or the
// tasks per node with the distribution that placed them), never from an
// assumed block order: cyclic, plane and arbitrary distributions place
// ranks differently, and the "plain" hostfile and MASTER_ADDR (rank 0's
// node) depend on it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "baton/status.h"

namespace baton::launch {

// Far above any real step; keeps a hostile value from allocating the machine.
inline constexpr long long kMaxTasks = 1 << 24;

struct StepLayout {
  std::vector<std::string> nodes;  // node rank = index (Slurm's node order)
  std::vector<int> task_node;      // node index of each global rank

  int num_nodes() const { return static_cast<int>(nodes.size()); }
  int num_tasks() const { return static_cast<int>(task_node.size()); }
  // Tasks on each node, in node order.
  std::vector<int> TasksPerNode() const;
  // The node that runs rank 0, where PyTorch's TCPStore and DeepSpeed's
  // rendezvous listen (MASTER_ADDR). Not always the first node: -m arbitrary.
  int MasterNode() const { return task_node.empty() ? 0 : task_node[0]; }
};

// Parses Slurm's compressed counts such as "2(x3),1" (SLURM_TASKS_PER_NODE,
// SLURM_STEP_TASKS_PER_NODE, SLURM_JOB_CPUS_PER_NODE) into {2,2,2,1}.
Status ParseTasksPerNode(std::string_view text, std::vector<int>* counts);

// A layout from the global task ids Slurm placed on each node (the `tids`
// of slurm_step_layout_t). Every rank 0..N-1 must appear exactly once.
Status LayoutFromNodeTasks(std::vector<std::string> nodes,
                           const std::vector<std::vector<int>>& tids, StepLayout* out);

// A layout rebuilt from the tasks per node and how they were dealt out:
// "block" (fill each node in turn), "cyclic" (one task to each node with
// room left, round after round), "plane=P" (P at a time, round after
// round). These are Slurm's distributions for the counts it reports; the
// plugin's srun side checks the rebuilt layout against Slurm's real one
// before it names a distribution (DistributionOf), so a layout Slurm made
// some other way is never rebuilt wrongly. A node may hold 0 tasks; counts
// that add up to 0 are InvalidArgument (a step has at least one task).
Status LayoutFromDistribution(std::vector<std::string> nodes, const std::vector<int>& counts,
                              std::string_view distribution, StepLayout* out);

// The batch script's allocation: block over the counts (it has counts but
// no ranks).
Status LayoutFromCounts(std::vector<std::string> nodes, const std::vector<int>& counts,
                        StepLayout* out);

// The distribution that rebuilds `layout` from its tasks per node
// ("block", "cyclic" or "plane=P"), or none when it follows none of them
// (-m arbitrary, or Slurm's over-subscription rounds).
std::optional<std::string> DistributionOf(const StepLayout& layout);

// The rank-to-node map as a string for the environment: runs of
// "node*count", e.g. block "0*2,1*2" and cyclic "0,1,0,1". Its size grows
// with the tasks of an irregular layout; see hand_over.h for the bound.
std::string EncodeTaskMap(const std::vector<int>& task_node);
// An empty text or a node outside 0..num_nodes-1 is an error naming the item.
Status DecodeTaskMap(std::string_view text, int num_nodes, std::vector<int>* task_node);

}  // namespace baton::launch
