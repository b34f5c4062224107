// Levels 2 and 3 of a save (ckpt/README.md, "Levels 2 and 3"): setting up
// the node-local level, and the commit of a version whose shards the
// background writers put on node-local storage.
//
// The commit, on the caller's thread at the next collective call (the
// writers make no MPI call), in order:
//   1. whether every rank's local write succeeded (one MPI_Allreduce); each
//      rank that wrote locally writes its shard's index beside it, agreed;
//   2. the partner exchange: every rank's shard and index go to its partner
//      rank (ckpt/partner_exchange.h), which keeps a verified copy in
//      partner/, agreed: the version is level-2 complete once this is;
//   3. rank 0 builds the manifest and broadcasts it; the first rank of each
//      node commits it in the node's version directory, agreed;
//   4. level 3 when due (every shared_every-th save) or when level 2 failed
//      anywhere (a full disk, a failed exchange: a warning, not a failure):
//      each rank's shard in the shared version directory (the writer copied
//      it already when it was due; else copied now), its index, and rank 0
//      commits the same manifest there (commit.cc), agreed, retention;
//      otherwise rank 0 removes the shared version directory, which then
//      holds nothing;
//   5. level-2 retention on each node (local_keep).
#include <mpi.h>

#include <climits>
#include <cstdlib>
#include <string>
#include <vector>

#include "baton/log.h"
#include "ckpt/agreement.h"
#include "ckpt/checkpointer_impl.h"
#include "ckpt/manifest_index.h"
#include "ckpt/partner_exchange.h"
#include "mpi_runtime/mpi_check.h"

namespace baton::ckpt {
namespace {

// The nodes the partner ring is built on: the runtime's, or for tests on
// one machine $BATON_CKPT_TEST_RANKS_PER_NODE consecutive ranks per node
// (the ranks still share one disk: the files of a "node" are told apart by
// their rank in the name, so a test wipes a node by removing its ranks'
// files).
std::vector<int> PartnerNodes(const Topology& topology) {
  std::vector<int> node_of = topology.node_of;
  const char* per = std::getenv("BATON_CKPT_TEST_RANKS_PER_NODE");
  const int k = per != nullptr ? std::atoi(per) : 0;
  if (k > 0) {
    for (size_t r = 0; r < node_of.size(); ++r) node_of[r] = static_cast<int>(r) / k;
  }
  return node_of;
}

}  // namespace

Status CheckpointerImpl::InitLevel2() {
  std::string dir = options_.local_dir;
  if (dir.empty() && options_.level2) {
    const char* env = std::getenv("BATON_LOCAL_DIR");
    if (env != nullptr) dir = env;
  }
  Status s;
  if (!dir.empty()) s = local_.Open(env_, dir, run_.run_id, options_.dir_mode);
  int mine[2] = {dir.empty() ? 0 : 1, !dir.empty() && s.ok() ? 1 : 0};
  int any = 0, all = 0;
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Allreduce(&mine[0], &any, 1, MPI_INT, MPI_MAX, comm_)));
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Allreduce(&mine[1], &all, 1, MPI_INT, MPI_MIN, comm_)));
  if (any != 0 && all == 0) {
    // Level 2 needs every rank: without it the saves go to level 3 alone.
    if (!s.ok()) {
      BATON_LOG(kCkpt, warning) << "level 2 (node-local checkpoints) is off: rank " << rank_ << " cannot use " << dir
                                << ": " << s;
    } else if (dir.empty()) {
      BATON_LOG(kCkpt, warning) << "level 2 (node-local checkpoints) is off: rank " << rank_
                                << " has no node-local directory (CheckpointOptions::local_dir, BATON_LOCAL_DIR)";
    }
    local_ = NodeLocalLevel();
  }
  if (!local_.on()) return Status::OK();
  partner_ = PartnerRanks(PartnerNodes(runtime_.topology()));
  const Topology& t = runtime_.topology();
  node_leader_ = t.RanksOn(t.node_of[static_cast<size_t>(rank_)]).front() == rank_;
  if (rank_ == 0) {
    BATON_LOG(kCkpt, info) << "level 2 on: node-local copies under " << local_.root() << ", "
                           << (partner_.empty() || partner_[0] < 0 ? "no partner (one node)" : "partner copies in a ring of nodes")
                           << ", level 3 (" << dir_ << ") every " << options_.shared_every << " save(s)";
  }
  return Status::OK();
}

Status CheckpointerImpl::GatherAndBuild(const std::vector<uint64_t>& record, Manifest* m) {
  const PendingSave& p = *pending_;
  const size_t n = p.arrays.size();
  const int per_rank = static_cast<int>(n + 4);
  std::vector<uint64_t> mine = record;
  mine.resize(n + 4);
  std::vector<uint64_t> all(rank_ == 0 ? static_cast<size_t>(size_) * (n + 4) : 0);
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(
      MPI_Gather(mine.data(), per_rank, MPI_UINT64_T, all.data(), per_rank, MPI_UINT64_T, 0, comm_)));
  if (rank_ != 0) return Status::OK();
  std::vector<int> group_of(static_cast<size_t>(size_));
  for (int k = 0; k < size_; ++k) group_of[static_cast<size_t>(k)] = k;
  return BuildManifest(p.step, p.arrays, group_of, 1, p.blob, all, m);
}

