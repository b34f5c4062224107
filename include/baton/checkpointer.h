// baton::Checkpointer: atomically committed checkpoints, saved synchronously
// (Save) or in the background (SaveAsync).
//
//   baton::CheckpointOptions opts;            // dir defaults to $BATON_CKPT_DIR
//   std::unique_ptr<baton::Checkpointer> ck;
//   BATON_RETURN_IF_ERROR(baton::Checkpointer::Create(*rt, opts, &ck));
//   BATON_RETURN_IF_ERROR(ck->RegisterSharded("w", w, {rows, cols}, my_first_row, my_rows));  // vector<float>
//   BATON_RETURN_IF_ERROR(ck->RegisterReplicated("bias", b, {cols}));
//   std::optional<int64_t> done;               // training steps completed
//   BATON_RETURN_IF_ERROR(ck->Restore(&done)); // all ranks agree; nullopt on a first run
//   if (done) rng.Load(ck->rank_state());
//   for (int64_t step = done.value_or(0); step < steps; ++step) {
//     train(step);
//     BATON_RETURN_IF_ERROR(ck->SetUserBlob(loader_state));  // job-wide bytes, rank 0's are kept
//     BATON_RETURN_IF_ERROR(ck->SetRankState(rng.Save()));   // this rank's own bytes
//     BATON_RETURN_IF_ERROR(ck->Save(step + 1));  // steps 0..step are done
//   }
//
// A step is the number of training steps completed: Save(n) after steps
// 0..n-1, so the step Restore gives back is the first one still to run.
//
// A version is a directory `<dir>/v<seq>-s<step>/` of HDF5 shard files plus
// `manifest.json`; it exists if and only if its manifest does. Ranks form
// shard groups of `group_size` consecutive ranks that write one shard file
// together (parallel HDF5, MPI-IO). Restore verifies every byte it reads
// (xxh3; the manifest has its own checksum and its step must be its
// directory's) and falls back to the next older version when any rank
// finds it damaged; a transient error (EIO, ESTALE, EACCES) fails the
// restore instead (RestoreResult); sharded arrays may be restored at
// another world or group size.
//
// Asynchronous saves: SaveAsync(n) copies the registered arrays into one
// staging copy and returns; a background thread writes this rank's shard
// file (no MPI on that thread), and the next collective call (SaveAsync,
// Save, Restore, ReadMetadata, Wait, WaitOrAbandon) agrees and commits it.
// The staging copy stays in memory as the newest snapshot: Rollback()
// restores it with no I/O.
//
// Collective: Create, Save, SaveAsync, Wait, WaitOrAbandon, Rollback and
// Restore are called by every rank of the runtime's world in the same
// order. Threading: one thread calls a Checkpointer. HDF5 1.10 is not
// thread-safe: baton holds baton::Hdf5Mutex() (baton/hdf5_mutex.h) around
// its HDF5 calls, including the background writer's, and a program that
// calls HDF5 itself while a Checkpointer lives must hold it too. The
// registered buffers must stay valid until the Checkpointer is destroyed or
// the array re-registered (SaveAsync no longer reads them once it returns).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "baton/dtype.h"
#include "baton/runtime.h"
#include "baton/span.h"
#include "baton/status.h"

