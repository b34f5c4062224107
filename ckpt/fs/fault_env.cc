#include "ckpt/fs/fault_env.h"

#include <algorithm>
#include <cerrno>
#include <utility>

namespace baton::ckpt::fs {

namespace {

// Injected failures read like the POSIX Env's, plus "(injected)", so a test
// can tell them from real ones.
Status Injected(std::string_view call, const std::string& path, std::string_view text) {
  return Status::IOError("ckpt", std::string(call) + "(" + path + "): " + std::string(text) + " (injected)");
}

Status Dead(std::string_view call, const std::string& path) {
  return Status::IOError("ckpt", std::string(call) + "(" + path + "): the process crashed before this call (injected)");
}

}  // namespace

// Wraps the target's file: write faults are decided per Append, sync faults
// per Sync, both by this file's path.
class FaultEnv::File : public WritableFile {
 public:
  File(FaultEnv* env, std::string path, std::unique_ptr<WritableFile> target)
      : env_(env), path_(std::move(path)), target_(std::move(target)) {}

  Status Append(const void* data, size_t n) override {
    if (env_->crashed()) return Dead("write", path_);
    Fault f = Fault::kFailWrite;
    if (env_->Take({Fault::kFailWrite, Fault::kShortWrite, Fault::kNoSpace}, path_, &f)) {
      if (f == Fault::kNoSpace) return Injected("write", path_, "No space left on device");
      if (f == Fault::kShortWrite) {
        // The first half reaches the file: what a process killed mid-write leaves.
        BATON_RETURN_IF_ERROR(target_->Append(data, n / 2));
        return Injected("write", path_, "short write of " + std::to_string(n / 2) + " of " + std::to_string(n) + " bytes");
      }
      return Injected("write", path_, "Input/output error");
    }
    return target_->Append(data, n);
  }

  Status Sync() override {
    if (env_->crashed()) return Dead("fsync", path_);
    Fault f = Fault::kFailWrite;
    if (env_->Take({Fault::kFailSync}, path_, &f)) return Injected("fsync", path_, "Input/output error");
    BATON_RETURN_IF_ERROR(target_->Sync());
    env_->Record("sync " + path_);
    return Status::OK();
  }

  Status Seek(uint64_t offset) override {
    if (env_->crashed()) return Dead("lseek", path_);
    return target_->Seek(offset);
  }

  // A hint that makes nothing durable: forwarded, and an unsynced write
  // stays droppable (Sync alone records a sync).
  void StartWriteback() override {
    if (!env_->crashed()) target_->StartWriteback();
  }

  void DropCache() override {
    if (env_->crashed()) return;
    target_->DropCache();
    env_->Record("dropcache " + path_);
  }

  Status Close() override { return target_->Close(); }

 private:
  FaultEnv* env_;
  std::string path_;
  std::unique_ptr<WritableFile> target_;
};

void FaultEnv::Inject(Fault fault, const std::string& path_part, int skip) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fault == Fault::kReadOnly) {
    read_only_.push_back(path_part);
    return;
  }
  armed_.push_back(Armed{fault, path_part, std::max(skip, 0)});
}

void FaultEnv::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  armed_.clear();
  read_only_.clear();
  crashed_ = false;
}

bool FaultEnv::crashed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return crashed_;
}

std::vector<std::string> FaultEnv::events() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_;
}

void FaultEnv::ClearEvents() {
  std::lock_guard<std::mutex> lock(mu_);
  events_.clear();
}

bool FaultEnv::Take(std::initializer_list<Fault> kinds, const std::string& path, Fault* which) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = armed_.begin(); it != armed_.end(); ++it) {
    if (std::find(kinds.begin(), kinds.end(), it->fault) == kinds.end()) continue;
    if (path.find(it->path_part) == std::string::npos) continue;
    if (it->skip > 0) {
      --it->skip;
      continue;
    }
    *which = it->fault;
    if (it->fault == Fault::kCrashBeforeRename) crashed_ = true;
    armed_.erase(it);
    return true;
  }
  return false;
}

bool FaultEnv::InReadOnly(const std::string& path) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const std::string& part : read_only_) {
    if (path.find(part) != std::string::npos) return true;
  }
  return false;
}

void FaultEnv::Record(std::string event) {
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back(std::move(event));
}

Status FaultEnv::NewWritableFile(const std::string& path, mode_t mode, std::unique_ptr<WritableFile>* out) {
  if (crashed()) return Dead("open", path);
  if (InReadOnly(path)) return Injected("open", path, "Read-only file system");
  std::unique_ptr<WritableFile> file;
  BATON_RETURN_IF_ERROR(target()->NewWritableFile(path, mode, &file));
  *out = std::make_unique<File>(this, path, std::move(file));
  Record("create " + path);
  return Status::OK();
}

Status FaultEnv::OpenForWriteAt(const std::string& path, uint64_t offset, std::unique_ptr<WritableFile>* out) {
  if (crashed()) return Dead("open", path);
  if (InReadOnly(path)) return Injected("open", path, "Read-only file system");
  std::unique_ptr<WritableFile> file;
  BATON_RETURN_IF_ERROR(target()->OpenForWriteAt(path, offset, &file));
  *out = std::make_unique<File>(this, path, std::move(file));
  return Status::OK();
}

Status FaultEnv::SyncFile(const std::string& path) {
  if (crashed()) return Dead("fsync", path);
  Fault f = Fault::kFailWrite;
  if (Take({Fault::kFailSync}, path, &f)) return Injected("fsync", path, "Input/output error");
  BATON_RETURN_IF_ERROR(target()->SyncFile(path));
  Record("sync " + path);
  return Status::OK();
}