Status CheckpointerImpl::CommitPendingLevels() {
  const PendingSave& p = *pending_;
  const size_t n = p.arrays.size();
  const std::string where = "the asynchronous save of step " + std::to_string(p.step);
  std::vector<int> group_of(static_cast<size_t>(size_));
  for (int k = 0; k < size_; ++k) group_of[static_cast<size_t>(k)] = k;
  std::vector<uint64_t> base{p.written.file_bytes, p.written.meta_xxh3};
  std::vector<uint64_t> offsets = p.written.offsets;
  offsets.resize(n, UINT64_MAX);
  base.insert(base.end(), offsets.begin(), offsets.end());
  const std::string local_vdir = local_.VersionDir(p.name);
  const std::string file = ShardFileName(rank_);
  // The commit's phases on this rank (CheckpointStats::phases, after the
  // save's own): the partner exchange is the part that moves bytes.
  PhaseClock clock;
  stats_.phases.clear();
  clock.Start(&stats_.phases, {"local_index", "exchange", "local_manifest", "shared"});

  // 1. The local writes and indexes.
  if (!p.outcome.local_ok) {
    BATON_LOG(kCkpt, warning) << where << ": rank " << rank_ << " could not write its shard to node-local storage ("
                              << p.outcome.local_failure << "); it went to the shared directory " << dir_
                              << " instead (level 3)";
  }
  int ok = p.outcome.local_ok ? 1 : 0, all_ok = 0;
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm_)));
  bool level2_ok = all_ok == 1;
  std::vector<uint64_t> record = base;
  Status local;
  if (p.outcome.local_ok) local = WriteIndexOfShard(local_vdir, p.step, p.arrays, group_of, 1, rank_, p.entries, &record);
  Status agreed = Agree(comm_, local);
  if (level2_ok && !agreed.ok()) {
    if (rank_ == 0) {
      BATON_LOG(kCkpt, warning) << where << ": level 2 failed (" << agreed << "); level 3 instead";
    }
    level2_ok = false;
  }

  clock.Lap("local_index");

  // 2. The partner copies.
  uint64_t received = 0;
  if (level2_ok && partner_[static_cast<size_t>(rank_)] >= 0) {
    std::vector<FileMove> moves;
    local = Status::OK();
    for (int k = 0; k < size_; ++k) {
      const int to = partner_[static_cast<size_t>(k)];
      const std::string f = ShardFileName(k);
      for (const std::string& name : {f, ShardIndexName(f)}) {
        moves.push_back(FileMove{k, to, local_vdir + "/" + name, local_.PartnerDir(p.name) + "/" + name});
      }
      if (to == rank_ && local.ok()) {
        local = env_->CreateDir(local_vdir, options_.dir_mode, /*exist_ok=*/true);
        if (local.ok()) local = env_->CreateDir(local_.PartnerDir(p.name), options_.dir_mode, /*exist_ok=*/true);
      }
    }
    agreed = Agree(comm_, local);  // every receiver's directories, before any rank starts sending
    if (agreed.ok()) {
      local = ExchangeFiles(comm_, env_, moves, options_.file_mode, &received);
      agreed = Agree(comm_, local);
    }
    if (!agreed.ok()) {
      if (rank_ == 0) {
        BATON_LOG(kCkpt, warning) << where << ": the partner copies failed (" << agreed << "); level 3 instead";
      }
      level2_ok = false;
    }
  }

  clock.Lap("exchange");
  stats_.bytes_partner = received;

  // 3. The manifest, on every node.
  Manifest m;
  std::string text;
  if (level2_ok) {
    local = GatherAndBuild(record, &m);
    if (local.ok() && rank_ == 0) local = WriteTopManifestJson(m, &text);
    BATON_RETURN_IF_ERROR(Agree(comm_, local).Annotate(where));
    BATON_RETURN_IF_ERROR(BcastString(comm_, &text));
    local = node_leader_ ? local_.WriteManifest(p.name, text, options_.file_mode) : Status::OK();
    agreed = Agree(comm_, local);
    if (!agreed.ok()) {
      if (rank_ == 0) {
        BATON_LOG(kCkpt, warning) << where << ": the node-local manifests failed (" << agreed << "); level 3 instead";
      }
      level2_ok = false;
    }
  }

  clock.Lap("local_manifest");

  // 4. Level 3.
  const bool shared = p.shared_due || !level2_ok;
  if (shared) {
    local = Status::OK();
    if (!p.outcome.shared_written) {
      uint64_t bytes = 0;
      local = CopyFileDurably(env_, local_vdir + "/" + file, p.vdir + "/" + file, options_.file_mode, &bytes);
    }
    std::vector<uint64_t> shared_record = base;
    if (local.ok()) local = WriteIndexOfShard(p.vdir, p.step, p.arrays, group_of, 1, rank_, p.entries, &shared_record);
    agreed = Agree(comm_, local);
    if (!agreed.ok()) return AbandonPending(agreed);
    Manifest sm;
    local = GatherAndBuild(shared_record, &sm);
    // One version, one manifest: level 3's says the time level 2's does
    // (a second may have passed during the copy).
    if (level2_ok && rank_ == 0) sm.time = m.time;
    if (local.ok() && rank_ == 0) local = CommitManifest(p.vdir, sm);
    agreed = Agree(comm_, local);
    if (!agreed.ok()) return AbandonPending(agreed);
    if (rank_ == 0) ApplyRetention();
  } else if (rank_ == 0) {
    Status rm = env_->RemoveTree(p.vdir);  // made at SaveAsync; nothing went into it
    if (!rm.ok()) {
      BATON_LOG(kCkpt, warning) << "could not remove the unused version directory " << p.vdir << ": " << rm;
    }
  }

  clock.Lap("shared");

  // 5. Level-2 retention.
  if (level2_ok && node_leader_) local_.ApplyRetention(options_.local_keep);
  stats_.level = level2_ok ? 2 : 3;
  stats_.shared = shared;
  if (!shared) stats_.version_path = local_vdir;
  pending_.reset();
  return Status::OK();
}

}  // namespace baton::ckpt
