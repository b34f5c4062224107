#include "mpi_runtime/mpi/online_tuner.h"

#include <algorithm>
#include <utility>

#include "base/median.h"

namespace baton::mpi {

OnlineTuner::OnlineTuner(std::vector<TunedAlgo> candidates, int samples, double margin)
    : candidates_(std::move(candidates)), samples_(std::max(1, samples)), margin_(margin) {
  if (candidates_.empty() || candidates_.front() != TunedAlgo::kNative)
    candidates_.insert(candidates_.begin(), TunedAlgo::kNative);
}

int OnlineTuner::ClassOf(size_t bytes) {
  int k = 0;
  while (bytes > 1) bytes >>= 1, ++k;
  return k;
}

TunedAlgo OnlineTuner::Next(size_t bytes, bool* measure) const {
  const Class& c = classes_[static_cast<size_t>(ClassOf(bytes))];
  *measure = !c.decided && candidates_.size() > 1;
  if (!*measure) return c.choice;
  return candidates_[static_cast<size_t>(c.recorded) % candidates_.size()];
}

bool OnlineTuner::Record(size_t bytes, double seconds) {
  Class& c = classes_[static_cast<size_t>(ClassOf(bytes))];
  if (c.decided) return false;
  if (c.times.empty()) c.times.resize(candidates_.size());
  c.times[static_cast<size_t>(c.recorded) % candidates_.size()].push_back(seconds);
  ++c.recorded;
  return c.recorded == samples_ * static_cast<int>(candidates_.size());
}

std::vector<double> OnlineTuner::Medians(size_t bytes) const {
  const Class& c = classes_[static_cast<size_t>(ClassOf(bytes))];
  std::vector<double> out(candidates_.size(), 0.0);
  for (size_t i = 0; i < c.times.size(); ++i) out[i] = Median(c.times[i]);
  return out;
}

TunedAlgo OnlineTuner::Decide(size_t bytes, const std::vector<double>& agreed) {
  Class& c = classes_[static_cast<size_t>(ClassOf(bytes))];
  // Native unless the fastest other candidate beats it by more than the
  // margin (the rule of --tune); a missing candidate never wins.
  double hier = -1, ring = -1;
  for (size_t i = 1; i < candidates_.size() && i < agreed.size(); ++i)
    (candidates_[i] == TunedAlgo::kHierarchical ? hier : ring) = agreed[i];
  const double never = agreed.empty() ? 0 : agreed[0] * 2 + 1;
  c.choice = agreed.empty() ? TunedAlgo::kNative
                            : PickTuned(agreed[0], hier < 0 ? never : hier, ring < 0 ? never : ring, margin_);
  c.decided = true;
  c.times.clear();
  c.times.shrink_to_fit();
  return c.choice;
}

void OnlineTuner::Preset(size_t bytes, TunedAlgo choice) {
  Class& c = classes_[static_cast<size_t>(ClassOf(bytes))];
  c.choice = choice;
  c.decided = true;
  c.recorded = 0;
  c.times.clear();
}

TunedAlgo OnlineTuner::Decided(size_t bytes) const { return classes_[static_cast<size_t>(ClassOf(bytes))].choice; }

bool OnlineTuner::IsDecided(size_t bytes) const { return classes_[static_cast<size_t>(ClassOf(bytes))].decided; }

}  // namespace baton::mpi
