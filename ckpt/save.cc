// The Checkpointer's save path (ckpt/checkpointer_impl.h).
//
// Save, in order (each step agreed by all ranks before the next):
//   1. registrations agree (a hash), every rank sends (first_row, rows)
//      per array to rank 0 (one MPI_Gather of a fixed-size record);
//   2. rank 0 checks that sharded rows tile their arrays, lists the
//      versions, reserves a sequence number never used before (ckpt/run.h)
//      and creates the fresh version directory (a save never writes into
//      an existing directory), broadcasts its name;
//   3. each shard group writes its shard file (ckpt/hdf5/shard_writer.h:
//      datasets, rows, a group agreement before the collective close);
//      each rank's rows are checksummed (xxh3) as they are written,
//      every rank that wrote into it fsyncs it; agreed; Env::Mark("agreed");
//   4. each group's first rank gathers its group's chunk records (first
//      row, rows, the xxh3 of the rows from step 3) and writes the shard's
//      index (shard-NNNNN.json, fsynced; ckpt/commit.cc); rank 0
//      gathers each shard's size, metadata checksum, data offsets and
//      index size and xxh3 with each rank's outcome of its index (no
//      commit unless every index was written), fsyncs the version directory, writes
//      manifest.json durably (ckpt/fs/durable_write.h: a temporary,
//      fsync, rename, directory fsync), fsyncs the checkpoint directory; agreed (the commit);
//   5. rank 0 applies retention (PlanRetention, RemoveTree).
// A failure abandons the version on every rank (rank 0 removes its
// directory, best effort) and every rank returns the failure of the lowest
// failing rank, naming it and the file.
#include <mpi.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "baton/log.h"
#include "baton/version.h"
#include "ckpt/agreement.h"
#include "ckpt/checkpointer_impl.h"
#include "ckpt/checksum.h"
#include "ckpt/hdf5/shard_writer.h"
#include "ckpt/layout.h"
#include "ckpt/phase_clock.h"
#include "ckpt/retention.h"
#include "ckpt/version_removal.h"
#include "mpi_runtime/mpi_check.h"