namespace baton {

namespace ckpt::fs {
class Env;
}

// How the ranks of a shard group move their rows into the shard file.
// Independent (the default): each rank writes its own rows (MPI-IO
// independent writes, pwrite underneath). Collective: MPI-IO two-phase
// aggregation. Measured side by side on this project's machine (docs/
// checkpoint-format.md), independent saved faster (0.80-0.91 of raw writes
// against 0.62-0.86) with ~5 MiB instead of ~52 MiB of extra memory, and
// Open MPI 4.1's ompio collective path (fcoll vulcan) once crashed in its
// progress function while the heartbeat thread was polling MPI. Collective
// may still win on a parallel file system with many ranks per file.
enum class Transfer { kCollective, kIndependent };

struct CheckpointOptions {
  // The checkpoint directory; empty: $BATON_CKPT_DIR (set by --baton-ckpt-dir);
  // neither: InvalidArgument.
  std::string dir;
  // Ranks per shard file: 0 = the ranks of one node (default), 1 = one file
  // per rank, world size = one file for the job. Must divide nothing: the last
  // group may be smaller.
  int group_size = 0;
  // Committed versions kept after a save (older ones are removed); >= 1.
  int keep = 3;
  // A version whose restore failed this many times (damaged bytes, or a
  // process that died reading it; not transient errors, not a preemption:
  // Restore) is skipped afterwards.
  int max_restore_failures = 2;
  // Modes of created files and directories.
  mode_t file_mode = 0600;
  mode_t dir_mode = 0700;
  Transfer transfer = Transfer::kIndependent;
  // A replicated array is written once in total, its rows spread over the
  // ranks, so copies that drifted apart would be stitched from several
  // ranks. true (default): at Save every rank hashes its whole copy (one
  // xxh3 pass over each replicated array) and the ranks compare the hashes
  // in Save's first MPI_Allreduce; copies that differ fail the Save on every
  // rank (InvalidArgument naming the array and which ranks hold which copy)
  // before anything is written. false: not checked.
  bool verify_replicas = true;
  // The run this directory belongs to (docs/checkpoint-format.md): empty:
  // the directory's (made once, kept across requeues and chained jobs);
  // given: the directory must belong to it (or be new), else
  // InvalidArgument naming both, so that another experiment pointed at the
  // same directory is refused instead of restoring its state. 1-64 of
  // [A-Za-z0-9._-], not "." nor ".." (it names each node's level-2 directory).
  std::string run_id;
  // One Checkpointer per directory at a time: Create takes an exclusive
  // lock (<dir>/writer.lock, flock, released when the holder's process
  // dies) and waits at most this long for it, so that a requeued job whose
  // dead predecessor's lock an NFS server has not freed yet gets it once
  // the lease ends (NFSv4: 90 s); then Unavailable naming the holder (pid,
  // host, job, since when).
  double lock_wait_seconds = 120;
  // A rank that stops answering heartbeats (stopped, hung, its node gone)
  // while the others wait for it in a collective call (Save, SaveAsync,
  // Wait, WaitOrAbandon, Restore, ReadMetadata, Rollback) ends their wait
  // after this many seconds of silence: they exit with 75 (requeue me), as
  // a communicator's collective under OnTimeout::kExit does, since MPI
  // cannot cancel the call they wait in. A call that is only slow (a rank
  // still writing a large shard keeps answering) is never cut short.
  // 0: the runtime's collective timeout (RuntimeOptions::collective_timeout,
  // else BATON_COLLECTIVE_TIMEOUT, else 600 s). Needs the runtime's
  // heartbeats (RuntimeOptions::heartbeats); without them it never fires.
  double peer_timeout = 0;
  // A reader's open (baton.dcp.BatonReader, `baton ckpt export`,
  // baton.latest): the directory must exist (NotFound naming it otherwise:
  // nothing is created), and nothing is written there, as for a read-only
  // directory: no writer lock, no run file, no event log, no restore marks,
  // level 2 off; Save and SaveAsync fail (InvalidArgument).
  bool read_only = false;
  // The nice value (setpriority, per thread) of SaveAsync's background
  // writer: by default 10, so that where the cores are all busy the
  // training's threads keep their share and the writer takes what is left
  // (the write must still end within the steps to the next SaveAsync, or
  // that call waits for it). 0: the caller's priority. 0-19.
  int async_writer_nice = 10;
  // Level 2 (ckpt/README.md, "Levels 2 and 3"): the node-local directory.
  // Given, level 2 is on. Empty: level 2 is on only when the program opts
  // in with level2 = true, in $BATON_LOCAL_DIR. The Checkpointer owns
  // `<local_dir>/<run id>/` on every node (created 0700, reused across
  // requeues): each rank's shard of a version goes there, and a verified
  // copy of it to the same local rank of the next node in a ring (over
  // MPI).
  //
  // What level 2 changes, beside the node-local copies: group_size is not
  // used (one shard file per rank, as SaveAsync writes: a version has as
  // many files and index entries as ranks); Save writes as SaveAsync
  // followed by Wait, its rows written from the registered arrays in place
  // (no staging copy: as a synchronous save, no memory beyond its buffers;
  // SaveAsync keeps its one staging copy as ever); each save sends this
  // rank's shard over the network to a rank of the next node, and each
  // node's disk keeps own and partner copies of local_keep versions;
  // restores read level 2 when it holds the newest version level 3 still
  // records (docs/recovery.md).
  std::string local_dir;
  // true: level 2 in $BATON_LOCAL_DIR when local_dir is empty (the
  // directory the plugin offers: --baton-local-dir, or the site's plugin key
  // local_root, man spank-baton(8)); neither: a warning, and every save
  // goes to `dir` alone. false (the default): $BATON_LOCAL_DIR is not used,
  // so a site's local_root changes nothing for a program that did not ask.
  bool level2 = false;
  // Level 3: with level 2 on, a version is also written to `dir` every
  // shared_every-th save (counted from 0 in this Checkpointer: the first
  // save always is), and whenever level 2 failed for it (a full disk);
  // >= 1. Without level 2 every save goes to `dir`.
  int shared_every = 1;
  // Level 2: complete versions kept in each node's local directory; >= 1.
  int local_keep = 2;
  // The file layer for everything that is not HDF5's own data I/O; null:
  // the POSIX one. Tests pass a fault-injecting wrapper. Not owned.
  ckpt::fs::Env* env = nullptr;
};

// The DType of a C++ element type, for the typed registrations: float
// f32, double f64, int8_t i8, int16_t i16, int32_t i32, int64_t i64, uint8_t
// u8, uint16_t u16, uint32_t u32, uint64_t u64, bool bool. bf16, f16 and the
// 8-bit floats have no standard C++ type: pass their bits as a
// Span<uint16_t> (bf16, f16) or Span<uint8_t> (f8e4m3, f8e5m2) with the DType.
template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::kF32;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::kF64;
};
template <>
struct DTypeOf<int32_t> {
  static constexpr DType value = DType::kI32;
};
template <>
struct DTypeOf<int64_t> {
  static constexpr DType value = DType::kI64;
};
template <>
struct DTypeOf<uint8_t> {
  static constexpr DType value = DType::kU8;
};
template <>
struct DTypeOf<int8_t> {
  static constexpr DType value = DType::kI8;
};
template <>
struct DTypeOf<int16_t> {
  static constexpr DType value = DType::kI16;
};
template <>
struct DTypeOf<uint16_t> {
  static constexpr DType value = DType::kU16;
};
template <>
struct DTypeOf<uint32_t> {
  static constexpr DType value = DType::kU32;
};
template <>
struct DTypeOf<uint64_t> {
  static constexpr DType value = DType::kU64;
};
template <>
struct DTypeOf<bool> {
  static_assert(sizeof(bool) == 1, "a bool array is stored one byte per element");
  static constexpr DType value = DType::kBool;
};

