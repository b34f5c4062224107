// baton::Checkpointer::Create and the Checkpointer's set-up: options, the
// checkpoint directory, the communicators of the world and of the shard
// groups; the public entry points of the synchronous paths, which first
// complete the asynchronous save in flight (ckpt/async_save.cc) and hold
// the process's HDF5 lock. The save and restore paths: ckpt/save.cc,
// ckpt/restore.cc; registration: ckpt/registration.cc (the class:
// ckpt/checkpointer_impl.h).
#include <mpi.h>

#include <unistd.h>

#include <chrono>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "baton/hdf5_mutex.h"
#include "base/printable.h"
#include "base/events/event_log.h"
#include "baton/log.h"
#include "ckpt/agreement.h"
#include "ckpt/catalog.h"
#include "ckpt/checkpointer_impl.h"
#include "ckpt/layout.h"
#include "ckpt/run.h"
#include "ckpt/slurm_job_life.h"
#include "ckpt/writer_lock.h"
#include "mpi_runtime/deadline.h"
#include "mpi_runtime/mpi_check.h"
#include "mpi_runtime/silence_watch.h"

namespace baton {
namespace ckpt {
namespace {

// mkdir -p: the directory and its missing parents (as torch.save and DCP
// users expect of a checkpoint path), the parents with the same mode; a
// parent that exists and is not a directory fails naming it.
Status CreateDirAndParents(fs::Env* env, const std::string& dir, mode_t mode) {
  const size_t slash = dir.find_last_of('/');
  if (slash != std::string::npos && slash > 0) {
    const std::string parent = dir.substr(0, slash);
    fs::FileInfo info;
    Status s = env->Stat(parent, &info);
    if (s.code() == Code::kNotFound) s = CreateDirAndParents(env, parent, mode);
    BATON_RETURN_IF_ERROR(s);
  }
  return env->CreateDir(dir, mode, /*exist_ok=*/true);
}

}  // namespace

std::string UtcNow() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string ShapeText(const std::vector<uint64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string ShardFileName(int group) { return CanonicalShardFile(static_cast<size_t>(group)); }

CheckpointerImpl::~CheckpointerImpl() {
  // Not collective, so the save in flight cannot be committed here (Wait()
  // commits it): its writer is abandoned at its next slab instead of
  // writing to the end a version nobody will commit (the exit would wait
  // for a whole shard only to discard it). What it left is an incomplete
  // version, which the next save's retention removes.
  if (pending_) {
    writer_.Abandon();
    env_->Mark("abandon " + pending_->vdir);
    Status s = writer_.Join();
    BATON_LOG(kCkpt, warning) << pending_->What() << " (" << pending_->vdir
                              << ") was abandoned: Checkpointer destroyed without Wait()"
                              << (s.ok() || s.code() == Code::kAborted ? "" : "; its write failed: " + s.ToString());
  }
  // After an MPI failure (mpi/mpi_check.h) MPI is not called again: leaked.
  if (mpi::Failed()) return;
  if (group_ != MPI_COMM_NULL) MPI_Comm_free(&group_);
  if (replicated_comm_ != MPI_COMM_NULL && replicated_comm_ != comm_) MPI_Comm_free(&replicated_comm_);
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

// Rank 0: the writer lock, waiting up to lock_wait_seconds for a holder
// that may be dead but not yet noticed (an NFS server frees a dead client's
// lock only when its lease ends), polling once a second. Where flock does
// not reach every node the lock is also a lease checked against Slurm
// (ckpt/writer_lock.h).
Status CheckpointerImpl::LockDirectory() {
  auto env_text = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v != nullptr ? v : "");
  };
  WriterIdentity me;
  me.pid = static_cast<long>(::getpid());
  me.host = runtime_.host(0);
  me.job = env_text("SLURM_JOB_ID");
  me.step = env_text("SLURM_STEP_ID");
  const std::string since = UtcNow();
  const double give_up = Now() + options_.lock_wait_seconds;
  for (bool logged = false;; logged = true) {
    std::string how;
    Status s = AcquireWriterLock(env_, dir_, options_.file_mode, me, since, SlurmJobLife, &lock_, &how);
    if (s.ok() && lock_->reach() != fs::LockReach::kCluster) {
      BATON_LOG(kCkpt, warning) << "the writer lock " << dir_ << "/" << kWriterLockName << ": " << how
                                << "; it is also a lease checked against Slurm (docs/checkpoint-format.md)";
    }
    if (s.code() != Code::kUnavailable) return s;
    if (Now() >= give_up) {
      // The holder's text is the lock file's, written by whoever holds
      // it: escaped (base/printable.h) before it can reach a terminal.
      return Status::Unavailable(log::kCkpt, "checkpoint directory " + dir_ + " has another live writer (" +
                                                 Printable(s.message()) + "), still after " +
                                                 std::to_string(static_cast<int>(options_.lock_wait_seconds)) +
                                                 " s: one Checkpointer per directory at a time");
    }
    if (!logged) {
      BATON_LOG(kCkpt, warning) << Printable(s.message()) << "; waiting up to " << options_.lock_wait_seconds
                                << " s for it to end (a dead holder's lock on NFS lasts until its lease ends)";
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

Status CheckpointerImpl::CheckWritable(const std::string& call) const {
  if (read_only_.empty()) return Status::OK();
  return Status::InvalidArgument(log::kCkpt, call + ": checkpoint directory " + dir_ + " is read-only (" + read_only_ +
                                                 "): this Checkpointer restores only");
}

// The event log's record of a save (docs/events.md): the time the call
// blocked the program, whether it committed, and the level it reached.
void CheckpointerImpl::RecordSave(int64_t step, double seconds, bool async, const Status& s) const {
  events::Record r("save");
  r.Int("step", step).Num("dur", seconds).Bool("async", async).Bool("ok", s.ok());
  if (!async && s.ok()) r.Int("level", stats_.level).Int("bytes", static_cast<int64_t>(stats_.total_bytes));
  events::Emit(r, events::Flush::kNow);
}

// The synchronous paths: the save in flight is completed first (at most one
// save in flight), and the snapshot of level 1 is dropped by Save and
// Restore (it is no longer the newest state). The HDF5 lock is free of the
// writer by then; it keeps the application's own HDF5 calls out.
Status CheckpointerImpl::Save(int64_t step) {
  const double t0 = Now();
  Status s = SaveUnrecorded(step);
  RecordSave(step, Now() - t0, /*async=*/false, s);
  return s;
}

Status CheckpointerImpl::SaveUnrecorded(int64_t step) {
  mpi::SilenceWatch::Scope watch(silence_.get(), "Checkpointer::Save");
  if (mpi::Failed()) return FailedBeforeCommit("Checkpointer::Save", __FILE__, __LINE__);
  BATON_RETURN_IF_ERROR(CheckWritable("Save(" + std::to_string(step) + ")"));
  BATON_RETURN_IF_ERROR(CompletePending());
  if (local_.on()) {
    // Level 2 writes one shard per rank (node_local_level.h): a save is
    // SaveAsync's, completed at once, its rows written from the
    // application's arrays in place (the caller waits: they cannot change),
    // so that it takes no staging memory, as a synchronous save takes none.
    const double t0 = Now();
    BATON_RETURN_IF_ERROR(StartSave(step, "Save(" + std::to_string(step) + ")", /*in_place=*/true));
    Status s = CompletePending();
    stats_.seconds = Now() - t0;
    return s;
  }
  memory_.Drop();
  std::lock_guard<std::mutex> lock(Hdf5Mutex());
  return SaveNow(step);
}

Status CheckpointerImpl::Restore(const RestoreOptions& options, RestoreResult* result) {
  const double t0 = Now();
  Status s = RestoreUnrecorded(options, result);
  events::Record r("restore");
  r.Num("dur", Now() - t0).Bool("ok", s.ok());
  if (result->step) r.Int("step", *result->step).Int("level", result->level);
  r.Int("fallbacks", static_cast<int64_t>(result->fallbacks.size()));
  // The event log is the process's, opened by a writable Checkpointer only:
  // a read-only one (BatonReader, the CLI) writes no file of its own, and its
  // record waits in the process's buffer until the program's writer opens
  // the log (docs/events.md). So the restore of a job that resumes through a
  // reader (the FSDP2 example: dcp.load, then BatonWriter saves) is in its
  // log, and `baton report` can say where it resumed; a process that opens
  // no log (the CLI: BATON_EVENTS=0) writes nothing.
  events::Emit(r, events::Flush::kNow);
  return s;
}

Status CheckpointerImpl::RestoreUnrecorded(const RestoreOptions& options, RestoreResult* result) {
  mpi::SilenceWatch::Scope watch(silence_.get(), "Checkpointer::Restore");
  *result = RestoreResult();
  if (mpi::Failed()) return FailedBeforeCommit("Checkpointer::Restore", __FILE__, __LINE__);
  BATON_RETURN_IF_ERROR(CompletePending());
  memory_.Drop();
  std::lock_guard<std::mutex> lock(Hdf5Mutex());
  return RestoreNow(options, result);
}

Status CheckpointerImpl::ReadMetadata(const RestoreOptions& options, std::optional<CheckpointMetadata>* out) {
  mpi::SilenceWatch::Scope watch(silence_.get(), "Checkpointer::ReadMetadata");
  out->reset();
  BATON_RETURN_IF_ERROR(CompletePending());
  return ReadMetadataNow(options, out);
}

namespace {

// A directory that holds DCP's .metadata (FileSystemWriter's checkpoint)
// and no baton version: InvalidArgument saying so and what reads it, so
// that neither a restore (a silent first run) nor a save (baton's files
// beside DCP's) takes it for an empty checkpoint directory.
Status CheckNotForeign(fs::Env* env, const std::string& dir) {
  std::vector<std::string> names;
  if (!env->ListDir(dir, &names).ok()) return Status::OK();  // the open's own checks name it
  bool dcp = false;
  for (const std::string& name : names) {
    uint64_t seq = 0;
    int64_t step = 0;
    if (ParseVersionName(name, &seq, &step)) return Status::OK();
    dcp = dcp || name == ".metadata";
  }
  if (!dcp) return Status::OK();
  return Status::InvalidArgument(
      log::kCkpt, "checkpoint directory " + dir + " holds a DCP checkpoint (.metadata, no baton version): import it "
                  "with `baton ckpt import " + dir + " NEWDIR`, or read it with torch.distributed.checkpoint's "
                  "FileSystemReader");
}

}  // namespace

Status CheckpointerImpl::Init() {
  rank_ = runtime_.rank();
  size_ = runtime_.size();
  Status local;
  if (rank_ == 0) {
    // The directory as given may be a symlink (a link to scratch space):
    // followed once, here, and every rank uses the real path, so that no
    // later call (all O_NOFOLLOW) meets it.
    fs::FileInfo info;
    local = env_->Stat(dir_, &info);
    if (local.code() == Code::kNotFound && options_.read_only) {
      local = Status::NotFound(log::kCkpt, "checkpoint directory " + dir_ + " does not exist (opened to read: nothing "
                                           "is created)");
    } else if (local.code() == Code::kNotFound) {
      local = CreateDirAndParents(env_, dir_, options_.dir_mode);
    }
    char* real = local.ok() ? ::realpath(dir_.c_str(), nullptr) : nullptr;
    if (local.ok() && real == nullptr) {
      local = Status::IOError(log::kCkpt, "realpath(" + dir_ + "): " + std::strerror(errno));
    }
    if (real != nullptr) {
      dir_ = real;
      std::free(real);
    }
    if (local.ok()) local = env_->Stat(dir_, &info);
    if (local.ok() && info.type != fs::FileType::kDirectory) {
      local = Status::InvalidArgument(log::kCkpt, "checkpoint directory " + dir_ + " is not a directory");
    }
    // A read-only directory (a file system remounted read-only, an
    // evaluation job's view of another's checkpoints) is restored from
    // without the writer lock, which it cannot hold: nothing is written
    // there, and no other Checkpointer can write it either.
    // Another tool's checkpoint is not a first run: refused before the lock or the run file is written there.
    if (local.ok()) local = CheckNotForeign(env_, dir_);
    std::string why;
    if (local.ok() && options_.read_only) why = "opened to read";
    if (local.ok() && (options_.read_only || env_->ReadOnly(dir_, &why))) {
      read_only_ = why;
      local = ReadRun(env_, dir_, &run_);
      if (local.code() == Code::kNotFound) {
        run_ = RunInfo();
        local = Status::OK();
      }
      if (local.ok() && !options_.run_id.empty() && !run_.run_id.empty() && run_.run_id != options_.run_id) {
        local = Status::InvalidArgument(log::kCkpt, "checkpoint directory " + dir_ + " belongs to run " + run_.run_id +
                                                        ", not " + options_.run_id);
      }
      if (run_.run_id.empty()) run_.run_id = options_.run_id;
      // A reader that asked for it (CheckpointOptions::read_only) is not told.
      if (!options_.read_only) {
        BATON_LOG(kCkpt, warning) << "checkpoint directory " << dir_ << " is read-only (" << why
                                  << "): restores only, without the writer lock; saves fail";
      }
    } else if (local.ok()) {
      local = LockDirectory();
      if (local.ok()) local = OpenRun(env_, dir_, options_.run_id, options_.file_mode, &run_);
    }
  }
  // Every rank uses rank 0's resolved directory and knows the run id
  // (run_id()) and whether the directory is read-only; only rank 0 its
  // sequence. Rank 0 alone did the work: its outcome and the three texts
  // in one broadcast (ckpt/agreement.h), NUL-separated (no path, reason or
  // run id holds a NUL).
  std::string opened = read_only_ + '\0' + dir_ + '\0' + run_.run_id;
  BATON_RETURN_IF_ERROR(BcastOutcome(runtime_.world_comm(), local, &opened));
  const size_t a = opened.find('\0'), b = a == std::string::npos ? a : opened.find('\0', a + 1);
  if (b == std::string::npos) {
    return Status::Internal(log::kCkpt, "the opened directory's texts from rank 0 lack their separators");
  }
  read_only_ = opened.substr(0, a);
  dir_ = opened.substr(a + 1, b - a - 1);
  run_.run_id = opened.substr(b + 1);
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_dup(runtime_.world_comm(), &comm_)));
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN)));
  group_of_ = ckpt::ShardGroups(runtime_.topology(), options_.group_size);
  if (static_cast<int>(group_of_.size()) != size_) {
    return Status::Internal(log::kCkpt, "ShardGroups gave " + std::to_string(group_of_.size()) + " groups for " +
                                            std::to_string(size_) + " ranks");
  }
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_split(comm_, group_of_[rank_], rank_, &group_)));
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_set_errhandler(group_, MPI_ERRORS_RETURN)));
  const ckpt::ReplicatedReadPlan replicated = ckpt::PlanReplicatedRead(runtime_.topology(), rank_);
  replicated_parts_ = replicated.parts;
  replicated_part_ = replicated.part;
  if (replicated.parts == size_) {
    replicated_comm_ = comm_;  // a part per rank: the parts go over the world
  } else if (replicated.parts > 1) {
    BATON_RETURN_IF_ERROR(
        BATON_MPI_CHECK(MPI_Comm_split(comm_, replicated.color, replicated.key, &replicated_comm_)));
    BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_set_errhandler(replicated_comm_, MPI_ERRORS_RETURN)));
  }
  double peer_timeout = 0;
  BATON_RETURN_IF_ERROR(mpi::ResolveCollectiveTimeout(
      options_.peer_timeout > 0 ? options_.peer_timeout : runtime_.options().collective_timeout, &peer_timeout));
  silence_ = std::make_unique<mpi::SilenceWatch>(runtime_, peer_timeout);
  // The event log lives beside the checkpoints; without it the job still
  // runs (it only measures the job). A read-only directory has none.
  if (read_only_.empty()) {
    if (Status ev = events::Open(dir_, rank_, options_.dir_mode, options_.file_mode); !ev.ok()) {
      BATON_LOG(kCkpt, warning) << ev << "; no event log for `baton report`";
    }
  }
  // Level 2 writes (its own directories, and the record of level 3): off.
  if (!read_only_.empty()) return Status::OK();
  return InitLevel2();
}

}  // namespace ckpt

