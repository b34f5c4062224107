// Env::Default(): the POSIX file layer. Every path is opened with O_NOFOLLOW
// (a checkpoint directory must not be redirected by a symlink planted in it)
// and O_CLOEXEC (ranks fork helpers; descriptors must not leak into them);
// files are read only when they are regular files, opened O_NONBLOCK so
// that a FIFO in their place is refused instead of hanging the reader.
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/sysmacros.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ckpt/fs/env.h"
#include "ckpt/fs/syscall_check.h"

namespace baton::ckpt::fs {

Status SyscallError(std::string_view call, std::string_view path, int err, const char* file, int line) {
  char buf[256];
  // GNU strerror_r: returns the text, which may or may not be in buf.
  const char* text = strerror_r(err, buf, sizeof buf);
  const char* base = std::strrchr(file, '/');
  std::string msg = std::string(call) + "(" + std::string(path) + "): " + text + " (errno " +
                    std::to_string(err) + ") [" + (base ? base + 1 : file) + ":" + std::to_string(line) + "]";
  if (err == ENOENT || err == ENOTDIR) return Status::NotFound("ckpt", msg);
  return Status::IOError("ckpt", msg);
}

namespace {

// O_NONBLOCK: a FIFO (or a device) planted where a file is expected must
// not hang the open; OpenRegular then refuses it.
constexpr int kReadFlags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK;
constexpr int kDirFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
// A tree deeper than this is not a checkpoint version; RemoveTree refuses it
// rather than run out of descriptors.
constexpr int kMaxTreeDepth = 64;

// Closes a descriptor when it goes out of scope (errors of close on a
// read-only descriptor carry no information).
class Fd {
 public:
  Fd() = default;
  ~Fd() { Reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int& get() { return fd_; }
  int release() { int fd = fd_; fd_ = -1; return fd; }
  void Reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

// close(2) is not retried on EINTR: on Linux the descriptor is gone either way.
Status CloseFd(int fd, const std::string& path) {
  if (::close(fd) == 0 || errno == EINTR) return Status::OK();
  return SyscallError("close", path, errno, __FILE__, __LINE__);
}

// Opens `path` for reading, never blocking, and only as a regular file
// (InvalidArgument naming it otherwise); *size: its size.
Status OpenRegular(const std::string& path, Fd* fd, uint64_t* size) {
  BATON_RETURN_IF_ERROR(BATON_SYSCALL("open", path, fd->get() = ::open(path.c_str(), kReadFlags)));
  struct stat st;
  BATON_RETURN_IF_ERROR(BATON_SYSCALL("fstat", path, ::fstat(fd->get(), &st)));
  if (!S_ISREG(st.st_mode)) {
    return Status::InvalidArgument("ckpt", path + " is not a regular file (" +
                                               (S_ISFIFO(st.st_mode) ? std::string("a FIFO") : "mode " + std::to_string(st.st_mode & S_IFMT)) + ")");
  }
  *size = static_cast<uint64_t>(st.st_size);
  return Status::OK();
}

// Opens the existing `path` to write, never blocking, never following a
// symlink, and only as a regular file (InvalidArgument naming it otherwise).
Status OpenRegularForWriting(const std::string& path, Fd* fd) {
  BATON_RETURN_IF_ERROR(
      BATON_SYSCALL("open", path, fd->get() = ::open(path.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)));
  struct stat st;
  BATON_RETURN_IF_ERROR(BATON_SYSCALL("fstat", path, ::fstat(fd->get(), &st)));
  if (!S_ISREG(st.st_mode)) return Status::InvalidArgument("ckpt", path + ": not a regular file");
  return Status::OK();
}

class PosixWritableFile : public WritableFile {
 public:
  PosixWritableFile(int fd, std::string path, uint64_t offset = 0)
      : fd_(fd), path_(std::move(path)), offset_(offset), handed_(offset) {}
  ~PosixWritableFile() override { Close().IgnoreError(); }  // a destructor cannot report

  Status Append(const void* data, size_t n) override {
    if (fd_ < 0) return Status::IOError("ckpt", "write(" + path_ + "): file is closed");
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      ssize_t w = 0;
      BATON_RETURN_IF_ERROR(BATON_SYSCALL("write", path_, w = ::write(fd_, p, n)));
      if (w == 0) return Status::IOError("ckpt", "write(" + path_ + "): wrote 0 of " + std::to_string(n) + " bytes");
      p += w;
      n -= static_cast<size_t>(w);
      offset_ += static_cast<uint64_t>(w);
    }
    return Status::OK();
  }

  Status Seek(uint64_t offset) override {
    if (fd_ < 0) return Status::IOError("ckpt", "lseek(" + path_ + "): file is closed");
    StartWriteback();  // what was appended before keeps its hint
    BATON_RETURN_IF_ERROR(BATON_SYSCALL("lseek", path_, ::lseek(fd_, static_cast<off_t>(offset), SEEK_SET)));
    offset_ = handed_ = offset;
    return Status::OK();
  }

  void StartWriteback() override {
    if (fd_ < 0 || offset_ == handed_) return;
    // SYNC_FILE_RANGE_WRITE alone: queue the dirty pages of the range for
    // writing and return (it blocks only while the device's queue is full,
    // which paces the writer at the disk's speed). Its errors are left to
    // the fsync, which reports a failed write-back too.
    (void)::sync_file_range(fd_, static_cast<off_t>(handed_), static_cast<off_t>(offset_ - handed_),
                            SYNC_FILE_RANGE_WRITE);
    handed_ = offset_;
  }

  void DropCache() override {
    // Only clean pages are dropped: called after the fsync, that is all of them.
    if (fd_ >= 0) (void)::posix_fadvise(fd_, 0, 0, POSIX_FADV_DONTNEED);
  }

  Status Sync() override {
    if (fd_ < 0) return Status::IOError("ckpt", "fsync(" + path_ + "): file is closed");
    return BATON_SYSCALL("fsync", path_, ::fsync(fd_));
  }

  Status Close() override {
    if (fd_ < 0) return Status::OK();
    const int fd = fd_;
    fd_ = -1;
    return CloseFd(fd, path_);
  }

 private:
  int fd_;
  std::string path_;
  uint64_t offset_;  // where the next Append writes
  uint64_t handed_;  // the write-back was started for the bytes before this
};

FileType TypeOf(mode_t mode) {
  if (S_ISREG(mode)) return FileType::kRegular;
  if (S_ISDIR(mode)) return FileType::kDirectory;
  if (S_ISLNK(mode)) return FileType::kSymlink;
  return FileType::kOther;
}

// The entry names of an open directory (consumes fd).
Status ReadNames(int fd, const std::string& path, std::vector<std::string>* names) {
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    const int err = errno;
    ::close(fd);
    return SyscallError("fdopendir", path, err, __FILE__, __LINE__);
  }
  names->clear();
  for (;;) {
    errno = 0;
    const dirent* e = ::readdir(d);
    if (e == nullptr) break;
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    names->emplace_back(e->d_name);
  }
  const int err = errno;
  ::closedir(d);
  if (err != 0) return SyscallError("readdir", path, err, __FILE__, __LINE__);
  return Status::OK();
}

// Empties the directory open as dir_fd (named path in messages), never
// following a symlink: subdirectories are opened with openat(O_NOFOLLOW),
// everything else is unlinked as the entry it is.
Status EmptyDirAt(int dir_fd, const std::string& path, int depth) {
  if (depth > kMaxTreeDepth) {
    return Status::IOError("ckpt", "remove tree " + path + ": deeper than " + std::to_string(kMaxTreeDepth) + " levels");
  }
  int list_fd = -1;
  BATON_RETURN_IF_ERROR(BATON_SYSCALL("dup", path, list_fd = ::dup(dir_fd)));
  std::vector<std::string> names;
  // Names first, removal after: removing entries while readdir runs may skip some.
  BATON_RETURN_IF_ERROR(ReadNames(list_fd, path, &names));
  for (const std::string& name : names) {
    const std::string child = path + "/" + name;
    struct stat st;
    BATON_RETURN_IF_ERROR(BATON_SYSCALL("fstatat", child, ::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW)));
    if (S_ISDIR(st.st_mode)) {
      Fd sub;
      BATON_RETURN_IF_ERROR(BATON_SYSCALL("openat", child, sub.get() = ::openat(dir_fd, name.c_str(), kDirFlags)));
      BATON_RETURN_IF_ERROR(EmptyDirAt(sub.get(), child, depth + 1));
      sub.Reset();
      BATON_RETURN_IF_ERROR(BATON_SYSCALL("unlinkat", child, ::unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR)));
    } else {
      BATON_RETURN_IF_ERROR(BATON_SYSCALL("unlinkat", child, ::unlinkat(dir_fd, name.c_str(), 0)));
    }
  }
  return Status::OK();
}

