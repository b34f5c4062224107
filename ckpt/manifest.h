// The manifest of one checkpoint version: what was saved, where, and the
// checksums that restore verifies. Pure data and its JSON form; no MPI, no
// HDF5 (the CLI and unit tests use it without either).
//
// The JSON is strict input: ParseManifestJson rejects unknown format
// versions, wrong types, values out of range, row counts or byte sizes
// whose products overflow 64 bits, chunks that do not tile their dataset,
// arrays whose chunks do not tile their rows, and file names that could
// leave the version directory ("/", "..", absolute). Errors name the JSON
// path and the value ("shards[3].datasets[1].chunks[0].rows: 18446744073709551615
// rows of 4096 bytes overflow 64 bits"). Parsing allocates in proportion to
// the text, never to the sizes the text claims.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "baton/dtype.h"
#include "baton/status.h"

namespace baton::ckpt {

// The format written: 5, a top-level manifest.json (header, arrays, shards
// without their datasets) plus one index per shard (its datasets and
// chunks, ckpt/manifest_index.h), so that a rank of a large restore reads
// only the indexes that hold its rows; the manifest ends with its own
// checksum ("manifest_xxh3", SealManifest) and every index names the step.
// Format 5 writes the shards as a compact table when they are the usual
// ones (CanonicalShardFile names, consecutive ranks): run-length groups of
// ranks and one base64 table of each shard's sizes and checksums, ~43
// bytes a shard instead of ~190 (one file per rank at 16,384 ranks: 0.7 MB
// instead of 3.1); otherwise the list of format 4. 4 (the list, always), 3
// (the same without the checksum and the indexes' step), 2 (one document
// with every chunk) and 1 (before run ids) are still read;
// WriteManifestJson writes format 2. A baton that reads only up to 4
// refuses format 5 as "written by a newer baton" (InvalidArgument, no
// fallback).
inline constexpr int kManifestFormat = 5;
inline constexpr int kCompactShardsFormat = 5;
inline constexpr int kChecksummedFormat = 4;
inline constexpr int kSplitFormat = 3;
inline constexpr int kSingleDocumentFormat = 2;
inline constexpr int kOldestManifestFormat = 1;
// The largest step a manifest holds (and Save takes): 2^53 - 1, exact in a
// double, so that every JSON reader (jq, JavaScript) sees the step that was
// saved, and a program's step + 1 never overflows.
inline constexpr int64_t kMaxStep = (int64_t{1} << 53) - 1;
// The key of the manifest's own checksum (format 4 on): always its last
// line, `  "manifest_xxh3": "<16 hex digits>"`, the xxh3 of every byte of the
// text before that key. Every later format keeps this ending, so that a
// reader can tell a manifest of a newer baton (its checksum holds) from a
// damaged one (it does not).
inline constexpr const char* kManifestChecksumKey = "manifest_xxh3";
inline constexpr const char* kManifestName = "manifest.json";
inline constexpr uint64_t kMaxUserBlobBytes = 64ull << 20;
// The largest manifest read, refused before it is read. Replicated arrays
// spread their rows over every rank, so a format-2 manifest of 16,384 ranks
// with 500 arrays has ~8M chunk tuples (~400 MB of text, parsed into 40
// bytes each). The rest of the text goes into a DOM at ~11 bytes of memory
// per byte (a 117 MB manifest of 700,000 arrays and datasets peaked at
// 1.27 GB), so the parse also takes a limit on the DOM's values, derived
// from the bytes the version's files hold (ManifestValueLimit,
// ckpt/manifest_index.h): a small version cannot claim a huge manifest.
inline constexpr uint64_t kMaxManifestBytes = 1ull << 30;
inline constexpr uint64_t kAnyNumberOfValues = UINT64_MAX;
// HDF5 allows at most 32 dimensions (H5S_MAX_RANK).
inline constexpr size_t kMaxDims = 32;

struct ArrayMeta {
  std::string name;              // the HDF5 dataset name in every shard
  DType dtype = DType::kF32;
  std::vector<uint64_t> shape;   // global shape; empty = a scalar (one row)
  bool replicated = false;

