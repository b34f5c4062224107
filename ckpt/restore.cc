// The Checkpointer's restore path (ckpt/checkpointer_impl.h).
//
// Restore: rank 0 picks the newest candidate and broadcasts its top-level
// manifest (ckpt/candidates.cc); every rank checks its registrations
// against it, loads the shard indexes that hold its rows and keeps only its
// chunks (ckpt/manifest_index.h), reads and verifies the chunks holding its
// rows (ckpt/hdf5/shard_reader.h),
// replicated arrays are read in a part per node (every rank of a node the
// whole part) and the parts exchanged between the nodes; agreed, preferring
// a corruption to other failures. A corruption (the bytes shown bad: a
// checksum, a size, a format) is recorded beside the version (quarantine
// after max_restore_failures), reported in RestoreResult::fallbacks, and
// the next older version is tried. Any other failure (EIO, ESTALE, EACCES:
// transient) fails the restore with its error, nothing recorded: going
// back to an older version for it would lose training that a requeue,
// meeting the error no more, keeps. An attempt mark written before the
// version is read counts as a failure if the process dies before the
// outcome, so a version that crashes every restore is quarantined instead
// of looping; a stop signal removes it (a preemption is not a failure).
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "base/printable.h"
#include "baton/log.h"
#include "ckpt/agreement.h"
#include "ckpt/checkpointer_impl.h"
#include "ckpt/checksum.h"
#include "ckpt/chunk_reader.h"
#include "ckpt/hdf5/shard_reader.h"
#include "ckpt/layout.h"
#include "ckpt/manifest_index.h"
#include "ckpt/phase_clock.h"
#include "ckpt/replicated_gather.h"
#include "mpi_runtime/mpi_check.h"

