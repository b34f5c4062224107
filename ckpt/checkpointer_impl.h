// The Checkpointer's implementation (include/baton/checkpointer.h), one
// class whose members live in one file per concept:
//
//   checkpointer.cc   Create and Init: options, the directory, communicators;
//                     the public Save, Restore, ReadMetadata (complete the
//                     asynchronous save in flight, hold the HDF5 lock)
//   async_save.cc     SaveAsync, its completion at the next call, Wait,
//                     WaitOrAbandon, Rollback (level 1)
//   registration.cc   registering arrays and blobs, the agreement on them
//   save.cc           the save path: records, shards, retention
//   commit.cc         the commit: shard indexes, the top-level manifest
//   candidates.cc     which version a restore tries next: listing, the
//                     manifest read by rank 0 and its outcome broadcast,
//                     ReadMetadata
//   restore.cc        the restore path: comparing with the registrations,
//                     reading and verifying rows, agreement, fallback
//   level2_save.cc    level 2 of a save: the commit of a version written
//                     to node-local storage, its partner copies, the
//                     outcome per level
//   level3_commit.cc  level 3 of such a save: the shared copy every
//                     shared_every-th save, or in place of a failed level 2
//   level_choice.cc   restore's choice of level: the newest version every
//                     rank can read from node-local copies (its own, or
//                     the partner's fetched over MPI), else level 3
//
// Internal to libbaton. Threading and collectivity: as the public class.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "baton/checkpointer.h"
#include "ckpt/background_writer.h"
#include "ckpt/catalog.h"
#include "ckpt/fs/env.h"
#include "ckpt/hdf5/shard_writer.h"
#include "ckpt/manifest.h"
#include "ckpt/manifest_parse_cache.h"
#include "ckpt/metadata_image.h"
#include "ckpt/phase_clock.h"
#include "ckpt/memory_level.h"
#include "ckpt/node_local_level.h"
#include "ckpt/registered.h"
#include "ckpt/run.h"
#include "ckpt/staging_pool.h"
#include "ckpt/stop_watch.h"
#include "mpi_runtime/silence_watch.h"

namespace baton::ckpt {
namespace h5 {
class ShardReader;      // ckpt/hdf5/shard_reader.h
enum class ReadMode;    // ckpt/hdf5/shard_reader.h
}  // namespace h5

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

// Rank 0's listing of the versions (ListCandidates), for the other ranks:
// sent with the first candidate when no level-2 choice needs it before.
struct Listing {
  Status status;             // rank 0's ListCandidates
  int quarantined = 0;       // versions skipped as quarantined
  long long world_rank = 0;  // rank 0's rank in MPI_COMM_WORLD (for the status's "rank R: ")
};

// Per rank and array, what rank 0 needs for the manifest.
struct ChunkRecord {
  uint64_t first_row;
  uint64_t rows;
};

// A rank's entries for its shard's index: per array [first_row, rows, k,
// then the k chunk digests] (k = ChunkCount(rows, row_bytes)).
std::vector<uint64_t> ShardEntries(const std::vector<ChunkRecord>& mine,
                                   const std::vector<std::vector<uint64_t>>& digests);

inline double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
std::string UtcNow();
std::string ShapeText(const std::vector<uint64_t>& shape);
std::string ShardFileName(int group);

// A restore's failure that does not show the version damaged (an I/O
// error, a stale handle, a permission: anything but kCorruption): the
// restore fails with it, same code, saying why no older version was
// taken (restore.cc).
Status TransientRestoreError(const Status& s, const std::string& version_path);
// Whether the version named `name` is one RestoreOptions `o` allows
// (its `version` and `older_than`; the step is checked apart).
bool Selects(const RestoreOptions& o, const std::string& name);
// What a skipped version's reason gets when its failure could not be
// recorded (EndAttempt's Status): the restore says so instead of claiming
// it counted toward the quarantine (candidates.cc).
std::string NotRecorded(const Status& why);

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
  Status Unregister(const std::string& name) override;
  Status SetUserBlob(std::string bytes) override;
  const std::string& user_blob() const override { return blob_; }
  Status SetRankState(std::string bytes) override;
  const std::string& rank_state() const override { return rank_state_; }