// What the last Save or Restore did, for the program and the benchmark.
struct CheckpointStats {
  int64_t step = -1;
  std::string version_path;  // the version directory
  uint64_t bytes = 0;        // array bytes written or read by this rank
  uint64_t total_bytes = 0;  // the same over all ranks
  // Restore, this rank: bytes of array data read from shard files, rows
  // that are not its own included (a chunk is read whole to verify its
  // checksum: more than `bytes` when resharding cuts a chunk; each rank
  // reads 1/world of a replicated array, the rest comes over MPI). With
  // RestoreOptions::verify_before_write, the bytes of both reads.
  uint64_t bytes_read = 0;
  double seconds = 0;        // wall time of the call on this rank
  int fallbacks = 0;         // restore: versions skipped (RestoreResult::fallbacks says why)
  // The level of the version saved or restored: 2 node-local (a save: level
  // 2 complete, and maybe 3 too: `shared`), 3 the shared directory; 0 none.
  int level = 0;
  bool shared = false;  // a save: the version was committed in `dir` (level 3)
  // A sync save, a shard group's first rank (independent transfers): its shard's
  // HDF5 metadata was written from the image of an earlier save of the same
  // arrays and rows, without HDF5 (ckpt/metadata_image.h).
  bool metadata_reused = false;
  // A save with level 2 on, per level (docs/recovery.md, "A save's outcome
  // per level"): whether level 2 committed the version on every node, and
  // why a level failed ("" when it committed, or was not due). The save
  // returns OK when either level committed the version (the failed one is
  // logged as a warning and given here), and a restore then uses the level
  // that holds it; when neither did, the save fails and nothing is kept.
  bool level2_committed = false;
  std::string level2_failure;
  std::string level3_failure;
  // A save with level 2 on: its phases are the commit's (local_index,
  // exchange, local_manifest, shared) and bytes_partner the bytes of
  // partner copies this rank received (the exchange is the part of the
  // commit that moves data, on the caller's thread).
  // Restore, this rank: bytes of array data read from its node-local copy
  // (level 2, including a copy fetched from the partner), bytes of shard
  // files fetched over MPI from the partner node's copy (the whole files),
  // bytes of array data read from the shared directory (level 3).
  uint64_t bytes_level2 = 0;
  uint64_t bytes_partner = 0;
  uint64_t bytes_level3 = 0;
  // The same over all ranks.
  uint64_t total_bytes_level2 = 0;
  uint64_t total_bytes_partner = 0;
  uint64_t total_bytes_level3 = 0;
  // Where `seconds` went on this rank, phase by phase, in a fixed order (the
  // same names on every rank; 0 for a phase a rank had no part in).
  // Save: hash (checksums of the user's buffers), agree (agreements and the
  // gathers of records), create (version directory, shard file, HDF5
  // datasets), write (the data), close (HDF5's metadata flush and close),
  // verify (collective transfers only: each rank reads its rows back),
  // sync (fsync of the shard), meta_hash (the shard's metadata checksum,
  // one rank per shard), manifest (build, write, fsync, rename, directory
  // syncs), retention (removal of old versions). Restore: call (the
  // agreement that every rank made the same call), list (the versions,
  // rank 0), mark (rank 0's attempt mark, ckpt/restore_failures.h), manifest
  // (rank 0 reads and parses it; every rank parses the copy it gets and
  // compares), bcast (the candidate's broadcast: on the other ranks, the wait
  // for rank 0's list, mark and manifest), index (the shard indexes), open
  // (shard files and datasets, metadata checksum), read (the data), verify
  // (checksums of the data), agree, gather (replicated arrays), unmark
  // (rank 0 ends the attempt, after the last collective).
  struct Phase {
    std::string name;
    double seconds = 0;
  };
  std::vector<Phase> phases;
};

