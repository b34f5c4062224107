#include "base/events/step_end.h"

#include <set>

#include "base/events/event_log.h"

namespace baton::events {

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