namespace baton::ckpt {

// Rank 0: the sharded arrays' rows over all ranks tile each array exactly.
Status CheckpointerImpl::CheckTiling(const std::vector<ChunkRecord>& all) const {
  const size_t n = arrays_.size();
  size_t i = 0;
  for (const auto& [name, r] : arrays_) {
    if (!r.meta.replicated) {
      std::vector<std::pair<uint64_t, int>> starts;  // (first_row, rank)
      for (int k = 0; k < size_; ++k) {
        const ChunkRecord& c = all[static_cast<size_t>(k) * n + i];
        if (c.rows > 0) starts.emplace_back(c.first_row, k);
      }
      std::sort(starts.begin(), starts.end());
      uint64_t next = 0;
      for (const auto& [first, k] : starts) {
        const ChunkRecord& c = all[static_cast<size_t>(k) * n + i];
        if (first != next) {
          return Status::InvalidArgument(
              log::kCkpt, "sharded array " + name + ": " +
                              (first > next ? "rows [" + std::to_string(next) + ", " + std::to_string(first) +
                                                  ") are held by no rank"
                                            : "rank " + std::to_string(k) + "'s rows [" + std::to_string(first) +
                                                  ", " + std::to_string(first + c.rows) +
                                                  ") overlap another rank's"));
        }
        next = first + c.rows;
      }
      if (next != r.meta.rows()) {
        return Status::InvalidArgument(log::kCkpt, "sharded array " + name + ": rows [" + std::to_string(next) +
                                                       ", " + std::to_string(r.meta.rows()) +
                                                       ") are held by no rank");
      }
    }
    ++i;
  }
  return Status::OK();
}

Status CheckpointerImpl::CreateVersionDir(int64_t step, std::string* name) {
  // Sequence numbers are reserved kSeqAhead at a time: listing the
  // directory and writing the run file durably (fsync, rename, directory
  // fsync) once per kSeqAhead saves instead of at each, a fixed cost of
  // every small save and of every SaveAsync in a loop (issue 43). The
  // numbers left when the run ends are skipped by the next one (numbers
  // only have to grow). A reserved name that exists (made by hand, a sync
  // tool): the directory is listed and numbers reserved again.
  if (seq_next_ < seq_end_) {
    *name = ckpt::VersionName(seq_next_, step);
    // exist_ok false: never into a directory someone else made.
    Status made = env_->CreateDir(dir_ + "/" + *name, options_.dir_mode, /*exist_ok=*/false);
    if (made.ok()) {
      ++seq_next_;
      return made;
    }
    seq_next_ = seq_end_ = 0;
  }
  std::vector<ckpt::VersionInfo> versions;
  BATON_RETURN_IF_ERROR(ckpt::ListVersions(env_, dir_, options_.max_restore_failures, &versions));
  uint64_t seq = 0;
  BATON_RETURN_IF_ERROR(ReserveSeq(env_, dir_, options_.file_mode, versions, &run_, &seq, kSeqAhead));
  seq_next_ = seq + 1;
  seq_end_ = seq + kSeqAhead;
  *name = ckpt::VersionName(seq, step);
  return env_->CreateDir(dir_ + "/" + *name, options_.dir_mode, /*exist_ok=*/false);
}

Status CheckpointerImpl::NameLevel2Version(int64_t step, bool shared_due, std::string* name) {
  if (!shared_due && seq_next_ < seq_end_) {
    // Level 3 is not due: a number reserved at the last save that listed
    // the directory; nothing in `dir` is read or written.
    *name = ckpt::VersionName(seq_next_++, step);
    return Status::OK();
  }
  std::vector<ckpt::VersionInfo> versions;
  BATON_RETURN_IF_ERROR(ckpt::ListVersions(env_, dir_, options_.max_restore_failures, &versions));
  uint64_t seq = 0;
  const uint64_t count = static_cast<uint64_t>(options_.shared_every);
  BATON_RETURN_IF_ERROR(ReserveSeq(env_, dir_, options_.file_mode, versions, &run_, &seq, count));
  seq_next_ = seq + 1;
  seq_end_ = seq + count;
  *name = ckpt::VersionName(seq, step);
  // The shared version directory only when level 3 gets the version; made
  // later when a failed level 2 sends it there (CommitLevel3).
  return shared_due ? env_->CreateDir(dir_ + "/" + *name, options_.dir_mode, /*exist_ok=*/false) : Status::OK();
}

Status CheckpointerImpl::WriteMyShard(const std::string& vdir, PhaseClock* clock, uint64_t* bytes,
                                      std::vector<uint64_t>* record, std::vector<std::vector<uint64_t>>* digests) {
  std::vector<ckpt::h5::ShardArray> shard;
  for (const auto& [name, r] : arrays_) {
    ckpt::h5::ShardArray a;
    a.name = name;
    a.dtype = r.meta.dtype;
    a.global_shape = r.meta.shape;
    a.replicated = r.meta.replicated;
    a.row_bytes = r.meta.row_bytes();
    if (r.meta.replicated) {
      ckpt::ReplicatedPart(name, r.meta.rows(), a.row_bytes, size_, rank_, &a.first_row, &a.rows);
    } else {
      a.first_row = r.first_row;
      a.rows = r.rows;
    }
    uint64_t buffer_first = r.meta.replicated ? a.first_row : 0;
    a.data = static_cast<const char*>(r.data) + buffer_first * a.row_bytes;
    shard.push_back(std::move(a));
  }
  ckpt::h5::ShardWriteOptions wo;
  wo.transfer = options_.transfer;
  wo.file_mode = options_.file_mode;
  wo.env = env_;
  wo.clock = clock;
  wo.caller_agrees = true;  // SaveNow agrees over the world right after
  wo.metadata_images = &metadata_images_;
  ckpt::h5::ShardWriteResult res;
  Status s = ckpt::h5::WriteShard(group_, vdir + "/" + ShardFileName(group_of_[rank_]), shard, wo, &res);
  *bytes = res.bytes_written;
  stats_.metadata_reused = res.metadata_reused;
  // [file bytes, metadata xxh3, data offset of each array] (group rank 0's
  // count); the digests of my rows' chunks of each array (every rank's).
  record->assign({res.file_bytes, res.meta_xxh3});
  res.offsets.resize(arrays_.size(), UINT64_MAX);
  record->insert(record->end(), res.offsets.begin(), res.offsets.end());
  res.xxh3.resize(arrays_.size());
  *digests = std::move(res.xxh3);
  return s;
}

void CheckpointerImpl::ApplyRetention(bool defer) {
  // The last retention's removals end first: its listing must not see theirs half done (and removing is
  // never a failure of the save: logged, as RemoveVersions does).
  (void)remover_.Join();
  std::vector<ckpt::VersionInfo> versions;
  Status s = ckpt::ListVersions(env_, dir_, options_.max_restore_failures, &versions);
  if (!s.ok()) {
    BATON_LOG(kCkpt, warning) << "retention skipped: " << s;
    return;
  }
  for (const ckpt::VersionInfo& v : ckpt::PlanRetention(versions, options_.keep)) removals_.push_back(v);
  if (defer) return;
  // Renamed out of every listing here, removed on remover_'s thread (ckpt/version_removal.h).
  auto aside = std::make_shared<std::vector<ckpt::VersionInfo>>(ckpt::SetAsideForRemoval(env_, dir_, removals_));
  removals_.clear();
  if (aside->empty()) return;
  fs::Env* env = env_;
  remover_.Start([env, aside](const std::atomic<bool>&) {
    RemoveVersions(env, aside.get());
    return Status::OK();
  }, options_.async_writer_nice);
}

void CheckpointerImpl::RemoveVersions(fs::Env* env, std::vector<VersionInfo>* versions) {
  for (const ckpt::VersionInfo& v : *versions) {
    Status s = ckpt::RemoveVersion(env, v);
    if (!s.ok()) {
      BATON_LOG(kCkpt, warning) << "retention could not remove " << v.path << ": " << s;
    }
  }
  versions->clear();
}

// Rare path: which array differs (one MPI_Allreduce over the arrays'
// hashes), then every rank's hash of it (one MPI_Allgather), grouped into
// the same message on every rank.
Status CheckpointerImpl::DescribeDivergedReplicas(const std::vector<uint64_t>& replica_xxh3) {
  const size_t n = replica_xxh3.size();
  std::vector<uint64_t> mine, most(2 * n);
  for (uint64_t v : replica_xxh3) mine.insert(mine.end(), {v, ~v});
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(
      MPI_Allreduce(mine.data(), most.data(), static_cast<int>(2 * n), MPI_UINT64_T, MPI_MAX, comm_)));
  size_t first = n;
  for (size_t i = 0; i < n && first == n; ++i) {
    if (most[2 * i] != replica_xxh3[i] || most[2 * i + 1] != ~replica_xxh3[i]) first = i;
  }
  // Every rank reaches the same `first` (the MAX is the same everywhere).
  if (first == n) return Status::Internal(log::kCkpt, "replicas differ, but no replicated array does");
  std::vector<uint64_t> all(static_cast<size_t>(size_));
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(
      MPI_Allgather(&replica_xxh3[first], 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, comm_)));
  std::string name;
  size_t i = 0;
  for (const auto& [array, r] : arrays_) {
    if (r.meta.replicated && i++ == first) name = array;
  }
  // "ranks 0-1,3 hold xxh3 ...; rank 2 holds xxh3 ...": at most 4 copies
  // and 8 ranks each, so that a large job's message stays short.
  std::vector<std::pair<uint64_t, std::vector<int>>> copies;
  for (int k = 0; k < size_; ++k) {
    auto it = std::find_if(copies.begin(), copies.end(), [&](const auto& c) { return c.first == all[k]; });
    if (it == copies.end()) {
      copies.push_back({all[k], {}});
      it = copies.end() - 1;
    }
    it->second.push_back(k);
  }
  std::string msg = "replicated array " + name + " differs between ranks (" + std::to_string(copies.size()) +
                    " different copies; nothing was written): ";
  for (size_t c = 0; c < copies.size() && c < 4; ++c) {
    const std::vector<int>& ranks = copies[c].second;
    msg += c ? "; " : "";
    msg += ranks.size() == 1 ? "rank " : "ranks ";
    for (size_t k = 0; k < ranks.size() && k < 8; ++k) msg += (k ? "," : "") + std::to_string(ranks[k]);
    if (ranks.size() > 8) msg += ",... (" + std::to_string(ranks.size()) + " ranks)";
    msg += (ranks.size() == 1 ? " holds xxh3 " : " hold xxh3 ") + HexU64(copies[c].first);
  }
  if (copies.size() > 4) msg += "; ...";
  return Status::InvalidArgument(log::kCkpt, msg);
}