namespace baton::ckpt {
namespace {

// The versions a restore that found none tried, each with its reason, for its NotFound: the cause on the
// screen, not only in the log.
std::string FailureReasons(const std::vector<SkippedVersion>& fallbacks) {
  std::string out;
  for (const SkippedVersion& f : fallbacks) out += (out.empty() ? " (" : "; ") + f.path + ": " + f.reason.message();
  return out.empty() ? out : out + ")";
}

}  // namespace

Status TransientRestoreError(const Status& s, const std::string& version_path) {
  return MakeStatus(s.code(), "restoring " + version_path + ": " + s.message() +
                                  " (not a damaged version: the restore fails for a requeue to retry instead of "
                                  "going back to an older version)");
}

Status CheckpointerImpl::NoVersionRestored(const RestoreOptions& options, const std::vector<SkippedVersion>& failed,
                                           int quarantined) const {
  return Status::NotFound(log::kCkpt, "no version " +
                                          (options.step ? "of step " + std::to_string(*options.step) + " " : "") +
                                          "in " + dir_ + " could be restored: " + std::to_string(failed.size()) +
                                          " failed now, " + std::to_string(quarantined) + " quarantined before" +
                                          FailureReasons(failed));
}

Status CheckpointerImpl::CompareWithManifest(const Manifest& m, const std::vector<std::string>& only,
                                             std::vector<int>* index_of) const {
  std::vector<std::string> diffs;
  std::map<std::string, int> in_manifest;
  for (size_t i = 0; i < m.arrays.size(); ++i) {
    if (!IsReservedName(m.arrays[i].name)) in_manifest[m.arrays[i].name] = static_cast<int>(i);
  }
  index_of->clear();
  // A set, not a scan of `only` per registered array (25 million compares at 5,000 arrays).
  const std::unordered_set<std::string_view> restored(only.begin(), only.end());
  for (const auto& [name, r] : arrays_) {
    if (!only.empty() && restored.count(name) == 0) {
      index_of->push_back(-1);  // not restored: left as it is
      continue;
    }
    auto it = in_manifest.find(name);
    // Names come from the manifest (untrusted: escaped, base/printable.h).
    const std::string shown = Printable(name);
    if (it == in_manifest.end()) {
      diffs.push_back(shown + ": registered, not in the checkpoint");
      index_of->push_back(-1);
      continue;
    }
    const ArrayMeta& a = m.arrays[static_cast<size_t>(it->second)];
    if (a.dtype != r.meta.dtype) {
      diffs.push_back(shown + ": dtype " + std::string(DTypeName(r.meta.dtype)) + " registered, " +
                      std::string(DTypeName(a.dtype)) + " in the checkpoint");
    }
    if (a.shape != r.meta.shape) {
      diffs.push_back(shown + ": shape " + ShapeText(r.meta.shape) + " registered, " + ShapeText(a.shape) +
                      " in the checkpoint");
    }
    // Replicated or sharded is how the rows were spread over the ranks at the save, not what they hold: a
    // replicated registration reads every row of an array the save wrote sharded (Python's one format: a
    // tensor a DCP plan gave one rank to write, restored into every rank's copy), a sharded one its own rows
    // of an array saved replicated. The rows are found through the manifest either way (PlanRead).
    index_of->push_back(it->second);
    in_manifest.erase(it);
  }
  // A partial restore ignores the version's other arrays.
  if (!only.empty()) in_manifest.clear();
  for (const auto& [name, i] : in_manifest) diffs.push_back(Printable(name) + ": in the checkpoint, not registered");
  if (diffs.empty()) return Status::OK();
  std::string msg = "step " + std::to_string(m.step) + " does not match the registered arrays: ";
  for (size_t i = 0; i < diffs.size(); ++i) msg += (i ? "; " : "") + diffs[i];
  return Status::InvalidArgument(log::kCkpt, msg);
}

// Per-rank state goes back to the same rank at the same world size only.
Status CheckpointerImpl::CheckRankState(const Manifest& m, const RestoreOptions& o, bool* restore_it) const {
  *restore_it = false;
  bool saved = false;
  for (const ArrayMeta& a : m.arrays) saved = saved || a.name == kRankStateName;
  if (!saved) return Status::OK();
  if (m.world_size == size_) {
    *restore_it = true;
    return Status::OK();
  }
  if (o.drop_rank_state_on_resize) return Status::OK();
  return Status::InvalidArgument(
      log::kCkpt, "step " + std::to_string(m.step) + " holds per-rank state of " + std::to_string(m.world_size) +
                      " ranks and this job has " + std::to_string(size_) +
                      ": per-rank state goes back only to the same ranks; restore at " +
                      std::to_string(m.world_size) + " ranks, or set RestoreOptions::drop_rank_state_on_resize "
                      "to restore without it");
}

CheckpointerImpl::ReplicatedSplit CheckpointerImpl::SplitReplicated(int level) const {
  if (level == 2) return ReplicatedSplit{size_, rank_, size_ > 1 ? comm_ : MPI_COMM_NULL};
  return ReplicatedSplit{replicated_parts_, replicated_part_, replicated_comm_};
}

Status CheckpointerImpl::ReadMyRows(int level, const std::string& vdir, Manifest& m, const std::vector<int>& index_of,
                                    bool rank_state, PhaseClock* clock, uint64_t* bytes,
                                    std::string* state, ReadPass pass, ShardReaders* open) {
  ShardReaders own;
  ShardReaders& readers = open != nullptr ? *open : own;
  // Reads and verifies whole chunks (ckpt/chunk_reader.h); the second pass copies a chunk out once verified.
  ChunkReader chunks(pass == ReadPass::kCopyVerified);
  // What to read: (array index in the manifest, the registration, the rows
  // to read, the buffer and the global row of its first row).
  struct Job {
    int index;
    std::string name;
    uint64_t first, rows, buffer_first;
    char* base;
    bool own = false;  // the rank state: a buffer of the restore's own, kept in the first pass too
    uint64_t replicated_rows = 0;  // a replicated array's rows (0: sharded)
  };
  std::vector<Job> jobs;
  const ReplicatedSplit split = SplitReplicated(level);
  size_t i = 0;
  for (const auto& [name, r] : arrays_) {
    const int index = index_of[i++];
    if (index < 0) continue;
    uint64_t first = r.first_row, rows = r.rows;
    if (r.meta.replicated) {
      first = 0;
      rows = r.meta.rows();
      // My part (my node's, ckpt/layout.h); the others' come by GatherReplicated.
      ReplicatedPart(name, r.meta.rows(), r.meta.row_bytes(), split.parts, split.part, &first, &rows);
    }
    jobs.push_back(Job{index, name, first, rows, r.meta.replicated ? 0 : r.first_row, static_cast<char*>(r.data),
                       false, r.meta.replicated ? r.meta.rows() : 0});
  }
  // Format 3: only the shard indexes that hold my rows (my own group's at
  // the same world size), holding only my chunks.
  if (pass != ReadPass::kCopyVerified) {  // the first pass loaded the indexes into m and read the rank state
    std::vector<RowRange> wants;
    for (const Job& job : jobs) wants.push_back(RowRange{static_cast<uint32_t>(job.index), job.first, job.rows});
    if (pass == ReadPass::kVerifyOnly) {
      // The first pass of verify_before_write verifies my part of the world's rows of a replicated array
      // (every chunk by some rank, ReadPass); its chunks are loaded beside those the second pass reads.
      for (Job& job : jobs) {
        if (job.replicated_rows == 0) continue;
        ReplicatedPart(job.name, job.replicated_rows, m.arrays[static_cast<size_t>(job.index)].row_bytes(), size_,
                       rank_, &job.first, &job.rows);
        wants.push_back(RowRange{static_cast<uint32_t>(job.index), job.first, job.rows});
      }
    }
    IndexLoadStats loaded;
    BATON_RETURN_IF_ERROR(LoadShardIndexesFor(env_, vdir, wants, FirstShardFor(m, wants, rank_, size_),
                                              rank_state ? rank_ : -1, &m, &loaded));
    clock->Lap("index");
    state->clear();
  }
  if (rank_state && pass != ReadPass::kCopyVerified) {
    // My own chunks of the per-rank state (consecutive rows, one chunk per
    // kChunkBytes), wherever the manifest has them.
    for (size_t a = 0; a < m.arrays.size(); ++a) {
      if (m.arrays[a].name != kRankStateName) continue;
      uint64_t first = UINT64_MAX, rows = 0;
      for (const ShardMeta& sh : m.shards) {
        for (const DatasetMeta& d : sh.datasets) {
          if (d.array != a) continue;
          for (const Chunk& c : d.chunks) {
            if (c.rank != rank_) continue;
            first = std::min(first, c.first_row);
            rows += c.rows;
          }
        }
      }
      if (rows == 0) continue;
      if (rows > kMaxUserBlobBytes) {
        return Status::Corruption(log::kCkpt, vdir + ": rank " + std::to_string(rank_) + "'s state of " +
                                                  std::to_string(rows) + " bytes exceeds the limit");
      }
      state->resize(rows);
      jobs.push_back(Job{static_cast<int>(a), kRankStateName, first, rows, first, state->data(), /*own=*/true});
    }
  }
  const DatasetsOfArrays datasets = IndexDatasets(m);  // after LoadShardIndexesFor, which changes m's datasets
  for (const Job& job : jobs) {
    const ArrayMeta& a = m.arrays[static_cast<size_t>(job.index)];
    const uint64_t rb = a.row_bytes();
    // The first pass keeps nothing of a registered array (the rank state: a buffer of the restore's own).
    const bool keep = pass != ReadPass::kVerifyOnly || job.own;
    std::vector<ReadPiece> pieces;
    BATON_RETURN_IF_ERROR(PlanRead(m, datasets, static_cast<uint32_t>(job.index), job.first, job.rows, &pieces));
    for (const ReadPiece& p : pieces) {
      const ShardMeta& shard = m.shards[p.shard];
      auto& reader = readers[p.shard];
      if (!reader) BATON_RETURN_IF_ERROR(h5::ShardReader::Open(env_, vdir, m, p.shard, &reader, read_mode_));
      // Verified before the next chunk is read: no row is used unchecked.
      Status read = chunks.Read(reader.get(), reader->path(), a, shard.datasets[p.dataset],
                                shard.datasets[p.dataset].chunks[p.chunk], p.first_row, keep ? p.rows : 0,
                                keep ? job.base + (p.first_row - job.buffer_first) * rb : nullptr, clock);
      if (!read.ok()) {
        stats_.bytes_read += chunks.bytes_read();
        if (pass == ReadPass::kCopyVerified) {
          return read.Annotate("the second read of a restore with verify_before_write, after the first read "
                               "of every rank verified (the file changed during the restore)");
        }
        return read;
      }
      if (pass != ReadPass::kVerifyOnly) *bytes += p.rows * rb;
    }
  }
  stats_.bytes_read += chunks.bytes_read();
  if (pass == ReadPass::kCopyVerified) return Status::OK();  // the blob was checked by the first pass
  if (Xxh3(m.user_blob.data(), m.user_blob.size()) != m.user_blob_xxh3) {
    return Status::Corruption(log::kCkpt, vdir + "/" + kManifestName + ": the user blob fails its checksum");
  }
  return Status::OK();
}

// Every rank read its part of each replicated array (ReadMyRows): the parts
// to every rank (ckpt/replicated_gather.h), whatever the array's size. A
// part per node: between the nodes only; at one node every rank read the
// whole array and nothing travels.
Status CheckpointerImpl::GatherReplicated(int level, const Manifest& m, const std::vector<int>& index_of) {
  const ReplicatedSplit split = SplitReplicated(level);
  size_t i = 0;
  for (const auto& [name, r] : arrays_) {
    const int index = index_of[i++];
    if (index < 0 || !r.meta.replicated || split.parts == 1) continue;
    const ArrayMeta& a = m.arrays[static_cast<size_t>(index)];
    BATON_RETURN_IF_ERROR(GatherReplicatedRows(split.comm, name, static_cast<char*>(r.data), a.rows(), a.row_bytes())
                              .Annotate("gathering replicated array " + name));
  }
  return Status::OK();
}

Status CheckpointerImpl::ReadAndAgree(int level, const std::string& vdir, Manifest& m, const std::vector<int>& index_of,
                                      bool with_state, PhaseClock* clock, uint64_t* bytes,
                                      std::string* state, Status* mine, uint64_t* total_bytes) {
  env_->Mark("restore-read " + vdir);  // every rank, before it reads a shard (a test crashes here)
  const ReadPass first = verify_before_write_ ? ReadPass::kVerifyOnly : ReadPass::kDirect;
  ShardReaders open;  // the files the first pass opened and checked, read again by the second
  Status read = ReadMyRows(level, vdir, m, index_of, with_state, clock, bytes, state, first, &open);
  if (mine != nullptr) *mine = read;
  clock->Lap("read");  // the user blob's check and what follows the last lap
  Status agreed;
  if (total_bytes != nullptr && !verify_before_write_) {
    *total_bytes = *bytes;
    agreed = AgreeAndSum(comm_, read, total_bytes, 1, Code::kCorruption);
  } else {
    agreed = Agree(comm_, read, nullptr, Code::kCorruption);
  }
  clock->Lap("agree");
  if (!agreed.ok() || !verify_before_write_) return agreed;
  return CopyVerifiedAndAgree(level, vdir, m, index_of, clock, bytes, total_bytes, mine, &open);
}

Status CheckpointerImpl::CopyVerifiedAndAgree(int level, const std::string& vdir, Manifest& m,
                                              const std::vector<int>& index_of, PhaseClock* clock, uint64_t* bytes,
                                              uint64_t* total_bytes, Status* mine, ShardReaders* open) {
  // Every rank verified all it reads: only now is a registered array written.
  env_->Mark("restore-copy " + vdir);  // every rank, before its second read (a test changes a file here)
  std::string unused;
  Status read = ReadMyRows(level, vdir, m, index_of, /*rank_state=*/false, clock, bytes, &unused,
                           ReadPass::kCopyVerified, open);
  if (mine != nullptr) *mine = read;
  clock->Lap("read");
  Status agreed;
  if (total_bytes != nullptr) {
    *total_bytes = *bytes;
    agreed = AgreeAndSum(comm_, read, total_bytes, 1, Code::kCorruption);
  } else {
    agreed = Agree(comm_, read, nullptr, Code::kCorruption);
  }
  clock->Lap("agree");
  return agreed;
}

Status CheckpointerImpl::FinishRestore(int level, const std::string& vdir, Manifest& m,
                                       const std::vector<int>& index_of, bool with_state,
                                       std::string state, uint64_t bytes, uint64_t fetched, PhaseClock* clock,
                                       RestoreResult* result, const uint64_t* total_bytes) {
  BATON_RETURN_IF_ERROR(GatherReplicated(level, m, index_of));
  clock->Lap("gather");
  blob_ = std::move(m.user_blob);
  rank_state_ = std::move(state);
  result->step = m.step;
  result->version_path = vdir;
  result->level = level;
  result->rank_state_dropped = !with_state && m.world_size != size_ &&
                               std::any_of(m.arrays.begin(), m.arrays.end(),
                                           [](const ArrayMeta& a) { return a.name == kRankStateName; });
  stats_.step = m.step;
  stats_.version_path = vdir;
  stats_.level = level;
  stats_.bytes = bytes;
  (level == 2 ? stats_.bytes_level2 : stats_.bytes_level3) = bytes;
  stats_.bytes_partner = fetched;
  uint64_t in[2] = {bytes, fetched}, out[2] = {0, 0};
  if (total_bytes != nullptr) {
    out[0] = *total_bytes;  // summed in the read's agreement (level 3: nothing fetched)
  } else {
    BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Allreduce(in, out, 2, MPI_UINT64_T, MPI_SUM, comm_)));
  }
  stats_.total_bytes = out[0];
  (level == 2 ? stats_.total_bytes_level2 : stats_.total_bytes_level3) = out[0];
  stats_.total_bytes_partner = out[1];
  clock->Lap("agree");
  if (rank_ == 0 && local_.on()) {
    BATON_LOG(kCkpt, info) << "restored step " << m.step << " from level " << level << " (" << vdir << "): "
                           << (level == 2 ? out[0] : 0) << " bytes read from node-local copies, " << out[1]
                           << " bytes of shard files fetched over MPI from partner copies, "
                           << (level == 3 ? out[0] : 0) << " from the shared directory";
  }
  return Status::OK();
}

