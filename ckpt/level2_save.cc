// Level 2 of a save (ckpt/README.md, "Levels 2 and 3"): setting up the
// node-local level, and the commit of a version whose shards the
// background writers put on node-local storage (level 3's part of that
// commit: level3_commit.cc).
//
// The commit, on the caller's thread at the next collective call (the
// writers make no MPI call), in order:
//   1. whether every rank's local write succeeded (one MPI_Allreduce); each
//      rank that wrote locally writes its shard's index beside it, agreed;
//   2. the partner exchange: every rank's shard and index go to its partner
//      rank (ckpt/partner_exchange.h), which keeps a verified copy in
//      partner/, agreed: the version is level-2 complete once this is;
//   3. rank 0 builds the manifest;
//   4. level 3 when due (every shared_every-th save) or when level 2 failed
//      anywhere (a full disk, a failed exchange): level3_commit.cc;
//   5. level 2's commit: rank 0 broadcasts the manifest and the record of
//      what level 3 did (node_local_level.h's Level3Record); the first rank
//      of each node writes the record, then commits the manifest, agreed;
//      when this fails and level 3 was not due, level 3 now;
//   6. the save's outcome per level (CheckpointStats::level2_committed,
//      shared, level2_failure, level3_failure; a warning for a level that
//      failed): OK when either level committed the version, else the save
//      is abandoned and its failure returned. A level-2 version that did
//      not commit is removed on every node; a shared version directory that
//      holds no version is removed; level-2 retention on each node
//      (local_keep), incomplete versions included (no save is in progress).
#include <mpi.h>

#include <charconv>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/printable.h"
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
// files). A test seam read in production code: rank 0 warns whenever it is
// set, since on a real cluster it would put partner copies on the same
// node; a value that is not a positive integer is ignored, saying so.
std::vector<int> PartnerNodes(const Topology& topology, int rank) {
  std::vector<int> node_of = topology.node_of;
  const char* per = std::getenv("BATON_CKPT_TEST_RANKS_PER_NODE");
  if (per == nullptr) return node_of;
  int k = 0;
  const char* end = per + std::strlen(per);
  auto r = std::from_chars(per, end, k);
  const bool valid = r.ec == std::errc() && r.ptr == end && k > 0;
  if (rank == 0) {
    if (valid) {
      BATON_LOG(kCkpt, warning) << "BATON_CKPT_TEST_RANKS_PER_NODE=" << k
                                << " (a test setting): the partner ring takes every " << k
                                << " consecutive ranks for a node instead of the real nodes, so a partner copy "
                                   "may be on its own node; unset it outside tests";
    } else {
      BATON_LOG(kCkpt, warning) << "BATON_CKPT_TEST_RANKS_PER_NODE=\"" << Printable(per)
                                << "\" is not a positive integer: ignored (the real nodes are used)";
    }
  }
  if (valid) {
    for (size_t r2 = 0; r2 < node_of.size(); ++r2) node_of[r2] = static_cast<int>(r2) / k;
  }
  return node_of;
}

}  // namespace

