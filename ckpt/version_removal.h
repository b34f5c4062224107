// The removal of one version directory (retention, `baton ckpt gc`, an
// abandoned save). MPI-free.
#pragma once

#include "baton/status.h"
#include "ckpt/catalog.h"
#include "ckpt/fs/env.h"

namespace baton::ckpt {

// Removes a version so that no moment of it is a damaged committed one: the
// manifest goes first (and the directory is synced), making the version
// incomplete at once; then the rest. A removal killed half-way leaves an
// incomplete version, which the next retention removes as a crashed save.
// Through descriptors (Env::RemoveTreeAt): a version directory swapped for
// a symlink since it was listed fails the removal, touching nothing.
Status RemoveVersion(fs::Env* env, const VersionInfo& version);

}  // namespace baton::ckpt
