// The Checkpointer's implementation (include/baton/checkpointer.h), one
// class whose members live in one file per concept:
//
//   checkpointer.cc   Create and Init: options, the directory, communicators
//   registration.cc   registering arrays and blobs, the agreement on them
//   save.cc           the save path: records, shards, manifest, commit, retention
//   restore.cc        the restore path: choosing a version, reading and
//                     verifying rows, agreement, fallback
//
// Internal to libbaton. Threading and collectivity: as the public class.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "baton/checkpointer.h"
#include "ckpt/catalog.h"
#include "ckpt/fs/env.h"
#include "ckpt/manifest.h"

namespace baton::ckpt {

// A manifest is small (arrays, chunks and the user blob in base64); a
// larger file is not one baton wrote.
inline constexpr uint64_t kMaxManifestBytes = 1ull << 30;

// One registered array and this rank's part of it.
struct Registered {
  ArrayMeta meta;
  void* data = nullptr;
  uint64_t first_row = 0;  // sharded: this rank's rows
  uint64_t rows = 0;
};

// Per rank and array, what rank 0 needs for the manifest.
struct ChunkRecord {
  uint64_t first_row;
  uint64_t rows;
  uint64_t xxh3;
};

inline double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
std::string UtcNow();
std::string ShapeText(const std::vector<uint64_t>& shape);
std::string ShardFileName(int group);

class CheckpointerImpl : public Checkpointer {
 public:
  CheckpointerImpl(Runtime& runtime, CheckpointOptions options, std::string dir, fs::Env* env)
      : runtime_(runtime), options_(std::move(options)), dir_(std::move(dir)), env_(env) {}
  ~CheckpointerImpl() override;

  Status Init();

  // registration.cc
  Status RegisterReplicated(const std::string& name, void* data, DType dtype,
                            const std::vector<uint64_t>& shape) override;
  Status RegisterSharded(const std::string& name, void* data, DType dtype, const std::vector<uint64_t>& global_shape,
                         uint64_t first_row, uint64_t rows) override;
  Status SetUserBlob(std::string bytes) override;
  const std::string& user_blob() const override { return blob_; }

  // save.cc
  Status Save(int64_t step) override;
  // restore.cc
  Status Restore(std::optional<int64_t>* step) override;

  const CheckpointStats& last_stats() const override { return stats_; }
  const std::string& dir() const override { return dir_; }

 private:
  // registration.cc
  Status Register(Registered r);
  // Collective, one MPI_Allreduce: every rank makes the same `call` (its
  // text holds the arguments) with the same registrations, and no rank's
  // own check of its arguments (`local`) failed (else every rank returns the
  // failing rank's Status). *value_differs: whether `value` differs between
  // ranks.
  Status AgreeOnCall(const std::string& call, const Status& local, uint64_t value = 0,
                     bool* value_differs = nullptr);
  // Collective: when the replicated arrays' hashes (full replicas, in the
  // order of arrays_) differ between ranks, InvalidArgument naming the first
  // such array and which ranks hold which copy; the same Status everywhere.
  Status DescribeDivergedReplicas(const std::vector<uint64_t>& replica_xxh3);

  // save.cc
  Status CheckTiling(const std::vector<ChunkRecord>& all) const;
  Status CreateVersionDir(int64_t step, std::string* name);
  Status WriteMyShard(const std::string& vdir, uint64_t* bytes, uint64_t* file_bytes);
  Status BuildManifest(int64_t step, const std::vector<ChunkRecord>& records, const std::vector<uint64_t>& file_bytes,
                       Manifest* m) const;
  Status CommitManifest(const std::string& vdir, const Manifest& m);
  void ApplyRetention();

  // restore.cc
  void NextCandidate(std::vector<VersionInfo>* candidates, std::string* name, std::string* text);
  Status CompareWithManifest(const Manifest& m, std::vector<int>* index_of) const;
  Status ReadMyRows(const std::string& vdir, const Manifest& m, const std::vector<int>& index_of,
                    bool gather_replicated, uint64_t* bytes);
  Status GatherReplicated(const Manifest& m, const std::vector<int>& index_of);
  bool GatherFits(const Manifest& m) const;

  Runtime& runtime_;
  const CheckpointOptions options_;
  const std::string dir_;
  fs::Env* const env_;
  int rank_ = 0, size_ = 0;
  MPI_Comm comm_ = MPI_COMM_NULL;   // a dup of the world: ckpt's messages stay apart
  MPI_Comm group_ = MPI_COMM_NULL;  // this rank's shard group
  std::vector<int> group_of_;       // shard group of every world rank
  std::map<std::string, Registered> arrays_;  // by name: the same order on every rank
  std::string blob_;
  CheckpointStats stats_;
};

}  // namespace baton::ckpt
