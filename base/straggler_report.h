// Which ranks are stragglers, from the step times of every rank. MPI-free:
// the runtime gathers the times (Runtime::EndStep), this decides.
#pragma once

#include <cstdint>
#include <vector>

#include "baton/health.h"

namespace baton {

// Ranks whose time exceeds median * (1 + threshold), slowest first. The
// median of an even count is the mean of the two middle values.
StragglerReport FindStragglers(int64_t step, std::vector<double> step_seconds, double threshold);

}  // namespace baton
