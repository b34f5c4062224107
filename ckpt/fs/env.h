// The file layer of ckpt (leveldb's Env): every file operation of a save or
// restore that is not HDF5's own data transfer goes through an Env, so that
// tests can inject failures (fault_env.h) and check the order of syncs and
// renames that makes a commit atomic.
//
// Paths are plain strings; nothing here interprets them beyond the system
// calls. Every failure is a Status (component "ckpt") naming the call, the
// path and errno's text. Thread-safe: an Env may be used from any thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "baton/status.h"

namespace baton::ckpt::fs {

enum class FileType { kRegular, kDirectory, kSymlink, kOther };

struct FileInfo {
  FileType type = FileType::kOther;
  uint64_t size = 0;
  mode_t mode = 0;      // permission bits
  uid_t uid = 0;        // owner
  int64_t mtime_ns = 0;
};

// A file being written from its start. Not thread-safe.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  // Writes all n bytes (retrying short writes and EINTR) or fails.
  virtual Status Append(const void* data, size_t n) = 0;
  virtual Status Sync() = 0;   // fsync
  // The next Append writes at `offset` (a shard's rows of its next array,
  // through the one descriptor the first OpenForWriteAt opened).
  virtual Status Seek(uint64_t offset) = 0;
  // Starts the write-back of what was appended since the last call, without
  // waiting for it: a hint, never durability (only Sync makes bytes
  // durable). A shard written in pieces, each handed to the disk as soon
  // as it is copied, keeps the disk busy during the copy of the next: the
  // fsync at the end then waits for the tail, not for the whole file.
  virtual void StartWriteback() {}
  // After a Sync: the file's pages may leave the page cache
  // (posix_fadvise DONTNEED), so that the large files of a save (shards,
  // partner and level-3 copies) do not crowd out the job's memory. A hint:
  // it never fails and makes nothing durable.
  virtual void DropCache() {}
  virtual Status Close() = 0;  // also done by the destructor, ignoring errors
};

// How far a FileLock keeps other writers out (docs/checkpoint-format.md,
// "The writer lock on cluster file systems").
enum class LockReach {
  kCluster,  // flock(2) holds on every node that mounts the file (a local disk, NFS with lockd, Lustre -o flock)
  kNode,     // flock holds on this node only (Lustre -o localflock, NFS -o nolock or local_lock=flock|all, BeeGFS)
  kNone,     // no flock at all (ENOLCK: NFS without lockd; ENOSYS/EOPNOTSUPP: Lustre without -o flock)
};
const char* LockReachName(LockReach reach);

// An exclusive lock on a file, held until destroyed (or the process dies:
// the kernel releases it, so a killed writer never keeps it). Destroyed,
// it empties the holder text it wrote, so that a text left in the file
// names a holder that did not end cleanly. Not thread-safe.
class FileLock {
 public:
  virtual ~FileLock() = default;
  // What flock guarantees on this file's file system, and why ("ext4",
  // "lustre mounted localflock").
  virtual LockReach reach() const { return LockReach::kCluster; }
  virtual std::string reach_reason() const { return ""; }
  // The holder text the file held when this lock was taken ("" none).
  virtual std::string previous_holder() const { return ""; }
  // Writes the holder text (LockFile's `holder`) into the file: done by
  // LockFile itself when reach() is kCluster; otherwise the caller first
  // decides from previous_holder() whether another node's writer still
  // holds the directory (ckpt/writer_lock.h), then claims it.
  virtual Status Claim() { return Status::OK(); }
};

class Env {
 public:
  virtual ~Env() = default;

  // The POSIX implementation; lives for the process.
  static Env* Default();

