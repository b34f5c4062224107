// The median of samples (the mean of the two middle values for an even
// count; 0 for none): what every `baton bench` reports, since on a shared
// machine the mean follows the outliers, and what the straggler report and
// algorithm auto's measurement compare. MPI-free, header-only.
#pragma once

#include <algorithm>
#include <vector>

namespace baton {

inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace baton