class PosixFileLock : public FileLock {
 public:
  PosixFileLock(int fd, std::string path, std::string holder, LockReach reach, std::string why, std::string previous)
      : fd_(fd), path_(std::move(path)), holder_(std::move(holder)), reach_(reach), why_(std::move(why)),
        previous_(std::move(previous)) {}
  ~PosixFileLock() override {
    // A clean end leaves no holder text: one found later names a holder
    // that died (or one that still holds the file on another node).
    if (claimed_) (void)::ftruncate(fd_, 0);
    ::close(fd_);  // releases the flock
  }
  LockReach reach() const override { return reach_; }
  std::string reach_reason() const override { return why_; }
  std::string previous_holder() const override { return previous_; }
  Status Claim() override {
    BATON_RETURN_IF_ERROR(BATON_SYSCALL("ftruncate", path_, ::ftruncate(fd_, 0)));
    const std::string text = holder_ + "\n";
    ssize_t w = 0;
    BATON_RETURN_IF_ERROR(BATON_SYSCALL("pwrite", path_, w = ::pwrite(fd_, text.data(), text.size(), 0)));
    if (static_cast<size_t>(w) != text.size()) return Status::IOError("ckpt", "pwrite(" + path_ + "): short write");
    claimed_ = true;
    return Status::OK();
  }

