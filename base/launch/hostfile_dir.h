// The directory that holds a node's hostfile: made so that no other user
// can have taken its place or swap it afterwards, made and removed with a
// bound on the wait (a hung NFS TMPDIR must never hang slurmstepd), and
// removed as the job's user.
//
// Every check is made on an open descriptor, and every later use is
// relative to it (openat, mkdirat, renameat, unlinkat): nothing is decided
// on a path and then done to whatever the path names a moment later.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>

#include "baton/status.h"

namespace baton::launch {

struct OpenDir {
  int parent_fd = -1;    // the directory that holds it
  std::string leaf;      // its name there
  int fd = -1;           // the directory itself
  std::string path;      // for messages and BATON_HOSTFILE
  bool created = false;  // made here, so removed at the end
};

// Opens the absolute directory `path`, making missing components (mode
// 0700) when `create`. Each component is opened without following a link
// and must be a directory that no other user can change: owned by the
// caller and writable by nobody else, or owned by root and writable by
// nobody else or sticky (/tmp). A directory writable by its group is not
// safe: any member could replace what is in it.
Status OpenSafeDir(const std::string& path, bool create, OpenDir* out);

// The same rule for another directory than the hostfile's: missing
// components are made with `mode` (exactly, whatever the umask), and
// messages call the directory `noun`.
struct SafeDirSpec {
  bool create = false;
  mode_t mode = 0700;
  std::string noun = "hostfile directory";
};
Status OpenSafeDir(const std::string& path, const SafeDirSpec& spec, OpenDir* out);

// A fresh directory "<parent>/<prefix>XXXXXX" (mode 0700) with a random
// suffix: a name planted beforehand is skipped, never used.
Status MakeFreshDir(const std::string& parent, const std::string& prefix, OpenDir* out);

// Writes `name` in `dir` through "<name>.tmp" (O_EXCL, O_NOFOLLOW, 0600)
// and a rename: a reader never sees half a file.
Status WriteFileIn(const OpenDir& dir, const std::string& name, const std::string& content);

void CloseDir(OpenDir* dir);

// Runs `work` in a child that first takes uid/gid (and no supplementary
// groups) when they are not already the caller's, and waits for it at most
// `limit`: a hung file system (NFS) then costs a Timeout, never a hung
// slurmstepd. `work` runs between fork and _exit, so it must be
// async-signal-safe; it returns 0 or an errno, which the Status reports
// as is. `what` names the work in messages.
Status RunAsUser(const std::string& what, uid_t uid, gid_t gid, std::chrono::milliseconds limit,
                 const std::function<int()>& work);

// Runs `make` (which opens or makes a directory, and may write in it) in a
// child and waits for it at most `limit`: a file system that never answers
// (a hung NFS server) costs a Timeout, never a hung slurmstepd. The child
// runs as the caller (user_init already runs as the job's user). On
// success the directory comes back through *out, its two descriptors
// passed over a socket (SCM_RIGHTS); a failure comes back as the child's
// Status. `make` runs between fork and _exit in a process that may have
// threads: it may allocate (glibc's fork leaves malloc usable in the
// child), but must take no other lock (no logging, no libslurm).
Status MakeDirBounded(const std::string& what, std::chrono::milliseconds limit,
                      const std::function<Status(OpenDir*)>& make, OpenDir* out);

// Removes `name` from `dir`, and `dir` itself when it was made here, as
// uid/gid through RunAsUser.
Status RemoveAsUser(const OpenDir& dir, const std::string& name, uid_t uid, gid_t gid,
                    std::chrono::milliseconds limit);

}  // namespace baton::launch