  // Creates `path` exclusively (O_CREAT|O_EXCL|O_NOFOLLOW) with `mode`.
  virtual Status NewWritableFile(const std::string& path, mode_t mode, std::unique_ptr<WritableFile>* out) = 0;
  // Opens an existing regular file (O_NOFOLLOW, neither created nor
  // truncated) for writing from byte `offset` on: Append writes there and
  // onward. For several writers of disjoint ranges of one file (the ranks
  // of a shard group).
  virtual Status OpenForWriteAt(const std::string& path, uint64_t offset, std::unique_ptr<WritableFile>* out) = 0;
  // Reads exactly n bytes at offset (a short file is an IOError naming the
  // path, offset and size). ReadAt, ReadFile and SyncFile open only regular
  // files, without blocking: anything else (a FIFO) is InvalidArgument.
  virtual Status ReadAt(const std::string& path, uint64_t offset, size_t n, void* buf) = 0;
  // Reads the whole file, refusing one larger than max_bytes (nothing is
  // allocated for it then).
  virtual Status ReadFile(const std::string& path, uint64_t max_bytes, std::string* out) = 0;
  // lstat: a symlink is reported as kSymlink, not followed.
  virtual Status Stat(const std::string& path, FileInfo* info) = 0;
  // fsync of a file written by someone else (HDF5): open read-only, fsync.
  virtual Status SyncFile(const std::string& path) = 0;
  // After SyncFile of a large file written by someone else (an HDF5
  // shard): its pages may leave the page cache (posix_fadvise DONTNEED).
  // A hint, as WritableFile::DropCache: never fails.
  virtual void DropFileCache(const std::string& /*path*/) {}
  // Reserves the disk blocks of the first `bytes` of the existing regular
  // file `path` (fallocate FALLOC_FL_KEEP_SIZE: its size stays), so that a
  // full disk is met here, as an IOError naming the path and the bytes,
  // before HDF5 writes into the file (HDF5 1.10 may then crash at exit:
  // HDFFV-11052). OK without reserving on a file system that has no
  // fallocate (EOPNOTSUPP, ENOSYS). ReleaseUnused gives back the blocks
  // past the file's end that the writer did not use.
  virtual Status Reserve(const std::string& path, uint64_t bytes) = 0;
  // ftruncate to its own size: frees blocks reserved past the end. A hint
  // (a failure is ignored): the file's bytes are unchanged either way.
  virtual void ReleaseUnused(const std::string& /*path*/) {}
  // ftruncate to `bytes`: a file that grows gets a sparse tail (zeros), as
  // HDF5 leaves a shard's unwritten data space (h5::WriteMetadataImage).
  virtual Status Resize(const std::string& path, uint64_t bytes) = 0;
  // fsync of a directory, making the entries created or renamed in it durable.
  virtual Status SyncDir(const std::string& path) = 0;
  // rename(2): atomic replacement within one file system.
  virtual Status Rename(const std::string& from, const std::string& to) = 0;
  // mkdir with mode; an existing directory is an error unless exist_ok.
  virtual Status CreateDir(const std::string& path, mode_t mode, bool exist_ok) = 0;
  // Entry names (no "." or ".."), unsorted.
  virtual Status ListDir(const std::string& path, std::vector<std::string>* names) = 0;
  virtual Status RemoveFile(const std::string& path) = 0;
  // Removes a directory and everything in it; never follows symlinks.
  virtual Status RemoveTree(const std::string& path) = 0;
  // Removes parent/name and everything in it through descriptors: the
  // parent is opened, name opened relative to it without following a
  // symlink (openat O_NOFOLLOW|O_DIRECTORY), `first` (unless empty) unlinked
  // in it and the directory fsynced before the rest, then everything
  // removed relative to those descriptors (unlinkat). A name swapped for a
  // symlink at any moment fails the call; nothing outside is touched.
  virtual Status RemoveTreeAt(const std::string& parent, const std::string& name, const std::string& first) = 0;
  // Takes an exclusive flock(2) on `path` (a regular file, created with
  // `mode` when missing, never through a symlink) without waiting, and
  // writes `holder` into it for whoever finds it taken. Taken by another
  // open file (another process, or another lock of this one):
  // kUnavailable whose message holds the holder's text. Where the file
  // system's flock does not reach every node (FileLock::reach()), or where
  // it has none (ENOLCK, ENOSYS, EOPNOTSUPP: OK, reach kNone, nothing
  // locked), `holder` is not written: the caller checks the text left by
  // an earlier holder and calls Claim() (ckpt/writer_lock.h).
  virtual Status LockFile(const std::string& path, mode_t mode, const std::string& holder,
                          std::unique_ptr<FileLock>* lock) = 0;

