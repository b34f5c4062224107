#include "ckpt/layout.h"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "ckpt/checksum.h"

namespace baton::ckpt {

std::vector<int> ShardGroups(const Topology& topology, int group_size) {
  const int world = static_cast<int>(topology.node_of.size());
  std::vector<int> group(static_cast<size_t>(world));
  if (group_size > 0) {
    for (int r = 0; r < world; ++r) group[static_cast<size_t>(r)] = r / group_size;
    return group;
  }
  // Renumbered in order of lowest rank, whatever ids the topology used.
  std::unordered_map<int, int> dense;
  for (int r = 0; r < world; ++r) {
    auto it = dense.emplace(topology.node_of[static_cast<size_t>(r)], static_cast<int>(dense.size())).first;
    group[static_cast<size_t>(r)] = it->second;
  }
  return group;
}

void ReplicatedRows(uint64_t rows, int world, int rank, uint64_t* first_row, uint64_t* count) {
  if (world <= 0 || rank < 0 || rank >= world) {
    *first_row = 0;
    *count = 0;
    return;
  }
  const uint64_t w = static_cast<uint64_t>(world), r = static_cast<uint64_t>(rank);
  const uint64_t base = rows / w, extra = rows % w;
  *first_row = r * base + std::min(r, extra);
  *count = base + (r < extra ? 1 : 0);
}

bool ReplicatedWhole(std::string_view name, uint64_t rows, uint64_t row_bytes, int parts, int* owner) {
  uint64_t bytes = 0;
  if (parts <= 1 || __builtin_mul_overflow(rows, row_bytes, &bytes) || bytes >= kWholeReplicatedBytes) return false;
  *owner = static_cast<int>(Xxh3(name.data(), name.size()) % static_cast<uint64_t>(parts));
  return true;
}

void ReplicatedPart(std::string_view name, uint64_t rows, uint64_t row_bytes, int parts, int part,
                    uint64_t* first_row, uint64_t* count) {
  int owner = 0;
  if (part >= 0 && part < parts && ReplicatedWhole(name, rows, row_bytes, parts, &owner)) {
    *first_row = 0;
    *count = part == owner ? rows : 0;
    return;
  }
  ReplicatedRows(rows, parts, part, first_row, count);
}

ReplicatedReadPlan PlanReplicatedRead(const Topology& topology, int rank) {
  ReplicatedReadPlan plan;
  const int world = static_cast<int>(topology.node_of.size());
  if (world <= 0 || rank < 0 || rank >= world) return plan;  // one part, read whole, nothing gathered
  if (!topology.Uniform()) {
    plan.parts = world;
    plan.part = rank;
    plan.key = rank;
    return plan;
  }
  const int node = topology.node_of[static_cast<size_t>(rank)];
  const std::vector<int> on = topology.RanksOn(node);
  plan.parts = topology.num_nodes();
  plan.part = node;
  plan.color = static_cast<int>(std::find(on.begin(), on.end(), rank) - on.begin());
  plan.key = node;
  return plan;
}

DatasetsOfArrays IndexDatasets(const Manifest& m) {
  DatasetsOfArrays out(m.arrays.size());
  for (size_t s = 0; s < m.shards.size(); ++s) {
    const std::vector<DatasetMeta>& datasets = m.shards[s].datasets;
    for (size_t d = 0; d < datasets.size(); ++d) {
      if (datasets[d].array < out.size()) out[datasets[d].array].emplace_back(s, d);
    }
  }
  return out;
}

Status PlanRead(const Manifest& m, uint32_t array, uint64_t first_row, uint64_t rows, std::vector<ReadPiece>* out) {
  return PlanRead(m, IndexDatasets(m), array, first_row, rows, out);
}

Status PlanRead(const Manifest& m, const DatasetsOfArrays& datasets, uint32_t array, uint64_t first_row,
                uint64_t rows, std::vector<ReadPiece>* out) {
  out->clear();
  if (array >= m.arrays.size() || array >= datasets.size()) {
    return Status::InvalidArgument("ckpt", "plan read: array index " + std::to_string(array) + " of " +
                                               std::to_string(m.arrays.size()) + " arrays");
  }
  const std::string& name = m.arrays[array].name;
  uint64_t end = 0;
  if (__builtin_add_overflow(first_row, rows, &end)) {
    return Status::InvalidArgument("ckpt", "plan read of \"" + name + "\": rows " + std::to_string(first_row) + " + " +
                                               std::to_string(rows) + " overflow 64 bits");
  }
  if (rows == 0) return Status::OK();
  for (const auto& [s, d] : datasets[array]) {
    const DatasetMeta& ds = m.shards[s].datasets[d];
    for (size_t k = 0; k < ds.chunks.size(); ++k) {
      const Chunk& c = ds.chunks[k];
      const uint64_t lo = std::max(first_row, c.first_row);
      const uint64_t hi = std::min(end, c.first_row + c.rows);
      if (lo < hi) out->push_back(ReadPiece{s, d, k, lo, hi - lo});
    }
  }
  std::sort(out->begin(), out->end(), [](const ReadPiece& a, const ReadPiece& b) { return a.first_row < b.first_row; });
  // A parsed manifest tiles every array; a hand-made one may not.
  uint64_t next = first_row;
  for (const ReadPiece& p : *out) {
    if (p.first_row != next) break;
    next += p.rows;
  }
  if (next != end) {
    const std::string what = "plan read of \"" + name + "\" rows [" + std::to_string(first_row) + ", " +
                             std::to_string(end) + "): row " + std::to_string(next) + " is in no chunk of step " +
                             std::to_string(m.step);
    out->clear();
    return Status::NotFound("ckpt", what);
  }
  return Status::OK();
}

}  // namespace baton::ckpt
