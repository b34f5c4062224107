// Reads rows of datasets from one shard file of a committed version, for
// one rank (sec2 driver, read-only: restore reads need no collective I/O).
//
// Hostile files: the shard is found through ResolveInside (a plain name,
// a regular file, no symlink), its size must equal the manifest's and
// (manifest format 2) the checksum of its metadata bytes the manifest's,
// all before HDF5 opens it; a dataset must be a hard link (no soft or
// external link, no external storage) at the manifest's offset; before
// the first read of a dataset its type, dims, layout (contiguous) and
// extent within the file are checked against what the manifest says, so a
// read never asks for, or allocates, more than the file on disk holds.
// Errors name the file (and dataset).
//
// Threading: HDF5 calls, see h5_check.h. Not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "baton/status.h"
#include "ckpt/fs/env.h"
#include "ckpt/hdf5/h5_check.h"
#include "ckpt/manifest.h"

namespace baton::ckpt::h5 {

class ShardReader {
 public:
  // Opens shards[shard] of manifest m in version_dir: its size must be the
  // manifest's and (format 2) its bytes outside the datasets' data must
  // match meta_xxh3 before HDF5 opens it, so HDF5 never parses an
  // unverified byte.
  static Status Open(fs::Env* env, const std::string& version_dir, const Manifest& m, size_t shard,
                     std::unique_ptr<ShardReader>* out);
  ~ShardReader();

  // Reads dataset rows [first, first + rows) of `array`'s dataset, which the
  // manifest says has dataset_rows rows, into buf (rows * row_bytes bytes):
  // with pread at the checked dataset's offset (through HDF5's H5Dread only
  // where its sec2 driver gave no descriptor).
  Status ReadRows(const ArrayMeta& array, uint64_t dataset_rows, uint64_t first, uint64_t rows, void* buf);

  // Checks the dataset (type, dims, layout, extent within the file) without
  // reading; ReadRows does it on its first read of a dataset.
  Status CheckDataset(const ArrayMeta& array, uint64_t dataset_rows) {
    const Checked* unused;
    return OpenDataset(array, dataset_rows, &unused);
  }

  const std::string& path() const { return path_; }

 private:
  ShardReader() = default;
  struct Checked {
    Hid ds;
    // A scalar array's dataset: an HDF5 scalar dataspace (true), or, in
    // files written before scalars were stored as such, dims [1].
    bool scalar_space = false;
    uint64_t offset = 0;  // where the data begin in the file
  };
  Status OpenDataset(const ArrayMeta& array, uint64_t dataset_rows, const Checked** ds);

  std::string path_;
  uint64_t file_bytes_ = 0;
  std::map<std::string, uint64_t> offsets_;  // format 2: where each dataset's data begin
  Hid file_;
  int fd_ = -1;  // the sec2 driver's descriptor of file_ (ReadRows)
  std::map<std::string, Checked> datasets_;  // checked ones, by name
};

}  // namespace baton::ckpt::h5
