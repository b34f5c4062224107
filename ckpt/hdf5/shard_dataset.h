// One array's dataset in a shard file, created the one way both shard
// writers (shard_writer.cc, a group's file; rank_shard_writer.cc, one
// rank's file) create it, so that their files do not differ in anything a
// reader (ShardReader, h5py, h5dump) checks.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "baton/status.h"
#include "ckpt/hdf5/h5_check.h"
#include "ckpt/hdf5/shard_writer.h"

namespace baton::ckpt::h5 {

// Creates `a.name` in `file` with `ds_rows` rows (an HDF5 scalar dataspace
// when a.global_shape is empty, as h5py writes a scalar): contiguous,
// allocated at creation (its data's offset is known before any write),
// never filled (every byte is written by a writer: filling first would
// write it all twice), with the attributes dtype, global_shape, row_map
// (`row_map`: (dataset row, global row, rows) triples), offset (the first
// global row, when the triples' global rows follow one another) and
// replicated. *type, *fspace and *ds are the dataset's; *offset is its
// data's offset in the file (left alone when it holds no bytes).
Status CreateShardDataset(hid_t file, const ShardArray& a, uint64_t ds_rows, const std::vector<uint64_t>& row_map,
                          Hid* type, Hid* fspace, Hid* ds, uint64_t* offset);

// The file creation properties every shard writer creates its file with:
// the root group without object times, as the datasets (CreateShardDataset),
// so that a shard's bytes depend on its arrays alone, never on the second it
// was written in (the same arrays saved twice are the same file: what lets
// ckpt/metadata_image.h stand for HDF5).
Status ShardFileCreation(Hid* fcpl);

// What a shard file's metadata is made of, as one key (ckpt/metadata_image.h:
// an image serves only its key): `kind` (a group's file or a rank's, which
// HDF5 lays out differently), every array's name, type, global shape,
// replication and row size, and every member's (first row, rows) of each
// ([member * arrays.size() + array]), in the order given. HDF5 makes the
// same metadata bytes for the same key (no object times).
std::string ShardLayoutKey(const char* kind, const std::vector<ShardArray>& arrays,
                           const std::vector<std::pair<uint64_t, uint64_t>>& member_rows);

// The bytes to reserve (fs::Env::Reserve) for a shard file whose datasets
// hold `data_bytes` bytes in all in `datasets` datasets: the data and HDF5's
// metadata beside it (the superblock and, per dataset, its object header,
// attributes and link: measured well under the allowance), an upper bound.
uint64_t ShardReserveBytes(uint64_t data_bytes, size_t datasets);

}  // namespace baton::ckpt::h5
