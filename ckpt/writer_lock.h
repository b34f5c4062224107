// The writer lock of a checkpoint directory (<dir>/writer.lock): one
// writer per directory at a time, on the file systems clusters have
// (docs/checkpoint-format.md, "The writer lock on cluster file systems").
//
// flock(2) is the lock where it reaches every node (fs::LockReach). Where
// it reaches one node only (Lustre localflock, NFS nolock) or does not
// exist (ENOLCK, ENOSYS), the lock is also a lease: the file holds its
// holder's text (pid, host, Slurm job and step), emptied when the holder
// ends cleanly; a text left by a holder on another node is honoured while
// Slurm says that holder's job still runs. Slurm is asked through
// `JobLifeFn`, an injectable seam: this core links no Slurm (the
// Checkpointer passes SlurmJobLife, ckpt/slurm_job_life.h).
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>

#include "baton/status.h"
#include "ckpt/fs/env.h"

namespace baton::ckpt {

// Who takes the lock. job and step: Slurm's ("" outside Slurm).
struct WriterIdentity {
  long pid = 0;
  std::string host;
  std::string job;
  std::string step;
};
// "pid P on HOST, job J, step S, since TIME" (the holder text).
std::string HolderText(const WriterIdentity& who, const std::string& since);
// The holder text parsed back; false when it is not one.
bool ParseHolderText(const std::string& text, WriterIdentity* who);

enum class JobLife { kRunning, kEnded, kUnknown };
// Whether Slurm's job `job` (an id as in SLURM_JOB_ID) still runs.
using JobLifeFn = std::function<JobLife(const std::string& job)>;

// Takes <dir>/writer.lock for `me` (rank 0 of a Checkpointer, or `baton
// ckpt gc`). kUnavailable naming the holder when it is held: by flock, or,
// where flock does not reach every node, by a holder text of another run
// whose job `job_life` says is running (or cannot tell). A text of the
// same job and step is an earlier run of this job (a requeue): taken over.
// *how: the lock's reach and, when taken over, whose text it replaced.
Status AcquireWriterLock(fs::Env* env, const std::string& dir, mode_t mode, const WriterIdentity& me,
                         const std::string& since, const JobLifeFn& job_life, std::unique_ptr<fs::FileLock>* lock,
                         std::string* how);

}  // namespace baton::ckpt
