// The restore failures of a version, recorded beside it in its
// restore-failures file (catalog.h's kRestoreFailuresName), one line each;
// a version with max_restore_failures of them is quarantined (ListVersions
// counts them). MPI-free. Every rewrite is durable (fs::WriteFileDurably):
// a reader sees the old or the new file, never half of one.
#pragma once

#include <string>

#include "baton/status.h"
#include "ckpt/catalog.h"
#include "ckpt/fs/env.h"

namespace baton::ckpt {

// The number of failures recorded in the version directory `version_path`
// (0 without the file). A file larger than any baton writes, or not a
// regular file: an error (ListVersions counts it as no failures).
Status CountRestoreFailures(fs::Env* env, const std::string& version_path, int* count);

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

}  // namespace baton::ckpt
