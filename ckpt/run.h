// The run a checkpoint directory belongs to, and its version sequence
// numbers, kept in <dir>/run (MPI-free: the Checkpointer and the CLI).
//
//   run_id 6f1c0a9e3b7d4e21a8c55f0e9b2d7c34
//   last_seq 12
//
// The run id is chosen by the user (CheckpointOptions::run_id) or made once
// (128 random bits) when the directory gets its first writer, and kept
// across requeues and chained jobs (Slurm job ids are not: a chained job
// has a new one, a new cluster restarts them). Every manifest carries it;
// a writer asking for another run id is refused, and a restore skips a
// version of another run. last_seq is the highest sequence number ever
// given to a version: a new version takes one above it and above every
// version listed, and records it before its directory exists, so no number
// is ever used twice, even after its version was removed.
//
// Writers hold <dir>/writer.lock (Env::LockFile) while they use these.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "baton/status.h"
#include "ckpt/catalog.h"
#include "ckpt/fs/env.h"

namespace baton::ckpt {

inline constexpr const char* kRunFileName = "run";
inline constexpr const char* kWriterLockName = "writer.lock";

struct RunInfo {
  std::string run_id;
  uint64_t last_seq = 0;
};

// 1-64 bytes of [A-Za-z0-9._-], not "." nor ".." (it names a directory).
bool ValidRunId(const std::string& id);
// 32 lower-case hex digits from std::random_device.
std::string NewRunId();

// <dir>/run: NotFound when absent, Corruption when it is not what WriteRun
// writes (the message names the line).
Status ReadRun(fs::Env* env, const std::string& dir, RunInfo* out);
// Replaces <dir>/run durably (fs::WriteFileDurably: a temporary, fsync,
// rename, directory fsync).
Status WriteRun(fs::Env* env, const std::string& dir, const RunInfo& run, mode_t mode);

// The directory's run for a writer that asks for run id `wanted` ("": the
// directory's, or a new one): made (and written) when the directory has
// none, its last_seq then the highest listed; InvalidArgument naming both
// ids when the directory belongs to another run. For the writer lock's
// holder only: it removes the temporaries of `run` that crashed writers left.
Status OpenRun(fs::Env* env, const std::string& dir, const std::string& wanted, mode_t mode, RunInfo* out);

// The sequence number of a new version: above run->last_seq and every
// listed version's, written to <dir>/run before it is returned. count > 1
// reserves count numbers from *seq on (last_seq = *seq + count - 1), for
// the saves to level 2 alone that follow without touching <dir>.
Status ReserveSeq(fs::Env* env, const std::string& dir, mode_t mode, const std::vector<VersionInfo>& versions,
                  RunInfo* run, uint64_t* seq, uint64_t count = 1);

}  // namespace baton::ckpt
