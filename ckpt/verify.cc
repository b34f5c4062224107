#include "ckpt/verify.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "ckpt/checksum.h"
#include "ckpt/hdf5/shard_reader.h"

namespace baton::ckpt {
namespace {

// Reads at most this much at a time, so verifying a large chunk needs a
// bounded buffer (one row when a row is larger).
constexpr uint64_t kPieceBytes = 64ull << 20;

std::string Rows(uint64_t first, uint64_t n) {
  return "rows " + std::to_string(first) + "-" + std::to_string(first + n - 1);
}

}  // namespace

Status VerifyVersion(fs::Env* env, const std::string& version_path, const Manifest& manifest,
                     std::vector<std::string>* failures, uint64_t* bytes,
                     const std::function<void(uint64_t, uint64_t)>& progress) {
  const uint64_t total = manifest.total_bytes();
  uint64_t done = 0;
  *bytes = 0;
  std::vector<char> buf;
  for (size_t shard_index = 0; shard_index < manifest.shards.size(); ++shard_index) {
    const ShardMeta& shard = manifest.shards[shard_index];
    std::unique_ptr<h5::ShardReader> reader;
    if (Status s = h5::ShardReader::Open(env, version_path, manifest, shard_index, &reader); !s.ok()) {
      failures->push_back(shard.file + ": " + s.message());
      for (const DatasetMeta& ds : shard.datasets) done += ds.rows * manifest.arrays[ds.array].row_bytes();
      continue;
    }
    for (const DatasetMeta& ds : shard.datasets) {
      const ArrayMeta& array = manifest.arrays[ds.array];
      const uint64_t row_bytes = array.row_bytes();
      // Nothing is allocated for a dataset before the file shows it holds
      // what the manifest claims (a row of 2 GiB was allocated first once).
      if (Status s = reader->CheckDataset(array, ds.rows); !s.ok()) {
        failures->push_back(shard.file + ": " + s.message());
        done += ds.rows * row_bytes;
        continue;
      }
      const uint64_t piece_rows = std::max<uint64_t>(1, row_bytes == 0 ? 1 : kPieceBytes / std::max<uint64_t>(row_bytes, 1));
      for (const Chunk& chunk : ds.chunks) {
        Xxh3Stream sum;
        Status s;
        for (uint64_t r = 0; r < chunk.rows && s.ok(); r += piece_rows) {
          const uint64_t n = std::min(piece_rows, chunk.rows - r);
          buf.resize(n * row_bytes);
          s = reader->ReadRows(array, ds.rows, chunk.dataset_row + r, n, buf.data());
          if (s.ok()) sum.Update(buf.data(), buf.size());
          done += n * row_bytes;
          if (progress) progress(done, total);
        }
        const std::string what = shard.file + ": dataset " + array.name + " " +
                                 Rows(chunk.dataset_row, chunk.rows) + " (written by rank " +
                                 std::to_string(chunk.rank) + ")";
        if (!s.ok()) {
          failures->push_back(what + ": " + s.message());
        } else if (sum.Digest() != chunk.xxh3) {
          failures->push_back(what + ": xxh3 " + HexU64(sum.Digest()) + " != manifest " + HexU64(chunk.xxh3));
        } else {
          *bytes += chunk.rows * row_bytes;
        }
      }
    }
  }
  if (Xxh3(manifest.user_blob.data(), manifest.user_blob.size()) != manifest.user_blob_xxh3)
    failures->push_back("manifest: user blob xxh3 mismatch");
  return Status::OK();
}

}  // namespace baton::ckpt
