#include "base/launch/hostfile_view.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/launch/component.h"
#include "base/launch/errno_status.h"
#include "base/launch/quote.h"

namespace baton::launch {
namespace {

// The copy another task put in place: a safe directory holding the file.
Status CheckPlaced(const std::string& dir_path, const std::string& name) {
  OpenDir dir;
  BATON_RETURN_IF_ERROR(OpenSafeDir(dir_path, /*create=*/false, &dir));
  struct stat st;
  Status s;
  if (fstatat(dir.fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) s = Errno("cannot inspect", dir_path + "/" + name, errno);
  else if (!S_ISREG(st.st_mode) || st.st_uid != geteuid())
    s = Status::InvalidArgument(kComponent, Quoted(dir_path + "/" + name) + " is not a file of uid " +
                                                std::to_string(geteuid()));
  CloseDir(&dir);
  return s;
}

}  // namespace

Status SeenAtItsPath(const OpenDir& dir, bool* same) {
  *same = false;
  struct stat opened, named;
  if (fstat(dir.fd, &opened) != 0) return Errno("cannot inspect the directory opened as", dir.path, errno);
  if (stat(dir.path.c_str(), &named) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return Status::OK();
    return Errno("cannot inspect", dir.path, errno);
  }
  *same = opened.st_dev == named.st_dev && opened.st_ino == named.st_ino;
  return Status::OK();
}

Status PlaceInThisView(const std::string& dir_path, const std::string& name, const std::string& content) {
  const size_t slash = dir_path.rfind('/');
  if (dir_path.empty() || dir_path[0] != '/' || slash == std::string::npos || slash + 1 == dir_path.size())
    return Status::InvalidArgument(kComponent, "hostfile directory " + Quoted(dir_path) + " is not an absolute path to a directory");
  const std::string parent_path = slash == 0 ? "/" : dir_path.substr(0, slash);
  const std::string leaf = dir_path.substr(slash + 1);
  if (parent_path != "/") {
    OpenDir parent;
    BATON_RETURN_IF_ERROR(OpenSafeDir(parent_path, /*create=*/true, &parent));
    CloseDir(&parent);
  }
  if (faccessat(AT_FDCWD, dir_path.c_str(), F_OK, AT_SYMLINK_NOFOLLOW) == 0) return CheckPlaced(dir_path, name);

  OpenDir fresh;
  BATON_RETURN_IF_ERROR(MakeFreshDir(parent_path, leaf + ".new.", &fresh));
  Status s = WriteFileIn(fresh, name, content);
  if (s.ok() && renameat(fresh.parent_fd, fresh.leaf.c_str(), fresh.parent_fd, leaf.c_str()) == 0) {
    CloseDir(&fresh);
    return Status::OK();
  }
  const int err = errno;
  unlinkat(fresh.fd, name.c_str(), 0);
  unlinkat(fresh.parent_fd, fresh.leaf.c_str(), AT_REMOVEDIR);
  CloseDir(&fresh);
  if (!s.ok()) return s;
  // Another task of the node renamed its copy into place first.
  if (err == EEXIST || err == ENOTEMPTY) return CheckPlaced(dir_path, name);
  return Errno("cannot rename the hostfile's directory into", dir_path, err);
}

}  // namespace baton::launch