  // checkpointer.cc: complete the save in flight, then the synchronous path
  // under the HDF5 lock.
  Status Save(int64_t step) override;
  Status Restore(const RestoreOptions& options, RestoreResult* result) override;
  Status ReadMetadata(const RestoreOptions& options, std::optional<CheckpointMetadata>* out) override;

  // async_save.cc
  Status SaveAsync(int64_t step) override;
  Status Wait(double timeout_seconds) override;
  Status WaitOrAbandon(double timeout_seconds) override;
  AsyncSaveStatus async_status() const override;
  Status Rollback(int64_t* step) override;

  const CheckpointStats& last_stats() const override { return stats_; }
  const std::string& dir() const override { return dir_; }

 private:
  // The public calls without their event-log record (Save at level 2 is
  // SaveAsync's: one record, not two).
  Status SaveUnrecorded(int64_t step);
  Status SaveAsyncUnrecorded(int64_t step);
  Status RestoreUnrecorded(const RestoreOptions& options, RestoreResult* result);
  void RecordSave(int64_t step, double seconds, bool async, const Status& s) const;
  // checkpointer.cc
  Status LockDirectory();
  // SaveAsync's work after the save in flight is completed: stage (in
  // place: no copy, for Save with level 2), agree, make the version
  // directory, start the writer. `call` names the caller in errors.
  Status StartSave(int64_t step, const std::string& call, bool in_place);
  // InvalidArgument naming the directory and why when it is read-only.
  Status CheckWritable(const std::string& call) const;

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
  Status SaveNow(int64_t step);
  Status CheckTiling(const std::vector<ChunkRecord>& all) const;
  Status CreateVersionDir(int64_t step, std::string* name);
  // Rank 0, a save with level 2 on: the version's name, and its shared
  // directory when level 3 is due. When it is not, a sequence number
  // reserved by the last save that listed `dir` (shared_every at a time):
  // such a save lists nothing, rewrites no run file and makes no directory
  // in `dir`.
  Status NameLevel2Version(int64_t step, bool shared_due, std::string* name);
  // *record: [file bytes, metadata xxh3, data offset of each array] of my
  // shard (meaningful from the group's first rank); *digests: per array the
  // xxh3 of each chunk of my rows (ckpt/chunk_digests.h, hashed as they
  // were written; every rank's).
  Status WriteMyShard(const std::string& vdir, PhaseClock* clock, uint64_t* bytes, std::vector<uint64_t>* record,
                      std::vector<std::vector<uint64_t>>* digests);
  // Rank 0: lists the versions and removes those past `keep`, off the
  // caller's thread either way: unlinking a version's files frees its blocks
  // and page-cache pages, which a save should not wait for. With defer
  // (SaveAsync) it only plans them into removals_, which the next writer
  // removes on its own thread before it writes (StartSave); without, they
  // are renamed out of every listing at once and removed by remover_
  // (ckpt/version_removal.h, SetAsideForRemoval).
  void ApplyRetention(bool defer = false);
  static void RemoveVersions(fs::Env* env, std::vector<VersionInfo>* versions);

  // commit.cc
  // Collective over the shard group: every member sends its entries
  // (ShardEntries of `mine` and `digests`, WriteMyShard's); the group's
  // first rank writes the shard's index. *record becomes [bytes, meta_xxh3,
  // offsets..., index bytes, index xxh3] (zeros for the index on the other
  // ranks).
  Status WriteMyShardIndex(const std::string& vdir, int64_t step, const std::vector<ChunkRecord>& mine,
                           const std::vector<std::vector<uint64_t>>& digests, std::vector<uint64_t>* record);
  // Writes the index of shard g (its ranks: those with group_of[k] == g,
  // ascending; entries: theirs in that order, ShardEntries of each) and
  // appends [index bytes, index xxh3] to *record ([bytes,
  // meta_xxh3, offsets...] of the shard). Sync saves through
  // WriteMyShardIndex; async ones per rank (a group of one), on the
  // background writer's thread right after the shard (StartSave): it reads
  // run_, size_, env_ and options_, which no call changes while a save is
  // in flight (each completes it first).
  Status WriteIndexOfShard(const std::string& vdir, int64_t step, const std::vector<ArrayMeta>& arrays,
                           const std::vector<int>& group_of, int group_size, int g,
                           const std::vector<uint64_t>& entries, std::vector<uint64_t>* record) const;
  // Rank 0: the top-level manifest from every rank's record ([bytes,
  // meta_xxh3, offsets..., index bytes, index xxh3]; the group's first
  // rank's counts).
  Status BuildManifest(int64_t step, const std::vector<ArrayMeta>& arrays, const std::vector<int>& group_of,
                       int group_size, const std::string& blob, const std::vector<uint64_t>& shard_records,
                       Manifest* m) const;
  Status CommitManifest(const std::string& vdir, const Manifest& m);

