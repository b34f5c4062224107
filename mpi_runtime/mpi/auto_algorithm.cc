#include "mpi_runtime/mpi/auto_algorithm.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
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
  a->LoadDecisions();
  *out = std::move(a);
  return Status::OK();
}

// Rank 0's text becomes every rank's (a split choice would deadlock).
Status AutoAlgorithm::Share(std::string* text) {
  unsigned long long n = text->size();
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Bcast(&n, 1, MPI_UNSIGNED_LONG_LONG, 0, world_)));
  if (n > static_cast<unsigned long long>(INT_MAX))
    return Status::InvalidArgument(kComponent, "tune table of " + std::to_string(n) + " bytes is too large");
  text->resize(static_cast<size_t>(n));
  if (n == 0) return Status::OK();
  return BATON_MPI_CHECK(MPI_Bcast(text->data(), static_cast<int>(n), MPI_CHAR, 0, world_));
}

void AutoAlgorithm::LoadTable() {
  Status s = LoadTuneTable(DefaultTunePath(), rank_ == 0, [this](std::string* t) { return Share(t); }, &table_);
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

// The decisions of an earlier run of this shape (BATON_AUTO_FILE).
void AutoAlgorithm::LoadDecisions() {
  if (!tuner_) return;  // a table entry, or nothing to choose
  const char* path = std::getenv("BATON_AUTO_FILE");
  if (path == nullptr || *path == '\0') return;
  decisions_path_ = path;
  TuneTable kept;
  Status s = LoadTuneTable(decisions_path_, rank_ == 0, [this](std::string* t) { return Share(t); }, &kept);
  if (!s.ok()) {
    if (rank_ == 0) {
      BATON_LOG(kRuntime, warning) << "BATON_AUTO_FILE: " << s.message() << "; algorithm auto measures again";
    }
    return;
  }
  auto entry = kept.find(KeyOf(topology_));
  if (entry == kept.end()) return;
  for (const auto& [bytes, choice] : entry->second) tuner_->Preset(bytes, choice);
  if (rank_ == 0) {
    BATON_LOG(kRuntime, debug) << "algorithm auto: " << entry->second.size() << " size classes decided by "
                               << decisions_path_;
  }
}

Algorithm AutoAlgorithm::Current(size_t bytes) const {
  if (tuner_) return FromTuned(tuner_->Decided(bytes));
  return FromTuned(LookupTuned(table_, KeyOf(topology_), bytes));
}

bool AutoAlgorithm::NextSample(size_t bytes, Algorithm* candidate) const {
  if (!tuner_ || bytes == 0) return false;
  bool measure = false;
  *candidate = FromTuned(tuner_->Next(bytes, &measure));
  return measure;
}

char* AutoAlgorithm::SampleBuffer(size_t bytes) {
  if (sample_.size() < bytes) sample_.resize(bytes);
  return sample_.data();
}

void AutoAlgorithm::AbandonSample() { Abandon(&sample_); }

Status AutoAlgorithm::Record(size_t bytes, double seconds, const Deadline& deadline) {
  if (!tuner_ || !tuner_->Record(bytes, seconds)) return Status::OK();
  return Agree(bytes, deadline);
}

// The ranks' medians per candidate, the slowest rank's (MAX), then the
// decision; logged once per size class on rank 0, at debug level (a
// program's log at info says what it does, not how auto measured).
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
  std::vector<char>().swap(sample_);  // the next class sizes its own
  const size_t class_bytes = size_t{1} << OnlineTuner::ClassOf(bytes);
  if (rank_ == 0) {
    std::string text;
    for (int i = 0; i < n; ++i)
      text += std::string(i ? ", " : "") + std::string(TunedAlgoName(tuner_->candidates()[static_cast<size_t>(i)])) +
              " " + std::to_string(static_cast<long>(medians[static_cast<size_t>(i)] * 1e6)) + " us";
    BATON_LOG(kRuntime, debug) << "algorithm auto, all_reduce of " << class_bytes << "+ bytes: measured " << text
                               << " (median of " << tuner_->samples() << ", slowest rank): " << TunedAlgoName(choice);
    KeepDecision(class_bytes, choice);
  }
  return Status::OK();
}

// Rank 0 merges the decision into BATON_AUTO_FILE (through a temporary file
// and a rename). A failure costs only the next run a measurement: a
// warning, not an error.
void AutoAlgorithm::KeepDecision(size_t class_bytes, TunedAlgo choice) {
  if (decisions_path_.empty()) return;
  TuneTable kept;
  std::string text;
  bool exists = false;
  Status s = ReadTuneFile(decisions_path_, &text, &exists);
  if (s.ok() && exists && !ParseTuneTable(text, decisions_path_, &kept).ok()) kept.clear();  // rewritten whole
  if (s.ok()) {
    kept[KeyOf(topology_)][class_bytes] = choice;
    s = WriteTuneFile(decisions_path_, FormatTuneTable(kept));
  }
  if (!s.ok()) {
    BATON_LOG(kRuntime, warning) << "BATON_AUTO_FILE: " << s.message()
                                 << "; a requeued run will measure this size class again";
  }
}

}  // namespace baton::mpi
