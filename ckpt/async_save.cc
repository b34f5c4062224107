// The Checkpointer's asynchronous save (ckpt/README.md, "Asynchronous
// saves"): SaveAsync stages and hands the write to the background writer;
// the next collective call completes it here (agreement and commit on the
// caller's thread: the writer makes no MPI call); Wait and WaitOrAbandon
// complete it on demand; Rollback restores level 1, the staged snapshot.
//
// SaveAsync, in order:
//   1. complete the save in flight (at most one);
//   2. stage: copy every registered array and the blobs into the staging
//      copy, hashing the rows this rank writes (and, with verify_replicas,
//      each replicated array whole) in the same pass;
//   3. agree on the call (registrations, arguments, replica hashes), the
//      rank state's rows (an exscan), the chunk records gathered to rank 0,
//      which checks the tiling and makes the version directory: as Save's
//      steps 1 and 2 (save.cc);
//   4. start the writer: this rank's shard, shard-<rank>.h5, a group of one
//      (ckpt/hdf5/rank_shard_writer.h); return.
// Completion (CompletePending): join the writer, agree on its Status; each
// rank writes its shard's index on the caller's thread (its chunk records,
// WriteIndexOfShard, commit.cc), agreed; rank 0 gathers each shard's size,
// metadata checksum, data offsets and index size and xxh3 and commits the
// format-3 manifest (BuildManifest, CommitManifest: commit.cc), agreed,
// retention.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "baton/log.h"
#include "baton/version.h"
#include "ckpt/agreement.h"
#include "ckpt/checkpointer_impl.h"
#include "ckpt/checksum.h"
#include "ckpt/chunk_digests.h"
#include "ckpt/hdf5/rank_shard_writer.h"
#include "mpi_runtime/mpi_check.h"
#include "mpi_runtime/silence_watch.h"