// This rank's asynchronous save (SaveAsync), as this rank knows it: local,
// not agreed (the agreed outcome comes with the next collective call).
struct AsyncSaveStatus {
  enum class State {
    kIdle,     // no save in flight
    kWriting,  // the background writer is writing this rank's shard
    kWritten,  // this rank's shard is written and synced; the commit waits for the next call
    kFailed,   // this rank's write failed (failure); every rank learns it at the next call
  };
  State state = State::kIdle;
  int64_t step = -1;  // the save in flight; -1 when idle
  Status failure;
};

// Which version Restore (or ReadMetadata) takes and what it restores.
struct RestoreOptions {
  // The newest committed version of this step (when a step was saved more
  // than once, the older copies are its fallbacks); nullopt: the newest
  // version. A step with no committed version: NotFound naming the step.
  std::optional<int64_t> step;
  // A partial restore (evaluation, fine-tuning): only these registered
  // arrays are read; the other registered arrays are left as they are and
  // the version's other arrays are ignored. Each name must be registered
  // (else InvalidArgument) and in the version (else InvalidArgument, as any
  // mismatch). Empty: every registered array, and the version must hold
  // exactly those.
  std::vector<std::string> arrays;
  // Per-rank state (SetRankState) is given back to the same rank at the same
  // world size. A version saved with per-rank state at another world size:
  // false (default): InvalidArgument naming both sizes (nothing restored,
  // no fallback); true: restored without it (rank_state() empty,
  // RestoreResult::rank_state_dropped).
  bool drop_rank_state_on_resize = false;
  // Which level serves the restore: 0 (default) the fastest that holds the
  // newest version (node-local copies, level 2, else the shared directory);
  // 3: the shared directory only (level 2 is not read). Others:
  // InvalidArgument. Level 3's directory is the record of what exists: a
  // level-2 copy of a version that level 3 committed is used only while
  // level 3 still holds it, and one of a version level 3 never got only
  // while level 3 still holds the version it followed, so a version
  // removed from `dir` (`baton ckpt gc`, rm -r: a rollback) never comes
  // back from level 2 (docs/recovery.md).
  int from_level = 0;
  // A restore pinned to one version, or kept to the versions older than
  // one: the name of a version directory ("v00000012-s400", the last part
  // of RestoreResult::version_path at either level). A front end that plans
  // against one version's arrays (Python's Checkpointer, whose state may
  // hold other arrays at another step) reads the version it planned on,
  // and after that version failed to verify asks for the next older one
  // here, so that which version comes next is decided in one place (this
  // listing, through the Env) and never by a listing of its own.
  // `version`: that version only (its failure fails the Restore: NotFound
  // with the reason; a version not committed: NotFound naming it).
  // `older_than`: only versions committed before that one, newest first,
  // falling back as usual (none: as a first run, nothing restored). Each
  // with `step`: the versions of that step among those. "" (default): any.
  // Not a version name: InvalidArgument.
  std::string version;
  std::string older_than;
  // Whether a restore that fails leaves every registered array as it was.
  // false (default): each chunk's rows go into the registered arrays as it
  // is read (every byte verified before Restore returns OK, but a failed
  // restore, this rank's or another's, leaves them holding some rows of the
  // failed version). true: every rank reads and verifies its chunks first
  // (nothing written to the arrays), the ranks agree, and only then each
  // chunk is read again into a buffer of the restore's own, verified again
  // and copied into the arrays: a version that fails to verify, on any
  // rank, leaves every array untouched, and no unverified byte is ever
  // written to one. It reads the bytes twice (from the page cache, right
  // after the first read) instead of into a second, whole-size copy of the
  // state (Python's front ends: docs/benchmarks.md, 2026-12-06). Only a
  // shard file that changes between the two reads (rewritten by another
  // program during the restore) fails the second one: then the arrays hold
  // verified rows of this version beside rows of before, the version is
  // counted as damaged and the restore goes on to the next older version,
  // which rewrites every array it restores.
  bool verify_before_write = false;
  // ReadMetadata only: the version as Restore would find it, for a front
  // end that plans on a version's arrays and user blob (ReadMetadata) and
  // then restores that version pinned (`version`), with no other read of
  // its manifest in between. A version passed over for a damaged manifest
  // is recorded toward its quarantine as Restore records it (once: the
  // pinned Restore never meets it) and listed in
  // CheckpointMetadata::skipped; where no version is left but some failed
  // now or were quarantined before, ReadMetadata fails with Restore's
  // NotFound instead of answering "none" (a first run). Rank 0 does not
  // mark the attempt (BeginAttempt): the pinned Restore does.
  bool as_restore = false;
};

