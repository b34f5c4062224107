// Which node-local job directories (local_dir.h) the sweep removes: the
// decision alone, from the names it finds and what Slurm says of each job,
// with no file system and no Slurm call, so that every case is a unit test.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace baton::launch {

// What the controller says of one job (SlurmQueries::JobState).
struct JobRecord {
  bool known = false;  // false: the controller does not know the job
  uint32_t state = 0;  // when known: job_state as slurm.h has it (base | flags)
};

// slurm.h's job_state values the decision reads (slurm_queries.cc checks
// them against Slurm's header, which base/ does not include).
inline constexpr uint32_t kJobStateBase = 0xff;
inline constexpr uint32_t kJobPending = 0, kJobRunning = 1, kJobSuspended = 2, kJobComplete = 3,
                          kJobCancelled = 4, kJobFailed = 5, kJobTimeout = 6, kJobNodeFail = 7,
                          kJobPreempted = 8, kJobBootFail = 9, kJobDeadline = 10, kJobOom = 11, kJobEnd = 12;
inline constexpr uint32_t kJobRequeueFlag = 1u << 10, kJobRequeueHoldFlag = 1u << 11,
                          kJobSpecialExitFlag = 1u << 12, kJobResizingFlag = 1u << 13,
                          kJobReconfigFailFlag = 1u << 17, kJobRequeueFedFlag = 1u << 20;

// True when the job will never run again: the controller no longer knows
// it (it ended more than MinJobAge ago; a job it never knew cannot run
// either), or its state is a final one (completed, cancelled, failed,
// timeout, node failure, preempted, boot failure, deadline, out of memory)
// with no requeue on its way. Pending, running, suspended, any requeue
// flag, a resize, and a state this code does not know: not ended, kept.
bool EndedForGood(const JobRecord& job);

// A job directory's name: a job id in canonical decimal (1..4294967294, no
// sign, no leading zero, nothing else). Anything else is not the plugin's
// and the sweep leaves it alone.
std::optional<uint32_t> ParseJobDirName(std::string_view name);

// A user directory's name: a uid in canonical decimal (0..4294967294).
std::optional<uid_t> ParseUidDirName(std::string_view name);

// The sweep's verdict on one entry of <root>/<uid>.
enum class SweepVerdict {
  kRemove,  // a directory of a job that ended for good
  kKeep,    // a directory of a job that may still run
  kLeave,   // not the plugin's, or nothing to decide on: left alone, said why
};

// What the sweep found at <root>/<uid>/<name> before deciding: a directory
// (lstat, not followed), its owner, and Slurm's answer on the job (none
// when the question failed).
struct SweepEntry {
  uid_t dir_uid = 0;               // the uid its parent is named after
  std::string name;                // the entry's name
  bool is_directory = false;       // not a link, not a file
  uid_t owner = 0;                 // its owner
  uid_t caller = 0;                // the sweep's euid (root in the plugin)
  std::optional<JobRecord> job;    // Slurm's answer; none when asking failed
  // The directory of the job whose end runs this sweep (the job epilog's),
  // found empty: removed without asking Slurm. Nothing in it can be lost,
  // and a run of the job that comes back here (a requeue) makes it again
  // (spank/remote_context.cc's init_post_opt).
  bool ending_job_and_empty = false;
};

// The verdict, and why (for the log) when it is not kRemove.
SweepVerdict Decide(const SweepEntry& entry, std::string* why);

}  // namespace baton::launch
