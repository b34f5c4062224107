#include "mpi_runtime/mpi/auto_algorithm.h"

#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include "base/env_options.h"
#include "baton/log.h"
#include "mpi_runtime/mpi/mpi_types.h"
#include "mpi_runtime/mpi_check.h"

namespace baton::mpi {

Algorithm FromTuned(TunedAlgo a) {
  return a == TunedAlgo::kRing ? Algorithm::kRing
         : a == TunedAlgo::kHierarchical ? Algorithm::kHierarchical
                                         : Algorithm::kNative;
}

Status AutoAlgorithm::Create(MPI_Comm world, int rank, int size, const Topology& topology,
                             std::unique_ptr<AutoAlgorithm>* out) {
  std::unique_ptr<AutoAlgorithm> a(new AutoAlgorithm(world, rank, topology));
  a->LoadTable();
  BATON_RETURN_IF_ERROR(a->MakeTuner(size));
  *out = std::move(a);
  return Status::OK();
}

// Rank 0 reads the tune file and broadcasts its text, so every rank
// chooses the same algorithm (a split choice would deadlock).
void AutoAlgorithm::LoadTable() {
  auto share = [this](std::string* text) -> Status {
    unsigned long long n = text->size();
    BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Bcast(&n, 1, MPI_UNSIGNED_LONG_LONG, 0, world_)));
    if (n > static_cast<unsigned long long>(INT_MAX))
      return Status::InvalidArgument(kComponent, "tune table of " + std::to_string(n) + " bytes is too large");
    text->resize(static_cast<size_t>(n));
    if (n == 0) return Status::OK();
    return BATON_MPI_CHECK(MPI_Bcast(text->data(), static_cast<int>(n), MPI_CHAR, 0, world_));
  };
  Status s = LoadTuneTable(DefaultTunePath(), rank_ == 0, share, &table_);
  if (!s.ok() && rank_ == 0) {
    BATON_LOG(kRuntime, warning) << s.message() << "; algorithm auto measures in the job instead";
  }
}

// Without a table entry for this job shape auto measures online. The
// candidates are those that differ here: hierarchical only with several
// nodes of which one holds several ranks, ring only with two ranks or
// more; none (one rank) leaves auto native.
Status AutoAlgorithm::MakeTuner(int size) {
  if (table_.count(KeyOf(topology_)) != 0) return Status::OK();
  long samples = 0;
  BATON_RETURN_IF_ERROR(PositiveCountOption("auto samples", 0, "BATON_AUTO_SAMPLES", 5, &samples));
  std::vector<TunedAlgo> candidates{TunedAlgo::kNative};
  const int nodes = topology_.num_nodes();
  if (nodes > 1 && nodes < size) candidates.push_back(TunedAlgo::kHierarchical);
  if (size > 1) candidates.push_back(TunedAlgo::kRing);
  if (candidates.size() > 1)
    tuner_ = std::make_unique<OnlineTuner>(candidates, static_cast<int>(std::min<long>(samples, 1000)));
  return Status::OK();
}

Algorithm AutoAlgorithm::Next(size_t bytes, bool* measure) const {
  *measure = false;
  if (tuner_ && bytes > 0) return FromTuned(tuner_->Next(bytes, measure));
  return Current(bytes);
}

Algorithm AutoAlgorithm::Current(size_t bytes) const {
  if (tuner_) return FromTuned(tuner_->Decided(bytes));
  return FromTuned(LookupTuned(table_, KeyOf(topology_), bytes));
}

Status AutoAlgorithm::Record(size_t bytes, double seconds, const Deadline& deadline) {
  if (!tuner_ || !tuner_->Record(bytes, seconds)) return Status::OK();
  return Agree(bytes, deadline);
}

// The ranks' medians per candidate, the slowest rank's (MAX), then the
// decision; logged once per size class on rank 0.
Status AutoAlgorithm::Agree(size_t bytes, const Deadline& deadline) {
  std::vector<double> medians = tuner_->Medians(bytes);
  const int n = static_cast<int>(medians.size());
  Status s = Issue(
      deadline,
      [&] { return BATON_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, medians.data(), n, MPI_DOUBLE, MPI_MAX, world_)); },
      [&](MPI_Request* r) {
        return BATON_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, medians.data(), n, MPI_DOUBLE, MPI_MAX, world_, r));
      });
  if (s.code() == Code::kTimeout) Abandon(&medians);
  BATON_RETURN_IF_ERROR(s);
  const TunedAlgo choice = tuner_->Decide(bytes, medians);
  if (rank_ == 0) {
    std::string text;
    for (int i = 0; i < n; ++i)
      text += std::string(i ? ", " : "") + std::string(TunedAlgoName(tuner_->candidates()[static_cast<size_t>(i)])) +
              " " + std::to_string(static_cast<long>(medians[static_cast<size_t>(i)] * 1e6)) + " us";
    BATON_LOG(kRuntime, info) << "algorithm auto, all_reduce of " << (size_t{1} << OnlineTuner::ClassOf(bytes))
                              << "+ bytes: measured " << text << " (median of " << tuner_->samples()
                              << ", slowest rank): " << TunedAlgoName(choice);
  }
  return Status::OK();
}

}  // namespace baton::mpi
