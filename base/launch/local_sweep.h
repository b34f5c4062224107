// The sweep of node-local job directories (local_dir.h): on one node,
// removes <root>/<uid>/<jobid> of every job that has ended for good
// (sweep_decision.h), whichever node it ran on last and however it ended.
// The plugin runs it as root in the job epilog of every job on the node
// and when slurmd starts (spank/node_context.cc), so a directory left on a
// node by a requeue goes at the next job's end there, and one on a node
// that died with the job and came back goes when its slurmd starts (or at
// the next job's end there, if the job still ran then).
//
// Never as root on a path a user controls by name: <root> and <root>/<uid>
// are opened as OpenSafeDir checks them (root's, writable by nobody else,
// no link); each job directory is opened from the <uid> descriptor without
// following a link; its contents are removed by a child that has become
// the directory's owner (RunAsUser: a link or a rename inside costs the
// user only what the user could remove anyway), under a time bound; root
// then removes the empty directory from the <uid> descriptor.
#pragma once

#include <chrono>
#include <cstdint>
#include <sys/types.h>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/launch/sweep_decision.h"
#include "baton/status.h"

namespace baton::launch {

// Asks Slurm about one job of the user whose directory holds it (the
// plugin: LookupByUser). A failure leaves that job's directories alone.
using JobLookup = std::function<Status(uid_t user, uint32_t job, JobRecord* record)>;

// Every job of one user that the controller knows, with its job_state
// (slurm_load_job_user); a job it does not list is unknown.
using UserJobsQuery = std::function<Status(uid_t user, std::map<uint32_t, uint32_t>* states)>;

// A JobLookup that asks `query` once per user and answers each of that
// user's jobs from the one answer: a sweep costs the controller one request
// per user directory on the node, not one per job directory (issue 30
// item 8). A job the answer does not list is unknown (ended more than
// MinJobAge ago); a failed question fails every job of that user in this
// sweep and is not repeated; a Timeout is not repeated for any user (each
// question would cost the whole limit).
JobLookup LookupByUser(UserJobsQuery query);

struct SweepReport {
  std::vector<std::string> removed;  // paths
  std::vector<std::string> kept;     // paths of jobs that may still run
  std::vector<std::string> left;     // "path: why" for what was not the sweep's to decide, or failed
  bool out_of_time = false;          // stopped at the deadline; the rest waits for the next sweep
};

struct SweepLimits {
  std::chrono::milliseconds total{30000};    // the whole sweep
  std::chrono::milliseconds per_dir{10000};  // removing one job's directory
};

// The job whose end on this node runs the sweep (the job epilog's). Its
// own directory <root>/<uid>/<job> costs the controller nothing when it is
// empty (removed: sweep_decision.h), else one question about that job
// alone (`ask`: slurm_load_job), never the per-user question of `lookup`.
// Before, every job end asked the per-user question on each of its nodes
// at once (issue 30 item 8).
struct EndingJob {
  uid_t uid = 0;
  uint32_t job = 0;
  std::function<Status(uint32_t job, JobRecord* record)> ask;
};

// Sweeps `root`. A missing root is nothing to sweep. A root that fails
// OpenSafeDir's rule is an error naming it (nothing removed). Anything
// else is per entry, in the report; the Status is OK.
// `ending`, when given, is decided as EndingJob says; every other job
// directory through `lookup`.
Status SweepLocalRoot(const std::string& root, const JobLookup& lookup, const SweepLimits& limits,
                      SweepReport* report, const EndingJob* ending = nullptr);

// Removes everything inside the open directory `dir` (not `dir` itself),
// never following a link: getdents64, unlinkat, openat(O_NOFOLLOW), and
// ".." to climb back. Async-signal-safe (no allocation, no lock), for a
// child between fork and _exit; returns 0 or an errno. Directories the
// caller owns without write or search permission are given 0700 first.
int RemoveDirectoryContents(int dir);

}  // namespace baton::launch