  // candidates.cc
  Status ReadMetadataNow(const RestoreOptions& options, std::optional<CheckpointMetadata>* out);
  // The call's text (AgreeOnCall) and the local check of the options.
  Status CheckRestoreOptions(const char* what, const RestoreOptions& o, std::string* call) const;
  // Rank 0: the complete versions a restore may take (of o.step if given),
  // oldest first, and how many were skipped as quarantined. No version of
  // o.step is NotFound, unless step_missing is given and level 2 is on:
  // then OK with the message there, for the caller to return once level 2
  // has no such step either.
  Status ListCandidates(const RestoreOptions& o, std::vector<VersionInfo>* candidates, int* quarantined,
                        std::vector<std::string>* quarantined_names = nullptr, std::string* step_missing = nullptr);
  // What NextCandidate records on rank 0: nothing (ReadMetadata), a
  // damaged manifest toward quarantine without an attempt mark
  // (ReadMetadata as_restore: the pinned Restore that follows marks its
  // own), or the attempt mark from before the manifest is read (Restore).
  enum class Record { kNothing, kFailures, kAttempt };
  // Rank 0 pops the newest candidate and reads its manifest (`record`: a
  // corrupt one is recorded toward quarantine); every rank gets the same
  // Candidate. clock, when given: "mark" (rank 0's attempt mark),
  // "manifest" (its read and parse), "bcast". listing, when given: rank
  // 0's goes to every rank in the same broadcasts (a failed listing leaves
  // rank 0 no candidate: kNone).
  Status NextCandidate(std::vector<VersionInfo>* candidates, Record record, Candidate* out,
                       PhaseClock* clock = nullptr, Listing* listing = nullptr);
  // Rank 0, with Record::kAttempt: the attempt mark (BeginRestoreAttempt) of the
  // version being tried, from before its manifest is read until the
  // outcome is known; ending it records `failure` when given. Failures of
  // the marks themselves are logged: a mark is a safeguard, not a reason
  // to refuse a restore.
  // A stop signal during the attempt takes its mark away (attempt_watch_):
  // a kill after it is a preemption, not the version's doing.
  // *recorded, when given: the failure to record (or end) it, logged too:
  // a restore-failures that is a symlink or a directory, a read-only
  // version directory; the caller then says the failure was not counted.
  void BeginAttempt(const VersionInfo& v);
  void EndAttempt(const std::string* failure, Status* recorded = nullptr);