namespace baton::ckpt {

Status CheckpointerImpl::SaveAsync(int64_t step) {
  const double t0 = Now();
  Status s = SaveAsyncUnrecorded(step);
  RecordSave(step, Now() - t0, /*async=*/true, s);
  return s;
}

Status CheckpointerImpl::SaveAsyncUnrecorded(int64_t step) {
  mpi::SilenceWatch::Scope watch(silence_.get(), "Checkpointer::SaveAsync");
  if (mpi::Failed()) return FailedBeforeCommit("Checkpointer::SaveAsync", __FILE__, __LINE__);
  const std::string call = "SaveAsync(" + std::to_string(step) + ")";
  // Where the call's time goes: completing the save before it (the wait
  // for its writer, the agreements, its index, manifest and retention),
  // then this save's staging copy, agreement and version directory; and,
  // apart (not in the call's time: the writer's own thread), how the
  // completed save's writer spent its time, the disk's write-back in
  // writer_sync.
  std::vector<CheckpointStats::Phase> phases;
  PhaseClock clock;
  clock.Start(&phases, {"check", "wait_write", "commit_agree", "index", "manifest", "retention", "stage", "agree",
                        "create", "start"});
  struct Unset {
    PhaseClock** clock;
    ~Unset() { *clock = nullptr; }
  } unset{&async_clock_};
  async_clock_ = &clock;
  BATON_RETURN_IF_ERROR(CheckWritable(call));
  AsyncLap("check");
  for (double& w : last_writer_) w = 0;  // set by CompletePending's join
  Status s = CompletePending();
  if (s.ok()) s = StartSave(step, call, /*in_place=*/false);
  // Removals the commit planned and no writer took (a save that failed
  // before its writer started): here.
  if (!removals_.empty()) RemoveVersions(env_, &removals_);
  BATON_RETURN_IF_ERROR(s);
  stats_.phases = phases;
  stats_.phases.push_back({"writer_write", last_writer_[0]});
  stats_.phases.push_back({"writer_sync", last_writer_[1]});
  stats_.phases.push_back({"writer_meta_hash", last_writer_[2]});
  stats_.phases.push_back({"writer_index", last_writer_[3]});
  stats_.phases.push_back({"writer_retention", last_writer_[4]});
  return Status::OK();
}

Status CheckpointerImpl::StartSave(int64_t step, const std::string& call, bool in_place) {
  const double t0 = Now();
  // 2. Stage (the old snapshot is overwritten: dropped until this succeeds).
  memory_.Drop();
  Status args = CheckSaveStep(call, step);
  staging_.Stage(step, arrays_, size_, rank_, options_.verify_replicas, blob_, rank_state_, in_place);
  const StagedVersion& v = staging_.version();
  AsyncLap("stage");

  // 3. Agreement, as Save's first step: the replicas' hashes came from the
  // copy's pass.
  std::vector<uint64_t> replica_xxh3;
  for (const StagedArray& a : v.arrays) {
    if (a.meta.replicated && options_.verify_replicas) replica_xxh3.push_back(a.whole_xxh3);
  }
  CallExtra extra;
  extra.value = Xxh3(replica_xxh3.data(), replica_xxh3.size() * sizeof(uint64_t));
  extra.flags = rank_state_set_ ? kFlagRankState : 0;
  BATON_RETURN_IF_ERROR(AgreeOnCall(call, args, &extra));
  if (extra.value_differs) return DescribeDivergedReplicas(replica_xxh3).Annotate(call);

  auto p = std::make_unique<PendingSave>();
  p->step = step;
  p->started = t0;
  p->in_place = in_place;
  p->blob = v.blob;
  // The version's arrays in name order (v.arrays is: staged from arrays_,
  // a map), the rank state among them where its name sorts when any rank
  // set one (as Save does: a sharded u8 array, rows in rank order). Built
  // straight into the pending save's vectors: four maps keyed by name, then
  // copied out, cost 3 us an array (15 ms of a 5,000-array call, issue 48).
  const size_t n = v.arrays.size() + ((extra.any_flags & kFlagRankState) ? 1 : 0);
  std::vector<ChunkRecord> mine;
  std::vector<std::vector<uint64_t>> mine_xxh3;
  p->shard.reserve(n);
  p->arrays.reserve(n);
  mine.reserve(n);
  mine_xxh3.reserve(n);
  auto add = [&](const ArrayMeta& meta, uint64_t first, uint64_t rows, const char* data,
                 std::vector<uint64_t> xxh3) {
    h5::ShardArray s;
    s.name = meta.name;
    s.dtype = meta.dtype;
    s.global_shape = meta.shape;
    s.replicated = meta.replicated;
    s.row_bytes = meta.row_bytes();
    s.first_row = first;
    s.rows = rows;
    s.data = data;
    p->shard.push_back(std::move(s));
    p->arrays.push_back(meta);
    mine.push_back(ChunkRecord{first, rows});
    mine_xxh3.push_back(std::move(xxh3));
  };
  // The rank state's entry (its MPI calls on every rank alike), and where it sorts.
  ArrayMeta state_meta;
  uint64_t state_first = 0, state_bytes = 0;
  size_t state_at = SIZE_MAX;
  if (extra.any_flags & kFlagRankState) {
    uint64_t mine_bytes = v.rank_state.size(), first = 0, total_bytes = 0;
    BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Exscan(&mine_bytes, &first, 1, MPI_UINT64_T, MPI_SUM, comm_)));
    if (rank_ == 0) first = 0;  // MPI_Exscan leaves rank 0's undefined
    BATON_RETURN_IF_ERROR(
        BATON_MPI_CHECK(MPI_Allreduce(&mine_bytes, &total_bytes, 1, MPI_UINT64_T, MPI_SUM, comm_)));
    state_meta.name = kRankStateName;
    state_meta.dtype = DType::kU8;
    state_meta.shape = {total_bytes};
    state_first = first;
    state_bytes = mine_bytes;
    p->total_bytes += total_bytes;
    state_at = static_cast<size_t>(
        std::lower_bound(v.arrays.begin(), v.arrays.end(), state_meta.name,
                         [](const StagedArray& a, const std::string& name) { return a.meta.name < name; }) -
        v.arrays.begin());
  }
  auto add_state = [&] {
    add(state_meta, state_first, state_bytes, v.rank_state.data(), ChunkDigests(v.rank_state.data(), state_bytes, 1));
  };
  for (size_t i = 0; i < v.arrays.size(); ++i) {
    if (i == state_at) add_state();
    const StagedArray& a = v.arrays[i];
    add(a.meta, a.write_first, a.write_rows, a.write_data(), a.write_xxh3);
    p->total_bytes += a.meta.rows() * a.meta.row_bytes();
  }
  if (state_at == v.arrays.size()) add_state();
  std::vector<ChunkRecord> all(rank_ == 0 ? n * static_cast<size_t>(size_) : 0);
  static_assert(sizeof(ChunkRecord) == 2 * sizeof(uint64_t));
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Gather(mine.data(), static_cast<int>(2 * n), MPI_UINT64_T, all.data(),
                                                   static_cast<int>(2 * n), MPI_UINT64_T, 0, comm_)));
  // My shard's index entries, written at the commit (no gather: a group of one).
  p->entries = ShardEntries(mine, mine_xxh3);
  std::string name;
  Status local;
  AsyncLap("agree");
  if (rank_ == 0) {
    // CheckTiling reads the registrations; the rank state takes part as it
    // does in Save (registered for the check's length only).
    if (state_at != SIZE_MAX) {
      Registered r;
      r.meta = state_meta;
      arrays_[kRankStateName] = r;
    }
    local = CheckTiling(all);
    arrays_.erase(kRankStateName);
    if (local.ok()) {
      local = local_.on() ? NameLevel2Version(step, level_saves_ % options_.shared_every == 0, &name)
                          : CreateVersionDir(step, &name);
    }
  }
  AsyncLap("create");
  // Rank 0's outcome and the name in one broadcast (ckpt/agreement.h).
  BATON_RETURN_IF_ERROR(
      BcastOutcome(comm_, local, &name).Annotate("saving step " + std::to_string(step) + " asynchronously"));
  p->vdir = dir_ + "/" + name;
  p->name = name;
  AsyncLap("agree");
  if (local_.on()) {
    p->level2 = true;
    p->shared_due = level_saves_ % options_.shared_every == 0;
    ++level_saves_;
  }

  // 4. The writer: this rank's shard, from the staged rows.
  stats_ = CheckpointStats();
  stats_.step = step;
  stats_.version_path = p->vdir;
  stats_.total_bytes = p->total_bytes;
  for (const h5::ShardArray& s : p->shard) stats_.bytes += s.rows * s.row_bytes;
  pending_ = std::move(p);
  PendingSave* job = pending_.get();
  h5::ShardWriteOptions wo;
  wo.file_mode = options_.file_mode;
  wo.env = env_;
  // The writer writes a layout saved before from its metadata image
  // (rank_shard_writer.cc); the checkpointer outlives the writer (joined
  // before it closes).
  wo.metadata_images = &metadata_images_;
  const std::string path = job->vdir + "/" + ShardFileName(rank_);
  if (job->level2) {
    // Level 2 first (node-local), level 3 from its bytes when due
    // (node_local_level.h).
    const NodeLocalLevel* level = &local_;
    const std::string file = ShardFileName(rank_);
    writer_.Start([job, wo, level, file](const std::atomic<bool>& abandon) {
      return level->WriteShard(job->name, file, job->vdir, job->shared_due, job->shard, wo, &abandon, &job->written,
                               &job->outcome);
    }, options_.async_writer_nice);
  } else {
    // The shard, then its index (a group of one: nothing to gather), both
    // off the caller's thread; the commit then only agrees, gathers and
    // writes the manifest.
    const std::vector<int> groups = OwnShardGroups();
    const int rank = rank_;
    // Rank 0: first the versions the last commit's retention planned.
    auto removals = std::make_shared<std::vector<VersionInfo>>(std::move(removals_));
    removals_.clear();
    fs::Env* env = env_;
    writer_.Start([this, job, wo, path, groups, rank, removals, env](const std::atomic<bool>& abandon) {
      const auto r0 = std::chrono::steady_clock::now();
      RemoveVersions(env, removals.get());
      job->retention_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - r0).count();
      Status s = h5::WriteRankShard(path, job->shard, wo, &abandon, &job->written);
      if (!s.ok() || abandon.load()) return s;
      const auto t0 = std::chrono::steady_clock::now();
      job->index_record = ShardRecord(job->written, job->arrays.size());
      s = WriteIndexOfShard(job->vdir, job->step, job->arrays, groups, 1, rank, job->entries, &job->index_record);
      job->index_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      job->indexed = s.ok();
      return s;
    }, options_.async_writer_nice);
  }
  // In place, the rows are the application's: no snapshot of them.
  if (!v.in_place) memory_.Accept(v);
  AsyncLap("start");
  stats_.seconds = Now() - t0;  // the time SaveAsync blocked
  return Status::OK();
}

