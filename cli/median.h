// The median of a benchmark's samples: what every `baton bench` reports,
// since on a shared machine the mean follows the outliers.
#pragma once

#include <algorithm>
#include <vector>

namespace baton::cli {

inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace baton::cli