  // restore.cc
  Status RestoreNow(const RestoreOptions& options, RestoreResult* result);
  // A restore (or ReadMetadata as_restore) that found no version left after
  // `failed` failed now and `quarantined` were quarantined before: NotFound
  // naming each failure's reason.
  Status NoVersionRestored(const RestoreOptions& options, const std::vector<SkippedVersion>& failed,
                           int quarantined) const;
  // index_of[i]: the manifest's index of the i-th registered array, -1 when
  // it is not restored (a partial restore).
  Status CompareWithManifest(const Manifest& m, const std::vector<std::string>& only,
                             std::vector<int>* index_of) const;
  Status CheckRankState(const Manifest& m, const RestoreOptions& o, bool* restore_it) const;
  // Loads the shard indexes that hold my rows into m (format 3) first.
  // `level`: 3 reads replicated arrays in a part per node, 2 in a part per
  // rank (a node-local copy holds its rank's own rows only): ReplicatedSplit.
  // `pass`: kDirect reads each chunk into the registered arrays (verified
  // before the next); kVerifyOnly (RestoreOptions::verify_before_write's
  // first pass) reads and verifies every chunk, the per-rank state and the
  // blob, and writes nothing registered; kCopyVerified (its second pass, m
  // as the first left it) reads each chunk again and copies it into the
  // registered arrays once verified (*bytes counts the rows of this pass).
  // kVerifyOnly checks the rows of replicated arrays in a part per rank of
  // the world, not per node: the second pass verifies again every chunk it
  // copies, so the first only has to cover every chunk once over the ranks.
  // `open`: the shard files opened (and checked) by a pass, for the next
  // (null: this call's own).
  enum class ReadPass { kDirect, kVerifyOnly, kCopyVerified };
  using ShardReaders = std::map<size_t, std::unique_ptr<h5::ShardReader>>;
  Status ReadMyRows(int level, const std::string& vdir, Manifest& m, const std::vector<int>& index_of,
                    bool rank_state, PhaseClock* clock, uint64_t* bytes, std::string* state,
                    ReadPass pass = ReadPass::kDirect, ShardReaders* open = nullptr);
  // verify_before_write's second pass (kCopyVerified) and its agreement, after the first was agreed on.
  Status CopyVerifiedAndAgree(int level, const std::string& vdir, Manifest& m, const std::vector<int>& index_of,
                              PhaseClock* clock, uint64_t* bytes, uint64_t* total_bytes, Status* mine = nullptr,
                              ShardReaders* open = nullptr);
  Status GatherReplicated(int level, const Manifest& m, const std::vector<int>& index_of);
  struct ReplicatedSplit {
    int parts, part;
    MPI_Comm comm;  // the parts go over it (MPI_COMM_NULL: one part)
  };
  ReplicatedSplit SplitReplicated(int level) const;
  // Collective, both levels: the restore-read mark, ReadMyRows, and the
  // agreement on it (a corruption preferred); *mine, when given: this
  // rank's own outcome; *total_bytes, when given: *bytes summed over the
  // ranks in the same round (for FinishRestore).
  // With verify_before_write_: ReadMyRows's two passes, each agreed.
  Status ReadAndAgree(int level, const std::string& vdir, Manifest& m, const std::vector<int>& index_of,
                      bool with_state, PhaseClock* clock, uint64_t* bytes, std::string* state,
                      Status* mine = nullptr, uint64_t* total_bytes = nullptr);
  // Collective, both levels: the end of a restore that read version `vdir`
  // from `level` (2 or 3; `fetched`: the bytes of partner copies this rank
  // received): the replicated arrays gathered, the blob and rank state
  // kept, RestoreResult and CheckpointStats filled, rank 0's log line.
  // total_bytes, when given (level 3: nothing fetched): `bytes` summed
  // over the ranks already (ReadAndAgree), not summed again.
  Status FinishRestore(int level, const std::string& vdir, Manifest& m, const std::vector<int>& index_of,
                       bool with_state, std::string state, uint64_t bytes, uint64_t fetched, PhaseClock* clock,
                       RestoreResult* result, const uint64_t* total_bytes = nullptr);

  // level_choice.cc: restores the newest version every rank can read from
  // level 2 when no newer one is in level 3 (rank 0: level 3's candidates,
  // oldest first, and the versions quarantined there, which level 2 skips
  // too); *restored false (with a warning when level 2 had one but it
  // failed): the caller goes on to level 3.
  Status TryLevel2(const RestoreOptions& options, const std::vector<VersionInfo>& level3,
                   const std::vector<std::string>& quarantined, RestoreResult* result, PhaseClock* clock,
                   bool* restored);
  // The choice alone (Restore and ReadMetadata): the version (name empty:
  // none in level 2), where each rank's shard comes from (-1: its own
  // copy, else the rank holding its partner copy), and its manifest, read
  // by one rank and broadcast (failure: it could not be read; the same on
  // every rank).
  struct Level2Choice {
    std::string name;
    std::vector<int> source;  // -1: the rank's own copy; else the rank sending it
    std::vector<int> spare;   // a rank holding a partner copy of the rank's shard, or -1
    std::string text;         // the manifest's text, to parse again for a second read
    Manifest manifest;
    Status failure;
  };
  // Rank 0: OK unless level 3 holds version `name` under a manifest other
  // than `local_text` (level 2's copy of it), then Corruption naming both.
  Status SameAsLevel3(const std::vector<VersionInfo>& level3, const std::string& name, const std::string& local_text);
  Status ChooseLevel2(const RestoreOptions& options, const std::vector<VersionInfo>& level3,
                      const std::vector<std::string>& quarantined, PhaseClock* clock, Level2Choice* out);

