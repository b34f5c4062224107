#include "ckpt/verify.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "ckpt/checksum.h"
#include "ckpt/chunk_reader.h"
#include "ckpt/hdf5/shard_reader.h"
#include "ckpt/manifest_index.h"
#include "ckpt/phase_clock.h"

namespace baton::ckpt {
namespace {

std::string Rows(uint64_t first, uint64_t n) {
  return "rows " + std::to_string(first) + "-" + std::to_string(first + n - 1);
}

// A failure line: the label and the file's name, then the message without
// the file's path in front when it names it already (the readers' messages
// start with the path they opened: "shard-0.h5: /.../shard-0.h5: ..." said
// the file twice).
std::string FailureLine(const std::string& label, const std::string& file, const std::string& message) {
  const std::string tail = file + ": ";
  const size_t at = message.find(tail);
  const bool named = at != std::string::npos && (at == 0 || message[at - 1] == '/') &&
                     message.substr(0, at).find(": ") == std::string::npos;
  return label + file + ": " + (named ? message.substr(at + tail.size()) : message);
}

uint64_t ShardBytes(const Manifest& m, const ShardMeta& shard) {
  uint64_t n = 0;
  for (const DatasetMeta& ds : shard.datasets) n += ds.rows * m.arrays[ds.array].row_bytes();
  return n;
}

// What a progress callback is told across shards.
struct Tally {
  uint64_t done = 0, total = 0;
  const VerifyProgress* progress = nullptr;
};

// Every chunk of manifest.shards[shard_index] (its index loaded), read from
// dir; failure lines start with label + the file's name.
void VerifyShard(fs::Env* env, const std::string& dir, const std::string& label, const Manifest& manifest,
                 size_t shard_index, h5::ReadMode mode, ChunkReader* chunks, Tally* tally,
                 std::vector<std::string>* failures, uint64_t* bytes) {
  const ShardMeta& shard = manifest.shards[shard_index];
  const std::string name = label + shard.file;
  std::unique_ptr<h5::ShardReader> reader;
  if (Status s = h5::ShardReader::Open(env, dir, manifest, shard_index, &reader, mode); !s.ok()) {
    failures->push_back(FailureLine(label, shard.file, s.message()));
    tally->done += ShardBytes(manifest, shard);
    return;
  }
  for (const DatasetMeta& ds : shard.datasets) {
    const ArrayMeta& array = manifest.arrays[ds.array];
    const uint64_t row_bytes = array.row_bytes();
    // Nothing is allocated for a dataset before the file shows it holds
    // what the manifest claims (a row of 2 GiB was allocated first once).
    if (Status s = reader->CheckDataset(array, ds.rows); !s.ok()) {
      failures->push_back(FailureLine(label, shard.file, s.message()));
      tally->done += ds.rows * row_bytes;
      continue;
    }
    PhaseClock clock;  // not started: verify keeps no phases
    for (const Chunk& chunk : ds.chunks) {
      uint64_t done = 0;  // bytes of the chunk counted in the progress
      Status s = chunks->Read(reader.get(), name, array, ds, chunk, 0, 0, nullptr, &clock, [&](uint64_t n) {
        done += n;
        tally->done += n;
        if (*tally->progress) (*tally->progress)(tally->done, tally->total);
      });
      tally->done += chunk.rows * row_bytes - done;  // a chunk whose read failed counts as done
      if (s.ok()) {
        *bytes += chunk.rows * row_bytes;
      } else if (chunks->mismatched()) {
        failures->push_back(s.message());  // the checksum: the line names the file, the rows and the rank
      } else {
        failures->push_back(name + ": dataset " + array.name + " " + Rows(chunk.dataset_row, chunk.rows) +
                            " (written by rank " + std::to_string(chunk.rank) + "): " + s.message());
      }
    }
  }
}

void VerifyUserBlob(const Manifest& manifest, std::vector<std::string>* failures) {
  if (Xxh3(manifest.user_blob.data(), manifest.user_blob.size()) != manifest.user_blob_xxh3)
    failures->push_back("manifest: user blob xxh3 mismatch");
}

}  // namespace

Status VerifyVersion(fs::Env* env, const std::string& version_path, const Manifest& manifest,
                     std::vector<std::string>* failures, uint64_t* bytes, const VerifyProgress& progress) {
  h5::ReadMode mode;
  BATON_RETURN_IF_ERROR(h5::ReadModeFromEnv(&mode));
  Tally tally{0, manifest.total_bytes(), &progress};
  *bytes = 0;
  ChunkReader chunks;
  for (size_t i = 0; i < manifest.shards.size(); ++i) {
    VerifyShard(env, version_path, "", manifest, i, mode, &chunks, &tally, failures, bytes);
  }
  VerifyUserBlob(manifest, failures);
  return Status::OK();
}

Status VerifyShardCopies(fs::Env* env, const Manifest& manifest, const std::vector<ShardCopy>& copies,
                         std::vector<std::string>* failures, uint64_t* bytes, const VerifyProgress& progress) {
  for (const ShardCopy& c : copies) {
    if (c.shard >= manifest.shards.size()) {
      return Status::InvalidArgument("ckpt", "shard " + std::to_string(c.shard) + " of " +
                                                 std::to_string(manifest.shards.size()));
    }
  }
  h5::ReadMode mode;
  BATON_RETURN_IF_ERROR(h5::ReadModeFromEnv(&mode));
  // Each copy's index is read from its own directory into a ShardMeta of
  // its own, so a second copy of one shard is checked against its own
  // index file, not the first copy's. Held together: the indexes of the
  // shards one node holds (its ranks' and its partner's), for the total
  // the progress bar needs before the first chunk.
  Manifest m = manifest;
  std::vector<ShardMeta> loaded(copies.size());
  std::vector<Status> load_status(copies.size());
  Tally tally{0, 0, &progress};
  for (size_t i = 0; i < copies.size(); ++i) {
    const size_t k = copies[i].shard;
    m.shards[k] = manifest.shards[k];
    load_status[i] = LoadShardIndex(env, copies[i].dir, k, &m);
    loaded[i] = std::move(m.shards[k]);
    if (load_status[i].ok()) tally.total += ShardBytes(m, loaded[i]);
  }
  *bytes = 0;
  ChunkReader chunks;
  for (size_t i = 0; i < copies.size(); ++i) {
    const ShardCopy& c = copies[i];
    if (!load_status[i].ok()) {
      failures->push_back(FailureLine(c.label, manifest.shards[c.shard].index, load_status[i].message()));
      continue;
    }
    m.shards[c.shard] = std::move(loaded[i]);
    VerifyShard(env, c.dir, c.label, m, c.shard, mode, &chunks, &tally, failures, bytes);
  }
  VerifyUserBlob(manifest, failures);
  return Status::OK();
}

}  // namespace baton::ckpt
