// The safety rule for a directory the plugin writes in (the hostfile's,
// the node-local one): made so that no other user can have taken its
// place or swap it afterwards. Making and removing it with a bound on the
// wait, and as the job's user, is bounded_child.h.
//
// Every check is made on an open descriptor, and every later use is
// relative to it (openat, mkdirat, renameat, unlinkat): nothing is decided
// on a path and then done to whatever the path names a moment later.
#pragma once

#include <sys/types.h>

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

// Ends a step from the open directory `parent` into its entry `leaf`
// (descriptor `fd`, -1 when opening it failed): when `s` is OK, `out` holds
// `leaf` with `parent`'s own descriptor as its parent and the grandparent is
// closed; otherwise every descriptor is closed and `s` returned. Either way
// `parent` is consumed.
Status StepInto(OpenDir* parent, int fd, const std::string& leaf, const std::string& path, bool created, Status s,
                OpenDir* out);

}  // namespace baton::launch
