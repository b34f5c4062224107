#include "base/straggler_report.h"

#include <algorithm>

#include "base/median.h"

namespace baton {

StragglerReport FindStragglers(int64_t step, std::vector<double> step_seconds, double threshold,
                               double min_seconds) {
  StragglerReport r;
  r.step = step;
  r.threshold = threshold;
  r.min_seconds = min_seconds;
  r.step_seconds = std::move(step_seconds);
  if (r.step_seconds.empty()) return r;
  r.median_seconds = Median(r.step_seconds);
  const double limit = std::max(r.median_seconds * (1 + threshold), r.median_seconds + min_seconds);
  for (size_t i = 0; i < r.step_seconds.size(); ++i)
    if (r.step_seconds[i] > limit) r.stragglers.push_back(static_cast<int>(i));
  std::sort(r.stragglers.begin(), r.stragglers.end(), [&](int a, int b) {
    return r.step_seconds[static_cast<size_t>(a)] > r.step_seconds[static_cast<size_t>(b)];
  });
  return r;
}

}  // namespace baton
