// A fault-injecting, recording Env for tests (leveldb's EnvWrapper idea):
// fails writes, writes short, runs out of space, fails a sync, a rename, a
// read (EIO, EACCES) or a stat (ESTALE), takes a lock where flock is
// missing or per node,
// or "crashes" before a rename (every later call fails, as if the process
// had died there), and records the order of creates, syncs, renames and
// marks so a test can assert the commit protocol.
//
// Thread-safe.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "ckpt/fs/env.h"

namespace baton::ckpt::fs {

class FaultEnv : public EnvWrapper {
 public:
  enum class Fault {
    kFailWrite,           // Append fails with EIO
    kShortWrite,          // Append writes half the bytes, then fails (a torn file stays)
    kNoSpace,             // Append fails with ENOSPC
    kFailSync,            // Sync / SyncFile / SyncDir fails with EIO
    kFailRename,          // Rename fails with EIO
    kCrashBeforeRename,   // Rename and every later call fail: the process is "dead"
    kFailRead,            // ReadFile / ReadAt fail with EIO (transient: the bytes may be fine)
    kStaleStat,           // Stat fails with ESTALE (an NFS handle gone stale)
    kDenyRead,            // ReadFile / ReadAt fail with EACCES
    // LockFile (the POSIX lock, its flock's outcome replaced): flock fails
    // with ENOLCK (NFS without lockd), with ENOSYS (Lustre without -o
    // flock), or works on this node only (Lustre -o localflock, NFS -o nolock).
    kLockNoLockd,
    kLockNoFlock,
    kLockNodeLocal,
    // Lasting: the directories whose path contains path_part are read-only
    // (ReadOnly says so; creating, renaming, removing and locking in them
    // fail with EROFS), as a file system remounted read-only.
    kReadOnly,
    kNoSpaceToReserve,    // Reserve fails with ENOSPC (a disk too full for the shard)
  };

  explicit FaultEnv(Env* target = Env::Default()) : EnvWrapper(target) {}

  // Arms `fault` for the first operation it applies to whose path contains
  // `path_part` ("" matches all), after skipping `skip` such operations.
  // One-shot, except kCrashBeforeRename, which lasts.
  void Inject(Fault fault, const std::string& path_part = "", int skip = 0);
  void Clear();  // disarms everything, un-crashes
  bool crashed() const;

  // "create <path>", "sync <path>" (file), "dropcache <path>", "syncdir <path>",
  // "rename <from> -> <to>", "remove <path>", "mark <event>", in call order; only calls that succeeded
  // (a failed or crashed rename is not in the list).
  std::vector<std::string> events() const;
  void ClearEvents();

  Status NewWritableFile(const std::string& path, mode_t mode, std::unique_ptr<WritableFile>* out) override;
  // Its Append and Sync take the same faults as a new file's (not recorded as a create).
  Status OpenForWriteAt(const std::string& path, uint64_t offset, std::unique_ptr<WritableFile>* out) override;
  Status SyncFile(const std::string& path) override;
  void DropFileCache(const std::string& path) override;  // recorded as "dropcache <path>"
  Status Reserve(const std::string& path, uint64_t bytes) override;  // not recorded
  Status SyncDir(const std::string& path) override;
  Status Rename(const std::string& from, const std::string& to) override;
  Status CreateDir(const std::string& path, mode_t mode, bool exist_ok) override;
  Status RemoveFile(const std::string& path) override;
  Status RemoveTree(const std::string& path) override;
  // Records "remove <parent/name/first>", "syncdir <parent/name>" (when
  // first is given) and "remove <parent/name>": the order the POSIX Env
  // keeps inside the one call.
  Status RemoveTreeAt(const std::string& parent, const std::string& name, const std::string& first) override;
  Status ReadAt(const std::string& path, uint64_t offset, size_t n, void* buf) override;
  Status ReadFile(const std::string& path, uint64_t max_bytes, std::string* out) override;
  void Mark(const std::string& event) override;
  // Fail once crashed, like every other call.
  Status Stat(const std::string& path, FileInfo* info) override;
  Status ListDir(const std::string& path, std::vector<std::string>* names) override;
  Status LockFile(const std::string& path, mode_t mode, const std::string& holder,
                  std::unique_ptr<FileLock>* lock) override;
  bool ReadOnly(const std::string& dir, std::string* why) override;

 private:
  class File;
  struct Armed {
    Fault fault;
    std::string path_part;
    int skip;
  };
  // Pops the armed fault that applies to (kinds, path), if any.
  bool Take(std::initializer_list<Fault> kinds, const std::string& path, Fault* which);
  bool InReadOnly(const std::string& path) const;
  void Record(std::string event);

  mutable std::mutex mu_;
  std::vector<Armed> armed_;
  std::vector<std::string> events_;
  bool crashed_ = false;
  std::vector<std::string> read_only_;  // kReadOnly's path parts
};

}  // namespace baton::ckpt::fs