 private:
  int fd_;
  std::string path_, holder_;
  LockReach reach_;
  std::string why_, previous_;
  bool claimed_ = false;
};

// The text a lock file holds (its holder's), without trailing newlines.
std::string HolderTextOf(int fd) {
  char text[1024];
  ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
  std::string who = n > 0 ? std::string(text, static_cast<size_t>(n)) : std::string();
  while (!who.empty() && (who.back() == '\n' || who.back() == '\0')) who.pop_back();
  return who;
}

// The mount of the file open on `fd`: its type and both option fields of
// /proc/self/mountinfo's line whose device is the file's. False when not
// found (no /proc).
bool MountOf(int fd, std::string* fstype, std::string* options) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return false;
  const std::string dev = std::to_string(major(st.st_dev)) + ":" + std::to_string(minor(st.st_dev));
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  bool found = false;
  while (std::getline(in, line)) {
    // id parent major:minor root mountpoint options [optional...] - fstype source superoptions
    std::istringstream f(line);
    std::string id, parent, mm, root, point, opts;
    if (!(f >> id >> parent >> mm >> root >> point >> opts) || mm != dev) continue;
    std::string word;
    while (f >> word && word != "-") {
    }
    std::string type, source, super;
    if (!(f >> type >> source >> super)) continue;
    // The last match: a later mount over the same device is the one seen.
    *fstype = type;
    *options = opts + "," + super;
    found = true;
  }
  return found;
}

