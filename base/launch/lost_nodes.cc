#include "base/launch/lost_nodes.h"

#include <sys/stat.h>

#include "base/launch/quote.h"

namespace baton::launch {

std::vector<LostNode> LostNodes(const Allocation& allocation, const std::vector<std::string>& step_nodes) {
  std::vector<LostNode> lost;
  for (const std::string& host : step_nodes) {
    const NodeHealth* found = nullptr;
    for (const NodeHealth& n : allocation.nodes)
      if (n.name == host) found = &n;
    if (found == nullptr) {
      lost.emplace_back(host, "left the allocation");
    } else if (std::string why = Unusable(*found); !why.empty()) {
      lost.emplace_back(host, why);
    }
  }
  return lost;
}

Status SlurmConfPresent(const std::string& slurm_conf, std::string_view component) {
  struct stat st;
  if (slurm_conf.empty() || ::stat(slurm_conf.c_str(), &st) == 0) return Status::OK();
  return Status::Unavailable(component, "SLURM_CONF=" + Quoted(slurm_conf) + " names no file");
}

Status AskLostNodes(SlurmQueries& slurm, const std::string& slurm_conf, std::string_view component, uint32_t job,
                    const std::vector<std::string>& step_nodes, std::vector<LostNode>* lost) {
  lost->clear();
  if (Status s = SlurmConfPresent(slurm_conf, component); !s.ok()) return s;
  Allocation now;
  if (Status s = slurm.AllocationNodes(job, &now); !s.ok()) return s;
  *lost = LostNodes(now, step_nodes);
  return Status::OK();
}

}  // namespace baton::launch