Status FaultEnv::Reserve(const std::string& path, uint64_t bytes) {
  if (crashed()) return Dead("fallocate", path);
  Fault f = Fault::kNoSpaceToReserve;
  if (Take({Fault::kNoSpaceToReserve}, path, &f)) {
    return Injected("fallocate", path + " (reserving " + std::to_string(bytes) + " bytes)", "No space left on device");
  }
  return target()->Reserve(path, bytes);
}

void FaultEnv::DropFileCache(const std::string& path) {
  if (crashed()) return;
  target()->DropFileCache(path);
  Record("dropcache " + path);
}

Status FaultEnv::SyncDir(const std::string& path) {
  if (crashed()) return Dead("fsync", path);
  Fault f = Fault::kFailWrite;
  if (Take({Fault::kFailSync}, path, &f)) return Injected("fsync", path, "Input/output error");
  BATON_RETURN_IF_ERROR(target()->SyncDir(path));
  Record("syncdir " + path);
  return Status::OK();
}

Status FaultEnv::Rename(const std::string& from, const std::string& to) {
  const std::string both = from + " -> " + to;
  if (crashed()) return Dead("rename", both);
  if (InReadOnly(both)) return Injected("rename", both, "Read-only file system");
  Fault f = Fault::kFailWrite;
  if (Take({Fault::kFailRename, Fault::kCrashBeforeRename}, both, &f)) {
    if (f == Fault::kCrashBeforeRename) return Dead("rename", both);
    return Injected("rename", both, "Input/output error");
  }
  BATON_RETURN_IF_ERROR(target()->Rename(from, to));
  Record("rename " + both);
  return Status::OK();
}

Status FaultEnv::CreateDir(const std::string& path, mode_t mode, bool exist_ok) {
  if (crashed()) return Dead("mkdir", path);
  if (InReadOnly(path)) return Injected("mkdir", path, "Read-only file system");
  return target()->CreateDir(path, mode, exist_ok);
}

Status FaultEnv::RemoveFile(const std::string& path) {
  if (crashed()) return Dead("unlink", path);
  if (InReadOnly(path)) return Injected("unlink", path, "Read-only file system");
  BATON_RETURN_IF_ERROR(target()->RemoveFile(path));
  Record("remove " + path);
  return Status::OK();
}

Status FaultEnv::RemoveTree(const std::string& path) {
  if (crashed()) return Dead("rmtree", path);
  if (InReadOnly(path)) return Injected("rmtree", path, "Read-only file system");
  BATON_RETURN_IF_ERROR(target()->RemoveTree(path));
  Record("remove " + path);
  return Status::OK();
}

Status FaultEnv::RemoveTreeAt(const std::string& parent, const std::string& name, const std::string& first) {
  const std::string path = parent + "/" + name;
  if (crashed()) return Dead("rmtree", path);
  if (InReadOnly(path)) return Injected("rmtree", path, "Read-only file system");
  BATON_RETURN_IF_ERROR(target()->RemoveTreeAt(parent, name, first));
  if (!first.empty()) {
    Record("remove " + path + "/" + first);
    Record("syncdir " + path);
  }
  Record("remove " + path);
  return Status::OK();
}

Status FaultEnv::ReadAt(const std::string& path, uint64_t offset, size_t n, void* buf) {
  if (crashed()) return Dead("pread", path);
  Fault f = Fault::kFailRead;
  if (Take({Fault::kFailRead, Fault::kDenyRead}, path, &f)) {
    return Injected("pread", path, f == Fault::kDenyRead ? "Permission denied" : "Input/output error");
  }
  return target()->ReadAt(path, offset, n, buf);
}

Status FaultEnv::ReadFile(const std::string& path, uint64_t max_bytes, std::string* out) {
  if (crashed()) return Dead("read", path);
  Fault f = Fault::kFailRead;
  if (Take({Fault::kFailRead, Fault::kDenyRead}, path, &f)) {
    return Injected("read", path, f == Fault::kDenyRead ? "Permission denied" : "Input/output error");
  }
  return target()->ReadFile(path, max_bytes, out);
}

Status FaultEnv::Stat(const std::string& path, FileInfo* info) {
  if (crashed()) return Dead("lstat", path);
  Fault f = Fault::kStaleStat;
  if (Take({Fault::kStaleStat}, path, &f)) return Injected("lstat", path, "Stale file handle");
  return target()->Stat(path, info);
}

Status FaultEnv::ListDir(const std::string& path, std::vector<std::string>* names) {
  if (crashed()) return Dead("opendir", path);
  return target()->ListDir(path, names);
}

Status FaultEnv::LockFile(const std::string& path, mode_t mode, const std::string& holder,
                          std::unique_ptr<FileLock>* lock) {
  if (crashed()) return Dead("open", path);
  if (InReadOnly(path)) return Injected("open", path, "Read-only file system");
  Fault f = Fault::kLockNoLockd;
  if (!Take({Fault::kLockNoLockd, Fault::kLockNoFlock, Fault::kLockNodeLocal}, path, &f)) {
    return target()->LockFile(path, mode, holder, lock);
  }
  LockFault fault;
  if (f == Fault::kLockNoLockd) fault.flock_errno = ENOLCK;
  if (f == Fault::kLockNoFlock) fault.flock_errno = ENOSYS;
  if (f == Fault::kLockNodeLocal) fault.node_local = true;
  return PosixLockFile(path, mode, holder, fault, lock);
}

bool FaultEnv::ReadOnly(const std::string& dir, std::string* why) {
  if (InReadOnly(dir + "/")) {
    *why = "its file system is mounted read-only (injected)";
    return true;
  }
  return target()->ReadOnly(dir, why);
}

void FaultEnv::Mark(const std::string& event) {
  if (crashed()) return;
  target()->Mark(event);
  Record("mark " + event);
}

}  // namespace baton::ckpt::fs