  uint64_t rows() const { return shape.empty() ? 1 : shape[0]; }
  // Bytes of one row (product of shape[1:] times the element size). The
  // parser has checked that this and rows() * row_bytes() fit in 64 bits.
  uint64_t row_bytes() const;
};

// Rows of one array that one rank wrote into a shard's dataset.
struct Chunk {
  int rank = 0;              // the writer's world rank
  uint64_t first_row = 0;    // global row index
  uint64_t rows = 0;
  uint64_t dataset_row = 0;  // where the rows begin in the shard's dataset
  uint64_t xxh3 = 0;         // of the chunk's bytes as written
};

// One array's rows inside one shard file: an HDF5 dataset of `rows` rows.
struct DatasetMeta {
  uint32_t array = 0;          // index into Manifest::arrays
  uint64_t rows = 0;
  uint64_t offset = 0;         // format 2: where its data begins in the file (bytes)
  std::vector<Chunk> chunks;   // ascending dataset_row, tiling [0, rows)
};

struct ShardMeta {
  std::string file;            // a plain name inside the version directory
  std::vector<int> ranks;      // the shard group's world ranks, ascending
  uint64_t bytes = 0;          // the file's size when committed
  // Format 2: xxh3 of every byte of the file outside the datasets' data
  // (HDF5's metadata: superblock, object headers, attributes, free space),
  // checked before HDF5 parses the file (ParseManifestJson checks that the
  // datasets' data lie inside the file without overlapping).
  uint64_t meta_xxh3 = 0;
  // Format 3: the shard's index file (datasets and chunks), its size and
  // xxh3 as committed; `loaded` says whether `datasets` holds it yet.
  // Formats 1 and 2 hold every dataset in the one document: always loaded.
  std::string index;
  uint64_t index_bytes = 0;
  uint64_t index_xxh3 = 0;
  bool loaded = true;
  std::vector<DatasetMeta> datasets;
};

struct Manifest {
  int format = kManifestFormat;
  std::string run_id;          // format 2: the run that wrote it (ckpt/run.h); format 1: empty
  int64_t step = 0;
  int world_size = 0;
  int group_size = 0;          // as configured: 0 = one shard per node
  std::string time;            // UTC, ISO 8601 ("2026-11-29T16:03:03Z")
  std::string baton_version;
  std::vector<ArrayMeta> arrays;
  std::vector<ShardMeta> shards;
  std::string user_blob;       // raw bytes (base64 in the JSON)
  uint64_t user_blob_xxh3 = 0;

  uint64_t total_bytes() const;  // the arrays' bytes (each row is stored once)
  // Every shard's datasets are known (always for formats 1 and 2).
  bool complete() const;
};

// The single-document form (m.format 1 or 2: every chunk in one text).
Status WriteManifestJson(const Manifest& m, std::string* out);
// Format 3: the top-level manifest (shards with their index's name, size
// and xxh3, no datasets) and the index of shards[shard] (its datasets).
// Every shard must be loaded; WriteTopManifestJson takes the index fields
// of each shard as given (the caller wrote the indexes first).
Status WriteTopManifestJson(const Manifest& m, std::string* out);
Status WriteShardIndexJson(const Manifest& m, size_t shard, std::string* out);
// Any format: 1 and 2 parse whole (every shard loaded, every check done);
// 4 first checks its manifest_xxh3 (SealManifest) against the text;
// 3 and 4 parse the top-level manifest only (shards not loaded;
// ParseShardIndexJson loads one); 4 is checked against its manifest_xxh3
// first. kCorruption for anything that is not a manifest this baton wrote,
// except a newer format (a "format" above kManifestFormat whose
// manifest_xxh3 holds): kInvalidArgument saying so, since such a version
// is not damaged, only unreadable here.
// max_values: at most this many JSON values outside the chunk lists (each
// costs ~100 bytes parsed), else kCorruption before more is allocated.
Status ParseManifestJson(std::string_view text, Manifest* out, uint64_t max_values = kAnyNumberOfValues);
// Formats 3-4: parses the index of m->shards[shard] into it (checked against
// the top-level manifest: its step (4), the shard's ranks, the arrays, the file's extent)
// and marks it loaded. When the last shard is loaded, the checks across
// shards (every row of every array in exactly one chunk) run too.
Status ParseShardIndexJson(std::string_view text, size_t shard, Manifest* m,
                           uint64_t max_values = kAnyNumberOfValues);
// The checks across shards of a complete manifest (every rank in one shard,
// every row in one chunk); kCorruption naming the first failure.
Status CheckCompleteManifest(const Manifest& m);

// *text, a manifest ending "\n}\n" without a checksum, gets its
// "manifest_xxh3" line (what WriteTopManifestJson does for format 4 on).
// Tests use it to make an edited manifest whole again.
void SealManifest(std::string* text);
// The reverse: *text without its checksum line; false (nothing changed)
// when the text does not end with one.
bool UnsealManifest(std::string* text);

// The step of a version is in its directory's name (v<seq>-s<step>,
// ckpt/catalog.h) and in its manifest: kCorruption unless they agree, so
// that an edited step or the files of another version copied in are a
// damaged version (the manifest's checksum, format 4, covers its step).
Status CheckManifestStep(const Manifest& m, int64_t version_step, const std::string& version_name);

// A step a Save may write: 0..kMaxStep, else InvalidArgument starting with
// `call` and naming the step.
Status CheckSaveStep(const std::string& call, int64_t step);

// "a plain file name": not empty, no '/', not "." or "..", no NUL.
bool IsPlainFileName(std::string_view name);

// The file of shard group g as saves name it, "shard-<g>.h5" (its index:
// ShardIndexName, "shard-<g>.json"): what a compact shard table (format 5)
// implies.
std::string CanonicalShardFile(size_t group);

}  // namespace baton::ckpt
