// The commit of a version (ckpt/checkpointer_impl.h, step 4 of save.cc):
// the shard indexes, written in parallel by each group's first rank, then
// the top-level manifest written by rank 0 and made visible by one rename.
// A version exists when manifest.json does (ckpt/catalog.h); the indexes it
// names were written, fsynced and agreed before it, so the rename commits
// all of them at once. An asynchronous save (async_save.cc) commits the
// same way at its completion, each rank a group of one writing its own
// shard's index (WriteIndexOfShard, no gather).
#include <mpi.h>

#include <algorithm>
#include <string>
#include <vector>

#include "baton/log.h"
#include "baton/version.h"
#include "ckpt/checkpointer_impl.h"
#include "ckpt/checksum.h"
#include "ckpt/chunk_digests.h"
#include "ckpt/fs/durable_write.h"
#include "ckpt/manifest_index.h"
#include "mpi_runtime/mpi_check.h"

namespace baton::ckpt {

std::vector<uint64_t> ShardEntries(const std::vector<ChunkRecord>& mine,
                                   const std::vector<std::vector<uint64_t>>& digests) {
  std::vector<uint64_t> entries;
  for (size_t i = 0; i < mine.size(); ++i) {
    const std::vector<uint64_t>& d = digests[i];
    entries.insert(entries.end(), {mine[i].first_row, mine[i].rows, d.size()});
    entries.insert(entries.end(), d.begin(), d.end());
  }
  return entries;
}

Status CheckpointerImpl::WriteMyShardIndex(const std::string& vdir, int64_t step, const std::vector<ChunkRecord>& mine,
                                           const std::vector<std::vector<uint64_t>>& digests,
                                           std::vector<uint64_t>* record) {
  const size_t n = arrays_.size();
  int group_rank = 0, group_size = 0;
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_rank(group_, &group_rank)));
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_size(group_, &group_size)));
  // My entries, the digests from WriteMyShard (hashed as the rows were
  // written); their number varies with the rows: counts first.
  const std::vector<uint64_t> entries = ShardEntries(mine, digests);
  std::vector<uint64_t> group_entries;
  if (group_size == 1) {
    group_entries = entries;  // a group of one (group_size 1, one rank on its node): nothing to gather
  } else {
    const int count = static_cast<int>(entries.size());
    std::vector<int> counts(group_rank == 0 ? static_cast<size_t>(group_size) : 0), displs;
    BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, group_)));
    size_t total = 0;
    for (int c : counts) {
      displs.push_back(static_cast<int>(total));
      total += static_cast<size_t>(c);
    }
    group_entries.resize(total);
    BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Gatherv(entries.data(), count, MPI_UINT64_T, group_entries.data(),
                                                      counts.data(), displs.data(), MPI_UINT64_T, 0, group_)));
  }
  record->resize(n + 2);  // [bytes, meta_xxh3, offsets...]
  if (group_rank != 0) {
    record->insert(record->end(), {0, 0});
    return Status::OK();
  }
  std::vector<ArrayMeta> arrays;
  for (const auto& [name, r] : arrays_) arrays.push_back(r.meta);
  return WriteIndexOfShard(vdir, step, arrays, group_of_, options_.group_size, group_of_[rank_], group_entries, record);
}

