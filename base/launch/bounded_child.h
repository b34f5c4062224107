// Work on the file system in a child process, waited for under a bound:
// a hung file system (an NFS TMPDIR) then costs a Timeout, never a hung
// slurmstepd. The child may switch to the job's user (RunAsUser), or hand
// back a directory it opened by passing its descriptors over a socket
// (MakeDirBounded).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>

#include "base/launch/safe_dir.h"
#include "baton/status.h"

namespace baton::launch {

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
