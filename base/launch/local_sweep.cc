#include "base/launch/local_sweep.h"

#include <memory>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/launch/bounded_child.h"
#include "base/launch/component.h"
#include "base/launch/quote.h"
#include "base/launch/safe_dir.h"

namespace baton::launch {
namespace {

using Clock = std::chrono::steady_clock;

// The names in the open directory `fd` (read through a duplicate, so `fd`
// keeps its offset), without "." and "..".
Status ListNames(int fd, const std::string& path, std::vector<std::string>* names) {
  names->clear();
  const int dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (dup_fd < 0) return Status::IOError(kComponent, "dup of " + Quoted(path) + ": " + std::strerror(errno));
  DIR* d = fdopendir(dup_fd);
  if (d == nullptr) {
    const int err = errno;
    close(dup_fd);
    return Status::IOError(kComponent, "cannot list " + Quoted(path) + ": " + std::strerror(err));
  }
  rewinddir(d);
  errno = 0;
  while (struct dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names->push_back(name);
  }
  const int err = errno;
  closedir(d);
  if (err != 0) return Status::IOError(kComponent, "cannot list " + Quoted(path) + ": " + std::strerror(err));
  std::sort(names->begin(), names->end());
  return Status::OK();
}

struct linux_dirent64 {
  ino64_t d_ino;
  off64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

bool IsDotOrDotDot(const char* n) { return n[0] == '.' && (n[1] == '\0' || (n[1] == '.' && n[2] == '\0')); }

// One pass over `dir`: removes what it can; *descend gets a directory that
// must be emptied first (opened), or -1. Returns 0 or an errno; *removed
// says whether the pass removed anything (entries removed while reading
// may hide others from getdents, so an empty pass is the proof).
int Pass(int dir, int* descend, bool* removed, bool* seen) {
  *descend = -1;
  *removed = false;
  *seen = false;
  alignas(linux_dirent64) char buf[4096];
  if (lseek(dir, 0, SEEK_SET) < 0) return errno;
  while (true) {
    const long n = syscall(SYS_getdents64, dir, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return 0;
    for (long off = 0; off < n;) {
      const auto* e = reinterpret_cast<const linux_dirent64*>(buf + off);
      off += e->d_reclen;
      const char* name = e->d_name;
      if (IsDotOrDotDot(name)) continue;
      *seen = true;
      if (unlinkat(dir, name, 0) == 0 || errno == ENOENT) {
        *removed = true;
        continue;
      }
      if (errno == EACCES) {  // no write permission in `dir`: ours, so give it
        struct stat st;
        if (fstat(dir, &st) != 0) return errno;
        if ((st.st_mode & 0700) == 0700) return EACCES;  // not a matter of mode
        if (fchmod(dir, 0700) != 0) return errno;
        *removed = true;       // a change: pass again
        return 0;
      }
      if (errno != EISDIR && errno != EPERM) return errno;
      if (unlinkat(dir, name, AT_REMOVEDIR) == 0 || errno == ENOENT) {
        *removed = true;
        continue;
      }
      if (errno != ENOTEMPTY && errno != EEXIST) return errno;
      int sub = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub < 0 && errno == EACCES) {
        if (fchmodat(dir, name, 0700, 0) != 0) return errno;
        sub = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      }
      if (sub < 0) return errno;
      *descend = sub;
      return 0;
    }
  }
}

// Whether <dir>/<name> (a directory, opened without following a link)
// holds nothing.
Status IsEmptyDir(int dir, const std::string& name, const std::string& path, bool* empty) {
  *empty = false;
  const int fd = openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return Status::IOError(kComponent, "cannot open " + Quoted(path) + ": " + std::strerror(errno));
  std::vector<std::string> names;
  Status s = ListNames(fd, path, &names);
  close(fd);
  if (s.ok()) *empty = names.empty();
  return s;
}

}  // namespace

int RemoveDirectoryContents(int dir) {
  int cur = fcntl(dir, F_DUPFD_CLOEXEC, 0);
  if (cur < 0) return errno;
  long depth = 0;
  while (true) {
    int sub = -1;
    bool removed = false, seen = false;
    const int err = Pass(cur, &sub, &removed, &seen);
    if (err != 0) {
      close(cur);
      return err;
    }
    if (sub >= 0) {  // empty that one first
      close(cur);
      cur = sub;
      ++depth;
      continue;
    }
    if (seen || removed) continue;  // something was there: pass again until a pass finds nothing
    if (depth == 0) break;
    // Empty: climb back; the parent's next pass removes it.
    const int up = openat(cur, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    close(cur);
    if (up < 0) return errno;
    cur = up;
    --depth;
  }
  close(cur);
  return 0;
}

JobLookup LookupByUser(UserJobsQuery query) {
  struct Cache {
    std::map<uid_t, std::map<uint32_t, uint32_t>> answers;
    std::map<uid_t, Status> failures;
    Status timeout;
  };
  auto cache = std::make_shared<Cache>();
  return [query = std::move(query), cache](uid_t user, uint32_t job, JobRecord* record) -> Status {
    *record = JobRecord();
    if (!cache->timeout.ok()) return cache->timeout;
    if (auto f = cache->failures.find(user); f != cache->failures.end()) return f->second;
    auto a = cache->answers.find(user);
    if (a == cache->answers.end()) {
      std::map<uint32_t, uint32_t> states;
      Status s = query(user, &states);
      if (!s.ok()) {
        if (s.code() == Code::kTimeout) cache->timeout = s;
        cache->failures[user] = s;
        return s;
      }
      a = cache->answers.emplace(user, std::move(states)).first;
    }
    if (auto j = a->second.find(job); j != a->second.end()) {
      record->known = true;
      record->state = j->second;
    }
    return Status::OK();
  };
}

Status SweepLocalRoot(const std::string& root, const JobLookup& lookup, const SweepLimits& limits,
                      SweepReport* report, const EndingJob* ending) {
  *report = SweepReport();
  const auto deadline = Clock::now() + limits.total;
  struct stat rst;
  if (lstat(root.c_str(), &rst) != 0 && errno == ENOENT) return Status::OK();
  OpenDir rootdir;
  BATON_RETURN_IF_ERROR(OpenSafeDir(root, SafeDirSpec{false, 0755, "node-local root"}, &rootdir));
  std::vector<std::string> users;
  Status s = ListNames(rootdir.fd, rootdir.path, &users);
  CloseDir(&rootdir);
  if (!s.ok()) return s;
  const uid_t caller = geteuid();
  for (const std::string& user : users) {
    const std::string user_path = root + "/" + user;
    const auto uid = ParseUidDirName(user);
    if (!uid) {
      report->left.push_back(user_path + ": not named after a uid");
      continue;
    }
    OpenDir udir;
    Status us = OpenSafeDir(user_path, SafeDirSpec{false, 0755, "node-local directory"}, &udir);
    std::vector<std::string> jobs;
    if (us.ok()) us = ListNames(udir.fd, udir.path, &jobs);
    if (!us.ok()) {
      report->left.push_back(user_path + ": " + us.ToString());
      CloseDir(&udir);
      continue;
    }
    for (const std::string& name : jobs) {
      const std::string path = udir.path + "/" + name;
      if (Clock::now() >= deadline) {
        report->out_of_time = true;
        break;
      }
      SweepEntry e;
      e.dir_uid = *uid;
      e.name = name;
      e.caller = caller;
      struct stat st;
      if (fstatat(udir.fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        report->left.push_back(path + ": cannot inspect: " + std::strerror(errno));
        continue;
      }
      e.is_directory = S_ISDIR(st.st_mode);
      e.owner = st.st_uid;
      const auto job = ParseJobDirName(name);
      std::string asked;
      if (job && e.is_directory) {
        JobRecord record;
        Status ls;
        if (ending != nullptr && ending->uid == *uid && ending->job == *job) {
          bool empty = false;
          ls = IsEmptyDir(udir.fd, name, path, &empty);
          e.ending_job_and_empty = ls.ok() && empty;
          if (ls.ok() && !empty) ls = ending->ask(*job, &record);
        } else {
          ls = lookup(*uid, *job, &record);
        }
        if (!ls.ok()) asked = ": " + ls.ToString();
        else if (!e.ending_job_and_empty) e.job = record;
      }
      std::string why;
      const SweepVerdict v = Decide(e, &why);
      if (v == SweepVerdict::kKeep) {
        report->kept.push_back(path);
        continue;
      }
      if (v == SweepVerdict::kLeave) {
        report->left.push_back(path + ": " + why + asked);
        continue;
      }
      // Opened from the <uid> descriptor, never through a link, and checked
      // to be what was decided on.
      const int fd = openat(udir.fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      struct stat fst;
      if (fd < 0 || fstat(fd, &fst) != 0 || fst.st_ino != st.st_ino || fst.st_dev != st.st_dev) {
        report->left.push_back(path + ": changed while the sweep looked at it; left for the next sweep");
        if (fd >= 0) close(fd);
        continue;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      Status rs = RunAsUser("removing " + Quoted(path), fst.st_uid, fst.st_gid,
                            std::max(std::chrono::milliseconds(1), std::min(limits.per_dir, left)),
                            [fd] { return RemoveDirectoryContents(fd); });
      close(fd);
      if (rs.ok() && unlinkat(udir.fd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT)
        rs = Status::IOError(kComponent, "cannot remove " + Quoted(path) + ": " + std::strerror(errno));
      if (rs.ok()) report->removed.push_back(path);
      else report->left.push_back(path + ": " + rs.ToString());
    }
    CloseDir(&udir);
    if (report->out_of_time) break;
  }
  return Status::OK();
}

}  // namespace baton::launch