// A version that a restore skipped, newest first.
struct SkippedVersion {
  std::string path;  // the version directory (its name's step: `step`)
  int64_t step = 0;
  // Why: kCorruption (the bytes shown bad: a checksum, size or format
  // mismatch, a manifest that fails its own checksum or whose step is not
  // its directory's) is recorded beside the version and counts toward its
  // quarantine (counted = true). Not counted (counted = false): a version
  // of another run (kInvalidArgument), or one removed since the listing
  // (kNotFound). A transient error (an I/O error, a stale handle, a
  // permission) never skips a version: Restore fails with it (see Restore).
  Status reason;
  bool counted = false;
};

// What a Restore did, on every rank the same.
struct RestoreResult {
  std::optional<int64_t> step;  // nullopt: nothing restored (a first run, or a failed Restore)
  std::string version_path;
  std::vector<SkippedVersion> fallbacks;  // newer versions skipped as damaged (or gone, or another run's)
  // Versions skipped untried: quarantined before (restores that failed on
  // their bytes, or processes that died reading them, max_restore_failures
  // times; a preempted restore is not counted, see Restore).
  int quarantined = 0;
  bool rank_state_dropped = false;        // see RestoreOptions::drop_rank_state_on_resize
  // 2: node-local copies (each rank's own, or fetched over MPI from the
  // partner node's copy: CheckpointStats::bytes_partner); 3: the shared
  // directory (version_path); 0: nothing restored.
  int level = 0;
  // Level 2 on: the node-local version the restore chose and could not
  // restore (a manifest that does not match the registrations, a partner
  // copy that could not be fetched, rows that failed their checksums in
  // both copies), and why (`reason`; `counted` is always false: level 2
  // never records a failure toward quarantine); the restore then went on
  // to level 3. nullopt when level 2 was off, held no version to try, or
  // restored it.
  std::optional<SkippedVersion> level2_fallback;
};

// One array of a saved version.
struct CheckpointArray {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<uint64_t> shape;  // global; empty: a scalar
  bool replicated = false;
};

// What a version holds, read from its manifest (no shard is opened).
struct CheckpointMetadata {
  int64_t step = 0;
  std::string version_path;
  int world_size = 0;              // the ranks that saved it
  std::string time;                // UTC, ISO 8601
  std::vector<CheckpointArray> arrays;
  uint64_t user_blob_bytes = 0;
  std::string user_blob;           // the job-wide bytes themselves (SetUserBlob), verified with the manifest
  bool has_rank_state = false;     // per-rank state was saved (SetRankState)
  // Newer versions passed over to reach this one (a damaged manifest,
  // another run's, removed since the listing), newest first, as
  // RestoreResult::fallbacks; counted only with RestoreOptions::as_restore.
  std::vector<SkippedVersion> skipped;
};