Status CheckpointerImpl::CompletePending() {
  if (!pending_) return Status::OK();
  Status written = writer_.Join();
  AsyncLap("wait_write");
  last_writer_[0] = pending_->written.write_seconds;
  last_writer_[1] = pending_->written.sync_seconds;
  last_writer_[2] = pending_->written.meta_hash_seconds;
  last_writer_[3] = pending_->index_seconds;
  last_writer_[4] = pending_->retention_seconds;
  return CommitPending(written);
}

Status CheckpointerImpl::AbandonPending(const Status& failure) {
  const std::string vdir = pending_->vdir;
  const std::string what = pending_->What();
  // Every rank is past its writer and its file work (the callers agreed
  // first): what the save left on node-local storage goes too, so that a
  // full disk recovers within the job.
  if (pending_->level2 && node_leader_) local_.RemoveVersionDir(pending_->name);
  pending_.reset();
  if (rank_ == 0) {
    // NotFound: a save to level 2 alone made none (NameLevel2Version).
    Status rm = env_->RemoveTree(vdir);
    if (!rm.ok() && rm.code() != Code::kNotFound) {
      BATON_LOG(kCkpt, warning) << "could not remove the abandoned version " << vdir << ": " << rm;
    }
  }
  return failure.Annotate(what + " (" + vdir + ", abandoned)");
}

