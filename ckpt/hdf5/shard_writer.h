// Writes one shard file together with the other ranks of a shard group
// (independent transfers: the group's first rank writes the metadata with
// HDF5's sec2 driver, every member its rows; collective transfers:
// parallel HDF5, MPI-IO driver). A self-contained unit: it takes the rows
// to write and a communicator and makes every HDF5 call itself, so that an
// async save can run it on its one HDF5 thread.
//
// File content: for each array that the group holds rows of, a dataset
// named after the array, of shape [rows the group holds, global_shape[1:]...]
// (a scalar: an HDF5 scalar dataspace), contiguous, allocated early, never filled: the group
// members' rows concatenated in group rank order (a member's rows: one
// chunk of the manifest). Attributes of each dataset:
//   dtype         string    baton's name ("bf16")
//   global_shape  uint64[]  the array's global shape (empty for a scalar)
//   row_map       uint64[n][3]  per chunk: dataset row, global first row, rows
//   offset        uint64    global row of dataset row 0, present when the
//                           chunks are consecutive global rows (the usual case)
//   replicated    uint8     1 for a replicated array
// The types: h5_types.h (file type == memory type, nothing is converted).
//
// The file is created by the group's first rank through the Env
// (O_EXCL|O_NOFOLLOW, with file_mode) before HDF5 opens it, so the mode is
// right and an existing file is never overwritten. Datasets are created
// (collective), then each member writes its rows, then the group agrees
// before anyone closes (collective), so one member's failed write (ENOSPC)
// fails the group instead of hanging it. With independent transfers (the
// default) no MPI-IO is involved: the group's first rank alone creates
// and closes the file with sec2 (metadata only; the datasets' space is
// allocated, never filled; its outcome and the offsets in one broadcast,
// BcastOutcome: a failed metadata write is reported, where ompio's
// collective path dropped it or HDF5's collective metadata flush hung),
// and each member writes its rows with plain sequential writes (one
// Env::OpenForWriteAt, then WritableFile::Seek per array) at the offsets
// HDF5 allocated, in pieces of 4 MiB, each hashed (xxh3) just before its
// write copies it, so the user's buffer is read from memory once, and
// fsyncs; then the group agrees once (or, with caller_agrees, the caller).
// The first rank of a layout saved before (the same arrays and every
// member's same rows: ShardLayoutKey) writes the metadata from the image its
// checkpointer kept of that save (options.metadata_images,
// ckpt/metadata_image.h) instead of calling HDF5: the same bytes.
// The file is the same HDF5 file byte for byte; MPI-IO's independent path
// (ompio) wrote the same bytes 6x slower on one node (docs/benchmarks.md).
// After H5Fclose every member that
// wrote bytes fsyncs the file (Env::SyncFile: a member on another node
// holds its own dirty pages), agreed; the first rank reports its size and
// the checksum of its metadata. Files are written in HDF5 1.8's format
// (H5Pset_libver_bounds V18): superblock v2 and object headers v2, whose
// metadata HDF5 checksums itself too.
// Collective transfers cannot rely on MPI-IO to report a failed write:
// Open MPI 4.1's ompio loses an aggregator's failed pwrite in its two-phase
// path (H5Dwrite and H5Fclose succeed). So after the close each member
// reads its rows back and compares their hash with the one taken before the
// write (phase "verify": one read of the member's bytes, from the page cache
// where the aggregator is on its node), agreed: a lost write fails the save
// on every rank (ALostCollectiveWriteFailsTheSave).
//
// Collective over `group`; every member passes the same arrays in the same
// order (names, types, shapes), with its own rows (possibly none: a member
// with no rows still takes part in the collective calls).
#pragma once

#include <mpi.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "baton/checkpointer.h"
#include "baton/dtype.h"
#include "baton/status.h"
#include "ckpt/fs/env.h"
#include "ckpt/phase_clock.h"

namespace baton::ckpt {
class MetadataImages;  // ckpt/metadata_image.h
}  // namespace baton::ckpt

namespace baton::ckpt::h5 {

struct ShardArray {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<uint64_t> global_shape;
  bool replicated = false;
  uint64_t row_bytes = 0;   // bytes of one row
  uint64_t first_row = 0;   // this rank's rows: global [first_row, first_row + rows)
  uint64_t rows = 0;
  const void* data = nullptr;  // rows * row_bytes bytes; not copied
};

struct ShardWriteOptions {
  Transfer transfer = Transfer::kCollective;
  mode_t file_mode = 0600;
  fs::Env* env = nullptr;  // not owned
  // After its fsync and metadata checksum, the shard's pages leave the page
  // cache (Env::DropFileCache): a save does not crowd out the job's memory
  // with bytes it will not read again. False for a file read again soon
  // (level 2's own copy: the level-3 copy and the partner send read it).
  bool drop_cache = true;
  // Laps create, write, close, sync, meta_hash and agree; null: untimed. Not owned.
  PhaseClock* clock = nullptr;
  // The caller agrees on WriteShard's result over a communicator that holds
  // the group (the Checkpointer's save: over the world, before anything
  // builds on the shard), so the group's own agreement after the fsync is
  // left out: nothing of the group's follows it (the first member's size
  // and metadata checksum read only what it wrote itself). False: the
  // result is the group's agreed one (but for the first member's own
  // failure of those reads, which only it returns).
  bool caller_agrees = false;
  // Independent transfers (and WriteRankShard): the group's first rank (the
  // rank) writes the metadata of a layout it saved before from the image
  // kept then, without HDF5, and keeps the image of a new one
  // (ckpt/metadata_image.h). Null: HDF5 each time. Not owned.
  MetadataImages* metadata_images = nullptr;
};

struct ShardWriteResult {
  uint64_t bytes_written = 0;  // this rank's array bytes
  // Group rank 0 only: the file's size after the sync, the xxh3 of its bytes
  // outside the datasets' data (ckpt/metadata_checksum.h), and per array
  // (in the order given) where its dataset's data begin, UINT64_MAX for an
  // array with no dataset (or no bytes) in this shard.
  uint64_t file_bytes = 0;
  uint64_t meta_xxh3 = 0;
  std::vector<uint64_t> offsets;
  // Every member: per array (in the order given), the xxh3 of each chunk of
  // this member's rows (ckpt/chunk_digests.h; none for no rows), computed as
  // they are written.
  std::vector<std::vector<uint64_t>> xxh3;
  // WriteRankShard (the background writer's): where its time went, for
  // SaveAsync's phases (writer_write: create, HDF5 writes and close;
  // writer_sync: the fsync, the disk's write-back; writer_meta_hash: the
  // metadata checksum's read).
  double write_seconds = 0, sync_seconds = 0, meta_hash_seconds = 0;
  // Group rank 0 only: the metadata was written from the image of an
  // earlier save of the same layout (HDF5 not called).
  bool metadata_reused = false;
};

Status WriteShard(MPI_Comm group, const std::string& path, const std::vector<ShardArray>& arrays,
                  const ShardWriteOptions& options, ShardWriteResult* result);

}  // namespace baton::ckpt::h5
