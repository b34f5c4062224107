// A heterogeneous step (`srun A : B`, or `srun --het-group=0,1` over an
// sbatch hetjob) as one world. Each component is its own job to Slurm,
// with its own step layout, its own node ids and task ids from 0; the
// world is the components in order: their nodes one after the other, their
// task ids shifted by the tasks before them (srun's het_job_task_offset).
//
// srun's side of the plugin learns the components once per step (their
// steps all exist when srun's local_user_init runs: srun creates every
// component's step before it launches any) and hands them to every
// slurmstepd as BATON_STEP_HET_COMPONENTS; slurmstepd places its own
// component in the world from it, without asking the controller.
#pragma once

#include <string>
#include <vector>

#include "base/launch/slurm_queries.h"
#include "base/launch/step_layout.h"
#include "baton/status.h"

namespace baton::launch {

// "17.0:17=1,18=2;n[1-3]": tagged with the leader's job id (every task's
// SLURM_JOB_ID), each component job of the step with its node count in
// component order, then the step's nodes in that order. Slurm sorts the
// node list the tasks see (srun.c's _reorder_het_job_recs): slurmstepd
// compares the two and refuses a step whose components are not in that
// order, as it refuses components sharing a node, where a node id would
// stand for two nodes.
inline constexpr const char* kHetComponentsVar = "BATON_STEP_HET_COMPONENTS";

struct HetComponent {
  std::string job;  // its job id
  int nodes = 0;    // its nodes in the step
};

// One component's step as Slurm laid it out (SlurmQueries::StepTasks).
struct ComponentLayout {
  std::string job;
  std::vector<std::string> nodes;
  std::vector<std::vector<int>> tids;  // the component's own task ids, from 0
};

// The whole step's nodes and task ids from its components' layouts, in
// component order.
void JoinComponents(const std::vector<ComponentLayout>& components, std::vector<std::string>* nodes,
                    std::vector<std::vector<int>>* tids);

// Where each component starts in the whole step's `layout`, given each
// component's node count: its first node and its first task. Each
// component's tasks must be the ids after the previous component's (as
// srun numbers them), else the layout is not one of this step.
Status PlaceComponents(const StepLayout& layout, const std::vector<HetComponent>& components,
                       std::vector<int>* first_node, std::vector<int>* first_task);

// The variable's value (untagged) and back. Parse checks every job id and
// count, and that the counts add up to the nodes named; `queries` expands
// the node list (libslurm's hostlist functions, no controller).
std::string EncodeHetComponents(const std::vector<HetComponent>& components, const std::string& hostlist);
Status ParseHetComponents(const std::string& source, const std::string& value, SlurmQueries& queries,
                          std::vector<HetComponent>* components, std::vector<std::string>* nodes);

// srun's side: which of the heterogeneous job's components (`jobs`, the
// job's component job ids in order) run step `step`, and how: one
// StepTasks question for each. Slurm numbers a heterogeneous job's steps
// from its leader's counter (step_mgr.c, step_create), so a component
// holds step `step` only when it is part of this srun's step; a component
// without it answers NotFound. `own` (srun's S_JOB_ID, one component of
// the step) must hold it.
Status StepComponents(const std::vector<std::string>& jobs, const std::string& own, long step,
                      SlurmQueries& queries, std::vector<ComponentLayout>* components);

}  // namespace baton::launch
