// Verifying a committed version without MPI: every chunk of every dataset
// of every shard is read (HDF5, serial driver) and compared with its xxh3
// in the manifest. Used by `baton ckpt verify`. All HDF5 calls on the
// calling thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "baton/status.h"
#include "ckpt/fs/env.h"
#include "ckpt/manifest.h"

namespace baton::ckpt {

// Appends one line per failure to *failures ("shard-0003.h5: dataset w rows
// 128-255 (rank 5): xxh3 0123... != manifest 4567..."; a missing, truncated
// or unreadable shard is one line); *bytes is the array bytes checked.
// Returns a failed Status only when verifying could not run at all.
// `progress(done, total)` is called with bytes as chunks complete.
Status VerifyVersion(fs::Env* env, const std::string& version_path, const Manifest& manifest,
                     std::vector<std::string>* failures, uint64_t* bytes,
                     const std::function<void(uint64_t, uint64_t)>& progress = {});

}  // namespace baton::ckpt
