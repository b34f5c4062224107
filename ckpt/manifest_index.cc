#include "ckpt/manifest_index.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "ckpt/catalog.h"
#include "ckpt/checksum.h"
#include "ckpt/fs/durable_write.h"
#include "ckpt/layout.h"

namespace baton::ckpt {

namespace {

// Uncovered parts [lo, hi) of one want, ascending and disjoint.
using Gaps = std::vector<std::pair<uint64_t, uint64_t>>;

void Subtract(uint64_t lo, uint64_t hi, Gaps* gaps) {
  Gaps out;
  for (const auto& [a, b] : *gaps) {
    if (hi <= a || b <= lo) {
      out.emplace_back(a, b);
      continue;
    }
    if (a < lo) out.emplace_back(a, lo);
    if (hi < b) out.emplace_back(hi, b);
  }
  gaps->swap(out);
}

// The wants of each array (indexes into the wants), so that a chunk meets
// only its own array's wants: a restore of 5,000 arrays at 2 ranks met
// every want for every chunk, 1e8 tests (0.26 s of a 0.9 s restore,
// docs/benchmarks.md).
using WantsByArray = std::vector<std::vector<size_t>>;

bool Overlaps(const Chunk& c, const std::vector<size_t>& mine, const std::vector<RowRange>& wants) {
  for (size_t i : mine) {
    const RowRange& w = wants[i];
    if (c.first_row < w.first_row + w.rows && w.first_row < c.first_row + c.rows) return true;
  }
  return false;
}

// The shard whose writer held `row` of arrays[array] when the manifest's
// ranks wrote it: exact for a replicated array (ReplicatedPart: an even
// split, or a small array whole at its owner), a guess from an even
// spread for a sharded one.
size_t GuessShardOfRow(const Manifest& m, uint32_t array, uint64_t row) {
  const ArrayMeta& a = m.arrays[array];
  const uint64_t rows = a.rows(), world = static_cast<uint64_t>(m.world_size);
  if (rows == 0 || world == 0) return 0;
  uint64_t rank = 0;
  int owner = 0;
  if (a.replicated && ReplicatedWhole(a.name, rows, a.row_bytes(), m.world_size, &owner)) {
    rank = static_cast<uint64_t>(owner);
  } else if (a.replicated) {
    const uint64_t base = rows / world, extra = rows % world;
    rank = row < extra * (base + 1) ? row / (base + 1) : (base == 0 ? world - 1 : extra + (row - extra * (base + 1)) / base);
  } else {
    rank = static_cast<uint64_t>(static_cast<unsigned __int128>(row) * world / rows);
  }
  return ShardOfRank(m, static_cast<int>(std::min(rank, world - 1)));
}

}  // namespace

std::string ShardIndexName(const std::string& shard_file) {
  const size_t dot = shard_file.rfind('.');
  return (dot == std::string::npos || dot == 0 ? shard_file : shard_file.substr(0, dot)) + ".json";
}

Status WriteShardIndex(fs::Env* env, const std::string& version_dir, size_t shard, mode_t mode, Manifest* m) {
  std::string text;
  BATON_RETURN_IF_ERROR(WriteShardIndexJson(*m, shard, &text));
  ShardMeta& sh = m->shards[shard];
  sh.index = ShardIndexName(sh.file);
  const std::string path = version_dir + "/" + sh.index;
  std::unique_ptr<fs::WritableFile> f;
  BATON_RETURN_IF_ERROR(env->NewWritableFile(path, mode, &f));
  BATON_RETURN_IF_ERROR(f->Append(text.data(), text.size()));
  BATON_RETURN_IF_ERROR(f->Sync());
  BATON_RETURN_IF_ERROR(f->Close());
  sh.index_bytes = text.size();
  sh.index_xxh3 = Xxh3(text.data(), text.size());
  return Status::OK();
}

Status LoadShardIndex(fs::Env* env, const std::string& version_dir, size_t shard, Manifest* m, uint64_t* bytes_read) {
  if (shard >= m->shards.size()) {
    return Status::InvalidArgument("ckpt", "shard " + std::to_string(shard) + " of " + std::to_string(m->shards.size()));
  }
  ShardMeta& sh = m->shards[shard];
  if (sh.loaded) return Status::OK();
  std::string path;
  Status s = ResolveInside(env, version_dir, sh.index, &path);
  if (s.code() == Code::kNotFound) {
    return Status::Corruption("ckpt", version_dir + "/" + sh.index + ": missing, yet the manifest lists it (" + s.message() + ")");
  }
  if (s.code() == Code::kInvalidArgument) return Status::Corruption("ckpt", s.message());
  BATON_RETURN_IF_ERROR(s);
  std::string text;
  // Never more than the manifest committed: a hostile index costs no more
  // memory than the real one did.
  s = env->ReadFile(path, sh.index_bytes, &text);
  if (s.code() == Code::kInvalidArgument) {
    return Status::Corruption("ckpt", path + ": larger than the " + std::to_string(sh.index_bytes) +
                                          " bytes the manifest says, or not a regular file (" + s.message() + ")");
  }
  BATON_RETURN_IF_ERROR(s);
  if (bytes_read != nullptr) *bytes_read += text.size();
  if (text.size() != sh.index_bytes) {
    return Status::Corruption("ckpt", path + ": " + std::to_string(text.size()) + " bytes, the manifest says " +
                                          std::to_string(sh.index_bytes));
  }
  const uint64_t sum = Xxh3(text.data(), text.size());
  if (sum != sh.index_xxh3) {
    return Status::Corruption("ckpt", path + ": xxh3 " + HexU64(sum) + ", the manifest says " + HexU64(sh.index_xxh3));
  }
  return ParseShardIndexJson(text, shard, m).Annotate(path);
}

Status LoadAllShardIndexes(fs::Env* env, const std::string& version_dir, Manifest* m) {
  if (m->complete()) return Status::OK();
  for (size_t s = 0; s < m->shards.size(); ++s) BATON_RETURN_IF_ERROR(LoadShardIndex(env, version_dir, s, m));
  return CheckCompleteManifest(*m).Annotate(version_dir + "/" + kManifestName);
}

namespace {

// The bytes of version_dir's regular files other than its manifest (and
// temporaries): what a manifest's size and values are bounded by.
Status OtherFileBytes(fs::Env* env, const std::string& version_dir, uint64_t* bytes) {
  std::vector<std::string> names;
  BATON_RETURN_IF_ERROR(env->ListDir(version_dir, &names));
  *bytes = 0;
  for (const std::string& name : names) {
    if (name.compare(0, std::char_traits<char>::length(kManifestName), kManifestName) == 0) continue;
    if (fs::IsDurableTemporary(name)) continue;  // a write in progress or a crash's leftover (the manifest's)
    fs::FileInfo info;
    const Status s = env->Stat(version_dir + "/" + name, &info);
    // Gone since the listing: not the version's. Any other failure (ESTALE, EIO) is
    // the storage's, not the manifest's: passed on, so that the restore fails as
    // transient instead of going on with a bound that left a file out.
    if (s.code() == Code::kNotFound) continue;
    BATON_RETURN_IF_ERROR(s);
    if (info.type != fs::FileType::kRegular) continue;
    *bytes += info.size;
  }
  return Status::OK();
}

}  // namespace

Status ManifestValueLimit(fs::Env* env, const std::string& version_dir, uint64_t text_bytes, uint64_t* max_values) {
  *max_values = kBaseManifestValues;
  if (text_bytes / 2 <= kBaseManifestValues) return Status::OK();
  uint64_t bytes = 0;
  BATON_RETURN_IF_ERROR(OtherFileBytes(env, version_dir, &bytes));
  *max_values = kBaseManifestValues + bytes / kManifestValueBytes;
  return Status::OK();
}

Status CheckArrayBytesWithinFiles(fs::Env* env, const std::string& version_dir, const Manifest& m) {
  const uint64_t arrays = m.total_bytes();
  // Up to what a manifest may hold anyway, a claim allocates nothing harmful: the
  // files are looked at only above it, as ManifestValueLimit does (each Stat is one
  // more call that can fail transiently on a shared file system).
  if (arrays <= kBaseManifestBytes) return Status::OK();
  uint64_t bytes = 0;
  BATON_RETURN_IF_ERROR(OtherFileBytes(env, version_dir, &bytes));
  if (arrays <= bytes) return Status::OK();
  return Status::Corruption("ckpt", version_dir + "/" + kManifestName + ": its arrays hold " + std::to_string(arrays) +
                                        " bytes, more than the " + std::to_string(bytes) +
                                        " bytes of the version's files (a forged or damaged manifest)");
}

Status ReadManifestText(fs::Env* env, const std::string& version_dir, const std::string& path, std::string* text,
                        uint64_t* max_values) {
  fs::FileInfo info;
  BATON_RETURN_IF_ERROR(env->Stat(path, &info));
  uint64_t max_bytes = kBaseManifestBytes;
  *max_values = kBaseManifestValues;
  if (info.size > kBaseManifestBytes || info.size / 2 > kBaseManifestValues) {
    uint64_t bytes = 0;
    BATON_RETURN_IF_ERROR(OtherFileBytes(env, version_dir, &bytes));
    max_bytes = std::min(kMaxManifestBytes, kBaseManifestBytes + bytes);
    *max_values = kBaseManifestValues + bytes / kManifestValueBytes;
    if (info.size > max_bytes) {
      return Status::InvalidArgument(
          "ckpt", path + ": " + std::to_string(info.size) + " bytes, more than the limit of " +
                      std::to_string(max_bytes) + " a manifest of this version may hold (" +
                      std::to_string(kBaseManifestBytes) + " plus the " + std::to_string(bytes) +
                      " bytes of its other files, at most " + std::to_string(kMaxManifestBytes) + "); not read");
    }
  }
  // ReadFile checks the size of what it opened again (the file may have
  // been replaced since the Stat) before it allocates.
  return env->ReadFile(path, max_bytes, text);
}

size_t FirstShardFor(const Manifest& m, const std::vector<RowRange>& wants, int rank, int world) {
  if (world == m.world_size || m.world_size < 1) return ShardOfRank(m, rank);
  for (const RowRange& w : wants) {
    if (w.array >= m.arrays.size() || m.arrays[w.array].replicated || w.rows == 0) continue;
    const unsigned __int128 guess =
        static_cast<unsigned __int128>(w.first_row) * static_cast<unsigned>(m.world_size) / m.arrays[w.array].rows();
    return ShardOfRank(m, static_cast<int>(std::min<unsigned __int128>(guess, static_cast<unsigned>(m.world_size - 1))));
  }
  return ShardOfRank(m, rank < m.world_size ? rank : 0);
}

size_t ShardOfRank(const Manifest& m, int rank) {
  for (size_t s = 0; s < m.shards.size(); ++s) {
    if (std::binary_search(m.shards[s].ranks.begin(), m.shards[s].ranks.end(), rank)) return s;
  }
  return 0;
}

Status LoadShardIndexesFor(fs::Env* env, const std::string& version_dir, const std::vector<RowRange>& wants,
                           size_t first_shard, int keep_rank, Manifest* m, IndexLoadStats* stats) {
  if (m->complete() || m->shards.empty()) return Status::OK();
  std::vector<Gaps> gaps(wants.size());
  WantsByArray by_array(m->arrays.size());
  size_t open = 0;  // wants with rows still to find
  for (size_t i = 0; i < wants.size(); ++i) {
    if (wants[i].array < by_array.size()) by_array[wants[i].array].push_back(i);
    if (wants[i].rows == 0) continue;
    gaps[i].emplace_back(wants[i].first_row, wants[i].first_row + wants[i].rows);
    ++open;
  }
  const size_t n = m->shards.size();
  first_shard = first_shard < n ? first_shard : 0;
  // The first shard always: per-rank state (keep_rank's chunks) lives there.
  // The order: first_shard; then the shards where each want's first and
  // last rows would be (replicated rows exactly, ReplicatedPart; sharded
  // rows if spread evenly); then outwards from first_shard (+1, -1, +2,
  // ...). Each shard at most once.
  std::vector<size_t> order = {first_shard};
  for (const RowRange& w : wants) {
    if (w.rows == 0 || w.array >= m->arrays.size()) continue;
    for (uint64_t row : {w.first_row, w.first_row + w.rows - 1}) order.push_back(GuessShardOfRow(*m, w.array, row));
  }
  for (size_t k = 1; k < n; ++k) {
    const size_t step = (k + 1) / 2;
    order.push_back(k % 2 == 1 ? (first_shard + step) % n : (first_shard + n - step % n) % n);
  }
  std::vector<bool> tried(n, false);
  for (size_t k = 0; k < order.size() && (k == 0 || open > 0); ++k) {
    const size_t s = order[k];
    if (tried[s]) continue;
    tried[s] = true;
    ShardMeta& sh = m->shards[s];
    if (sh.loaded) continue;
    BATON_RETURN_IF_ERROR(LoadShardIndex(env, version_dir, s, m, &stats->bytes_read));
    ++stats->indexes_read;
    bool useful = false;
    for (DatasetMeta& ds : sh.datasets) {
      // Keep only what this rank reads; the datasets themselves stay (the
      // shard's metadata checksum needs every dataset's extent).
      static const std::vector<size_t> kNone;
      const std::vector<size_t>& mine = ds.array < by_array.size() ? by_array[ds.array] : kNone;
      auto keep_end = std::remove_if(ds.chunks.begin(), ds.chunks.end(), [&](const Chunk& c) {
        return !(c.rank == keep_rank || Overlaps(c, mine, wants));
      });
      ds.chunks.erase(keep_end, ds.chunks.end());
      ds.chunks.shrink_to_fit();
      useful = useful || !ds.chunks.empty();
      for (const Chunk& c : ds.chunks) {
        for (size_t i : mine) {
          if (gaps[i].empty()) continue;
          Subtract(c.first_row, c.first_row + c.rows, &gaps[i]);
          if (gaps[i].empty()) --open;
        }
      }
    }
    if (!useful) {
      sh.datasets.clear();
      sh.datasets.shrink_to_fit();
      sh.loaded = false;
    }
  }
  return Status::OK();
}

}  // namespace baton::ckpt
