// The versions in a checkpoint directory and their status: the listing.
// MPI-free: the CLI (`baton ckpt ls|gc`) and the Checkpointer share it.
// Beside it, each its own concept: the restore failures and attempt marks
// recorded in a version (restore_failures.h), which versions retention
// removes (retention.h), and a version's removal (version_removal.h).
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

// The file in a version directory that records its restore failures
// (restore_failures.h); counted here for the status.
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

// dir + "/" + name after checking that name is a plain file name and that
// the result is a regular file, not a symlink (a manifest must not lead
// outside its version directory). InvalidArgument naming the name otherwise.
Status ResolveInside(fs::Env* env, const std::string& dir, const std::string& name, std::string* path);

}  // namespace baton::ckpt
