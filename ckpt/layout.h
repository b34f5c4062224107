// Who writes what where: shard groups, the rows of a replicated array each
// rank writes, and which chunks a rank reads to rebuild the rows it owns
// (at the same or another world size). Pure functions, no MPI.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "baton/status.h"
#include "baton/topology.h"
#include "ckpt/manifest.h"

namespace baton::ckpt {

// The shard group of every world rank: group_size 0 = the rank's node (from
// the topology), else rank / group_size. Groups are numbered densely in the
// order of their lowest rank.
std::vector<int> ShardGroups(const Topology& topology, int group_size);

// The rows of a replicated array of `rows` rows that `rank` of `world`
// writes: an even split, the first rows % world ranks one row more.
void ReplicatedRows(uint64_t rows, int world, int rank, uint64_t* first_row, uint64_t* count);

// Replicated arrays smaller than this are not split: each is written (and
// read in parts, and gathered) whole by one part, ReplicatedPart's owner.
// Each part of a split costs a dataset with its attributes (HDF5: about
// 40 us to create here), a chunk digest, a manifest entry and a read, more
// than 64 KiB of bytes cost to write (issue 48: 5,000 arrays of 256 bytes
// at 2 ranks made 10,000 datasets, 0.185 s of a 0.41 s save).
inline constexpr uint64_t kWholeReplicatedBytes = 64 << 10;

// The part of replicated array `name` (rows of row_bytes bytes) that part
// `part` of `parts` holds: ReplicatedRows's even split; an array of fewer
// than kWholeReplicatedBytes bytes whole in part Xxh3(name) % parts (every
// rank derives the same owner from the name alone, as a manifest's reader
// does: manifest_index.cc), nothing in the others. The one rule for the
// rows a rank writes (parts = world), the rows a restore reads before the
// parts are gathered (GatherReplicatedRows) and the rows it verifies.
void ReplicatedPart(std::string_view name, uint64_t rows, uint64_t row_bytes, int parts, int part,
                    uint64_t* first_row, uint64_t* count);
// Whether ReplicatedPart keeps the array whole at `parts` parts, and then
// in which (*owner).
bool ReplicatedWhole(std::string_view name, uint64_t rows, uint64_t row_bytes, int parts, int* owner);

// How a restore reads replicated arrays: the rows are cut into `parts`,
// this rank reads part `part` (ReplicatedRows(rows, parts, part)), and the
// parts travel between the ranks that read different parts, over a
// communicator split by `color` and ordered by `key` (its rank is the part).
// On a uniform topology a part per node: every rank of a node reads its
// node's whole part (the shard files' pages are read from storage once
// per node and shared through the node's page cache), and the parts go
// between the nodes only, over the ranks of the same index on each node:
// at one node nothing travels. Read in parts per rank and all-gathered
// (parts = world) was measured slower on one node, where the gather copies
// every byte twice through shared memory (docs/benchmarks.md, "Python:
// Checkpointer and BatonWriter against DCP"). Nodes of different sizes
// (no equal communicators across them): a part per rank, gathered over
// the world (color 0, key rank).
struct ReplicatedReadPlan {
  int parts = 1;
  int part = 0;
  int color = 0;
  int key = 0;
};
ReplicatedReadPlan PlanReplicatedRead(const Topology& topology, int rank);

// A piece of global rows [first_row, first_row + rows) of one array that
// lies inside one chunk of one shard.
struct ReadPiece {
  size_t shard = 0;     // index into Manifest::shards
  size_t dataset = 0;   // index into ShardMeta::datasets
  size_t chunk = 0;     // index into DatasetMeta::chunks
  uint64_t first_row = 0;
  uint64_t rows = 0;
};

// The datasets of each array of a manifest, (shard, dataset) indexes in
// shard order: built once per read of a manifest, so that PlanRead of an
// array meets only its own datasets (every dataset for every array was
// quadratic in the arrays: 2.5e7 tests for a state of 5,000 small
// tensors). Valid while
// the manifest's shards and datasets stay as they were (LoadShardIndexesFor
// changes them: index after it).
using DatasetsOfArrays = std::vector<std::vector<std::pair<size_t, size_t>>>;
DatasetsOfArrays IndexDatasets(const Manifest& m);

// The pieces that together hold rows [first_row, first_row + rows) of
// `array`, in row order. NotFound naming the first missing row if they are
// not all there (ParseManifestJson already checked the tiling). `datasets`:
// IndexDatasets(m); the form without indexes the manifest for this call.
Status PlanRead(const Manifest& m, const DatasetsOfArrays& datasets, uint32_t array, uint64_t first_row,
                uint64_t rows, std::vector<ReadPiece>* out);
Status PlanRead(const Manifest& m, uint32_t array, uint64_t first_row, uint64_t rows, std::vector<ReadPiece>* out);

}  // namespace baton::ckpt
