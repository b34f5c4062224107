#include "base/straggler_report.h"

#include <algorithm>

namespace baton {

StragglerReport FindStragglers(int64_t step, std::vector<double> step_seconds, double threshold) {
  StragglerReport r;
  r.step = step;
  r.threshold = threshold;
  r.step_seconds = std::move(step_seconds);
  if (r.step_seconds.empty()) return r;
  std::vector<double> sorted = r.step_seconds;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  r.median_seconds = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  const double limit = r.median_seconds * (1 + threshold);
  for (size_t i = 0; i < n; ++i)
    if (r.step_seconds[i] > limit) r.stragglers.push_back(static_cast<int>(i));
  std::sort(r.stragglers.begin(), r.stragglers.end(), [&](int a, int b) {
    return r.step_seconds[static_cast<size_t>(a)] > r.step_seconds[static_cast<size_t>(b)];
  });
  return r;
}

}  // namespace baton
