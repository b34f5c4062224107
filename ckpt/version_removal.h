// The removal of one version directory (retention, `baton ckpt gc`, an
// abandoned save), and retention's way of taking it off the saving
// thread. MPI-free.
#pragma once

#include <string>
#include <vector>

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

// What a version is renamed to before it is removed off the saving thread:
// a name no listing takes for a version (catalog.h), nor for another
// program's file (`baton ckpt ls`, a restore's check for foreign files).
inline constexpr char kRemovingPrefix[] = ".removing-";
// kRemovingPrefix followed by a version name (v<seq>-s<step>), nothing
// else: the one rule, which python/baton/storage.py's _OWN repeats. A
// ".removing-notes" of somebody else's is not baton's to remove.
bool IsRemovingName(const std::string& name);

// What a process that died while removing versions left in `dir` (names
// that IsRemovingName takes), to be removed with RemoveVersion: retention
// and `baton ckpt gc` remove them. Empty where `dir` cannot be listed.
std::vector<VersionInfo> LeftoverRemovals(fs::Env* env, const std::string& dir);

// Takes `versions` (of `dir`, planned by retention) out of every listing at
// once, each by one rename to kRemovingPrefix + its name in the same
// directory, and returns what a RemoveVersion of each then removes, off the
// caller's thread: unlinking a shard file frees its blocks and page-cache
// pages, 8 ms for 16 MiB here, which a save should not wait for (issue 48).
// The returned list also holds what such a removal left behind when its
// process died (LeftoverRemovals). A version whose rename fails is
// returned as it is, to be removed where it is (listed until then).
//
// Why a crash at any point leaves no damaged committed version: the rename
// is one step; RemoveVersion still takes the renamed version's manifest
// first and syncs, so where a machine crash undoes a rename not yet on
// disk, the version comes back whole or without its manifest (incomplete),
// never as a manifest without its shards.
std::vector<VersionInfo> SetAsideForRemoval(fs::Env* env, const std::string& dir,
                                            const std::vector<VersionInfo>& versions);

}  // namespace baton::ckpt