class PosixEnv : public Env {
 public:
  Status NewWritableFile(const std::string& path, mode_t mode, std::unique_ptr<WritableFile>* out) override {
    Fd fd;
    BATON_RETURN_IF_ERROR(BATON_SYSCALL(
        "open", path, fd.get() = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)));
    // The umask must not change what the caller asked for.
    BATON_RETURN_IF_ERROR(BATON_SYSCALL("fchmod", path, ::fchmod(fd.get(), mode)));
    *out = std::make_unique<PosixWritableFile>(fd.release(), path);
    return Status::OK();
  }

  Status OpenForWriteAt(const std::string& path, uint64_t offset, std::unique_ptr<WritableFile>* out) override {
    Fd fd;
    BATON_RETURN_IF_ERROR(
        BATON_SYSCALL("open", path, fd.get() = ::open(path.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC)));
    struct stat st;
    BATON_RETURN_IF_ERROR(BATON_SYSCALL("fstat", path, ::fstat(fd.get(), &st)));
    if (!S_ISREG(st.st_mode)) return Status::InvalidArgument("ckpt", path + ": not a regular file");
    BATON_RETURN_IF_ERROR(
        BATON_SYSCALL("lseek", path, ::lseek(fd.get(), static_cast<off_t>(offset), SEEK_SET)));
    *out = std::make_unique<PosixWritableFile>(fd.release(), path, offset);
    return Status::OK();
  }

  Status ReadAt(const std::string& path, uint64_t offset, size_t n, void* buf) override {
    Fd fd;
    uint64_t size = 0;
    BATON_RETURN_IF_ERROR(OpenRegular(path, &fd, &size));
    char* p = static_cast<char*>(buf);
    size_t done = 0;
    while (done < n) {
      ssize_t r = 0;
      BATON_RETURN_IF_ERROR(BATON_SYSCALL("pread", path, r = ::pread(fd.get(), p + done, n - done,
                                                                    static_cast<off_t>(offset + done))));
      if (r == 0) {
        return Status::IOError("ckpt", "pread(" + path + "): short file: wanted " + std::to_string(n) +
                                           " bytes at offset " + std::to_string(offset) + ", got " +
                                           std::to_string(done));
      }
      done += static_cast<size_t>(r);
    }
    return Status::OK();
  }

  Status ReadFile(const std::string& path, uint64_t max_bytes, std::string* out) override {
    Fd fd;
    uint64_t size = 0;
    BATON_RETURN_IF_ERROR(OpenRegular(path, &fd, &size));
    if (size > max_bytes) {
      return Status::InvalidArgument("ckpt", "read " + path + ": " + std::to_string(size) +
                                                 " bytes, more than the limit of " + std::to_string(max_bytes));
    }
    out->assign(size, '\0');
    size_t done = 0;
    while (done < size) {
      ssize_t r = 0;
      BATON_RETURN_IF_ERROR(BATON_SYSCALL("read", path, r = ::read(fd.get(), &(*out)[done], size - done)));
      if (r == 0) break;  // shrank since fstat: what is there is the file
      done += static_cast<size_t>(r);
    }
    out->resize(done);
    return Status::OK();
  }

  Status Stat(const std::string& path, FileInfo* info) override {
    struct stat st;
    BATON_RETURN_IF_ERROR(BATON_SYSCALL("lstat", path, ::lstat(path.c_str(), &st)));
    info->type = TypeOf(st.st_mode);
    info->size = static_cast<uint64_t>(st.st_size);
    info->mode = st.st_mode & 07777;
    info->uid = st.st_uid;
    info->mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    return Status::OK();
  }

  Status SyncFile(const std::string& path) override {
    Fd fd;
    uint64_t size = 0;
    BATON_RETURN_IF_ERROR(OpenRegular(path, &fd, &size));
    return BATON_SYSCALL("fsync", path, ::fsync(fd.get()));
  }

  void DropFileCache(const std::string& path) override {
    Fd fd;
    uint64_t size = 0;
    if (OpenRegular(path, &fd, &size).ok()) (void)::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED);
  }

  Status Resize(const std::string& path, uint64_t bytes) override {
    Fd fd;
    BATON_RETURN_IF_ERROR(OpenRegularForWriting(path, &fd));
    return BATON_SYSCALL("ftruncate", path + " (to " + std::to_string(bytes) + " bytes)",
                         ::ftruncate(fd.get(), static_cast<off_t>(bytes)));
  }

  Status Reserve(const std::string& path, uint64_t bytes) override {
    if (bytes == 0) return Status::OK();
    Fd fd;
    BATON_RETURN_IF_ERROR(OpenRegularForWriting(path, &fd));
    int rc = 0;
    do {
      rc = ::fallocate(fd.get(), FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(bytes));
    } while (rc != 0 && errno == EINTR);
    if (rc == 0 || errno == EOPNOTSUPP || errno == ENOSYS) return Status::OK();  // no fallocate here: go on without
    return SyscallError("fallocate", path + " (reserving " + std::to_string(bytes) + " bytes)", errno, __FILE__,
                        __LINE__);
  }

  void ReleaseUnused(const std::string& path) override {
    Fd fd;
    fd.get() = ::open(path.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (fd.get() >= 0 && ::fstat(fd.get(), &st) == 0 && S_ISREG(st.st_mode)) (void)::ftruncate(fd.get(), st.st_size);
  }

  Status SyncDir(const std::string& path) override {
    Fd fd;
    BATON_RETURN_IF_ERROR(BATON_SYSCALL("open", path, fd.get() = ::open(path.c_str(), kDirFlags)));
    return BATON_SYSCALL("fsync", path, ::fsync(fd.get()));
  }

  Status Rename(const std::string& from, const std::string& to) override {
    return BATON_SYSCALL("rename", from + " -> " + to, ::rename(from.c_str(), to.c_str()));
  }

  Status CreateDir(const std::string& path, mode_t mode, bool exist_ok) override {
    if (::mkdir(path.c_str(), mode) != 0) {
      const int err = errno;
      if (err == EEXIST && exist_ok) {
        struct stat st;
        BATON_RETURN_IF_ERROR(BATON_SYSCALL("lstat", path, ::lstat(path.c_str(), &st)));
        if (S_ISDIR(st.st_mode)) return Status::OK();
        return Status::IOError("ckpt", "mkdir(" + path + "): exists and is not a directory");
      }
      return SyscallError("mkdir", path, err, __FILE__, __LINE__);
    }
    // As for files: exactly `mode`, whatever the umask.
    Fd fd;
    BATON_RETURN_IF_ERROR(BATON_SYSCALL("open", path, fd.get() = ::open(path.c_str(), kDirFlags)));
    return BATON_SYSCALL("fchmod", path, ::fchmod(fd.get(), mode));
  }

  Status ListDir(const std::string& path, std::vector<std::string>* names) override {
    int fd = -1;
    BATON_RETURN_IF_ERROR(BATON_SYSCALL("open", path, fd = ::open(path.c_str(), kDirFlags)));
    return ReadNames(fd, path, names);
  }

  Status RemoveFile(const std::string& path) override {
    return BATON_SYSCALL("unlink", path, ::unlink(path.c_str()));
  }

  Status RemoveTreeAt(const std::string& parent, const std::string& name, const std::string& first) override {
    const std::string path = parent + "/" + name;
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) {
      return Status::InvalidArgument("ckpt", "remove " + path + ": not a plain name");
    }
    Fd parent_fd, fd;
    BATON_RETURN_IF_ERROR(BATON_SYSCALL("open", parent, parent_fd.get() = ::open(parent.c_str(), kDirFlags)));
    // O_NOFOLLOW on a symlink fails with ELOOP: the link's target is never touched.
    BATON_RETURN_IF_ERROR(
        BATON_SYSCALL("openat", path, fd.get() = ::openat(parent_fd.get(), name.c_str(), kDirFlags)));
    if (!first.empty()) {
      if (::unlinkat(fd.get(), first.c_str(), 0) != 0 && errno != ENOENT) {
        return SyscallError("unlinkat", path + "/" + first, errno, __FILE__, __LINE__);
      }
      BATON_RETURN_IF_ERROR(BATON_SYSCALL("fsync", path, ::fsync(fd.get())));
    }
    BATON_RETURN_IF_ERROR(EmptyDirAt(fd.get(), path, 0));
    fd.Reset();
    return BATON_SYSCALL("unlinkat", path, ::unlinkat(parent_fd.get(), name.c_str(), AT_REMOVEDIR));
  }

  Status LockFile(const std::string& path, mode_t mode, const std::string& holder,
                  std::unique_ptr<FileLock>* lock) override {
    return PosixLockFile(path, mode, holder, LockFault(), lock);
  }

  bool ReadOnly(const std::string& dir, std::string* why) override {
    struct statvfs vfs;
    if (::statvfs(dir.c_str(), &vfs) == 0 && (vfs.f_flag & ST_RDONLY) != 0) {
      *why = std::string("its file system is mounted read-only: ") + std::strerror(EROFS);
      return true;
    }
    if (::access(dir.c_str(), W_OK | X_OK) != 0 && (errno == EACCES || errno == EROFS || errno == EPERM)) {
      const int e = errno;
      *why = e == EROFS ? std::string("its file system is mounted read-only: ") + std::strerror(EROFS)
                        : "it is not writable by this user (uid " + std::to_string(::geteuid()) + "): " +
                              std::strerror(e);
      return true;
    }
    return false;
  }

  Status RemoveTree(const std::string& path) override {
    Fd fd;
    // O_NOFOLLOW on a symlink fails with ELOOP: the link's target is never touched.
    BATON_RETURN_IF_ERROR(BATON_SYSCALL("open", path, fd.get() = ::open(path.c_str(), kDirFlags)));
    BATON_RETURN_IF_ERROR(EmptyDirAt(fd.get(), path, 0));
    fd.Reset();
    return BATON_SYSCALL("rmdir", path, ::rmdir(path.c_str()));
  }
};

}  // namespace