// A committed version of a checkpoint directory (its directory holds its
// manifest: complete, or quarantined after failed restores).
struct CommittedVersion {
  std::string name;  // "v00000012-s400"
  int64_t step = 0;
};

// The committed versions of `dir`, oldest first (the order of their
// commits, which a restore takes newest first): the one listing and the
// one version-name rule (docs/checkpoint-format.md) for every front end
// that asks which steps a directory holds (Python's baton.latest, the
// Lightning CheckpointIO). No MPI; nothing is created, locked or written,
// no manifest is read or verified. NotFound when `dir` does not exist; an
// error of the listing with its path.
Status ListCommittedVersions(const std::string& dir, std::vector<CommittedVersion>* out);

class Checkpointer {
 public:
  // Collective over the runtime's world. Checks the options and the
  // directory (created with dir_mode when missing), takes the directory's
  // writer lock (Unavailable when another Checkpointer, in this or another
  // process, holds it past lock_wait_seconds) and its run id.
  static Status Create(Runtime& runtime, const CheckpointOptions& options, std::unique_ptr<Checkpointer>* out);
  virtual ~Checkpointer() = default;

  // Array names become HDF5 dataset names: 1-255 bytes, no '/', not
  // beginning with '.' (baton's own datasets do). Registering a name again
  // replaces the earlier registration.
  //
  // A replicated array: the same on every rank; written once in total (its
  // rows spread over the ranks), restored on every rank. shape may be empty
  // (a scalar). Same call on every rank.
  virtual Status RegisterReplicated(const std::string& name, void* data, DType dtype,
                                    const std::vector<uint64_t>& shape) = 0;
  // A sharded array: this rank holds rows [first_row, first_row + rows) of
  // dim 0 of global_shape. Over all ranks the row ranges must tile the array
  // exactly (checked at Save). global_shape is the same on every rank.
  virtual Status RegisterSharded(const std::string& name, void* data, DType dtype,
                                 const std::vector<uint64_t>& global_shape, uint64_t first_row,
                                 uint64_t rows) = 0;

  // Typed registrations: the dtype follows the element type (DTypeOf) or is
  // given (a Span<uint16_t> as bf16 or f16), and the span must hold exactly
  // the registered elements (replicated: the product of shape, 1 for a
  // scalar; sharded: rows times the product of global_shape[1:]), else
  // InvalidArgument naming both counts. A container with data() and size()
  // (std::vector, std::array) stands for its span; a const one does not
  // compile (Restore writes into it).
  //
  //   std::vector<float> bias(cols);
  //   ck->RegisterReplicated("bias", bias, {cols});
  //   ck->RegisterSharded("w", w, {rows, cols}, first_row, my_rows);
  //   ck->RegisterReplicated("emb", baton::Span<uint16_t>(e), baton::DType::kBF16, {n, d});
  template <typename T>
  Status RegisterReplicated(const std::string& name, Span<T> data, DType dtype, const std::vector<uint64_t>& shape) {
    static_assert(!std::is_const_v<T>, "Restore writes into a registered array: it cannot be const");
    BATON_RETURN_IF_ERROR(CheckElements(name, data.size(), sizeof(T), dtype, shape, std::nullopt));
    return RegisterReplicated(name, static_cast<void*>(data.data()), dtype, shape);
  }
  template <typename T>
  Status RegisterReplicated(const std::string& name, Span<T> data, const std::vector<uint64_t>& shape) {
    return RegisterReplicated(name, data, DTypeOf<std::remove_cv_t<T>>::value, shape);
  }
  template <typename C, typename T = std::remove_pointer_t<decltype(std::data(std::declval<C&>()))>,
            typename = decltype(DTypeOf<T>::value)>
  Status RegisterReplicated(const std::string& name, C& data, const std::vector<uint64_t>& shape) {
    return RegisterReplicated(name, Span<T>(data), shape);
  }
  template <typename T>
  Status RegisterSharded(const std::string& name, Span<T> data, DType dtype, const std::vector<uint64_t>& global_shape,
                         uint64_t first_row, uint64_t rows) {
    static_assert(!std::is_const_v<T>, "Restore writes into a registered array: it cannot be const");
    BATON_RETURN_IF_ERROR(CheckElements(name, data.size(), sizeof(T), dtype, global_shape, rows));
    return RegisterSharded(name, static_cast<void*>(data.data()), dtype, global_shape, first_row, rows);
  }
  template <typename T>
  Status RegisterSharded(const std::string& name, Span<T> data, const std::vector<uint64_t>& global_shape,
                         uint64_t first_row, uint64_t rows) {
    return RegisterSharded(name, data, DTypeOf<std::remove_cv_t<T>>::value, global_shape, first_row, rows);
  }
  template <typename C, typename T = std::remove_pointer_t<decltype(std::data(std::declval<C&>()))>,
            typename = decltype(DTypeOf<T>::value)>
  Status RegisterSharded(const std::string& name, C& data, const std::vector<uint64_t>& global_shape,
                         uint64_t first_row, uint64_t rows) {
    return RegisterSharded(name, Span<T>(data), global_shape, first_row, rows);
  }