Status CheckpointerImpl::InitLevel2() {
  // A job opts in (docs/recovery.md, "Level 2 is the job's choice"): the
  // plugin's BATON_LOCAL_DIR is an offer, taken only with level2 = true.
  std::string dir = options_.local_dir;
  if (dir.empty() && options_.level2) {
    const char* env = std::getenv("BATON_LOCAL_DIR");
    if (env != nullptr) dir = env;
    if (dir.empty() && rank_ == 0) {
      BATON_LOG(kCkpt, warning) << "level2 = true, but no node-local directory (CheckpointOptions::local_dir, "
                                   "BATON_LOCAL_DIR): every save goes to "
                                << dir_ << " alone";
    }
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
  partner_ = PartnerRanks(PartnerNodes(runtime_.topology(), rank_));
  const Topology& t = runtime_.topology();
  node_leader_ = t.RanksOn(t.node_of[static_cast<size_t>(rank_)]).front() == rank_;
  // What an earlier run left unfinished on this node (a save that crashed
  // or failed) goes now: this Checkpointer holds the directory's writer
  // lock, so no save of it is in progress.
  if (node_leader_) local_.ApplyRetention(options_.local_keep, /*none_in_progress=*/true);
  // Rank 0: level 3's newest complete version, which the record of a
  // version that level 3 does not get names (Level3Record); empty when it
  // cannot be listed (such records say "unknown").
  if (rank_ == 0) {
    std::vector<VersionInfo> versions;
    Status listed = ListVersions(env_, dir_, options_.max_restore_failures, &versions);
    if (listed.ok()) {
      level3_newest_ = "-";
      for (const VersionInfo& v : versions) {
        if (v.status != VersionStatus::kIncomplete) level3_newest_ = v.name;
      }
    } else {
      BATON_LOG(kCkpt, warning) << "level 2: cannot list " << dir_ << " (" << listed
                                << "); versions saved to level 2 alone are restored only while level 3 holds them";
    }
  }
  if (rank_ == 0) {
    BATON_LOG(kCkpt, info) << "level 2 on: node-local copies under " << local_.root() << ", "
                           << (partner_.empty() || partner_[0] < 0 ? "no partner (one node)" : "partner copies in a ring of nodes")
                           << ", level 3 (" << dir_ << ") every " << options_.shared_every << " save(s)";
  }
  return Status::OK();
}

Status CheckpointerImpl::CommitPendingLevels() {
  const PendingSave& p = *pending_;
  const std::string where = p.What();
  const std::vector<uint64_t> base = PendingShardRecord();
  const std::string local_vdir = local_.VersionDir(p.name);
  // The commit's phases on this rank (CheckpointStats::phases, after the
  // save's own): the partner exchange is the part that moves bytes.
  PhaseClock clock;
  stats_.phases.clear();
  clock.Start(&stats_.phases, {"local_index", "exchange", "local_manifest", "shared"});
  Status level2_failure;  // agreed: the same on every rank
  auto level2_failed = [&](const Status& why, const char* what) {
    if (level2_failure.ok()) level2_failure = why.Annotate(what);
  };

  // 1. The local writes and indexes.
  if (!p.outcome.local_ok) {
    BATON_LOG(kCkpt, warning) << where << ": rank " << rank_ << " could not write its shard to node-local storage ("
                              << p.outcome.local_failure << "); it went to the shared directory " << dir_
                              << " instead (level 3)";
  }
  Status agreed = Agree(comm_, p.outcome.local_ok ? Status::OK() : p.outcome.local_failure);
  if (!agreed.ok()) level2_failed(agreed, "the node-local write");
  std::vector<uint64_t> record = base;
  Status local;
  if (p.outcome.local_ok) local = IndexPendingShard(local_vdir, &record);
  agreed = Agree(comm_, local);
  if (!agreed.ok()) level2_failed(agreed, "the node-local index");
  clock.Lap("local_index");

  // 2. The partner copies.
  uint64_t received = 0;
  if (level2_failure.ok() && partner_[static_cast<size_t>(rank_)] >= 0) {
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
      local = ExchangeFiles(comm_, env_, moves, options_.file_mode, &received, commit_deadline_);
      agreed = Agree(comm_, local);
    }
    if (!agreed.ok()) level2_failed(agreed, "the partner copies");
  }
  clock.Lap("exchange");
  stats_.bytes_partner = received;

  // 3. Level 2's manifest, built (committed in 5, once level 3's outcome
  // is known and recorded beside it).
  Manifest m;
  std::string text;
  if (level2_failure.ok()) {
    local = GatherAndBuild(record, &m);
    if (local.ok() && rank_ == 0) local = WriteTopManifestJson(m, &text);
    agreed = Agree(comm_, local);
    if (!agreed.ok()) level2_failed(agreed, "the manifest");
  }
  clock.Lap("local_manifest");

  // 4. Level 3 when due, or in place of a level 2 that failed.
  bool shared = false;
  Status level3_failure;
  if (p.shared_due || !level2_failure.ok()) {
    level3_failure = CommitLevel3(level2_failure.ok() ? &m : nullptr);
    shared = level3_failure.ok();
  }
  clock.Lap("shared");

  // 5. Level 2's commit: the record of level 3's outcome, then the manifest,
  // on every node. A version level 3 did not get is still level 2's to
  // restore (the record says which level-3 version it follows).
  if (level2_failure.ok()) {
    Level3Record rec;
    if (shared) {
      rec.kind = Level3Record::Kind::kCommitted;
    } else if (!level3_newest_.empty()) {
      rec.kind = Level3Record::Kind::kAbsent;
      rec.base = level3_newest_;
    }
    std::string rec_text = EncodeLevel3Record(rec);
    BATON_RETURN_IF_ERROR(BcastString(comm_, &text));
    BATON_RETURN_IF_ERROR(BcastString(comm_, &rec_text));
    rec = ParseLevel3Record(rec_text);
    local = node_leader_ ? local_.WriteManifest(p.name, text, rec, options_.file_mode) : Status::OK();
    agreed = Agree(comm_, local);
    if (!agreed.ok()) level2_failed(agreed, "the node-local manifests");
    if (!level2_failure.ok() && !shared && level3_failure.ok()) {
      // Level 3 was not due; now it is the only level left.
      level3_failure = CommitLevel3(nullptr);
      shared = level3_failure.ok();
    }
  }
  clock.Lap("local_manifest");

  // 6. What failed goes: a level-2 version that did not commit (a full
  // disk must not keep it), a level-3 directory that holds no version.
  if (!level2_failure.ok() && node_leader_) local_.RemoveVersionDir(p.name);
  if (!level2_failure.ok() && !shared) {
    if (level3_failure.ok()) level3_failure = Status::Internal(log::kCkpt, "level 3 was not tried");
    return AbandonPending(level3_failure.Annotate("level 3").Annotate("level 2: " + level2_failure.message()));
  }
  if (!shared && rank_ == 0) {
    // Made when level 3 was due, or by a failed level 2; holds no version.
    Status rm = env_->RemoveTree(p.vdir);
    if (!rm.ok() && rm.code() != Code::kNotFound) {
      BATON_LOG(kCkpt, warning) << "could not remove the unused version directory " << p.vdir << ": " << rm;
    }
  }
  // The own copy's last readers (the copy to level 3, the partner send)
  // are done: its pages leave the page cache as the copies' did.
  if (p.outcome.local_ok) env_->DropFileCache(local_vdir + "/" + ShardFileName(rank_));
  if (node_leader_) local_.ApplyRetention(options_.local_keep, /*none_in_progress=*/true);

  stats_.level = level2_failure.ok() ? 2 : 3;
  stats_.shared = shared;
  stats_.level2_committed = level2_failure.ok();
  stats_.level2_failure = level2_failure.ok() ? "" : level2_failure.message();
  stats_.level3_failure = level3_failure.ok() ? "" : level3_failure.message();
  if (!shared) stats_.version_path = local_vdir;
  if (rank_ == 0) {
    if (!level2_failure.ok()) {
      BATON_LOG(kCkpt, warning) << where << ": saved at level 3 only (" << p.vdir << "); level 2 failed: "
                                << level2_failure.message();
    } else if (!level3_failure.ok()) {
      BATON_LOG(kCkpt, warning) << where << ": saved at level 2 only (" << local_vdir
                                << ", node-local copies); level 3 failed: " << level3_failure.message();
    }
  }
  pending_.reset();
  return Status::OK();
}

}  // namespace baton::ckpt
