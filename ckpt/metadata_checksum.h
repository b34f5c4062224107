// The checksum of a shard file's HDF5 metadata: xxh3 over every byte of
// the file outside its datasets' data (superblock, object headers,
// attributes, free space; manifest format 2, ShardMeta::meta_xxh3). The
// data have their own checksums (the chunks'); with this one, every byte
// HDF5 parses is checked before HDF5 sees it, so a damaged metadata byte
// is a Corruption, not a crash inside H5Dopen2. MPI-free.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "baton/status.h"
#include "ckpt/fs/env.h"

namespace baton::ckpt {

// xxh3 of the bytes of `path` (file_bytes long) outside the [begin, end)
// extents (which may be unsorted; overlapping ones are merged), read
// through env in pieces of at most 1 MiB; gaps between extents closer than
// 64 KiB to each other are read together (the .cc says why).
Status HashOutsideExtents(fs::Env* env, const std::string& path, uint64_t file_bytes,
                          std::vector<std::pair<uint64_t, uint64_t>> extents, uint64_t* xxh3);

// The same bytes, handed to `take` (offset, bytes, count) in ascending
// order as they are read (the hash above is theirs, in this order): what
// h5::CaptureMetadataImage keeps of a shard file.
Status ReadOutsideExtents(fs::Env* env, const std::string& path, uint64_t file_bytes,
                          std::vector<std::pair<uint64_t, uint64_t>> extents,
                          const std::function<void(uint64_t, const char*, size_t)>& take);

}  // namespace baton::ckpt
