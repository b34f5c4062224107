// Writes one rank's shard file alone, with HDF5's sec2 (POSIX) driver and
// no MPI call: the background writer of an asynchronous save (ckpt/README.md,
// "Asynchronous saves"), which must not touch MPI (Open MPI 4.1's ompio has
// crashed beside a thread polling MPI).
//
// The file is the shard of a group of one (shard_writer.h describes the
// format: the same datasets and attributes, HDF5 1.8's file format), so the
// normal Restore, `baton ckpt verify`, h5dump and h5py read it. Created
// through the Env (O_EXCL, file_mode) before HDF5 opens it; fsync'ed after
// H5Fclose; its size and metadata checksum returned. With
// options.metadata_images, a layout written before (the same arrays and
// rows) is written from the image kept then: its metadata bytes, then the
// rows at the same offsets, no HDF5 call (the same file); a new layout's
// image is kept.
//
// Threading: any one thread; holds baton::Hdf5Mutex() while inside HDF5
// (not for the fsync nor the checksum, plain POSIX reads). `abandon`
// (may be null) is read between slabs of at most 64 MiB: once it is true the
// write stops there (Aborted), so an abandon waits at most one slab.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "baton/status.h"
#include "ckpt/hdf5/shard_writer.h"

namespace baton::ckpt::h5 {

Status WriteRankShard(const std::string& path, const std::vector<ShardArray>& arrays,
                      const ShardWriteOptions& options, const std::atomic<bool>* abandon,
                      ShardWriteResult* result);

}  // namespace baton::ckpt::h5
