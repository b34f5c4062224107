#include "base/launch/sweep_decision.h"

#include "base/launch/decimal.h"

namespace baton::launch {
namespace {

std::optional<uint32_t> CanonicalDecimal(std::string_view name, long long lo) {
  long long v = 0;
  if (name.empty() || (name.size() > 1 && name[0] == '0')) return std::nullopt;
  for (char c : name)
    if (c < '0' || c > '9') return std::nullopt;
  if (!ParseDecimal(name, lo, 0xfffffffeLL, &v)) return std::nullopt;
  return static_cast<uint32_t>(v);
}

}  // namespace

bool EndedForGood(const JobRecord& job) {
  if (!job.known) return true;
  constexpr uint32_t kComingBack = kJobRequeueFlag | kJobRequeueHoldFlag | kJobSpecialExitFlag | kJobResizingFlag |
                                   kJobReconfigFailFlag | kJobRequeueFedFlag;
  if (job.state & kComingBack) return false;
  switch (job.state & kJobStateBase) {
    case kJobComplete:
    case kJobCancelled:
    case kJobFailed:
    case kJobTimeout:
    case kJobNodeFail:
    case kJobPreempted:
    case kJobBootFail:
    case kJobDeadline:
    case kJobOom:
      return true;
    default:  // pending, running, suspended, or a state newer than this code
      return false;
  }
}

std::optional<uint32_t> ParseJobDirName(std::string_view name) { return CanonicalDecimal(name, 1); }

std::optional<uid_t> ParseUidDirName(std::string_view name) {
  auto v = CanonicalDecimal(name, 0);
  if (!v) return std::nullopt;
  return static_cast<uid_t>(*v);
}

SweepVerdict Decide(const SweepEntry& e, std::string* why) {
  why->clear();
  if (!ParseJobDirName(e.name)) {
    *why = "not named after a job id";
    return SweepVerdict::kLeave;
  }
  if (!e.is_directory) {
    *why = "not a directory (a link or a file)";
    return SweepVerdict::kLeave;
  }
  // The owner is the user the parent is named after, or the caller for a
  // directory whose hand-over an earlier start did not finish.
  if (e.owner != e.dir_uid && e.owner != e.caller) {
    *why = "owned by uid " + std::to_string(e.owner) + ", not by uid " + std::to_string(e.dir_uid);
    return SweepVerdict::kLeave;
  }
  if (e.ending_job_and_empty) return SweepVerdict::kRemove;
  if (!e.job) {
    *why = "Slurm did not say whether the job ended";
    return SweepVerdict::kLeave;
  }
  if (!EndedForGood(*e.job)) {
    *why = "the job may still run (job_state " + std::to_string(e.job->state) + ")";
    return SweepVerdict::kKeep;
  }
  return SweepVerdict::kRemove;
}

}  // namespace baton::launch
