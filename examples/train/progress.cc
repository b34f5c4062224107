#include "progress.h"

#include <cmath>
#include <cstdio>

namespace train {

Progress::Progress(int64_t total, int64_t done, double period_seconds)
    : total_(total), period_(period_seconds), last_step_(done), last_(Steady::now()) {}

std::string Progress::Clock(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "-";
  const auto s = static_cast<long long>(std::llround(seconds));
  char buf[40];
  std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  return buf;
}

bool Progress::Due(int64_t step, double loss, std::string* line) {
  const Steady::time_point now = Steady::now();
  const double seconds = std::chrono::duration<double>(now - last_).count();
  if (!first_ && step != total_ && seconds < period_) return false;
  const double rate = seconds > 0 ? static_cast<double>(step - last_step_) / seconds : 0;
  char buf[200];
  std::snprintf(buf, sizeof buf, "step %lld/%lld (%.1f%%)  loss %.6f  %.1f steps/s  ETA %s",
                static_cast<long long>(step), static_cast<long long>(total_),
                100.0 * static_cast<double>(step) / static_cast<double>(total_), loss, rate,
                step == total_ ? "0:00:00" : rate > 0 ? Clock(static_cast<double>(total_ - step) / rate).c_str() : "-");
  *line = buf;
  first_ = false;
  last_ = now;
  last_step_ = step;
  return true;
}

}  // namespace train
