// A shard file's HDF5 metadata, kept to be written again: the bytes HDF5
// wrote outside the datasets' data (superblock, object headers, attributes,
// links) when the group's first rank created the file alone, with the
// layout HDF5 was given. A save of the same layout (a training loop saving
// the same state: the same names, types, shapes and every member's rows)
// writes those bytes into the new file and skips HDF5: the file is the
// same, byte for byte, as the one HDF5 would make (datasets carry no object
// times: shard_dataset.cc), and so is its metadata checksum, which is kept
// with the image instead of being read back. HDF5 cost 4-5 ms of a 20 ms
// save of 71 arrays (its create), and grows with the arrays. MPI-free.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "baton/status.h"
#include "ckpt/fs/env.h"

namespace baton::ckpt {

struct MetadataImage {
  // Everything the file's metadata was made from (h5::ShardLayoutKey,
  // hdf5/shard_dataset.h), compared whole: an image serves only this layout.
  std::string layout;
  uint64_t file_bytes = 0;  // the file's size as HDF5 closed it (the data's space included)
  // Per array, in the order given: where its dataset's data begin,
  // UINT64_MAX for none (as ShardWriteResult::offsets).
  std::vector<uint64_t> offsets;
  // The bytes outside the datasets' data: (offset, bytes), ascending, disjoint.
  std::vector<std::pair<uint64_t, std::string>> pieces;
  uint64_t meta_xxh3 = 0;  // HashOutsideExtents of such a file: the pieces' bytes in order
  uint64_t bytes() const;  // of the pieces
};

// The images a checkpointer keeps across its saves: the layouts used last
// (a save's layout rarely changes; a sync save's file and an async save's
// differ, and a program may take turns), the least recently used dropped
// first. Shared by the caller's thread and an async save's writer.
class MetadataImages {
 public:
  static constexpr size_t kMaxImages = 4;
  // The pieces kept in all, at most (a state of very many arrays keeps
  // fewer images, or none): memory held for the checkpointer's life.
  static constexpr uint64_t kMaxBytes = 64ull << 20;
  std::shared_ptr<const MetadataImage> Find(const std::string& layout);
  void Keep(std::shared_ptr<const MetadataImage> image);
  // CaptureMetadataImage of the file HDF5 just closed, kept (as Keep
  // bounds it) and returned; null when the file could not be read (nothing
  // kept: the next save of the layout calls HDF5 again).
  std::shared_ptr<const MetadataImage> Capture(fs::Env* env, const std::string& path, uint64_t file_bytes,
                                               std::vector<std::pair<uint64_t, uint64_t>> extents,
                                               std::string layout, std::vector<uint64_t> offsets);
  void Forget(const std::string& layout);

 private:
  std::mutex mu_;
  std::vector<std::shared_ptr<const MetadataImage>> recent_;  // most recently used first
};

// The image of `path` as HDF5 closed it, before any row was written: its
// `file_bytes` bytes outside `extents` (the datasets' data), read through
// env, and their checksum.
Status CaptureMetadataImage(fs::Env* env, const std::string& path, uint64_t file_bytes,
                            std::vector<std::pair<uint64_t, uint64_t>> extents, std::string layout,
                            std::vector<uint64_t> offsets, MetadataImage* out);

// Writes `image` into the existing, empty file `path` (created through env
// with its mode): its blocks reserved first (Env::Reserve, so that a full
// disk is one named error before anything is written), its size set to
// HDF5's (Env::Resize), then each piece at its offset. The datasets' space
// stays unwritten (sparse) for the rows.
Status WriteMetadataImage(fs::Env* env, const std::string& path, const MetadataImage& image);

}  // namespace baton::ckpt