Status CheckpointerImpl::SaveNow(int64_t step) {
  const double t0 = Now();
  stats_ = CheckpointStats();
  stats_.step = step;
  PhaseClock clock;
  clock.Start(&stats_.phases,
              {"hash", "agree", "create", "write", "close", "verify", "sync", "meta_hash", "manifest", "retention"});

  // 1. Agreed registrations; my chunk records (their checksums come with the writes).
  // A step out of 0..kMaxStep is refused before anything is written, on every rank
  // even when only one rank passed it.
  const std::string call = "Save(" + std::to_string(step) + ")";
  Status args = CheckSaveStep(call, step);
  // Replicas must agree: one hash over every replicated array's whole copy,
  // compared in the same MPI_Allreduce.
  std::vector<uint64_t> replica_xxh3;
  uint64_t replicas = 0;
  if (options_.verify_replicas) {
    for (const auto& [name, r] : arrays_) {
      if (r.meta.replicated) replica_xxh3.push_back(Xxh3(r.data, r.meta.rows() * r.meta.row_bytes()));
    }
    replicas = Xxh3(replica_xxh3.data(), replica_xxh3.size() * sizeof(uint64_t));
  }
  clock.Lap("hash");
  CallExtra extra;
  extra.value = replicas;
  extra.flags = rank_state_set_ ? kFlagRankState : 0;
  BATON_RETURN_IF_ERROR(AgreeOnCall(call, args, &extra));
  if (extra.value_differs) return DescribeDivergedReplicas(replica_xxh3).Annotate(call);
  clock.Lap("agree");

  // Per-rank state, when any rank set it: a sharded u8 array of this Save
  // only, the ranks' bytes in rank order (first row: an exclusive scan).
  struct StateGuard {
    std::map<std::string, Registered>* arrays;
    ~StateGuard() {
      if (arrays != nullptr) arrays->erase(kRankStateName);
    }
  } state_guard{nullptr};
  if (extra.any_flags & kFlagRankState) {
    uint64_t mine_bytes = rank_state_.size(), first = 0, total_bytes = 0;
    BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Exscan(&mine_bytes, &first, 1, MPI_UINT64_T, MPI_SUM, comm_)));
    if (rank_ == 0) first = 0;  // MPI_Exscan leaves rank 0's undefined
    BATON_RETURN_IF_ERROR(
        BATON_MPI_CHECK(MPI_Allreduce(&mine_bytes, &total_bytes, 1, MPI_UINT64_T, MPI_SUM, comm_)));
    Registered r;
    r.meta.name = kRankStateName;
    r.meta.dtype = DType::kU8;
    r.meta.shape = {total_bytes};
    r.data = rank_state_.data();
    r.first_row = first;
    r.rows = mine_bytes;
    arrays_[kRankStateName] = std::move(r);
    state_guard.arrays = &arrays_;
  }
  clock.Lap("agree");
  const size_t n = arrays_.size();
  std::vector<ChunkRecord> mine;
  mine.reserve(n);
  uint64_t total = 0;
  for (const auto& [name, r] : arrays_) {
    ChunkRecord c{0, 0};
    const uint64_t rb = r.meta.row_bytes();
    if (r.meta.replicated) {
      ckpt::ReplicatedPart(name, r.meta.rows(), rb, size_, rank_, &c.first_row, &c.rows);
    } else {
      c.first_row = r.first_row;
      c.rows = r.rows;
    }
    total += r.meta.rows() * rb;
    mine.push_back(c);
  }
  clock.Lap("hash");
  std::vector<ChunkRecord> all(rank_ == 0 ? n * static_cast<size_t>(size_) : 0);
  static_assert(sizeof(ChunkRecord) == 2 * sizeof(uint64_t));
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Gather(mine.data(), static_cast<int>(2 * n), MPI_UINT64_T, all.data(),
                                                   static_cast<int>(2 * n), MPI_UINT64_T, 0, comm_)));

  // 2. Rank 0: tiling, the fresh version directory.
  std::string name;
  Status local;
  if (rank_ == 0) {
    local = CheckTiling(all);
    if (local.ok()) local = CreateVersionDir(step, &name);
  }
  clock.Lap("create");
  // Only rank 0 did anything that could fail: its outcome and the name in
  // one broadcast (ckpt/agreement.h).
  BATON_RETURN_IF_ERROR(BcastOutcome(comm_, local, &name).Annotate("saving step " + std::to_string(step)));
  const std::string vdir = dir_ + "/" + name;
  stats_.version_path = vdir;
  clock.Lap("agree");

  auto abandon = [&](const Status& failed) {
    if (rank_ == 0) {
      Status rm = env_->RemoveTree(vdir);
      if (!rm.ok()) {
        BATON_LOG(kCkpt, warning) << "could not remove the abandoned version " << vdir << ": " << rm;
      }
    }
    return failed.Annotate("saving step " + std::to_string(step) + " (" + vdir + ", abandoned)");
  };

  // 3. The shards, written, synced and agreed.
  std::vector<uint64_t> record;
  std::vector<std::vector<uint64_t>> digests;
  local = WriteMyShard(vdir, &clock, &stats_.bytes, &record, &digests);
  Status agreed = Agree(comm_, local);
  if (!agreed.ok()) return abandon(agreed);
  env_->Mark("agreed");
  clock.Lap("agree");

  // 4. Each group's first rank writes its shard's index (ckpt/commit.cc);
  // agreed; rank 0 commits the top-level manifest (the shards' records:
  // one MPI_Gather).
  // The indexes are not agreed on in a round of their own: each rank's
  // outcome rides in its record to rank 0 (the last word), which commits
  // only when every index was written, and the commit's agreement names
  // the rank whose index failed (its own failure ranks before rank 0's
  // kAborted, ckpt/agreement.h).
  local = WriteMyShardIndex(vdir, step, mine, digests, &record);
  clock.Lap("manifest");
  record.resize(n + 4);
  record.push_back(local.ok() ? 0 : 1);
  const int per_rank = static_cast<int>(n + 5);
  std::vector<uint64_t> gathered(rank_ == 0 ? static_cast<size_t>(size_) * (n + 5) : 0);
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Gather(record.data(), per_rank, MPI_UINT64_T, gathered.data(),
                                                   per_rank, MPI_UINT64_T, 0, comm_)));
  clock.Lap("agree");
  if (rank_ == 0 && local.ok()) {
    std::vector<uint64_t> shard_records;
    shard_records.reserve(static_cast<size_t>(size_) * (n + 4));
    int failed = -1;
    for (int k = 0; k < size_; ++k) {
      const auto at = gathered.begin() + static_cast<ptrdiff_t>(k) * (n + 5);
      if (at[static_cast<ptrdiff_t>(n + 4)] != 0 && failed < 0) failed = k;
      shard_records.insert(shard_records.end(), at, at + static_cast<ptrdiff_t>(n + 4));
    }
    if (failed >= 0) {
      local = Status::Aborted(log::kCkpt, "rank " + std::to_string(failed) + " could not write its shard's index");
    } else {
      ckpt::Manifest m;
      std::vector<ckpt::ArrayMeta> arrays;
      for (const auto& [name, r] : arrays_) arrays.push_back(r.meta);
      local = BuildManifest(step, arrays, group_of_, options_.group_size, blob_, shard_records, &m);
      if (local.ok()) local = CommitManifest(vdir, m);
    }
  }
  clock.Lap("manifest");
  agreed = Agree(comm_, local);
  if (!agreed.ok()) return abandon(agreed);
  clock.Lap("agree");

  // 5. Retention, only after the commit.
  if (rank_ == 0) ApplyRetention();
  clock.Lap("retention");
  stats_.total_bytes = total;
  stats_.level = 3;  // every rank's stats say where the version is, not rank 0's alone
  stats_.shared = true;
  stats_.seconds = Now() - t0;
  return Status::OK();
}

}  // namespace baton::ckpt
