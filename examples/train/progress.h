// The progress line of a long run, every few seconds rather than one line a
// step:
//   step 120/1000 (12.0%)  loss 1.234567  23.4 steps/s  ETA 0:00:37
// steps/s over the steps since the previous line (the rate now, not the
// run's average, which a slow start or a save would drag for long); the
// ETA at that rate. The first step of a run and the last step always get a
// line. Not thread-safe; one caller.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace train {

class Progress {
 public:
  // `total`: the run's last step; `done`: the steps done before this run
  // (a resumed run's checkpoint); a line at most every `period_seconds`.
  Progress(int64_t total, int64_t done, double period_seconds);

  // After step `step` with mean loss `loss`: true and *line when a line is due.
  bool Due(int64_t step, double loss, std::string* line);

  // "0:00:37", "12:03:09"; "-" for a negative or non-finite count.
  static std::string Clock(double seconds);

 private:
  using Steady = std::chrono::steady_clock;
  int64_t total_;
  double period_;
  int64_t last_step_;
  Steady::time_point last_;
  bool first_ = true;
};

}  // namespace train