Status CheckpointerImpl::CommitPending(const Status& written) {
  Status agreed = Agree(comm_, written);
  if (!agreed.ok()) return AbandonPending(agreed);
  AsyncLap("commit_agree");
  env_->Mark("agreed");
  if (pending_->level2) return CommitPendingLevels();
  const PendingSave& p = *pending_;
  // Every shard is its rank's own (a group of one): the writer wrote its
  // index after the shard (StartSave). Written here only when the writer
  // stopped between the two (it was told to abandon; never committed today).
  std::vector<uint64_t> record = p.indexed ? p.index_record : PendingShardRecord();
  Status local = p.indexed ? Status::OK() : IndexPendingShard(p.vdir, &record);
  AsyncLap("index");
  // The index's outcome rides in the records' gather (no agreement of its
  // own); the commit's agreement below names a rank whose index failed.
  Manifest m;
  local = GatherAndBuild(record, &m, local);
  if (local.ok() && rank_ == 0) local = CommitManifest(p.vdir, m);
  AsyncLap("manifest");
  agreed = Agree(comm_, local);
  if (!agreed.ok()) return AbandonPending(agreed);
  AsyncLap("commit_agree");
  // From SaveAsync the removals go to the writer it starts next.
  if (rank_ == 0) ApplyRetention(/*defer=*/async_clock_ != nullptr);
  AsyncLap("retention");
  stats_.level = 3;
  stats_.shared = true;
  pending_.reset();
  return Status::OK();
}

// A version written one shard per rank (SaveAsync, and every save with
// level 2): the one gather and build of its manifest, whichever level
// commits it (here, level2_save.cc, level3_commit.cc).
std::vector<int> CheckpointerImpl::OwnShardGroups() const {
  std::vector<int> group_of(static_cast<size_t>(size_));
  for (int k = 0; k < size_; ++k) group_of[static_cast<size_t>(k)] = k;
  return group_of;
}

std::vector<uint64_t> CheckpointerImpl::ShardRecord(const h5::ShardWriteResult& written, size_t arrays) {
  std::vector<uint64_t> record{written.file_bytes, written.meta_xxh3};
  std::vector<uint64_t> offsets = written.offsets;
  offsets.resize(arrays, UINT64_MAX);
  record.insert(record.end(), offsets.begin(), offsets.end());
  return record;
}

std::vector<uint64_t> CheckpointerImpl::PendingShardRecord() const {
  return ShardRecord(pending_->written, pending_->arrays.size());
}

Status CheckpointerImpl::IndexPendingShard(const std::string& vdir, std::vector<uint64_t>* record) {
  const PendingSave& p = *pending_;
  return WriteIndexOfShard(vdir, p.step, p.arrays, OwnShardGroups(), 1, rank_, p.entries, record);
}

Status CheckpointerImpl::GatherAndBuild(const std::vector<uint64_t>& record, Manifest* m, const Status& mine) {
  const PendingSave& p = *pending_;
  const size_t n = p.arrays.size();
  // [record (n + 4), failed]
  const int per_rank = static_cast<int>(n + 5);
  std::vector<uint64_t> sent = record;
  sent.resize(n + 4);
  sent.push_back(mine.ok() ? 0 : 1);
  std::vector<uint64_t> all(rank_ == 0 ? static_cast<size_t>(size_) * (n + 5) : 0);
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(
      MPI_Gather(sent.data(), per_rank, MPI_UINT64_T, all.data(), per_rank, MPI_UINT64_T, 0, comm_)));
  if (rank_ != 0 || !mine.ok()) return mine;
  std::vector<uint64_t> records;
  records.reserve(static_cast<size_t>(size_) * (n + 4));
  for (int k = 0; k < size_; ++k) {
    const auto at = all.begin() + static_cast<ptrdiff_t>(k) * (n + 5);
    if (at[static_cast<ptrdiff_t>(n + 4)] != 0) {
      return Status::Aborted(log::kCkpt, "rank " + std::to_string(k) + " failed before the manifest");
    }
    records.insert(records.end(), at, at + static_cast<ptrdiff_t>(n + 4));
  }
  return BuildManifest(p.step, p.arrays, OwnShardGroups(), 1, p.blob, records, m);
}