Status Checkpointer::Create(Runtime& runtime, const CheckpointOptions& options, std::unique_ptr<Checkpointer>* out) {
  std::string dir = options.dir;
  if (dir.empty()) {
    const char* env = std::getenv("BATON_CKPT_DIR");
    if (env != nullptr) dir = env;
  }
  if (dir.empty()) {
    return Status::InvalidArgument(log::kCkpt, "no checkpoint directory: set CheckpointOptions::dir or BATON_CKPT_DIR");
  }
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (options.keep < 1) {
    return Status::InvalidArgument(log::kCkpt, "keep = " + std::to_string(options.keep) + ": must be >= 1");
  }
  if (options.max_restore_failures < 1) {
    return Status::InvalidArgument(log::kCkpt, "max_restore_failures = " +
                                                   std::to_string(options.max_restore_failures) + ": must be >= 1");
  }
  if (!(options.lock_wait_seconds >= 0)) {
    return Status::InvalidArgument(log::kCkpt, "lock_wait_seconds = " + std::to_string(options.lock_wait_seconds) +
                                                   ": must be >= 0");
  }
  if (!options.run_id.empty() && !ckpt::ValidRunId(options.run_id)) {
    return Status::InvalidArgument(log::kCkpt, "run_id \"" + options.run_id + "\": must be 1-64 of [A-Za-z0-9._-], not . nor ..");
  }
  if (options.async_writer_nice < 0 || options.async_writer_nice > 19) {
    return Status::InvalidArgument(log::kCkpt, "async_writer_nice = " + std::to_string(options.async_writer_nice) +
                                                   ": must be 0-19");
  }
  if (options.shared_every < 1) {
    return Status::InvalidArgument(log::kCkpt, "shared_every = " + std::to_string(options.shared_every) +
                                                   ": must be >= 1");
  }
  if (!(options.peer_timeout >= 0) || options.peer_timeout > 1e9) {
    return Status::InvalidArgument(log::kCkpt, "peer_timeout = " + std::to_string(options.peer_timeout) +
                                                   ": must be >= 0 s (0: the runtime's collective timeout)");
  }
  if (options.local_keep < 1) {
    return Status::InvalidArgument(log::kCkpt, "local_keep = " + std::to_string(options.local_keep) +
                                                   ": must be >= 1");
  }
  if (options.group_size < 0) {
    return Status::InvalidArgument(log::kCkpt, "group_size = " + std::to_string(options.group_size) +
                                                   ": must be >= 0 (0: one shard per node)");
  }
  ckpt::fs::Env* env = options.env != nullptr ? options.env : ckpt::fs::Env::Default();
  auto ck = std::make_unique<ckpt::CheckpointerImpl>(runtime, options, dir, env);
  BATON_RETURN_IF_ERROR(ck->Init());
  *out = std::move(ck);
  return Status::OK();
}

// The listing of ckpt/catalog.h, for front ends (include/baton/checkpointer.h).
Status ListCommittedVersions(const std::string& dir, std::vector<CommittedVersion>* out) {
  out->clear();
  std::vector<ckpt::VersionInfo> versions;
  BATON_RETURN_IF_ERROR(ckpt::ListVersions(ckpt::fs::Env::Default(), dir, /*max_restore_failures=*/0, &versions));
  for (const ckpt::VersionInfo& v : versions) {
    if (v.status != ckpt::VersionStatus::kIncomplete) out->push_back(CommittedVersion{v.name, v.step});
  }
  return Status::OK();
}

}  // namespace baton