  // Drops the registration of `name`: later calls neither save nor restore
  // it, and its memory is no longer referenced (a front end that registers
  // each save's arrays anew on one open checkpointer drops the last ones;
  // before, only a new Checkpointer dropped them). Local, like the
  // registrations: every rank unregisters the same names. NotFound when
  // `name` is not registered; Unavailable while a SaveAsync is not yet
  // committed (its commit and Rollback use the registrations it staged).
  virtual Status Unregister(const std::string& name) = 0;

  // Job-wide bytes saved with the next Save (rank 0's are kept) and given
  // back to every rank by Restore. At most 64 MiB.
  virtual Status SetUserBlob(std::string bytes) = 0;
  virtual const std::string& user_blob() const = 0;
  // Per-rank state (an RNG's state, a data loader's cursor): this rank's
  // bytes, saved with every later Save and given back to this same rank by
  // Restore when the world size is the same; at another world size see
  // RestoreOptions::drop_rank_state_on_resize. At most 64 MiB per rank. Set
  // on any rank, a version holds it for every rank (empty where not set).
  virtual Status SetRankState(std::string bytes) = 0;
  virtual const std::string& rank_state() const = 0;

  // Writes every registered array (and the blobs) as version `step`, the
  // number of training steps completed (0 to 2^53 - 1, exact in a double:
  // another step is refused, InvalidArgument on every rank before anything
  // is written), and commits it; then applies
  // retention. On failure nothing is committed, every rank returns
  // the same code and the message names the rank and file that failed.
  // With level 2 on (local_dir) the save succeeds when either level
  // committed the version: a failure of the other is a warning in the log
  // and in last_stats() (level2_failure, level3_failure), and a restore
  // uses the level that holds it. The same holds for SaveAsync's commit.
  virtual Status Save(int64_t step) = 0;

