// A consistent Manifest for the ckpt unit tests.
#pragma once

#include <algorithm>
#include <string>

#include "ckpt/manifest.h"

namespace baton::ckpt {

// A consistent manifest: `world` ranks in groups of `group`, `arrays`
// arrays alternating sharded (rows_per_rank rows per rank) and replicated
// (world * rows_per_rank / 2 + 1 rows spread evenly), rows of 3 f32.
inline Manifest MakeManifest(int world, int group, int arrays, uint64_t rows_per_rank) {
  Manifest m;
  m.format = kSingleDocumentFormat;  // one document: every shard loaded
  m.run_id = "run-7";
  m.step = 400;
  m.world_size = world;
  m.group_size = group;
  m.time = "2026-11-29T16:03:03Z";
  m.baton_version = "0.1.0";
  m.user_blob = std::string("loader\0state\xff", 13);
  for (int a = 0; a < arrays; ++a) {
    ArrayMeta am;
    am.name = "layer" + std::to_string(a) + ".weight";
    am.replicated = a % 2 == 1;
    am.dtype = am.replicated ? DType::kBF16 : DType::kF32;
    am.shape = {am.replicated ? world * rows_per_rank / 2 + 1 : world * rows_per_rank, 3};
    m.arrays.push_back(am);
  }
  for (int g = 0; g * group < world; ++g) {  // REQUIRES group > 0
    ShardMeta sh;
    sh.file = "shard-" + std::to_string(g) + ".h5";
    for (int r = g * group; r < std::min(world, (g + 1) * group); ++r) sh.ranks.push_back(r);
    for (int a = 0; a < arrays; ++a) {
      DatasetMeta ds;
      ds.array = static_cast<uint32_t>(a);
      for (int r : sh.ranks) {
        Chunk c;
        c.rank = r;
        const uint64_t rows = m.arrays[static_cast<size_t>(a)].rows();
        if (m.arrays[static_cast<size_t>(a)].replicated) {
          const uint64_t base = rows / static_cast<uint64_t>(world), extra = rows % static_cast<uint64_t>(world);
          const uint64_t ur = static_cast<uint64_t>(r);
          c.first_row = ur * base + std::min(ur, extra);
          c.rows = base + (ur < extra ? 1 : 0);
        } else {
          c.first_row = static_cast<uint64_t>(r) * rows_per_rank;
          c.rows = rows_per_rank;
        }
        c.dataset_row = ds.rows;
        c.xxh3 = 0x0123456789abcdefull ^ (static_cast<uint64_t>(r) << 32) ^ static_cast<uint64_t>(a);
        ds.rows += c.rows;
        ds.chunks.push_back(c);
      }
      sh.datasets.push_back(ds);
    }
    // Format 2: the datasets' data one after the other after 96 bytes of
    // "metadata", 64 more at the end.
    uint64_t at = 96;
    for (DatasetMeta& ds : sh.datasets) {
      ds.offset = at;
      at += ds.rows * m.arrays[ds.array].row_bytes();
    }
    sh.bytes = at + 64;
    sh.meta_xxh3 = 0xfeedface00000000ull + static_cast<uint64_t>(g);
    m.shards.push_back(sh);
  }
  return m;
}

}  // namespace baton::ckpt
