// Which ranks are stragglers, from the step times of every rank. MPI-free:
// the runtime gathers the times (Runtime::EndStep), this decides.
#pragma once

#include <cstdint>
#include <vector>

#include "baton/health.h"

namespace baton {

// Ranks whose time exceeds median * (1 + threshold) AND the median by at
// least `min_seconds`, slowest first: the floor keeps a rank 20 us behind
// at 40 us per step (50 %, and nothing a person can act on) out of the
// report. The median of an even count is the mean of the two middle
// values.
StragglerReport FindStragglers(int64_t step, std::vector<double> step_seconds, double threshold,
                               double min_seconds);

}  // namespace baton
