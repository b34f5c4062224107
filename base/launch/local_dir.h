// The node-local directory the plugin gives a job when the site chose a
// root for them (plugstack.conf local_root=PATH) and the user gave none
// (--baton-local-dir): "<root>/<uid>/<jobid>". Level-2 checkpoints live in
// it (ckpt/), so it must outlive a requeue: the name holds nothing that
// changes between runs of the job, and a run that lands on a node where an
// earlier run wrote finds the data there. The sweep (local_sweep.h)
// removes it once the job has ended for good.
//
// Who may change what: <root> and <root>/<uid> belong to root and only
// root writes in them, so no user can plant, rename or remove a job's
// directory; the job's directory belongs to the user (mode 0700), who
// writes what they like inside it. Made by root in slurmstepd before the
// tasks start, each step of checks and changes on open descriptors
// (openat, mkdirat, fchown, fchmod), never through a link.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "base/launch/safe_dir.h"
#include "baton/status.h"

namespace baton::launch {

// "<root>/<uid>/<job>", the same on every node and every run of the job.
std::string JobLocalDirPath(const std::string& root, uid_t uid, uint32_t job);

// Opens the job's directory, making what is missing: <root> (and its
// missing parents) and <root>/<uid> with mode 0755, owned by the caller; the
// job's directory with mode 0700, then handed to uid:gid (fchown on its
// descriptor). Refused, with an error naming the path: a component that is
// a link or not a directory, a component the caller does not own that is
// writable by others than root (or not sticky), a job directory owned by
// another user than uid. The caller is root in slurmstepd; the rule is
// "the caller" so that unit tests run as an ordinary user. On success
// out->parent_fd is <root>/<uid> and out->fd the job's directory.
Status OpenJobLocalDir(const std::string& root, uid_t uid, gid_t gid, uint32_t job, OpenDir* out);

}  // namespace baton::launch