const char* LockReachName(LockReach reach) {
  switch (reach) {
    case LockReach::kCluster: return "every node";
    case LockReach::kNode: return "this node only";
    case LockReach::kNone: return "nothing (no flock)";
  }
  return "?";
}

LockReach LockReachOf(const std::string& fstype, const std::string& options, std::string* why) {
  std::set<std::string> opts;
  std::istringstream in(options);
  for (std::string o; std::getline(in, o, ',');) opts.insert(o);
  const std::string type = fstype.substr(0, fstype.find('.'));  // "fuse.beegfs" stays whole below
  if (type == "nfs" || fstype == "nfs4") {
    if (opts.count("nolock") || opts.count("local_lock=flock") || opts.count("local_lock=all")) {
      *why = fstype + " mounted " + (opts.count("nolock") ? "nolock" : "local_lock=flock|all") +
             ": flock is kept on each client";
      return LockReach::kNode;
    }
    *why = fstype + ": flock is an NFS lock (lockd, or NFSv4's own), held for every client";
    return LockReach::kCluster;
  }
  if (type == "lustre") {
    if (opts.count("localflock")) {
      *why = "lustre mounted localflock: flock is kept on each client";
      return LockReach::kNode;
    }
    if (opts.count("flock")) {
      *why = "lustre mounted flock: flock is coherent across clients";
      return LockReach::kCluster;
    }
    *why = "lustre mounted without flock or localflock";
    return LockReach::kNone;
  }
  if (type == "beegfs" || fstype == "fuse.beegfs") {
    *why = fstype + ": flock is per client unless the client's tuneUseGlobalFileLocks is set, which a client cannot see";
    return LockReach::kNode;
  }
  static const std::set<std::string> kPerClient = {"cifs", "smb3", "9p", "fuse.sshfs", "virtiofs"};
  if (kPerClient.count(fstype)) {
    *why = fstype + ": flock may not reach other clients";
    return LockReach::kNode;
  }
  // Local disks, tmpfs, and cluster file systems whose flock is coherent
  // (GPFS, CephFS, OCFS2, GFS2).
  *why = fstype.empty() ? "file system not found in /proc/self/mountinfo" : fstype;
  return LockReach::kCluster;
}

