#include "base/launch/local_dir.h"

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

constexpr const char* kNoun = "node-local directory";

}  // namespace

std::string JobLocalDirPath(const std::string& root, uid_t uid, uint32_t job) {
  std::string r = root;
  while (r.size() > 1 && r.back() == '/') r.pop_back();
  return r + "/" + std::to_string(uid) + "/" + std::to_string(job);
}

Status OpenJobLocalDir(const std::string& root, uid_t uid, gid_t gid, uint32_t job, OpenDir* out) {
  *out = OpenDir();
  const std::string path = JobLocalDirPath(root, uid, job);
  const std::string parent_path = path.substr(0, path.rfind('/'));
  OpenDir parent;
  BATON_RETURN_IF_ERROR(OpenSafeDir(parent_path, SafeDirSpec{true, 0755, kNoun}, &parent));
  const std::string name = std::to_string(job);
  const bool made = mkdirat(parent.fd, name.c_str(), 0700) == 0;
  if (!made && errno != EEXIST) {
    Status s = Errno("cannot create " + std::string(kNoun), path, errno);
    CloseDir(&parent);
    return s;
  }
  const int fd = openat(parent.fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  Status s;
  struct stat st = {};
  if (fd < 0) {
    s = errno == ELOOP || errno == ENOTDIR
            ? Status::InvalidArgument(kComponent, std::string(kNoun) + " " + Quoted(path) +
                                                      " is not safe to use: not a directory (a link or a file)")
            : Errno("cannot open " + std::string(kNoun), path, errno);
  } else if (fstat(fd, &st) != 0) {
    s = Errno("cannot inspect " + std::string(kNoun), path, errno);
  } else if (made || (st.st_uid == geteuid() && st.st_uid != uid)) {
    // Made here, or by an earlier start that stopped before handing it
    // over: only the caller writes in <root>/<uid>, so nobody else made it.
    if (fchown(fd, uid, gid) != 0) s = Errno("cannot hand over " + std::string(kNoun), path, errno);
    else if (fchmod(fd, 0700) != 0) s = Errno("cannot set the mode of " + std::string(kNoun), path, errno);
  } else if (st.st_uid != uid) {
    s = Status::InvalidArgument(kComponent, std::string(kNoun) + " " + Quoted(path) + " belongs to uid " +
                                                std::to_string(st.st_uid) + ", not to the job's user (uid " +
                                                std::to_string(uid) + ")");
  }
  return StepInto(&parent, fd, name, path, made, s, out);
}

}  // namespace baton::launch
