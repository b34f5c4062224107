#include "base/launch/safe_dir.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/launch/component.h"
#include "base/launch/errno_status.h"
#include "base/launch/quote.h"

namespace baton::launch {
namespace {

// The rule of OpenSafeDir, on the open descriptor.
Status CheckSafe(int fd, const std::string& path, const std::string& noun = "hostfile directory") {
  struct stat st;
  if (fstat(fd, &st) != 0) return Errno("cannot inspect " + noun, path, errno);
  const uid_t me = geteuid();
  const bool others_write = (st.st_mode & 022) != 0;
  const bool mine = st.st_uid == me && !others_write;
  const bool roots = st.st_uid == 0 && (!others_write || (st.st_mode & S_ISVTX) != 0);
  if (S_ISDIR(st.st_mode) && (mine || roots)) return Status::OK();
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  return Status::InvalidArgument(
      kComponent, noun + " " + Quoted(path) + " is not safe to use: " +
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

Status OpenFailed(const std::string& path, int err, const std::string& noun = "hostfile directory") {
  if (err == ELOOP || err == ENOTDIR)
    return Status::InvalidArgument(kComponent, noun + " " + Quoted(path) +
                                                   " is not safe to use: not a directory (a link or a file)");
  return Errno("cannot open " + noun, path, err);
}

}  // namespace

void CloseDir(OpenDir* dir) {
  if (dir->fd >= 0) close(dir->fd);
  if (dir->parent_fd >= 0) close(dir->parent_fd);
  dir->fd = dir->parent_fd = -1;
}

Status StepInto(OpenDir* parent, int fd, const std::string& leaf, const std::string& path, bool created, Status s,
                OpenDir* out) {
  if (!s.ok()) {
    if (fd >= 0) close(fd);
    CloseDir(parent);
    return s;
  }
  close(parent->parent_fd);
  out->parent_fd = parent->fd;
  out->fd = fd;
  out->leaf = leaf;
  out->path = path;
  out->created = created;
  parent->fd = parent->parent_fd = -1;
  return Status::OK();
}

Status OpenSafeDir(const std::string& path, bool create, OpenDir* out) {
  return OpenSafeDir(path, SafeDirSpec{create, 0700, "hostfile directory"}, out);
}

Status OpenSafeDir(const std::string& path, const SafeDirSpec& spec, OpenDir* out) {
  const std::string& noun = spec.noun;
  *out = OpenDir();
  if (path.empty() || path[0] != '/') return Status::InvalidArgument(kComponent, noun + " " + Quoted(path) + " is not absolute");
  int fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno("cannot open", "/", errno);
  Status s = CheckSafe(fd, "/", noun);
  std::string sofar, leaf;
  int parent = -1;
  size_t pos = 1;
  while (s.ok() && pos < path.size()) {
    size_t slash = path.find('/', pos);
    const std::string part = path.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos);
    pos = slash == std::string::npos ? path.size() : slash + 1;
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      s = Status::InvalidArgument(kComponent, noun + " " + Quoted(path) + " contains '..'");
      break;
    }
    sofar += "/" + part;
    bool made = false;
    int next = OpenDirAt(fd, part);
    if (next < 0 && errno == ENOENT && spec.create) {
      if (mkdirat(fd, part.c_str(), spec.mode) == 0) made = true;
      else if (errno != EEXIST) {
        s = Errno("cannot create " + noun, sofar, errno);
        break;
      }
      next = OpenDirAt(fd, part);
      // The mode exactly, whatever the umask took from it.
      if (made && next >= 0 && fchmod(next, spec.mode) != 0) {
        s = Errno("cannot set the mode of " + noun, sofar, errno);
        close(next);
        break;
      }
    }
    if (next < 0) {
      s = OpenFailed(sofar, errno, noun);
      break;
    }
    s = CheckSafe(next, sofar, noun);
    if (parent >= 0) close(parent);
    parent = fd;
    fd = next;
    leaf = part;
    out->created = made;
  }
  if (!s.ok() || parent < 0) {
    if (s.ok()) s = Status::InvalidArgument(kComponent, noun + " " + Quoted(path) + " is the root directory");
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
    return StepInto(&base, fd, name, path, /*created=*/true, s, out);
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

}  // namespace baton::launch