// After an MPI failure (mpi_check.h) the save in flight can never be agreed
// on nor committed, and no new save or restore can agree on anything: the
// failure at once, not after this rank's write has ended (Wait, and Save,
// SaveAsync and Restore, which complete it first: a whole shard) or
// timeout_seconds (WaitOrAbandon: an agreed stop's grace period spent on a
// commit that cannot come), and before a save copies or hashes the arrays
// or drops the level-1 snapshot. The writer is left to the destructor,
// which abandons it at its next slab.
Status CheckpointerImpl::FailedBeforeCommit(const char* call, const char* file, int line) const {
  Status failed = mpi::FailedStatus(call, file, line);
  return pending_ ? failed.Annotate(pending_->What() + " is not committed") : failed;
}

Status CheckpointerImpl::Wait(double timeout_seconds) {
  mpi::SilenceWatch::Scope watch(silence_.get(), "Checkpointer::Wait");
  if (!pending_) return Status::OK();
  if (mpi::Failed()) return FailedBeforeCommit("Checkpointer::Wait", __FILE__, __LINE__);
  const bool done = writer_.WaitUntil(Now() + timeout_seconds);
  int mine = done ? 1 : 0, all = 0;
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm_)));
  if (all == 0) {
    return Status::Timeout(log::kCkpt, pending_->What() + " was not written by every rank within " +
                                           std::to_string(timeout_seconds) + " s (this rank: " +
                                           (done ? "written" : "still writing") + "); still in flight");
  }
  return CompletePending();
}

Status CheckpointerImpl::WaitOrAbandon(double timeout_seconds) {
  mpi::SilenceWatch::Scope watch(silence_.get(), "Checkpointer::WaitOrAbandon");
  if (!pending_) return Status::OK();
  if (mpi::Failed()) return FailedBeforeCommit("Checkpointer::WaitOrAbandon", __FILE__, __LINE__);
  const double deadline = Now() + timeout_seconds;
  const bool done = writer_.WaitUntil(deadline);
  int mine = done ? 1 : 0, all = 0;
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm_)));
  if (all == 1) {
    // Written everywhere: the commit keeps the same bound (the partner
    // exchange and the copies to level 3 stop at the deadline; the
    // version is then saved at whichever level completed, or abandoned).
    commit_deadline_ = deadline;
    Status s = CompletePending();
    commit_deadline_ = std::numeric_limits<double>::infinity();
    return s;
  }
  // Not written everywhere in time: every writer stops at its next slab and
  // is joined before rank 0 removes the directory (agreed first, so that no
  // rank's writer still creates files in it).
  writer_.Abandon();
  env_->Mark("abandon " + pending_->vdir);  // a test's held writer lets go here
  (void)writer_.Join();  // its own failure (Aborted, or an earlier one) is moot now
  const std::string why = pending_->What() + " was not written by every rank within " + std::to_string(timeout_seconds) + " s";
  Status agreed = Agree(comm_, Status::OK());
  return AbandonPending(agreed.ok() ? Status::Aborted(log::kCkpt, why) : agreed);
}

AsyncSaveStatus CheckpointerImpl::async_status() const {
  AsyncSaveStatus out;
  if (!pending_) return out;
  out.step = pending_->step;
  switch (writer_.state(&out.failure)) {
    case BackgroundWriter::State::kRunning:
      out.state = AsyncSaveStatus::State::kWriting;
      break;
    case BackgroundWriter::State::kFailed:
      out.state = AsyncSaveStatus::State::kFailed;
      break;
    default:
      out.state = AsyncSaveStatus::State::kWritten;
      break;
  }
  return out;
}

// Level 1: the snapshot back into the registered arrays, every rank
// agreeing that it holds one of the same step matching its registrations.
Status CheckpointerImpl::Rollback(int64_t* step) {
  mpi::SilenceWatch::Scope watch(silence_.get(), "Checkpointer::Rollback");
  Status local = memory_.CheckMatches(arrays_);
  const std::optional<int64_t> held = memory_.held_step();
  CallExtra extra;
  extra.value = held ? static_cast<uint64_t>(*held) : UINT64_MAX;
  BATON_RETURN_IF_ERROR(AgreeOnCall("Rollback", local, &extra));
  if (extra.value_differs) {
    return Status::InvalidArgument(log::kCkpt, "Rollback: the ranks hold snapshots of different steps (this "
                                               "rank: " + std::to_string(*held) + "); nothing restored");
  }
  memory_.RestoreInto(arrays_, &blob_, &rank_state_);
  *step = *held;
  return Status::OK();
}

}  // namespace baton::ckpt
