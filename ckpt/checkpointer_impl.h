// The Checkpointer's implementation (include/baton/checkpointer.h), one
// class whose members live in one file per concept:
//
//   checkpointer.cc   Create and Init: options, the directory, communicators
//   registration.cc   registering arrays and blobs, the agreement on them
//   save.cc           the save path: records, shards, retention
//   commit.cc         the commit: shard indexes, the top-level manifest
//   candidates.cc     which version a restore tries next: listing, the
//                     manifest read by rank 0 and its outcome broadcast,
//                     ReadMetadata
//   restore.cc        the restore path: comparing with the registrations,
//                     reading and verifying rows, agreement, fallback
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
#include "ckpt/run.h"

namespace baton::ckpt {

// The dataset of per-rank state (SetRankState): a sharded u8 array whose
// rows are the ranks' bytes in rank order. Users' names cannot begin with
// '.', so it never meets one of theirs.
inline constexpr const char* kRankStateName = ".rank_state";
inline bool IsReservedName(const std::string& name) { return !name.empty() && name[0] == '.'; }

// What rank 0 found for the next candidate version, broadcast to all.
struct Candidate {
  enum Kind { kNone, kManifest, kSkipped, kHardError };
  Kind kind = kNone;
  std::string name;     // kManifest, kSkipped: the version directory's name
  int64_t step = 0;
  std::string text;     // kManifest: the manifest's JSON
  Status failure;       // kSkipped, kHardError
  bool counted = false; // kSkipped: recorded toward quarantine
};

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
  const std::string& run_id() const override { return run_.run_id; }

  // registration.cc
  Status RegisterReplicated(const std::string& name, void* data, DType dtype,
                            const std::vector<uint64_t>& shape) override;
  Status RegisterSharded(const std::string& name, void* data, DType dtype, const std::vector<uint64_t>& global_shape,
                         uint64_t first_row, uint64_t rows) override;
  Status SetUserBlob(std::string bytes) override;
  const std::string& user_blob() const override { return blob_; }
  Status SetRankState(std::string bytes) override;
  const std::string& rank_state() const override { return rank_state_; }

  // save.cc
  Status Save(int64_t step) override;
  // restore.cc
  Status Restore(const RestoreOptions& options, RestoreResult* result) override;
  // candidates.cc
  Status ReadMetadata(const RestoreOptions& options, std::optional<CheckpointMetadata>* out) override;

  const CheckpointStats& last_stats() const override { return stats_; }
  const std::string& dir() const override { return dir_; }

 private:
  // checkpointer.cc
  Status LockDirectory();

  // registration.cc
  Status Register(Registered r);
  // Collective, one MPI_Allreduce: every rank makes the same `call` (its
  // text holds the arguments) with the same registrations, and no rank's
  // own check of its arguments (`local`) failed (else every rank returns the
  // failing rank's Status). With `extra`: whether its value differs between
  // ranks, and the OR of its flags over the ranks.
  struct CallExtra {
    uint64_t value = 0;          // in
    uint64_t flags = 0;          // in
    bool value_differs = false;  // out
    uint64_t any_flags = 0;      // out
  };
  Status AgreeOnCall(const std::string& call, const Status& local, CallExtra* extra = nullptr);
  static constexpr uint64_t kFlagRankState = 1;  // SetRankState was called on some rank
  // Collective: when the replicated arrays' hashes (full replicas, in the
  // order of arrays_) differ between ranks, InvalidArgument naming the first
  // such array and which ranks hold which copy; the same Status everywhere.
  Status DescribeDivergedReplicas(const std::vector<uint64_t>& replica_xxh3);

  // save.cc
  Status CheckTiling(const std::vector<ChunkRecord>& all) const;
  Status CreateVersionDir(int64_t step, std::string* name);
  // *record: [file bytes, metadata xxh3, data offset of each array] of my
  // shard (meaningful from the group's first rank).
  Status WriteMyShard(const std::string& vdir, uint64_t* bytes, std::vector<uint64_t>* record);
  void ApplyRetention();