  // level2_save.cc
  Status InitLevel2();
  // The commit of a save written with level 2 on (CommitPending's, after
  // the agreement on the writers' Status).
  Status CommitPendingLevels();

  // async_save.cc: the pending save's version, one shard per rank, whatever
  // level commits it. Each rank its own shard group.
  std::vector<int> OwnShardGroups() const;
  // This rank's shard record before its index: file bytes, metadata xxh3,
  // each dataset's offset.
  std::vector<uint64_t> PendingShardRecord() const;
  static std::vector<uint64_t> ShardRecord(const h5::ShardWriteResult& written, size_t arrays);
  // Writes this rank's shard index into `vdir` (completing *record).
  Status IndexPendingShard(const std::string& vdir, std::vector<uint64_t>* record);
  // Collective: the shard records gathered to rank 0, which builds the
  // version's manifest into *m. `mine`: this rank's outcome of the step
  // before (its index written), carried in the same gather instead of an
  // agreement of its own: rank 0 builds only when every rank's is OK, else
  // returns kAborted naming the first failed rank; the other ranks return
  // `mine`. The caller's next Agree (it must make one) then names the rank
  // that failed.
  Status GatherAndBuild(const std::vector<uint64_t>& record, Manifest* m, const Status& mine = Status::OK());

  // level3_commit.cc: the pending save's level-3 copy (each rank's shard,
  // unless its writer copied it; its index), and rank 0's commit of the
  // manifest there (with level 2's time when `level2` is given: one
  // version, one manifest), retention. The agreed outcome, the same on
  // every rank; a failure leaves the shared version directory to the
  // caller.
  Status CommitLevel3(const Manifest* level2);

  Runtime& runtime_;
  // Ends a collective call's wait for a rank that stopped answering
  // heartbeats (CheckpointOptions::peer_timeout); made by Init.
  std::unique_ptr<mpi::SilenceWatch> silence_;
  const CheckpointOptions options_;
  std::string dir_;  // resolved by Init (a symlink as given is followed once, there)
  fs::Env* const env_;
  int rank_ = 0, size_ = 0;
  MPI_Comm comm_ = MPI_COMM_NULL;   // a dup of the world: ckpt's messages stay apart
  MPI_Comm group_ = MPI_COMM_NULL;  // this rank's shard group
  std::vector<int> group_of_;       // shard group of every world rank
  // How a restore reads replicated arrays (ckpt/layout.h): this rank's part
  // of `replicated_parts_`, gathered over replicated_comm_ (comm_ itself
  // when the parts are the world's ranks; MPI_COMM_NULL at one part).
  int replicated_parts_ = 1, replicated_part_ = 0;
  MPI_Comm replicated_comm_ = MPI_COMM_NULL;
  std::unique_ptr<fs::FileLock> lock_;  // rank 0: <dir>/writer.lock, held for the Checkpointer's life
  // Why dir_ is read-only (Env::ReadOnly; every rank): then no lock, no
  // level 2, no save, no restore attempt marks; "" when writable.
  std::string read_only_;
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
  // Rank 0, while attempt_ holds a mark: removes it when a stop signal arrives.
  StopWatch attempt_watch_;  // armed from BeginAttempt to EndAttempt
  CheckpointStats stats_;
  ManifestParseCache manifest_parses_;  // every rank: its last manifest text parsed (candidates.cc)
  // The HDF5 metadata of this rank's last shard's layout (a shard group's
  // first rank: save.cc; each rank's own shard: async_save.cc, level 2),
  // written again by the next save of that layout.
  MetadataImages metadata_images_;
  bool verify_before_write_ = false;  // the running restore's RestoreOptions::verify_before_write
  h5::ReadMode read_mode_{};  // how the running restore reads shard files (BATON_CKPT_READ); {}: kPread, the default

