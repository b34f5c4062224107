#include "base/events/step_end.h"

#include <set>

#include "base/events/event_log.h"

namespace baton::events {

std::vector<std::pair<std::string, std::string>> LostNodes(const launch::Allocation& allocation,
                                                           const std::vector<std::string>& step_nodes) {
  std::vector<std::pair<std::string, std::string>> lost;
  for (const std::string& host : step_nodes) {
    const launch::NodeHealth* found = nullptr;
    for (const launch::NodeHealth& n : allocation.nodes)
      if (n.name == host) found = &n;
    if (found == nullptr) {
      lost.emplace_back(host, "left the allocation");
    } else if (std::string why = launch::Unusable(*found); !why.empty()) {
      lost.emplace_back(host, why);
    }
  }
  return lost;
}

std::string StepEndLine(const StepEnd& end, double unix_seconds) {
  std::string lost = "[";
  for (const auto& [host, why] : end.lost)
    lost += (lost.size() > 1 ? "," : "") + std::string("{\"host\":") + JsonString(host) +
            ",\"why\":" + JsonString(why) + "}";
  lost += "]";
  Record r("step_end", unix_seconds);
  r.Str("job", end.job).Int("restart", end.restart).Int("exit", end.exit).Str("nodes", end.nodes);
  if (end.slurm_error.empty()) {
    r.Raw("lost", lost);
  } else {
    r.Str("slurm_error", end.slurm_error);
  }
  if (!end.said.empty()) r.Str("said", end.said);
  return r.Line();
}

}  // namespace baton::events