  // commit.cc
  // Collective over the shard group: its first rank writes the shard's
  // index from the group's chunk records (`mine` of every member) and
  // appends [index bytes, index xxh3] to its *record; the others append
  // zeros.
  Status WriteMyShardIndex(const std::string& vdir, int64_t step, const std::vector<ChunkRecord>& mine,
                           std::vector<uint64_t>* record);
  // Rank 0: the top-level manifest from every rank's record ([bytes,
  // meta_xxh3, offsets..., index bytes, index xxh3]; the group's first
  // rank's counts).
  Status BuildManifest(int64_t step, const std::vector<uint64_t>& shard_records, Manifest* m) const;
  Status CommitManifest(const std::string& vdir, const Manifest& m);

  // candidates.cc
  // The call's text (AgreeOnCall) and the local check of the options.
  Status CheckRestoreOptions(const char* what, const RestoreOptions& o, std::string* call) const;
  // Rank 0: the complete versions a restore may take (of o.step if given),
  // oldest first, and how many were skipped as quarantined.
  Status ListCandidates(const RestoreOptions& o, std::vector<VersionInfo>* candidates, int* quarantined);
  // Rank 0 pops the newest candidate and reads its manifest (record: a
  // corrupt one is recorded toward quarantine); every rank gets the same
  // Candidate.
  Status NextCandidate(std::vector<VersionInfo>* candidates, bool record, Candidate* out);
  // Rank 0, with `record`: the attempt mark (BeginRestoreAttempt) of the
  // version being tried, from before its manifest is read until the
  // outcome is known; ending it records `failure` when given. Failures of
  // the marks themselves are logged: a mark is a safeguard, not a reason
  // to refuse a restore.
  void BeginAttempt(const VersionInfo& v);
  void EndAttempt(const std::string* failure);

  // restore.cc
  // index_of[i]: the manifest's index of the i-th registered array, -1 when
  // it is not restored (a partial restore).
  Status CompareWithManifest(const Manifest& m, const std::vector<std::string>& only,
                             std::vector<int>* index_of) const;
  Status CheckRankState(const Manifest& m, const RestoreOptions& o, bool* restore_it) const;
  // Loads the shard indexes that hold my rows into m (format 3) first.
  Status ReadMyRows(const std::string& vdir, Manifest& m, const std::vector<int>& index_of,
                    bool gather_replicated, bool rank_state, uint64_t* bytes, std::string* state);
  Status GatherReplicated(const Manifest& m, const std::vector<int>& index_of);
  bool GatherFits(const Manifest& m, const std::vector<int>& index_of) const;

  Runtime& runtime_;
  const CheckpointOptions options_;
  std::string dir_;  // resolved by Init (a symlink as given is followed once, there)
  fs::Env* const env_;
  int rank_ = 0, size_ = 0;
  MPI_Comm comm_ = MPI_COMM_NULL;   // a dup of the world: ckpt's messages stay apart
  MPI_Comm group_ = MPI_COMM_NULL;  // this rank's shard group
  std::vector<int> group_of_;       // shard group of every world rank
  std::unique_ptr<fs::FileLock> lock_;  // rank 0: <dir>/writer.lock, held for the Checkpointer's life
  RunInfo run_;                          // the directory's run (last_seq: rank 0 only)
  std::map<std::string, Registered> arrays_;  // by name: the same order on every rank
  std::string blob_;
  std::string rank_state_;
  bool rank_state_set_ = false;  // SetRankState was called on this rank
  struct Attempt {
    VersionInfo version;
    std::string token;  // empty: the mark could not be written
  };
  std::optional<Attempt> attempt_;  // rank 0: the restore attempt marked and not yet ended
  CheckpointStats stats_;
};

}  // namespace baton::ckpt
