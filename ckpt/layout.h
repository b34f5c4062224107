// Who writes what where: shard groups, the rows of a replicated array each
// rank writes, and which chunks a rank reads to rebuild the rows it owns
// (at the same or another world size). Pure functions, no MPI.
#pragma once

#include <cstdint>
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

// A piece of global rows [first_row, first_row + rows) of one array that
// lies inside one chunk of one shard.
struct ReadPiece {
  size_t shard = 0;     // index into Manifest::shards
  size_t dataset = 0;   // index into ShardMeta::datasets
  size_t chunk = 0;     // index into DatasetMeta::chunks
  uint64_t first_row = 0;
  uint64_t rows = 0;
};

// The pieces that together hold rows [first_row, first_row + rows) of
// `array`, in row order. NotFound naming the first missing row if they are
// not all there (ParseManifestJson already checked the tiling).
Status PlanRead(const Manifest& m, uint32_t array, uint64_t first_row, uint64_t rows, std::vector<ReadPiece>* out);

}  // namespace baton::ckpt