  // async_save.cc: the save in flight (SaveAsync to its commit).
  struct PendingSave {
    int64_t step = -1;
    std::string vdir;
    double started = 0;                      // Now() at SaveAsync
    std::vector<ArrayMeta> arrays;           // the version's arrays (manifest order)
    std::vector<uint64_t> entries;           // mine: ShardEntries (commit.cc)
    std::string blob;                        // rank 0's, at SaveAsync
    uint64_t total_bytes = 0;
    std::vector<h5::ShardArray> shard;       // what the writer writes (staged rows)
    h5::ShardWriteResult written;            // the writer's; read after Join
    std::string name;                        // the version directory's name (both levels)
    bool level2 = false;                     // written to node-local storage first
    bool shared_due = true;                  // level 3 this time (shared_every)
    bool in_place = false;                   // Save's (level 2): the caller waits, rows not staged
    NodeLocalLevel::WriteOutcome outcome;    // the writer's; read after Join
    // Level 3 alone: the writer wrote this rank's index too, right after the
    // shard, off the caller's thread (its fsync under the shard's
    // write-back); the record is complete ([bytes, meta_xxh3, offsets...,
    // index bytes, index xxh3]). Read after Join.
    bool indexed = false;
    std::vector<uint64_t> index_record;
    double index_seconds = 0;
    double retention_seconds = 0;  // rank 0: the removals the writer did first
    // "the save of step N" (Save with level 2 writes as SaveAsync, yet the
    // program called Save: its messages must not name a SaveAsync it never
    // made) or "the asynchronous save of step N".
    std::string What() const {
      return std::string(in_place ? "the save" : "the asynchronous save") + " of step " + std::to_string(step);
    }
  };
  // The save in flight, if any, completed on every rank: its writer joined,
  // agreed, committed (or abandoned, its failure returned annotated).
  Status CompletePending();
  Status CommitPending(const Status& written);
  Status AbandonPending(const Status& failure);
  // The answer of Save, SaveAsync, Restore, Wait and WaitOrAbandon after an
  // MPI failure (async_save.cc): the failure, naming the save in flight.
  Status FailedBeforeCommit(const char* call, const char* file, int line) const;
  StagingPool staging_;          // the one staging copy
  MemoryLevel memory_;           // level 1: the staging copy, kept as the snapshot
  NodeLocalLevel local_;         // level 2; off without a node-local directory
  std::vector<int> partner_;     // level 2: the rank keeping each rank's copy (-1: one node)
  bool node_leader_ = false;     // the first rank of its node: the node's manifests, retention
  int64_t level_saves_ = 0;      // saves with level 2 on, for shared_every
  uint64_t seq_next_ = 0, seq_end_ = 0;  // rank 0: sequence numbers reserved, [next, end) (CreateVersionDir, NameLevel2Version)
  static constexpr uint64_t kSeqAhead = 16;  // reserved at a time by CreateVersionDir
  // WaitOrAbandon's bound (Now() seconds) while it commits a written save:
  // the partner exchange and the copies to level 3 stop there; infinity
  // otherwise.
  double commit_deadline_ = std::numeric_limits<double>::infinity();
  // SaveAsync's clock while it runs (the commit of the save before it and
  // the start of its own: CheckpointStats::phases), else null.
  PhaseClock* async_clock_ = nullptr;
  std::vector<VersionInfo> removals_;  // rank 0: retention's, planned by SaveAsync's commit (ApplyRetention)
  // The last joined writer's seconds: write, sync, meta_hash (ShardWriteResult), index, retention.
  double last_writer_[5] = {0, 0, 0, 0, 0};
  void AsyncLap(const char* phase) {
    if (async_clock_ != nullptr) async_clock_->Lap(phase);
  }
  // Rank 0, level 2 on: level 3's newest complete version, "-" for none,
  // empty when not known (Level3Record's base).
  std::string level3_newest_;
  std::unique_ptr<PendingSave> pending_;
  // Rank 0: removes the versions a synchronous save's retention set aside
  // (ApplyRetention), off the caller's thread; joined by the next retention
  // and by the destructor.
  BackgroundWriter remover_;
  BackgroundWriter writer_;      // last: destroyed (joined) first
};

}  // namespace baton::ckpt