Status CheckpointerImpl::RestoreNow(const RestoreOptions& options, RestoreResult* result) {
  const double t0 = Now();
  stats_ = CheckpointStats();
  *result = RestoreResult();
  PhaseClock clock;
  clock.Start(&stats_.phases, {"call", "list", "mark", "manifest", "bcast", "index", "open", "read", "verify", "copy", "agree", "gather", "unmark"});
  verify_before_write_ = options.verify_before_write;
  // Every rank must compare the same registrations with the manifest, or
  // some would stop at the comparison while others read.
  std::string call;
  Status args = CheckRestoreOptions("Restore", options, &call);
  if (args.ok()) args = h5::ReadModeFromEnv(&read_mode_);  // a bad value fails the call on every rank
  BATON_RETURN_IF_ERROR(AgreeOnCall(call, args));
  clock.Lap("call");

  std::vector<VersionInfo> candidates;  // rank 0: complete versions, oldest first
  int quarantined = 0;
  std::vector<std::string> quarantined_names;  // rank 0
  Status local;
  std::string step_missing;  // no version of options.step in level 3 (asked of level 2 first)
  if (rank_ == 0) local = ListCandidates(options, &candidates, &quarantined, &quarantined_names, &step_missing);
  clock.Lap("list");
  // Level 3 only: the listing's outcome goes out with the first candidate
  // (NextCandidate), three collective rounds fewer; level 2's choice needs
  // it first.
  const bool level2 = options.from_level != 3 && local_.on();
  std::optional<Listing> listing;
  if (level2) {
    BATON_RETURN_IF_ERROR(Agree(comm_, local).Annotate("restoring from " + dir_));
    BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Bcast(&quarantined, 1, MPI_INT, 0, comm_)));
    BATON_RETURN_IF_ERROR(BcastString(comm_, &step_missing));
    result->quarantined = quarantined;
    clock.Lap("agree");
  } else {
    int world_rank = 0;
    BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank)));
    listing = Listing{local, quarantined, world_rank};
  }

  // Level 2 first, when it holds a version at least as new as level 3's
  // newest (ckpt/level_choice.cc); else, or when it fails, level 3.
  bool restored = false;
  if (level2) BATON_RETURN_IF_ERROR(TryLevel2(options, candidates, quarantined_names, result, &clock, &restored));
  if (restored) {
    stats_.seconds = Now() - t0;
    return Status::OK();
  }
  if (!step_missing.empty()) return Status::NotFound(log::kCkpt, step_missing).Annotate("restoring from " + dir_);

  auto skip = [&](const std::string& name, int64_t step, const Status& why, bool counted) {
    const std::string vdir = dir_ + "/" + name;
    if (rank_ == 0) {
      BATON_LOG(kCkpt, warning) << "cannot restore " << vdir << ": " << why.message() << " ("
                                << (counted ? "corrupt: recorded toward its quarantine"
                                            : "not counted toward its quarantine")
                                << "); trying the next older version";
    }
    result->fallbacks.push_back(SkippedVersion{vdir, step, why, counted});
    stats_.fallbacks = static_cast<int>(result->fallbacks.size());
  };

  // An attempt still open when Restore returns (a mismatch with the
  // registrations, an MPI error) did not find the version damaged.
  struct EndOpenAttempt {
    CheckpointerImpl* self;
    ~EndOpenAttempt() {
      if (self->attempt_) self->EndAttempt(nullptr);
    }
  } end_open_attempt{this};

  for (;;) {
    Candidate c;
    BATON_RETURN_IF_ERROR(NextCandidate(&candidates, Record::kAttempt, &c, &clock, listing ? &*listing : nullptr));
    if (listing) {
      // As Agree would have said it (its "rank R: "), on every rank.
      if (!listing->status.ok()) {
        return MakeStatus(listing->status.code(), "rank " + std::to_string(listing->world_rank) + ": " +
                                                      listing->status.message())
            .Annotate("restoring from " + dir_);
      }
      quarantined = listing->quarantined;
      result->quarantined = quarantined;
      listing.reset();  // the first candidate only
    }
    if (c.kind == Candidate::kHardError) return c.failure;
    if (c.kind == Candidate::kSkipped) {
      skip(c.name, c.step, c.failure, c.counted);
      continue;
    }
    if (c.kind == Candidate::kNone) {
      stats_.seconds = Now() - t0;
      if (result->fallbacks.empty() && quarantined == 0) return Status::OK();  // a first run
      return NoVersionRestored(options, result->fallbacks, quarantined);
    }
    Manifest m;
    BATON_RETURN_IF_ERROR(manifest_parses_.Parse(c.text, &m));  // rank 0 parsed the same text
    std::vector<int> index_of;
    BATON_RETURN_IF_ERROR(CompareWithManifest(m, options.arrays, &index_of));
    bool with_state = false;
    BATON_RETURN_IF_ERROR(CheckRankState(m, options, &with_state));
    clock.Lap("manifest");

    const std::string vdir = dir_ + "/" + c.name;
    uint64_t bytes = 0;
    std::string state;
    uint64_t total_bytes = 0;
    Status agreed = ReadAndAgree(3, vdir, m, index_of, with_state, &clock, &bytes, &state, nullptr, &total_bytes);
    if (agreed.ok()) {
      BATON_RETURN_IF_ERROR(FinishRestore(3, vdir, m, index_of, with_state, std::move(state), bytes,
                                          /*fetched=*/0, &clock, result, &total_bytes));
      // Rank 0 ends the attempt after the last collective of the restore:
      // no rank waits for its rewrite of restore-failures (an error before
      // this ends it too: end_open_attempt).
      if (rank_ == 0) EndAttempt(nullptr);
      clock.Lap("unmark");
      stats_.seconds = Now() - t0;
      return Status::OK();
    }
    if (agreed.code() != Code::kCorruption) {
      if (rank_ == 0) EndAttempt(nullptr);
      return TransientRestoreError(agreed, vdir);
    }
    // Counted only once recorded (a restore-failures that is a symlink or
    // a directory cannot be written): rank 0 says which, to every rank.
    std::string unrecorded;
    if (rank_ == 0) {
      const std::string reason = agreed.message();
      Status ended;
      EndAttempt(&reason, &ended);
      if (!ended.ok()) unrecorded = NotRecorded(ended);
    }
    BATON_RETURN_IF_ERROR(BcastString(comm_, &unrecorded));
    skip(c.name, c.step, unrecorded.empty() ? agreed : MakeStatus(agreed.code(), agreed.message() + unrecorded),
         /*counted=*/unrecorded.empty());
  }
}

}  // namespace baton::ckpt
