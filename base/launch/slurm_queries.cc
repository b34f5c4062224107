// SlurmQueries answered by libslurm. Compiled into the SPANK plugin without
// linking libslurm: srun, sbatch and slurmstepd already carry Slurm's
// library, and a second copy in the same process would have its own,
// unconfigured state.
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include <cstdlib>

#include "base/launch/component.h"
#include "base/launch/slurm_facts.h"

namespace baton::launch {
namespace {

std::string SlurmError(const char* call) {
  const int err = slurm_get_errno();
  return std::string(call) + " failed: " + slurm_strerror(err) + " (errno " + std::to_string(err) + ")";
}

class LibslurmQueries : public SlurmQueries {
 public:
  Status ExpandHostlist(const std::string& hostlist, std::vector<std::string>* hosts) override {
    hosts->clear();
    hostlist_t hl = slurm_hostlist_create(hostlist.c_str());
    if (hl == nullptr)
      return Status::InvalidArgument(kComponent, "hostlist '" + hostlist + "' is malformed");
    while (char* host = slurm_hostlist_shift(hl)) {
      hosts->emplace_back(host);
      free(host);
    }
    slurm_hostlist_destroy(hl);
    if (hosts->empty()) return Status::InvalidArgument(kComponent, "hostlist '" + hostlist + "' names no host");
    return Status::OK();
  }

  Status StepTasks(const std::string& job_id, long step_id, std::vector<std::string>* nodes,
                   std::vector<std::vector<int>>* tids) override {
    slurm_step_id_t id = {};
    id.job_id = static_cast<uint32_t>(std::strtoul(job_id.c_str(), nullptr, 10));
    id.step_id = static_cast<uint32_t>(step_id);
    id.step_het_comp = NO_VAL;
    slurm_step_layout_t* layout = slurm_job_step_layout_get(&id);
    if (layout == nullptr)
      return Status::Unavailable(kComponent, SlurmError("slurm_job_step_layout_get") + " for step " + job_id +
                                                 "." + std::to_string(step_id));
    Status s = ExpandHostlist(layout->node_list ? layout->node_list : "", nodes);
    if (s.ok() && nodes->size() != layout->node_cnt) {
      s = Status::Internal(kComponent, "step layout lists " + std::to_string(nodes->size()) +
                                           " nodes but counts " + std::to_string(layout->node_cnt));
    }
    if (s.ok()) {
      tids->assign(layout->node_cnt, {});
      for (uint32_t n = 0; n < layout->node_cnt; ++n)
        (*tids)[n].assign(layout->tids[n], layout->tids[n] + layout->tasks[n]);
    }
    slurm_job_step_layout_free(layout);
    return s;
  }

  Status NodeAddress(const std::string& node, std::string* addr) override {
    node_info_msg_t* msg = nullptr;
    if (slurm_load_node_single(&msg, const_cast<char*>(node.c_str()), SHOW_ALL) != SLURM_SUCCESS || msg == nullptr)
      return Status::Unavailable(kComponent, SlurmError("slurm_load_node_single") + " for node " + node);
    Status s;
    if (msg->record_count < 1 || msg->node_array[0].node_addr == nullptr)
      s = Status::NotFound(kComponent, "Slurm has no address for node " + node);
    else
      *addr = msg->node_array[0].node_addr;
    slurm_free_node_info_msg(msg);
    return s;
  }
};

}  // namespace

SlurmQueries& Libslurm() {
  static LibslurmQueries queries;
  return queries;
}

}  // namespace baton::launch
