// The shard indexes of a format-3 manifest on disk (ckpt/manifest.h): one
// file per shard beside it holding the shard's datasets and chunks, so that
// a rank of a large restore reads and holds only the indexes with its rows
// (at 16,384 ranks in groups of 8 with 64 arrays: one index of ~25 KB
// instead of a 58.7 MB manifest). MPI-free: the restore path and the CLI
// share it.
//
// Every index is read with its size and xxh3 from the top-level manifest
// checked before it is parsed, so a damaged or swapped index is corruption
// before any of it is trusted. Failures: kCorruption (missing, not a
// regular file, another size, another xxh3, does not parse), else the
// file layer's code (I/O errors stay transient).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "baton/status.h"
#include "ckpt/fs/env.h"
#include "ckpt/manifest.h"

namespace baton::ckpt {

// The index file of shard file "shard-00003.h5": "shard-00003.json".
std::string ShardIndexName(const std::string& shard_file);

// Writes the index of m.shards[shard] into version_dir (created exclusively
// with `mode`, fsynced; the caller fsyncs the directory before the commit)
// and sets that shard's index, index_bytes and index_xxh3 in *m.
Status WriteShardIndex(fs::Env* env, const std::string& version_dir, size_t shard, mode_t mode, Manifest* m);

// Reads, checks and parses the index of m->shards[shard] (a no-op when
// loaded). *bytes_read (optional) grows by the bytes read.
Status LoadShardIndex(fs::Env* env, const std::string& version_dir, size_t shard, Manifest* m,
                      uint64_t* bytes_read = nullptr);

// Every shard loaded, then the checks across shards (CheckCompleteManifest):
// what `baton ckpt verify` and `inspect` need.
Status LoadAllShardIndexes(fs::Env* env, const std::string& version_dir, Manifest* m);

// Rows [first_row, first_row + rows) of arrays[array] that one rank reads.
struct RowRange {
  uint32_t array = 0;
  uint64_t first_row = 0;
  uint64_t rows = 0;
};

struct IndexLoadStats {
  int indexes_read = 0;     // index files read and parsed
  uint64_t bytes_read = 0;  // their bytes
};

// What a restoring rank loads: the indexes of the shards whose chunks hold
// `wants`, tried in this order until every row is found: shards[first_shard]
// (FirstShardFor), the shards where each want's first and last rows would
// be (replicated rows exactly, sharded ones if spread evenly), then
// outwards from first_shard (+1, -1, +2, ...), each at most once. Of the
// loaded shards only chunks that overlap a want, or that `keep_rank` wrote
// (per-rank state), are kept; a shard with none is unloaded again, so the
// memory held is the rank's own chunks plus one index at a time. A row in
// no chunk is NotFound from PlanRead afterwards; a format 1-2 manifest is
// already complete and left as it is.
Status LoadShardIndexesFor(fs::Env* env, const std::string& version_dir, const std::vector<RowRange>& wants,
                           size_t first_shard, int keep_rank, Manifest* m, IndexLoadStats* stats);

// The most JSON values (outside chunk lists) a manifest of the version in
// version_dir may hold (ParseManifestJson's max_values): kBaseManifestValues
// plus one per kManifestValueBytes of the version's other regular files
// (its shards and indexes: every dataset a manifest lists is an HDF5 object
// of hundreds of bytes in a shard). The manifest itself does not count, so
// a hostile one cannot raise its own limit; a 117 MB manifest of 700,000
// arrays beside a small shard is refused after ~25 MB of parsing instead of
// taking 1.27 GB.
inline constexpr uint64_t kBaseManifestValues = 256 * 1024;
inline constexpr uint64_t kManifestValueBytes = 32;
// A text of n bytes holds at most n / 2 values ("1,"): below
// 2 * kBaseManifestValues bytes the directory is not even listed.
Status ManifestValueLimit(fs::Env* env, const std::string& version_dir, uint64_t text_bytes, uint64_t* max_values);

// The most bytes a manifest of the version in version_dir may hold:
// kBaseManifestBytes (room for a 64 MiB user blob in base64 and the fixed
// fields) plus the bytes of the version's other regular files, capped at
// kMaxManifestBytes. Everything else a manifest lists (array names, shapes,
// chunks) is mirrored by at least as many bytes of HDF5 objects or index
// text in those files, so a legitimate manifest stays within it and a
// hostile one beside small shards cannot be read at all.
inline constexpr uint64_t kBaseManifestBytes = 96ull << 20;

// Reads the manifest at `path` (version_dir's manifest.json, resolved by
// the caller) after checking its size against the byte limit above:
// larger, it is refused as InvalidArgument naming the size and the limit
// before a byte is read or allocated (a 998 MB manifest took 3.6 GB before
// its parse refused it). *max_values: ManifestValueLimit's, for the parse.
// One listing of the directory serves both limits.
Status ReadManifestText(fs::Env* env, const std::string& version_dir, const std::string& path, std::string* text,
                        uint64_t* max_values);

// The arrays of m (the manifest of the version in version_dir, a shared
// directory's: every shard there) hold every row once, uncompressed, in
// its shard files, so together they cannot hold more bytes than the
// version's other regular files. A manifest that says so was forged or
// damaged (its checksum recomputed): Corruption naming both figures, before
// a reader sizes a buffer by it (a 32 TiB array, a restore that would raise
// instead of falling back to the intact older version).
Status CheckArrayBytesWithinFiles(fs::Env* env, const std::string& version_dir, const Manifest& m);

// Where a restoring rank of `world` starts looking: at the world size that
// saved, the shard of the same rank (its one index holds all its rows);
// at another size, the shard of the old rank that held the first row of
// its first sharded want if rows were spread evenly over the old ranks
// (they usually are), so a resharded rank reads a few neighbouring indexes.
size_t FirstShardFor(const Manifest& m, const std::vector<RowRange>& wants, int rank, int world);

// The index into m.shards of the shard whose ranks include `rank`, else 0.
size_t ShardOfRank(const Manifest& m, int rank);

}  // namespace baton::ckpt