Status PosixLockFile(const std::string& path, mode_t mode, const std::string& holder, const LockFault& fault,
                     std::unique_ptr<FileLock>* lock) {
  Fd fd;
  // O_NONBLOCK: a FIFO planted under the name must not hang the open.
  fd.get() = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, mode);
  if (fd.get() < 0) {
    const int err = errno;
    // O_NOFOLLOW on a symlink: ELOOP, whose text ("Too many levels of
    // symbolic links") does not say what is wrong.
    if (err == ELOOP) {
      return Status::InvalidArgument("ckpt", "lock " + path + " is a symbolic link; the writer lock must be a regular file"
                                             " (remove the link)");
    }
    return SyscallError("open", path, err, __FILE__, __LINE__);
  }
  struct stat st;
  BATON_RETURN_IF_ERROR(BATON_SYSCALL("fstat", path, ::fstat(fd.get(), &st)));
  if (!S_ISREG(st.st_mode)) return Status::IOError("ckpt", "lock " + path + ": not a regular file");
  std::string fstype, options, why;
  LockReach reach = LockReach::kCluster;
  if (MountOf(fd.get(), &fstype, &options)) reach = LockReachOf(fstype, options, &why);
  else why = "file system not found in /proc/self/mountinfo";
  if (fault.node_local) {
    reach = LockReach::kNode;
    why = "injected: flock kept on each node";
  }
  int rc = fault.flock_errno != 0 ? -1 : ::flock(fd.get(), LOCK_EX | LOCK_NB);
  const int err = fault.flock_errno != 0 ? fault.flock_errno : errno;
  if (rc != 0 && (err == ENOLCK || err == ENOSYS || err == EOPNOTSUPP)) {
    // No flock on this file system: the lock is the holder text alone.
    reach = LockReach::kNone;
    why = (why.empty() ? std::string() : why + "; ") + "flock fails: " + std::strerror(err);
    rc = 0;
  }
  if (rc != 0) {
    if (err != EWOULDBLOCK && err != EINTR) return SyscallError("flock", path, err, __FILE__, __LINE__);
    std::string who = HolderTextOf(fd.get());
    return Status::Unavailable("ckpt", path + " is locked by " + (who.empty() ? "(not said)" : who));
  }
  std::string previous = HolderTextOf(fd.get());
  auto held = std::make_unique<PosixFileLock>(fd.release(), path, holder, reach, why, std::move(previous));
  if (reach == LockReach::kCluster) BATON_RETURN_IF_ERROR(held->Claim());
  *lock = std::move(held);
  return Status::OK();
}

Env* Env::Default() {
  // Never destroyed: other static destructors may still write files.
  static Env* env = new PosixEnv;
  return env;
}

}  // namespace baton::ckpt::fs