  // Whether this process cannot write in directory `dir`: its file system
  // is mounted read-only, or the directory is not writable by this user
  // (access W_OK); *why says which. False when it can, or when neither can
  // be told (the writes then say it).
  virtual bool ReadOnly(const std::string& dir, std::string* why) = 0;

  // A protocol step that is not a file operation ("agreed" once every rank's
  // shards are synced), so a recording Env can check the whole order. No-op.
  virtual void Mark(const std::string& /*event*/) {}
};

// Forwards every call to a target Env; override what a test changes.
class EnvWrapper : public Env {
 public:
  explicit EnvWrapper(Env* target) : target_(target) {}
  Env* target() const { return target_; }

  Status NewWritableFile(const std::string& path, mode_t mode, std::unique_ptr<WritableFile>* out) override {
    return target_->NewWritableFile(path, mode, out);
  }
  Status OpenForWriteAt(const std::string& path, uint64_t offset, std::unique_ptr<WritableFile>* out) override {
    return target_->OpenForWriteAt(path, offset, out);
  }
  Status ReadAt(const std::string& path, uint64_t offset, size_t n, void* buf) override {
    return target_->ReadAt(path, offset, n, buf);
  }
  Status ReadFile(const std::string& path, uint64_t max_bytes, std::string* out) override {
    return target_->ReadFile(path, max_bytes, out);
  }
  Status Stat(const std::string& path, FileInfo* info) override { return target_->Stat(path, info); }
  Status SyncFile(const std::string& path) override { return target_->SyncFile(path); }
  void DropFileCache(const std::string& path) override { target_->DropFileCache(path); }
  Status Reserve(const std::string& path, uint64_t bytes) override { return target_->Reserve(path, bytes); }
  void ReleaseUnused(const std::string& path) override { target_->ReleaseUnused(path); }
  Status Resize(const std::string& path, uint64_t bytes) override { return target_->Resize(path, bytes); }
  Status SyncDir(const std::string& path) override { return target_->SyncDir(path); }
  Status Rename(const std::string& from, const std::string& to) override { return target_->Rename(from, to); }
  Status CreateDir(const std::string& path, mode_t mode, bool exist_ok) override {
    return target_->CreateDir(path, mode, exist_ok);
  }
  Status ListDir(const std::string& path, std::vector<std::string>* names) override {
    return target_->ListDir(path, names);
  }
  Status RemoveFile(const std::string& path) override { return target_->RemoveFile(path); }
  Status RemoveTree(const std::string& path) override { return target_->RemoveTree(path); }
  Status RemoveTreeAt(const std::string& parent, const std::string& name, const std::string& first) override {
    return target_->RemoveTreeAt(parent, name, first);
  }
  Status LockFile(const std::string& path, mode_t mode, const std::string& holder,
                  std::unique_ptr<FileLock>* lock) override {
    return target_->LockFile(path, mode, holder, lock);
  }
  bool ReadOnly(const std::string& dir, std::string* why) override { return target_->ReadOnly(dir, why); }
  void Mark(const std::string& event) override { target_->Mark(event); }

 private:
  Env* target_;
};

// The POSIX lock (Env::Default()'s LockFile) with flock's outcome replaced,
// for FaultEnv: flock_errno != 0 makes flock fail with it; node_local
// reports the reach of a file system whose flock is per node.
struct LockFault {
  int flock_errno = 0;
  bool node_local = false;
};
Status PosixLockFile(const std::string& path, mode_t mode, const std::string& holder, const LockFault& fault,
                     std::unique_ptr<FileLock>* lock);

// What flock reaches on a file system of type `fstype` (mountinfo's, e.g.
// "nfs4", "lustre") mounted with the comma-separated `options` (both of
// mountinfo's option fields); *why says it in words.
LockReach LockReachOf(const std::string& fstype, const std::string& options, std::string* why);

}  // namespace baton::ckpt::fs
