// Verifying a committed version without MPI: every chunk of every dataset
// of every shard is read (HDF5, serial driver) and compared with its xxh3
// in the manifest. Used by `baton ckpt verify`, for the shared directory
// (every shard, VerifyVersion) and for a node's level-2 copies (the shards
// that node holds, each where it holds it: VerifyShardCopies). All HDF5
// calls on the calling thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "baton/status.h"
#include "ckpt/fs/env.h"
#include "ckpt/manifest.h"

namespace baton::ckpt {

// `progress(done, total)` is called with bytes as chunks complete.
using VerifyProgress = std::function<void(uint64_t, uint64_t)>;

// Appends one line per failure to *failures ("shard-0003.h5: dataset w rows
// 128-255 (rank 5): xxh3 0123... != manifest 4567..."; a missing, truncated
// or unreadable shard is one line); *bytes is the array bytes checked.
// Every shard's index must be loaded (LoadAllShardIndexes). Returns a
// failed Status only when verifying could not run at all.
Status VerifyVersion(fs::Env* env, const std::string& version_path, const Manifest& manifest,
                     std::vector<std::string>* failures, uint64_t* bytes, const VerifyProgress& progress = {});

// One copy of manifest.shards[shard]: its file and index in `dir` (a
// version directory, or level 2's partner/ directory inside one); failure
// lines name it as `label` + its file name ("partner/shard-3.h5").
struct ShardCopy {
  size_t shard = 0;
  std::string dir;
  std::string label;
};

// The given copies only, as VerifyVersion checks a shard, each with its
// index read from its own directory and checked against the manifest's
// size and xxh3 first (a manifest whose indexes are not loaded; a format
// 1-2 one holds them), so two copies of one shard are each checked; then
// the manifest's user blob. The checks across shards (every row covered
// once) need every shard and are not made. Failures and returns as
// VerifyVersion's.
Status VerifyShardCopies(fs::Env* env, const Manifest& manifest, const std::vector<ShardCopy>& copies,
                         std::vector<std::string>* failures, uint64_t* bytes, const VerifyProgress& progress = {});

}  // namespace baton::ckpt
