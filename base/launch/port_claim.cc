#include "base/launch/port_claim.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/launch/component.h"
#include "base/launch/quote.h"

namespace baton::launch {
namespace {

// The claims are root's: a directory another user could write would let
// that user hold (or free) every port.
Status CheckClaimDir(const std::string& dir) {
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0) return Status::IOError(kComponent, "port_dir " + Quoted(dir) + ": " + std::strerror(errno));
  if (!S_ISDIR(st.st_mode) || st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return Status::InvalidArgument(kComponent, "port_dir " + Quoted(dir) +
                                                   " is not a directory that only root can write (mode " +
                                                   std::to_string(st.st_mode & 07777) + ", owner " +
                                                   std::to_string(st.st_uid) + ")");
  return Status::OK();
}

Status MakeDirs(const std::string& dir) {
  for (size_t slash = 1; slash != std::string::npos;) {
    slash = dir.find('/', slash + 1);
    const std::string part = dir.substr(0, slash);
    if (mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) return Status::IOError(kComponent, "making " + Quoted(part) + ": " + std::strerror(errno));
  }
  return Status::OK();
}

}  // namespace

Status ClaimPort(const std::string& dir, int lo, int hi, int start, int* port, int* fd) {
  *fd = -1;
  if (dir.empty() || dir[0] != '/') return Status::InvalidArgument(kComponent, "port_dir " + Quoted(dir) + " is not absolute");
  if (lo < 1 || hi > 65535 || lo > hi || start < lo || start > hi)
    return Status::InvalidArgument(kComponent, "port range " + std::to_string(lo) + "-" + std::to_string(hi) +
                                                   " with start " + std::to_string(start));
  BATON_RETURN_IF_ERROR(MakeDirs(dir));
  BATON_RETURN_IF_ERROR(CheckClaimDir(dir));
  const int span = hi - lo + 1;
  for (int i = 0; i < span; ++i) {
    const int p = lo + (start - lo + i) % span;
    const std::string path = dir + "/" + std::to_string(p);
    const int f = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (f < 0) return Status::IOError(kComponent, "opening the port claim " + Quoted(path) + ": " + std::strerror(errno));
    if (flock(f, LOCK_EX | LOCK_NB) == 0) {
      *port = p;
      *fd = f;
      return Status::OK();
    }
    const int err = errno;
    close(f);
    if (err != EWOULDBLOCK) {
      errno = err;
      return Status::IOError(kComponent, "locking the port claim " + Quoted(path) + ": " + std::strerror(errno));
    }
  }
  return Status::Unavailable(kComponent, "every port of port_range " + std::to_string(lo) + "-" + std::to_string(hi) +
                                             " is held by another job's batch script or interactive step on this "
                                             "node (claims in " + Quoted(dir) + "): give --baton-master-port");
}

void ReleasePort(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

}  // namespace baton::launch
