#include "base/launch/hostfile_dir.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "base/launch/component.h"
#include "base/launch/quote.h"

namespace baton::launch {
namespace {

Status Errno(const std::string& what, const std::string& path, int err) {
  return Status::IOError(kComponent, what + " " + Quoted(path) + ": " + std::strerror(err));
}

// The rule of OpenSafeDir, on the open descriptor.
Status CheckSafe(int fd, const std::string& path) {
  struct stat st;
  if (fstat(fd, &st) != 0) return Errno("cannot inspect hostfile directory", path, errno);
  const uid_t me = geteuid();
  const bool others_write = (st.st_mode & 022) != 0;
  const bool mine = st.st_uid == me && !others_write;
  const bool roots = st.st_uid == 0 && (!others_write || (st.st_mode & S_ISVTX) != 0);
  if (S_ISDIR(st.st_mode) && (mine || roots)) return Status::OK();
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  return Status::InvalidArgument(
      kComponent, "hostfile directory " + Quoted(path) + " is not safe to use: " +
                      (!S_ISDIR(st.st_mode) ? std::string("not a directory")
                                            : "owned by uid " + std::to_string(st.st_uid) + " with mode " + mode +
                                                  "; it must belong to uid " + std::to_string(me) +
                                                  " and be writable by nobody else, or belong to root and be "
                                                  "writable by nobody else or sticky (as /tmp)"));
}

// Opens `name` in `parent_fd` as a directory, never through a link.
int OpenDirAt(int parent_fd, const std::string& name) {
  return openat(parent_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

Status OpenFailed(const std::string& path, int err) {
  if (err == ELOOP || err == ENOTDIR)
    return Status::InvalidArgument(kComponent, "hostfile directory " + Quoted(path) +
                                                   " is not safe to use: not a directory (a link or a file)");
  return Errno("cannot open hostfile directory", path, err);
}

}  // namespace

void CloseDir(OpenDir* dir) {
  if (dir->fd >= 0) close(dir->fd);
  if (dir->parent_fd >= 0) close(dir->parent_fd);
  dir->fd = dir->parent_fd = -1;
}

Status OpenSafeDir(const std::string& path, bool create, OpenDir* out) {
  *out = OpenDir();
  if (path.empty() || path[0] != '/') return Status::InvalidArgument(kComponent, "hostfile directory " + Quoted(path) + " is not absolute");
  int fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno("cannot open", "/", errno);
  Status s = CheckSafe(fd, "/");
  std::string sofar, leaf;
  int parent = -1;
  size_t pos = 1;
  while (s.ok() && pos < path.size()) {
    size_t slash = path.find('/', pos);
    const std::string part = path.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos);
    pos = slash == std::string::npos ? path.size() : slash + 1;
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      s = Status::InvalidArgument(kComponent, "hostfile directory " + Quoted(path) + " contains '..'");
      break;
    }
    sofar += "/" + part;
    bool made = false;
    int next = OpenDirAt(fd, part);
    if (next < 0 && errno == ENOENT && create) {
      if (mkdirat(fd, part.c_str(), 0700) == 0) made = true;
      else if (errno != EEXIST) {
        s = Errno("cannot create hostfile directory", sofar, errno);
        break;
      }
      next = OpenDirAt(fd, part);
    }
    if (next < 0) {
      s = OpenFailed(sofar, errno);
      break;
    }
    s = CheckSafe(next, sofar);
    if (parent >= 0) close(parent);
    parent = fd;
    fd = next;
    leaf = part;
    out->created = made;
  }
  if (!s.ok() || parent < 0) {
    if (s.ok()) s = Status::InvalidArgument(kComponent, "hostfile directory " + Quoted(path) + " is the root directory");
    if (parent >= 0) close(parent);
    close(fd);
    out->created = false;
    return s;
  }
  out->parent_fd = parent;
  out->fd = fd;
  out->leaf = leaf;
  out->path = sofar;
  return Status::OK();
}

Status MakeFreshDir(const std::string& parent, const std::string& prefix, OpenDir* out) {
  OpenDir base;
  BATON_RETURN_IF_ERROR(OpenSafeDir(parent, /*create=*/false, &base));
  static const char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  for (int attempt = 0; attempt < 100; ++attempt) {
    unsigned char random[8];
    if (getrandom(random, sizeof random, 0) != static_cast<ssize_t>(sizeof random)) {
      Status s = Errno("getrandom for a directory name in", parent, errno);
      CloseDir(&base);
      return s;
    }
    std::string name = prefix;
    for (unsigned char r : random) name += kChars[r % (sizeof kChars - 1)];
    if (mkdirat(base.fd, name.c_str(), 0700) != 0) {
      if (errno == EEXIST) continue;  // taken, perhaps planted: draw again
      Status s = Errno("cannot create hostfile directory in", base.path, errno);
      CloseDir(&base);
      return s;
    }
    const std::string path = base.path + "/" + name;
    const int fd = OpenDirAt(base.fd, name);
    Status s = fd < 0 ? OpenFailed(path, errno) : CheckSafe(fd, path);
    if (!s.ok()) {
      if (fd >= 0) close(fd);
      CloseDir(&base);
      return s;
    }
    close(base.parent_fd);
    out->parent_fd = base.fd;
    out->fd = fd;
    out->leaf = name;
    out->path = path;
    out->created = true;
    return Status::OK();
  }
  CloseDir(&base);
  return Status::IOError(kComponent, "no free directory name in " + Quoted(parent) + " after 100 tries");
}

Status WriteFileIn(const OpenDir& dir, const std::string& name, const std::string& content) {
  const std::string tmp = name + ".tmp", path = dir.path + "/" + name;
  unlinkat(dir.fd, tmp.c_str(), 0);
  int fd = openat(dir.fd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Errno("cannot create hostfile", dir.path + "/" + tmp, errno);
  size_t done = 0;
  Status s;
  while (s.ok() && done < content.size()) {
    ssize_t n = write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) s = Errno("cannot write hostfile", path, errno);
    else done += static_cast<size_t>(n);
  }
  if (close(fd) != 0 && s.ok()) s = Errno("cannot close hostfile", path, errno);
  if (s.ok() && renameat(dir.fd, tmp.c_str(), dir.fd, name.c_str()) != 0) s = Errno("cannot rename hostfile into", path, errno);
  if (!s.ok()) unlinkat(dir.fd, tmp.c_str(), 0);
  return s;
}

Status RunAsUser(const std::string& what, uid_t uid, gid_t gid, std::chrono::milliseconds limit,
                 const std::function<int()>& work) {
  // The child reports {stage, errno} through the pipe; its exit closes the
  // pipe, which is the event waited for (with the deadline).
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Status::IOError(kComponent, what + ": pipe: " + std::strerror(errno));
  const bool switch_user = getuid() != uid || geteuid() != uid || getgid() != gid || getegid() != gid;
  pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    close(fds[0]);
    close(fds[1]);
    return Status::IOError(kComponent, what + ": fork: " + std::strerror(err));
  }
  if (pid == 0) {
    // Only async-signal-safe calls between fork and _exit (slurmstepd has threads).
    close(fds[0]);
    int report[2] = {0, 0};
    if (switch_user && (setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(uid) != 0)) {
      report[0] = 1;
      report[1] = errno;
    } else {
      report[0] = 2;
      report[1] = work();
    }
    ssize_t ignored = write(fds[1], report, sizeof report);
    (void)ignored;
    _exit(0);
  }
  close(fds[1]);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int report[2] = {0, 0};
  size_t got = 0;
  bool ended = false;
  while (!ended) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    struct pollfd p = {fds[0], POLLIN, 0};
    const int n = poll(&p, 1, static_cast<int>(left.count()));
    if (n == 0 || (n < 0 && errno == EINTR)) continue;  // the loop's head decides on the deadline
    if (n < 0) break;
    const ssize_t r = read(fds[0], reinterpret_cast<char*>(report) + got, sizeof report - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) ended = true;  // EOF: the child is gone
    else got += static_cast<size_t>(r);
  }
  close(fds[0]);
  if (!ended) {
    // Left behind: a process stuck in the kernel (D state) ignores even
    // SIGKILL, and waiting for it is what must not happen.
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, WNOHANG);
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.1f", static_cast<double>(limit.count()) / 1000.0);
    return Status::Timeout(kComponent, what + " did not finish within " + seconds +
                                           " s (a hung file system?); given up, left in place");
  }
  while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
  if (got != sizeof report) return Status::Internal(kComponent, what + ": the child ended without a report");
  if (report[0] == 1)
    return Status::IOError(kComponent, what + ": cannot become uid " + std::to_string(uid) + " gid " +
                                           std::to_string(gid) + ": " + std::strerror(report[1]));
  if (report[1] != 0) return Status::IOError(kComponent, what + ": " + std::strerror(report[1]));
  return Status::OK();
}

Status RemoveAsUser(const OpenDir& dir, const std::string& name, uid_t uid, gid_t gid,
                    std::chrono::milliseconds limit) {
  const int fd = dir.fd, parent = dir.parent_fd;
  const bool created = dir.created;
  const char* file = name.c_str();
  const char* leaf = dir.leaf.c_str();
  return RunAsUser("removing hostfile " + Quoted(dir.path + "/" + name), uid, gid, limit, [=]() -> int {
    if (unlinkat(fd, file, 0) != 0 && errno != ENOENT) return errno;
    if (created && unlinkat(parent, leaf, AT_REMOVEDIR) != 0 && errno != ENOENT) return errno;
    return 0;
  });
}

}  // namespace baton::launch