Status CheckpointerImpl::WriteIndexOfShard(const std::string& vdir, int64_t step, const std::vector<ArrayMeta>& arrays,
                                           const std::vector<int>& group_of, int group_size, int g,
                                           const std::vector<uint64_t>& entries, std::vector<uint64_t>* record) const {
  const size_t n = arrays.size();
  int groups = 0;
  for (int x : group_of) groups = std::max(groups, x + 1);
  Manifest m;
  m.run_id = run_.run_id;
  m.step = step;
  m.world_size = size_;
  m.group_size = group_size;
  m.arrays = arrays;
  m.shards.resize(static_cast<size_t>(groups));
  ShardMeta& sh = m.shards[static_cast<size_t>(g)];
  sh.file = ShardFileName(g);
  sh.bytes = (*record)[0];
  sh.meta_xxh3 = (*record)[1];
  // The group's world ranks, ascending: the group's order (MPI_Comm_split
  // keyed by world rank).
  for (int k = 0; k < size_; ++k) {
    if (group_of[k] == g) sh.ranks.push_back(k);
  }
  // Each rank's entries (ShardEntries), in rank order.
  std::vector<std::vector<const uint64_t*>> at(sh.ranks.size(), std::vector<const uint64_t*>(n));
  size_t e = 0;
  for (size_t j = 0; j < sh.ranks.size(); ++j) {
    for (size_t i = 0; i < n; ++i) {
      if (e + 3 > entries.size() || entries[e + 2] > entries.size() - e - 3) {
        return Status::Internal(log::kCkpt, "shard " + std::to_string(g) + "'s index entries end early at rank " +
                                                std::to_string(sh.ranks[j]));
      }
      at[j][i] = &entries[e];
      e += 3 + entries[e + 2];
    }
  }
  for (size_t i = 0; i < n; ++i) {
    DatasetMeta d;
    d.array = static_cast<uint32_t>(i);
    d.offset = (*record)[2 + i];
    const uint64_t per = ChunkRows(arrays[i].row_bytes());
    for (size_t j = 0; j < sh.ranks.size(); ++j) {
      const uint64_t* r = at[j][i];
      const uint64_t first = r[0], rows = r[1], k = r[2];
      if (rows == 0) continue;
      if (k != ChunkCount(rows, arrays[i].row_bytes())) {
        return Status::Internal(log::kCkpt, "rank " + std::to_string(sh.ranks[j]) + " sent " + std::to_string(k) +
                                                " chunk digests of " + arrays[i].name + " for " + std::to_string(rows) +
                                                " rows");
      }
      // A rank's rows as chunks of ChunkRows each (ckpt/chunk_digests.h).
      for (uint64_t c = 0; c < k; ++c) {
        const uint64_t rows_c = std::min(per, rows - c * per);
        d.chunks.push_back(Chunk{sh.ranks[j], first + c * per, rows_c, d.rows, r[3 + c]});
        d.rows += rows_c;
      }
    }
    if (d.rows > 0) sh.datasets.push_back(std::move(d));
  }
  BATON_RETURN_IF_ERROR(WriteShardIndex(env_, vdir, static_cast<size_t>(g), options_.file_mode, &m));
  record->insert(record->end(), {sh.index_bytes, sh.index_xxh3});
  return Status::OK();
}

Status CheckpointerImpl::BuildManifest(int64_t step, const std::vector<ArrayMeta>& arrays,
                                       const std::vector<int>& group_of, int group_size, const std::string& blob,
                                       const std::vector<uint64_t>& shard_records, Manifest* m) const {
  m->run_id = run_.run_id;
  m->step = step;
  m->world_size = size_;
  m->group_size = group_size;
  m->time = UtcNow();
  m->baton_version = kVersion;
  m->arrays = arrays;
  const size_t n = arrays.size();
  int groups = 0;
  for (int g : group_of) groups = std::max(groups, g + 1);
  m->shards.resize(static_cast<size_t>(groups));
  for (int k = 0; k < size_; ++k) {
    ShardMeta& s = m->shards[static_cast<size_t>(group_of[k])];
    if (s.ranks.empty()) {
      // The group's first rank's record: [bytes, meta_xxh3, offsets..., index bytes, index xxh3].
      const uint64_t* rec = &shard_records[static_cast<size_t>(k) * (n + 4)];
      s.file = ShardFileName(group_of[k]);
      s.bytes = rec[0];
      s.meta_xxh3 = rec[1];
      s.index = ShardIndexName(s.file);
      s.index_bytes = rec[n + 2];
      s.index_xxh3 = rec[n + 3];
      s.loaded = false;  // its datasets are in its index
    }
    s.ranks.push_back(k);
  }
  m->user_blob = blob;
  m->user_blob_xxh3 = Xxh3(blob.data(), blob.size());
  return Status::OK();
}

// Rank 0: the manifest becomes visible atomically and durably.
Status CheckpointerImpl::CommitManifest(const std::string& vdir, const Manifest& m) {
  std::string text;
  BATON_RETURN_IF_ERROR(WriteTopManifestJson(m, &text));
  // The indexes' directory entries are durable before the manifest that
  // names them can be.
  BATON_RETURN_IF_ERROR(env_->SyncDir(vdir));
  fs::DurableWriteOptions o;
  o.mode = options_.file_mode;
  BATON_RETURN_IF_ERROR(fs::WriteFileDurably(env_, vdir, kManifestName, text, o));
  return env_->SyncDir(dir_);
}

}  // namespace baton::ckpt
