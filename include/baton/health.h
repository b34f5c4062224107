// Keeping a job from hanging silently: the types shared by the runtime
// (heartbeats, stragglers, agreed stop, requeue) and the communicators
// (collective deadlines). The behaviour is documented where it lives:
// baton/runtime.h and baton/communicator.h; the defaults and environment
// variables in man 3 baton and man 7 baton.
#pragma once

#include <cstdint>
#include <vector>

namespace baton {

// EX_TEMPFAIL: "requeue me". The cluster sets RequeueExit=75 in slurm.conf.
inline constexpr int kRequeueExitCode = 75;

// What a collective does when its deadline passes.
enum class OnTimeout {
  // Log the timeout (collective, size, step, silent ranks) and end the
  // process at once with kRequeueExitCode: no destructors, no atexit
  // handlers, no MPI_Finalize (each could wait for the dead peer forever).
  kExit,
  // Return Status::Timeout to the caller, which handles it.
  kReturn,
};

// Per-rank step times, gathered every straggler_every steps (EndStep).
struct StragglerReport {
  int64_t step = -1;                 // the step at which they were gathered; -1: never yet
  std::vector<double> step_seconds;  // mean step time of each rank over the window, by rank
  double median_seconds = 0;
  double threshold = 0;              // slower than median * (1 + threshold) is a straggler,
  double min_seconds = 0;            // and by at least this many seconds
  std::vector<int> stragglers;       // ranks, slowest first
};

}  // namespace baton
