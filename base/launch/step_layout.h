// Which node each task of a Slurm step runs on.
//
// Built from what Slurm says (the step layout's task ids per node, or the
// map the plugin's srun side passes on in BATON_TASK_MAP), never from an
// assumed block order: cyclic, plane and arbitrary distributions place
// ranks differently, and the "plain" hostfile and LOCAL_RANK depend on it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "baton/status.h"

namespace baton::launch {

struct StepLayout {
  std::vector<std::string> nodes;  // node rank = index (Slurm's node order)
  std::vector<int> task_node;      // node index of each global rank

  int num_nodes() const { return static_cast<int>(nodes.size()); }
  int num_tasks() const { return static_cast<int>(task_node.size()); }
  // Tasks on each node, in node order.
  std::vector<int> TasksPerNode() const;
  // Global ranks on `node`, ascending.
  std::vector<int> RanksOn(int node) const;
};

// Parses Slurm's compressed counts such as "2(x3),1" (SLURM_TASKS_PER_NODE,
// SLURM_STEP_TASKS_PER_NODE, SLURM_JOB_CPUS_PER_NODE) into {2,2,2,1}.
Status ParseTasksPerNode(std::string_view text, std::vector<int>* counts);

// A layout from the global task ids Slurm placed on each node (the `tids`
// of slurm_step_layout_t). Every rank 0..N-1 must appear exactly once.
Status LayoutFromNodeTasks(std::vector<std::string> nodes,
                           const std::vector<std::vector<int>>& tids, StepLayout* out);

// One slot per counted task, filling the nodes in order. Only for the batch
// script's allocation, which has counts but no ranks.
Status LayoutFromCounts(std::vector<std::string> nodes, const std::vector<int>& counts,
                        StepLayout* out);

// The rank-to-node map as a short string for the environment: runs of
// "node*count", e.g. block "0*2,1*2" and cyclic "0,1,0,1".
std::string EncodeTaskMap(const std::vector<int>& task_node);
Status DecodeTaskMap(std::string_view text, int num_nodes, std::vector<int>* task_node);

}  // namespace baton::launch