  // Asynchronous save of version `step`: completes the save in flight, if
  // any (as Wait()); copies every registered array, the blob and the rank
  // state into the staging copy (checksums computed in the same pass); the
  // ranks agree on the call and rank 0 makes the version directory; then
  // returns while a background thread writes this rank's shard file
  // (one file per rank, HDF5's POSIX driver: the background makes no MPI
  // call). What changes in the registered arrays after it returns never
  // reaches this version. At most one save is in flight: the next
  // SaveAsync, Save, Restore, ReadMetadata or Wait waits for the write,
  // agrees on it and commits it; a failure of the write reaches every rank
  // there, as that call's Status naming the rank, the file and the step
  // (the call's own work is then not done). So SaveAsync(k+1) commits k
  // first: with a save every N steps, the newest committed version is at
  // most about 2N steps old. Memory: one staging copy of this rank's arrays
  // (replicated arrays whole), kept as the snapshot for Rollback.
  virtual Status SaveAsync(int64_t step) = 0;
  // Completes the save in flight: waits until every rank's write ended or
  // `timeout_seconds` passed on each rank, then the ranks agree: all
  // written: committed (its failure, if any, returned on every rank); else
  // Timeout on every rank and the save stays in flight. OK at once when no
  // save is in flight. Call it before destroying the Checkpointer: the
  // destructor cannot commit (it is not collective), so it abandons the
  // writer at its next slab (at most 64 MiB) and logs a warning; the
  // version stays incomplete and the next save's retention removes it.
  virtual Status Wait(double timeout_seconds = std::numeric_limits<double>::infinity()) = 0;
  // For an agreed stop (Runtime::ShouldStop, then exit 75): as Wait, but a
  // save not written by every rank within `timeout_seconds` is abandoned:
  // each writer stops at its next slab (at most 64 MiB), the ranks agree,
  // rank 0 removes the version directory, and every rank gets Aborted
  // naming the step. Returns within about timeout_seconds plus one slab's
  // write, so the job exits within Slurm's grace period. With level 2 the
  // commit keeps the same bound: the partner exchange (its rounds agreed,
  // no piece written past the deadline) and the copies to level 3 stop at
  // the deadline (plus one 16 MiB piece); the version is then saved at the
  // level that completed (level 3 when the writers had copied it there:
  // OK, CheckpointStats says which), else abandoned (Aborted).
  virtual Status WaitOrAbandon(double timeout_seconds) = 0;
  // This rank's save in flight. Local, non-blocking, no MPI.
  virtual AsyncSaveStatus async_status() const = 0;
  // Level 1: restores the newest SaveAsync's snapshot, kept in memory, into
  // the registered arrays, the user blob and the rank state, with no I/O
  // (for a soft failure such as a NaN loss); *step: its step. Every rank
  // must hold a snapshot of the same step and the registrations must be
  // those of the snapshot, else InvalidArgument on every rank (nothing
  // restored). No snapshot (none since the last Save or Restore, which drop
  // it): NotFound on every rank. Does not wait for the save in flight.
  virtual Status Rollback(int64_t* step) = 0;
  // Restores the newest committed version that every rank can read and
  // verify into the registered buffers (and the user blob and per-rank
  // state). result->step is the version's step: the number of training steps
  // it holds as completed (Save(n) after n steps), so training continues
  // with step n (counting from 0); nullopt when the directory holds no
  // version (a first run). Names or shapes that do not match the registered
  // arrays: InvalidArgument listing the differences, nothing skipped. A
  // version shown damaged (kCorruption: its bytes fail a checksum, a size
  // or the format; its manifest fails its own checksum or names another
  // step than its directory) is skipped for the next older one and
  // reported in result->fallbacks with its reason. A transient error while
  // reading the newest version (EIO, ESTALE, EACCES, ...: the version may
  // be good) fails the restore with that error (same code; IOError is a
  // requeue for baton-train) and nothing is recorded: going back to an
  // older version for it would lose the training a requeue keeps. Versions
  // that exist but none of which can be restored (all damaged now or
  // quarantined before): NotFound with the counts, never a silent first
  // run. A manifest written by a newer baton (a newer format, its checksum
  // intact): InvalidArgument saying so, no fallback (an older version
  // would silently go back in time). A process that dies while reading a
  // version counts toward its quarantine (a version that crashes every
  // restore ends the loop), unless a stop signal (SIGTERM of a preemption
  // or time limit, the stop signal) arrived first and every rank still
  // answered its heartbeats a few intervals later: a preempted restore is
  // not counted. A failed restore may leave the buffers partly overwritten.
  virtual Status Restore(const RestoreOptions& options, RestoreResult* result) = 0;
  // Restore({}, ...), giving only the step.
  Status Restore(std::optional<int64_t>* step) {
    RestoreResult result;
    Status s = Restore(RestoreOptions(), &result);
    *step = result.step;
    return s;
  }
  // The metadata of the version Restore(options) would try first (the
  // newest complete, not quarantined version, of options.step if given, whose
  // manifest reads), so that a program can allocate and register its arrays
  // from it; nullopt when there is none. Reads no shard; records nothing
  // unless options.as_restore (a damaged manifest passed over is counted).
  // Collective, like Restore.
  virtual Status ReadMetadata(const RestoreOptions& options, std::optional<CheckpointMetadata>* out) = 0;

  virtual const CheckpointStats& last_stats() const = 0;
  virtual const std::string& dir() const = 0;
  // The directory's run id (CheckpointOptions::run_id), the same on every rank.
  virtual const std::string& run_id() const = 0;

 protected:
  // The typed registrations' check: `elements` of `element_bytes` bytes
  // are exactly a registration of dtype and shape (rows: a sharded rank's
  // rows; nullopt: replicated, the whole shape).
  static Status CheckElements(const std::string& name, size_t elements, size_t element_bytes, DType dtype,
                              const std::vector<uint64_t>& shape, std::optional<uint64_t> rows);
};

}  // namespace baton
