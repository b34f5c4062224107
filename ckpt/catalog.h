// The versions in a checkpoint directory, their status, restore failures
// recorded beside them, and what retention removes. MPI-free: the CLI
// (`baton ckpt ls|gc`) and the Checkpointer share it.
//
// A version is the directory `v<seq>-s<step>` (seq: 8+ digits, increasing
// with every save in the directory; step: the training step, may repeat).
// It is complete when it holds a regular file `manifest.json`, incomplete
// otherwise (a save that crashed, or one in progress), quarantined when
// complete but its restore failed max_restore_failures times.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "baton/status.h"
#include "ckpt/fs/env.h"

namespace baton::ckpt {

enum class VersionStatus { kComplete, kIncomplete, kQuarantined };
std::string_view VersionStatusName(VersionStatus s);  // "complete", ...

inline constexpr const char* kRestoreFailuresName = "restore-failures";

struct VersionInfo {
  std::string name;  // "v00000012-s400"
  std::string path;  // dir + "/" + name
  uint64_t seq = 0;
  int64_t step = 0;
  VersionStatus status = VersionStatus::kIncomplete;
  int restore_failures = 0;
  // What could not be read about it ("" when all could): its directory or
  // manifest could not be examined (status then kIncomplete), or its
  // restore-failures file (then counted as 0). One unreadable version does
  // not fail the listing of the others.
  std::string problem;
};

std::string VersionName(uint64_t seq, int64_t step);
bool ParseVersionName(std::string_view name, uint64_t* seq, int64_t* step);

// The versions under dir, ascending seq. Entries that are not version
// directories (other files, symlinks, names that do not parse) are ignored.
// Fails only when dir itself cannot be listed; a version that cannot be
// examined is listed with its `problem`.
Status ListVersions(fs::Env* env, const std::string& dir, int max_restore_failures,
                    std::vector<VersionInfo>* out);
// One more than the highest seq in use (1 for an empty directory).
uint64_t NextSeq(const std::vector<VersionInfo>& versions);

// Appends a failure (one line: time and reason) to the version's
// restore-failures file, written through a temporary name and a rename.
Status RecordRestoreFailure(fs::Env* env, const VersionInfo& version, const std::string& reason);

// A restore attempt, marked before the version is read: a line "<time>
// unfinished restore attempt <token> (...)" in restore-failures, which
// counts as a failure until EndRestoreAttempt removes it. A process that
// dies while reading the version (a crash inside HDF5, the OOM killer, a
// kill) leaves it behind, so a version that kills every restore is
// quarantined after max_restore_failures attempts instead of looping.
// *token names this attempt's line.
Status BeginRestoreAttempt(fs::Env* env, const VersionInfo& version, std::string* token);
// Ends the attempt: its line goes; with `failure` (a corruption found) the
// failure's line takes its place.
Status EndRestoreAttempt(fs::Env* env, const VersionInfo& version, const std::string& token,
                         const std::string* failure);

// What retention removes: all but the newest `keep` complete versions;
// quarantined versions older than the newest complete one; incomplete
// versions older than the newest complete one (crashed saves). Never an
// incomplete version newer than every complete one (a save in progress),
// nor a version with a problem (what it is is not known).
std::vector<VersionInfo> PlanRetention(const std::vector<VersionInfo>& versions, int keep);

// Removes a version so that no moment of it is a damaged committed one: the
// manifest goes first (and the directory is synced), making the version
// incomplete at once; then the rest. A removal killed half-way leaves an
// incomplete version, which the next retention removes as a crashed save.
// Through descriptors (Env::RemoveTreeAt): a version directory swapped for
// a symlink since it was listed fails the removal, touching nothing.
Status RemoveVersion(fs::Env* env, const VersionInfo& version);

// dir + "/" + name after checking that name is a plain file name and that
// the result is a regular file, not a symlink (a manifest must not lead
// outside its version directory). InvalidArgument naming the name otherwise.
Status ResolveInside(fs::Env* env, const std::string& dir, const std::string& name, std::string* path);

}  // namespace baton::ckpt
