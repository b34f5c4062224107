#include "ckpt/retention.h"

#include <algorithm>

namespace baton::ckpt {

std::vector<VersionInfo> PlanRetention(const std::vector<VersionInfo>& versions, int keep) {
  // Never the newest complete version: keep < 1 counts as 1.
  keep = std::max(keep, 1);
  std::vector<const VersionInfo*> sorted;
  for (const VersionInfo& v : versions) {
    if (v.problem.empty() || v.problem.rfind(kRestoreFailuresName, 0) == 0) sorted.push_back(&v);
  }
  std::sort(sorted.begin(), sorted.end(), [](const VersionInfo* a, const VersionInfo* b) { return a->seq < b->seq; });
  bool any_complete = false;
  uint64_t newest_complete = 0;
  int complete_left = 0;
  for (const VersionInfo* v : sorted) {
    if (v->status == VersionStatus::kComplete) {
      any_complete = true;
      newest_complete = v->seq;
      ++complete_left;
    }
  }
  std::vector<VersionInfo> remove;
  for (const VersionInfo* v : sorted) {
    switch (v->status) {
      case VersionStatus::kComplete:
        // Ascending seq: the first (count - keep) complete versions go.
        if (complete_left-- > keep) remove.push_back(*v);
        break;
      case VersionStatus::kQuarantined:
      case VersionStatus::kIncomplete:
        if (any_complete && v->seq < newest_complete) remove.push_back(*v);
        break;
    }
  }
  return remove;
}

}  // namespace baton::ckpt
