// Levels 2 and 3 (issue 17): node-local copies with a partner copy over
// MPI, the shared directory every shared_every-th save, restore's choice of
// level, a full node-local disk. At 4 ranks (ckpt-levels-np4.sh) on one
// machine: $BATON_CKPT_TEST_RANKS_PER_NODE splits them into "nodes" for the
// partner ring, all on one disk, so a node is wiped by removing the files
// its ranks own and the partner copies it keeps. The same on real nodes with
// private disks: tests/cluster/test_ckpt.sh.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <thread>
#include <cstdlib>
#include <set>

#include "ckpt/fs/fault_env.h"
#include "ckpt/node_local_level.h"
#include "ckpt/partner_exchange.h"
#include "ckpt/restore_failures.h"
#include "ckpt/version_removal.h"
#include "tests/mpi/ckpt_fixture.h"
#include "tests/mpi/write_fault.h"

namespace baton::ckpt_testing {
namespace {

// Every piece written into a partner/ directory takes `delay` longer: a
// partner node whose disk is slow.
class SlowPartnerEnv : public ckpt::fs::EnvWrapper {
 public:
  explicit SlowPartnerEnv(double delay) : EnvWrapper(ckpt::fs::Env::Default()), delay_(delay) {}
  Status NewWritableFile(const std::string& path, mode_t mode,
                         std::unique_ptr<ckpt::fs::WritableFile>* out) override {
    BATON_RETURN_IF_ERROR(EnvWrapper::NewWritableFile(path, mode, out));
    if (path.find("/partner/") != std::string::npos) *out = std::make_unique<Slow>(std::move(*out), delay_);
    return Status::OK();
  }

 private:
  class Slow : public ckpt::fs::WritableFile {
   public:
    Slow(std::unique_ptr<ckpt::fs::WritableFile> f, double delay) : f_(std::move(f)), delay_(delay) {}
    Status Append(const void* data, size_t n) override {
      std::this_thread::sleep_for(std::chrono::duration<double>(delay_));
      return f_->Append(data, n);
    }
    Status Sync() override { return f_->Sync(); }
    Status Seek(uint64_t offset) override { return f_->Seek(offset); }
    Status Close() override { return f_->Close(); }

   private:
    std::unique_ptr<ckpt::fs::WritableFile> f_;
    double delay_;
  };
  double delay_;
};

class Levels : public CkptTest {
 protected:
  void SetUp() override {
    CkptTest::SetUp();
    local_ = stdfs::path(root_).parent_path().string() + "/local";
  }
  void TearDown() override {
    unsetenv("BATON_CKPT_TEST_RANKS_PER_NODE");
    CkptTest::TearDown();
  }
  std::unique_ptr<Checkpointer> Make(int ranks_per_node, int shared_every = 1, ckpt::fs::Env* env = nullptr) {
    setenv("BATON_CKPT_TEST_RANKS_PER_NODE", std::to_string(ranks_per_node).c_str(), 1);
    CheckpointOptions o = Options();
    o.local_dir = local_;
    o.shared_every = shared_every;
    o.env = env;
    return MakeCheckpointer(o);
  }
  // Rank 0 flips a data byte in every shard of every level-3 version, so
  // that a restore that succeeds cannot have read level 3; every rank waits.
  void DamageLevel3() {
    if (Rank() == 0) {
      for (const auto& v : Versions(root_)) {
        for (int k = 0; k < Size(); ++k) FlipDataByte(v.path + "/shard-" + std::to_string(k) + ".h5", "s_f32");
      }
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  // The steps of the versions in `dir` (rank 0's view), with their status.
  static std::vector<std::string> Steps(const std::string& dir) {
    std::vector<std::string> out;
    for (const auto& v : Versions(dir)) {
      out.push_back(std::to_string(v.step) + (v.status == ckpt::VersionStatus::kComplete ? "" : "?"));
    }
    return out;
  }
  // Rank 0 removes what node `node` holds (its ranks' own copies, the
  // partner copies it keeps: those of the previous node's ranks) in every
  // level-2 version; every rank waits.
  void WipeNode(const std::string& run_id, int node, int ranks_per_node) {
    if (Rank() == 0) {
      const int nodes = Size() / ranks_per_node;
      const int prev = (node + nodes - 1) % nodes;
      std::set<std::string> gone;
      for (int k = node * ranks_per_node; k < (node + 1) * ranks_per_node; ++k) {
        gone.insert("shard-" + std::to_string(k) + ".h5");
        gone.insert("shard-" + std::to_string(k) + ".json");
      }
      std::set<std::string> gone_partner;
      for (int k = prev * ranks_per_node; k < (prev + 1) * ranks_per_node; ++k) {
        gone_partner.insert("shard-" + std::to_string(k) + ".h5");
        gone_partner.insert("shard-" + std::to_string(k) + ".json");
      }
      for (const auto& v : stdfs::directory_iterator(local_ + "/" + run_id)) {
        for (const std::string& f : gone) stdfs::remove(v.path() / f);
        for (const std::string& f : gone_partner) stdfs::remove(v.path() / "partner" / f);
      }
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  std::string local_;
};

// The ring: the l-th rank of node i sends to the (l mod n)-th rank of node
// i+1; on uneven nodes a smaller node's ranks keep several copies, and every
// rank's copy is on another node; one node has no partner.
TEST_F(Levels, TheRingPairsRanksAcrossNodesEvenWhenUneven) {
  EXPECT_EQ(ckpt::PartnerRanks({0, 0, 1, 1}), (std::vector<int>{2, 3, 0, 1}));
  EXPECT_EQ(ckpt::PartnerRanks({0, 1, 2, 3}), (std::vector<int>{1, 2, 3, 0}));
  // Node 0: ranks 0-2; node 1: rank 3; node 2: ranks 4-5.
  EXPECT_EQ(ckpt::PartnerRanks({0, 0, 0, 1, 2, 2}), (std::vector<int>{3, 3, 3, 4, 0, 1}));
  EXPECT_EQ(ckpt::PartnerRanks({0, 0, 0}), (std::vector<int>{-1, -1, -1}));
}

// The record of what level 3 did with a version (node_local_level.h): its
// two forms round-trip; anything else (a truncated, edited or foreign file)
// is unknown, which restore treats as committed (the safe side: used only
// while level 3 holds the version).
TEST_F(Levels, TheLevel3RecordParsesItsTwoFormsAndNothingElse) {
  using K = ckpt::Level3Record::Kind;
  ckpt::Level3Record r;
  r.kind = K::kCommitted;
  EXPECT_EQ(ckpt::EncodeLevel3Record(r), "committed\n");
  EXPECT_EQ(ckpt::ParseLevel3Record("committed\n").kind, K::kCommitted);
  r.kind = K::kAbsent;
  r.base = ckpt::VersionName(7, 30);
  const ckpt::Level3Record back = ckpt::ParseLevel3Record(ckpt::EncodeLevel3Record(r));
  EXPECT_EQ(back.kind, K::kAbsent);
  EXPECT_EQ(back.base, r.base);
  EXPECT_EQ(ckpt::ParseLevel3Record("absent -\n").base, "-");
  for (const char* bad : {"", "committed", "commit\n", "absent \n", "absent ../x\n", "absent v1-s2 x\n",
                          "absent -", "unknown\n"}) {
    EXPECT_EQ(ckpt::ParseLevel3Record(bad).kind, K::kUnknown) << bad;
  }
}

// A save puts every rank's shard on node-local storage and a verified copy
// with the same local rank of the next node; the level-2 manifest is local
// too; restore reads level 2, nothing from level 3.
TEST_F(Levels, ASaveKeepsOwnAndPartnerCopiesAndRestoreReadsThem) {
  ASSERT_EQ(Size(), 4) << "run at 4 ranks (ckpt-levels-np4.sh)";
  auto ck = Make(2);
  ASSERT_TRUE(ck);
  auto arrays = MakeArrays(Size(), Rank());
  ASSERT_TRUE(RegisterAll(ck.get(), &arrays).ok());
  FillAll(&arrays, 1);
  EXPECT_TRUE(ck->SetRankState("state-" + std::to_string(Rank())).ok());
  Status s = ck->Save(1);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(ck->last_stats().level, 2);
  EXPECT_TRUE(ck->last_stats().shared);
  MPI_Barrier(MPI_COMM_WORLD);
  if (Rank() == 0) {
    auto local = Versions(local_ + "/" + ck->run_id());
    ASSERT_EQ(local.size(), 1u);
    EXPECT_EQ(local[0].status, ckpt::VersionStatus::kComplete);
    for (int k = 0; k < Size(); ++k) {
      const std::string f = "shard-" + std::to_string(k);
      EXPECT_TRUE(stdfs::exists(local[0].path + "/" + f + ".h5")) << f;
      EXPECT_TRUE(stdfs::exists(local[0].path + "/partner/" + f + ".h5")) << f;
      EXPECT_TRUE(stdfs::exists(local[0].path + "/partner/" + f + ".json")) << f;
      // The partner copy is the same file, byte for byte.
      EXPECT_EQ(Slurp(local[0].path + "/" + f + ".h5"), Slurp(local[0].path + "/partner/" + f + ".h5")) << f;
    }
    EXPECT_EQ(stdfs::status(local_).permissions() & stdfs::perms::all, stdfs::perms::owner_all);
    EXPECT_EQ(stdfs::status(local_ + "/" + ck->run_id()).permissions() & stdfs::perms::all, stdfs::perms::owner_all);
    auto shared = Versions(root_);
    ASSERT_EQ(shared.size(), 1u);
    EXPECT_EQ(shared[0].name, local[0].name);
    EXPECT_EQ(shared[0].status, ckpt::VersionStatus::kComplete);
    EXPECT_EQ(Slurp(shared[0].path + "/manifest.json"), Slurp(local[0].path + "/manifest.json"));
  }
  RestoreResult rr;
  ASSERT_EQ(RestoreAndCheck(ck.get(), &arrays, 1, 2, &rr), "");
  EXPECT_EQ(ck->rank_state(), "state-" + std::to_string(Rank()));
  EXPECT_GT(ck->last_stats().bytes_level2, 0u);
  EXPECT_EQ(ck->last_stats().bytes_partner, 0u);
  EXPECT_EQ(ck->last_stats().total_bytes_level3, 0u);

  // A requeued run on the same nodes: a new Checkpointer finds the
  // node-local directory as the last one left it and restores from it.
  ck.reset();
  ck = Make(2);
  ASSERT_TRUE(ck);
  ASSERT_TRUE(RegisterAll(ck.get(), &arrays).ok());
  ASSERT_EQ(RestoreAndCheck(ck.get(), &arrays, 1, 2, &rr), "");
  // from_level 3: the shared directory only.
  RestoreOptions only3;
  only3.from_level = 3;
  ZeroAll(&arrays);
  s = ck->Restore(only3, &rr);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(rr.level, 3);
  EXPECT_EQ(CheckAll(arrays, 1), "");
  EXPECT_EQ(ck->last_stats().total_bytes_level2, 0u);
}

// One node's local storage wiped: its ranks' shards come over MPI from the
// partner node's copies (counted), nothing is read from level 3 (its
// shards are damaged, so it could not be), and the fetched copies are the
// ranks' own again.
TEST_F(Levels, OneNodeWipedRestoresFromThePartnerCopyOverMpi) {
  ASSERT_EQ(Size(), 4) << "run at 4 ranks (ckpt-levels-np4.sh)";
  auto ck = Make(2);
  ASSERT_TRUE(ck);
  auto arrays = MakeArrays(Size(), Rank());
  ASSERT_TRUE(RegisterAll(ck.get(), &arrays).ok());
  FillAll(&arrays, 1);
  ASSERT_TRUE(ck->Save(1).ok());
  FillAll(&arrays, 2);
  ASSERT_TRUE(ck->SaveAsync(2).ok());
  Status s = ck->Wait();
  ASSERT_TRUE(s.ok()) << s;
  MPI_Barrier(MPI_COMM_WORLD);
  uint64_t shard_bytes = 0;  // rank 2's shard and index, as saved
  std::string name;
  if (Rank() == 0) {
    auto local = Versions(local_ + "/" + ck->run_id());
    ASSERT_EQ(local.size(), 2u);
    name = local[1].name;
    shard_bytes = stdfs::file_size(local[1].path + "/shard-2.h5") + stdfs::file_size(local[1].path + "/shard-2.json");
  }
  DamageLevel3();
  MPI_Bcast(&shard_bytes, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  name = BcastString(name);
  WipeNode(ck->run_id(), 1, 2);
  RestoreResult rr;
  ASSERT_EQ(RestoreAndCheck(ck.get(), &arrays, 2, 2, &rr), "");
  const CheckpointStats& st = ck->last_stats();
  if (Rank() >= 2) {
    EXPECT_GT(st.bytes_partner, 0u);
  } else {
    EXPECT_EQ(st.bytes_partner, 0u);
  }
  if (Rank() == 2) {
    EXPECT_EQ(st.bytes_partner, shard_bytes);
  }
  EXPECT_GT(st.total_bytes_partner, 0u);
  EXPECT_EQ(st.total_bytes_level3, 0u);
  EXPECT_EQ(st.total_bytes_level2, st.total_bytes);
  if (Rank() == 2) {
    EXPECT_TRUE(stdfs::exists(local_ + "/" + ck->run_id() + "/" + name + "/shard-2.h5"));
  }
}

// Two neighbouring nodes wiped (4 nodes of one rank): rank 1's own copy and
// its partner copy (on node 2) are both gone: level 3.
TEST_F(Levels, TwoNeighbouringNodesWipedRestoreFromLevel3) {
  ASSERT_EQ(Size(), 4) << "run at 4 ranks (ckpt-levels-np4.sh)";
  auto ck = Make(1);
  ASSERT_TRUE(ck);
  auto arrays = MakeArrays(Size(), Rank());
  ASSERT_TRUE(RegisterAll(ck.get(), &arrays).ok());
  FillAll(&arrays, 3);
  ASSERT_TRUE(ck->Save(3).ok());
  WipeNode(ck->run_id(), 1, 1);
  WipeNode(ck->run_id(), 2, 1);
  RestoreResult rr;
  ASSERT_EQ(RestoreAndCheck(ck.get(), &arrays, 3, 3, &rr), "");
  EXPECT_EQ(ck->last_stats().total_bytes_level2, 0u);
  EXPECT_EQ(ck->last_stats().total_bytes_partner, 0u);
  EXPECT_GT(ck->last_stats().total_bytes_level3, 0u);
}

// With shared_every 2, level 3 gets saves 1 and 3 (the first and every
// second); level 2 keeps the newest two; restore takes level 2's newest.
TEST_F(Levels, SharedEverySecondSaveAndLevel2KeepsTwo) {
  ASSERT_EQ(Size(), 4) << "run at 4 ranks (ckpt-levels-np4.sh)";
  auto ck = Make(2, /*shared_every=*/2);
  ASSERT_TRUE(ck);
  auto arrays = MakeArrays(Size(), Rank());
  ASSERT_TRUE(RegisterAll(ck.get(), &arrays).ok());
  std::vector<bool> shared;
  for (int64_t step = 1; step <= 4; ++step) {
    FillAll(&arrays, step);
    Status s = ck->Save(step);
    ASSERT_TRUE(s.ok()) << s;
    shared.push_back(ck->last_stats().shared);
  }
  EXPECT_EQ(shared, (std::vector<bool>{true, false, true, false}));
  MPI_Barrier(MPI_COMM_WORLD);
  if (Rank() == 0) {
    std::vector<int64_t> steps3, steps2;
    for (const auto& v : Versions(root_)) steps3.push_back(v.step);
    for (const auto& v : Versions(local_ + "/" + ck->run_id())) steps2.push_back(v.step);
    EXPECT_EQ(steps3, (std::vector<int64_t>{1, 3}));
    EXPECT_EQ(steps2, (std::vector<int64_t>{3, 4}));
  }
  // ReadMetadata names the version Restore takes: level 2's newest.
  std::optional<CheckpointMetadata> md;
  Status m = ck->ReadMetadata(RestoreOptions(), &md);
  ASSERT_TRUE(m.ok()) << m;
  ASSERT_TRUE(md.has_value());
  EXPECT_EQ(md->step, 4);
  EXPECT_EQ(md->version_path.rfind(local_, 0), 0u) << md->version_path;
  EXPECT_EQ(md->arrays.size(), arrays.size());
  RestoreResult rr;
  ASSERT_EQ(RestoreAndCheck(ck.get(), &arrays, 4, 2, &rr), "");
}

// A step that level 2 holds and level 3 does not (shared_every 2): a
// restore of that step takes it from level 2 (it once failed with NotFound
// from level 3's listing before level 2 was asked); a step neither holds
// is NotFound naming it.
TEST_F(Levels, AStepOnlyLevel2HoldsIsRestoredFromLevel2) {
  ASSERT_EQ(Size(), 4) << "run at 4 ranks (ckpt-levels-np4.sh)";
  auto ck = Make(2, /*shared_every=*/2);
  ASSERT_TRUE(ck);
  auto arrays = MakeArrays(Size(), Rank());
  ASSERT_TRUE(RegisterAll(ck.get(), &arrays).ok());
  for (int64_t step = 1; step <= 4; ++step) {
    FillAll(&arrays, step);
    ASSERT_TRUE(ck->Save(step).ok());
  }
  // Level 3: steps 1 and 3; level 2: steps 3 and 4.
  RestoreOptions four;
  four.step = 4;
  std::optional<CheckpointMetadata> md;
  Status s = ck->ReadMetadata(four, &md);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_TRUE(md.has_value());
  EXPECT_EQ(md->step, 4);
  FillAll(&arrays, 1);
  RestoreResult rr;
  s = ck->Restore(four, &rr);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(rr.step, 4);
  EXPECT_EQ(rr.level, 2);
  EXPECT_EQ(CheckAll(arrays, 4), "");
  RestoreOptions two;
  two.step = 2;
  s = ck->Restore(two, &rr);
  EXPECT_EQ(s.code(), Code::kNotFound) << s;
  EXPECT_NE(s.message().find("step 2"), std::string::npos) << s;
  EXPECT_EQ(CheckAll(arrays, 4), "") << "a failed restore leaves the arrays as they were";
  s = ck->ReadMetadata(two, &md);
  EXPECT_EQ(s.code(), Code::kNotFound) << s;
  // Level 3 alone does not hold step 4.
  four.from_level = 3;
  s = ck->Restore(four, &rr);
  EXPECT_EQ(s.code(), Code::kNotFound) << s;
  EXPECT_NE(s.message().find("step 4"), std::string::npos) << s;
}

// A flipped bit in one rank's own node-local copy: that rank gets its
// partner copy over MPI and reads again; the restore stays in level 2
// (level 3 is damaged, so it could not have come from there) and the
// copy fetched replaces the damaged one.
TEST_F(Levels, AnOwnCopyThatFailsItsChecksumIsReadFromThePartnerCopy) {
  ASSERT_EQ(Size(), 4) << "run at 4 ranks (ckpt-levels-np4.sh)";
  auto ck = Make(2);
  ASSERT_TRUE(ck);
  auto arrays = MakeArrays(Size(), Rank());
  ASSERT_TRUE(RegisterAll(ck.get(), &arrays).ok());
  FillAll(&arrays, 1);
  ASSERT_TRUE(ck->Save(1).ok());
  FillAll(&arrays, 2);
  ASSERT_TRUE(ck->Save(2).ok());
  MPI_Barrier(MPI_COMM_WORLD);
  std::string damaged;
  if (Rank() == 0) {
    auto local = Versions(local_ + "/" + ck->run_id());
    ASSERT_EQ(local.size(), 2u);
    damaged = local[1].path + "/shard-3.h5";
    FlipDataByte(damaged, "s_f32");
  }
  DamageLevel3();
  damaged = BcastString(damaged);
  MPI_Barrier(MPI_COMM_WORLD);
  ZeroAll(&arrays);
  RestoreResult rr;
  Status s = ck->Restore(RestoreOptions(), &rr);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(rr.step, 2);
  EXPECT_EQ(rr.level, 2);
  EXPECT_TRUE(rr.fallbacks.empty());
  EXPECT_EQ(CheckAll(arrays, 2), "");
  const CheckpointStats& st = ck->last_stats();
  if (Rank() == 3) {
    EXPECT_GT(st.bytes_partner, 0u);
  } else {
    EXPECT_EQ(st.bytes_partner, 0u);
  }
  EXPECT_EQ(st.total_bytes_level3, 0u);
  MPI_Barrier(MPI_COMM_WORLD);
  if (Rank() == 0) {
    EXPECT_EQ(Slurp(damaged), Slurp(stdfs::path(damaged).parent_path().string() + "/partner/shard-3.h5"))
        << "the own copy is the partner copy again";
  }
}

// Rank 3's own node-local copy and its partner copy both fail their
// checksums: level 2 gives the version up and level 3 restores it; the
// RestoreResult says which node-local version was tried and why it was
// not restored (not only the log line), on every rank.
TEST_F(Levels, ALevel2FallbackReachesTheRestoreResult) {
  ASSERT_EQ(Size(), 4) << "run at 4 ranks (ckpt-levels-np4.sh)";
  auto ck = Make(2);
  ASSERT_TRUE(ck);
  auto arrays = MakeArrays(Size(), Rank());
  ASSERT_TRUE(RegisterAll(ck.get(), &arrays).ok());
  FillAll(&arrays, 1);
  ASSERT_TRUE(ck->Save(1).ok());
  MPI_Barrier(MPI_COMM_WORLD);
  std::string local_version;
  if (Rank() == 0) {
    auto local = Versions(local_ + "/" + ck->run_id());
    ASSERT_EQ(local.size(), 1u);
    local_version = local[0].path;
    FlipDataByte(local_version + "/shard-3.h5", "s_f32");
    FlipDataByte(local_version + "/partner/shard-3.h5", "s_f32");
  }
  local_version = BcastString(local_version);
  RestoreResult rr;
  ASSERT_EQ(RestoreAndCheck(ck.get(), &arrays, 1, 3, &rr), "");
  EXPECT_TRUE(rr.fallbacks.empty()) << "level 3's copy was not skipped";
  ASSERT_TRUE(rr.level2_fallback.has_value());
  EXPECT_EQ(rr.level2_fallback->path, local_version);
  EXPECT_EQ(rr.level2_fallback->step, 1);
  EXPECT_EQ(rr.level2_fallback->reason.code(), Code::kCorruption) << rr.level2_fallback->reason;
  EXPECT_NE(rr.level2_fallback->reason.message().find("shard-3.h5"), std::string::npos) << rr.level2_fallback->reason;
  EXPECT_FALSE(rr.level2_fallback->counted);
  RestoreResult again;
  Status s = ck->Restore(RestoreOptions(), &again);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(again.level, 3) << "the damaged node-local copies are still damaged";
  RestoreOptions only3;
  only3.from_level = 3;
  s = ck->Restore(only3, &again);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_FALSE(again.level2_fallback.has_value()) << "level 2 was not tried";
}

// Issue 32, item 6: $BATON_LOCAL_DIR (the plugin's --baton-local-dir, or a
// site's local_root on every --baton step) once turned level 2 on for every
// program. It is an offer: taken with level2 = true only; a local_dir
// given is the program's own choice.
TEST_F(Levels, Level2IsTheJobsChoice) {
  setenv("BATON_LOCAL_DIR", local_.c_str(), 1);
  CheckpointOptions o = Options();
  auto ck = MakeCheckpointer(o);
  ASSERT_TRUE(ck);
  auto arrays = MakeArrays(Size(), Rank());
  ASSERT_TRUE(RegisterAll(ck.get(), &arrays).ok());
  FillAll(&arrays, 1);
  ASSERT_TRUE(ck->Save(1).ok());
  EXPECT_EQ(ck->last_stats().level, 3);
  EXPECT_FALSE(ck->last_stats().level2_committed);
  EXPECT_FALSE(stdfs::exists(local_ + "/" + ck->run_id())) << "the offer was taken without the job asking";
  ck.reset();

  o.level2 = true;  // the job opts in
  ck = MakeCheckpointer(o);
  unsetenv("BATON_LOCAL_DIR");
  ASSERT_TRUE(ck);
  ASSERT_TRUE(RegisterAll(ck.get(), &arrays).ok());
  ASSERT_TRUE(ck->Save(2).ok());
  EXPECT_TRUE(ck->last_stats().level2_committed);
  EXPECT_TRUE(stdfs::exists(local_ + "/" + ck->run_id()));
  ck.reset();

  o.level2 = false;
  o.local_dir = local_;  // the program's own directory
  ck = MakeCheckpointer(o);
  ASSERT_TRUE(ck);
  ASSERT_TRUE(RegisterAll(ck.get(), &arrays).ok());
  ASSERT_TRUE(ck->Save(3).ok());
  EXPECT_TRUE(ck->last_stats().level2_committed);
}

// Counts what a save does in the shared directory `dir`: listings of it,
// replacements of its run file, directories made in it.
class SharedDirCounter : public ckpt::fs::EnvWrapper {
 public:
  explicit SharedDirCounter(std::string dir) : EnvWrapper(ckpt::fs::Env::Default()), dir_(std::move(dir)) {}
  Status ListDir(const std::string& path, std::vector<std::string>* names) override {
    if (path == dir_) ++lists;
    return EnvWrapper::ListDir(path, names);
  }
  Status Rename(const std::string& from, const std::string& to) override {
    if (to == dir_ + "/run") ++run_writes;
    return EnvWrapper::Rename(from, to);
  }
  Status CreateDir(const std::string& path, mode_t mode, bool exist_ok) override {
    if (path.rfind(dir_ + "/", 0) == 0) ++mkdirs;
    return EnvWrapper::CreateDir(path, mode, exist_ok);
  }
  void Reset() { lists = run_writes = mkdirs = 0; }
  std::atomic<int> lists{0}, run_writes{0}, mkdirs{0};

 private:
  std::string dir_;
};

// Issue 32, item 7: every save with level 2 once listed the shared
// directory, rewrote its run file and made a version directory there, even
// when level 3 was not due (and removed the directory at the commit). Now
// a save to level 2 alone touches nothing there: its sequence number was
// reserved by the last save that did; a level-3 save still does all three.
TEST_F(Levels, ASaveToLevel2AloneLeavesTheSharedDirectoryAlone) {
  // The directory is made by the Checkpointer: its parent's real path.
  const stdfs::path root(root_);
  SharedDirCounter env((stdfs::canonical(root.parent_path()) / root.filename()).string());
  auto ck = Make(/*ranks_per_node=*/2, /*shared_every=*/3, &env);
  auto arrays = MakeArrays(Size(), Rank());
  ASSERT_TRUE(RegisterAll(ck.get(), &arrays).ok());
  std::vector<std::string> names;
  for (int64_t step = 1; step <= 4; ++step) {
    FillAll(&arrays, step);
    env.Reset();
    Status s = ck->Save(step);
    ASSERT_TRUE(AllRanks(s.ok())) << s;
    const bool due = step % 3 == 1;
    EXPECT_EQ(ck->last_stats().shared, due) << "step " << step;
    EXPECT_TRUE(ck->last_stats().level2_committed) << "step " << step;
    names.push_back(stdfs::path(ck->last_stats().version_path).filename().string());
    if (Rank() != 0) continue;
    if (due) {
      EXPECT_GE(env.lists.load(), 1) << "step " << step;
      EXPECT_GE(env.run_writes.load(), 1) << "step " << step;
      EXPECT_GE(env.mkdirs.load(), 1) << "step " << step;
    } else {
      EXPECT_EQ(env.lists.load(), 0) << "step " << step << ": the shared directory was listed";
      EXPECT_EQ(env.run_writes.load(), 0) << "step " << step << ": the run file was rewritten";
      EXPECT_EQ(env.mkdirs.load(), 0) << "step " << step << ": a directory was made in it";
    }
  }
  // The sequence numbers still grow, never reused.
  for (size_t i = 1; i < names.size(); ++i) {
    uint64_t a = 0, b = 0;
    int64_t sa = 0, sb = 0;
    ASSERT_TRUE(ckpt::ParseVersionName(names[i - 1], &a, &sa) && ckpt::ParseVersionName(names[i], &b, &sb)) << names[i];
    EXPECT_LT(a, b) << names[i - 1] << " " << names[i];
  }
  EXPECT_EQ(Steps(root_), (std::vector<std::string>{"1", "4"}));
  ZeroAll(&arrays);
  RestoreResult result;
  Status s = ck->Restore(RestoreOptions(), &result);
  ASSERT_TRUE(AllRanks(s.ok())) << s;
  EXPECT_EQ(result.step, std::optional<int64_t>(4));
  EXPECT_EQ(CheckAll(arrays, 4), "");
}

// Issue 32, item 6: Save with level 2 (SaveAsync completed at once) once
// kept a whole staging copy of the rank's state (replicated arrays whole)
// for the Checkpointer's life. It writes from the registered arrays in
// place now: bounded as a synchronous save is (no whole copy).
TEST_F(Levels, ASaveWithLevel2MakesNoStagingCopy) {
  if (Size() > 4) GTEST_SKIP() << "48 MiB per rank: run at up to 4 ranks";
  auto ck = Make(/*ranks_per_node=*/2);
  const uint64_t rows = 48 * 256, cols = 1024;  // 48 MiB of f32, replicated (the worst case: copied whole)
  std::vector<float> w(rows * cols);
  for (size_t i = 0; i < w.size(); i += 1024) w[i] = static_cast<float>(i);  // touch every page
  ASSERT_TRUE(ck->RegisterReplicated("w", w.data(), DType::kF32, {rows, cols}).ok());
  ResetPeakRss();
  const uint64_t before = PeakRss();
  Status s = ck->Save(1);
  ASSERT_TRUE(AllRanks(s.ok())) << s;
  EXPECT_TRUE(ck->last_stats().level2_committed);
  const uint64_t after = PeakRss();
#if !defined(__SANITIZE_THREAD__)
  // What the save needs: the partner exchange's send and receive pieces (at
  // most 16 MiB each: ckpt/partner_exchange.cc) of this rank's file (its
  // 1/Size() of the rows), and a few MiB of HDF5's and MPI's (27.4-27.6 MiB
  // in all at 4 ranks, 2026-12-07). A whole staging copy would add the
  // array's 48 MiB on top.
  const uint64_t share = rows * cols * sizeof(float) / static_cast<uint64_t>(Size());
  const uint64_t bound = 2 * std::min<uint64_t>(share, 16ull << 20) + (12ull << 20);
  EXPECT_LT(after - before, bound) << "save with level 2, peak grew by " << ((after - before) >> 20) << " MiB";
  EXPECT_LT(bound, rows * cols * sizeof(float)) << "the bound would not see a whole copy";
#endif
  // Save leaves no snapshot: Rollback is SaveAsync's.
  int64_t step = -1;
  EXPECT_FALSE(ck->Rollback(&step).ok());
  std::fill(w.begin(), w.end(), 0.0f);
  std::optional<int64_t> restored;
  s = ck->Restore(&restored);
  ASSERT_TRUE(AllRanks(s.ok())) << s;
  EXPECT_EQ(restored, std::optional<int64_t>(1));
  EXPECT_EQ(w[1024], 1024.0f);
}

// The background writer's copy to level 3 stops between pieces once its
// save is abandoned (a stop signal's bounded wait), leaving neither the
// file nor its temporary; not abandoned, it copies every byte.
TEST_F(Levels, ACopyToLevel3StopsWhenAbandoned) {
  if (Rank() == 0) {
    ckpt::fs::Env* env = ckpt::fs::Env::Default();
    const std::string dir = stdfs::path(root_).parent_path().string();
    const std::string from = dir + "/big", to = dir + "/copy";
    std::string bytes(40u << 20, '\0');  // three pieces of 16 MiB
    for (size_t i = 0; i < bytes.size(); i += 4096) bytes[i] = static_cast<char>(i / 4096);
    {
      std::ofstream out(from, std::ios::binary);
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    std::atomic<bool> abandon{false};
    uint64_t copied = 0;
    Status s = ckpt::CopyFileDurably(env, from, to, 0600, &copied, &abandon);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(copied, bytes.size());
    EXPECT_TRUE(Slurp(to) == bytes);
    stdfs::remove(to);
    abandon = true;
    s = ckpt::CopyFileDurably(env, from, to, 0600, &copied, &abandon);
    EXPECT_EQ(s.code(), Code::kAborted) << s;
    EXPECT_FALSE(stdfs::exists(to));
    for (const auto& e : stdfs::directory_iterator(dir)) {
      EXPECT_NE(e.path().filename().string().rfind(".copy.tmp.", 0), 0u) << e.path() << ": a temporary left";
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// A version only level 2 holds (shared_every 2) is marked in rank 0's
// node-local copy while it is read: a restore that ends leaves no mark; two
// that died reading it (their marks left behind) quarantine it, and the
// next older version is restored instead of crashing every restart.
TEST_F(Levels, AVersionOnlyInLevel2IsQuarantinedAfterRestoresThatDied) {
  ASSERT_EQ(Size(), 4) << "run at 4 ranks (ckpt-levels-np4.sh)";
  auto ck = Make(2, /*shared_every=*/2);
  ASSERT_TRUE(ck);
  auto arrays = MakeArrays(Size(), Rank());
  ASSERT_TRUE(RegisterAll(ck.get(), &arrays).ok());
  for (int64_t step = 1; step <= 2; ++step) {
    FillAll(&arrays, step);
    ASSERT_TRUE(ck->Save(step).ok());
  }
  ZeroAll(&arrays);
  RestoreResult rr;
  Status s = ck->Restore(RestoreOptions(), &rr);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(rr.step, 2);
  EXPECT_EQ(rr.level, 2);
  MPI_Barrier(MPI_COMM_WORLD);
  if (Rank() == 0) {
    auto local = Versions(local_ + "/" + ck->run_id());
    ASSERT_EQ(local.size(), 2u);
    EXPECT_EQ(local[1].restore_failures, 0) << "a restore that ended left its mark";
    for (int i = 0; i < 2; ++i) {  // two restores that died while reading it
      std::string token;
      ASSERT_TRUE(ckpt::BeginRestoreAttempt(ckpt::fs::Env::Default(), local[1], &token).ok());
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  ASSERT_EQ(RestoreAndCheck(ck.get(), &arrays, 1, 2, &rr), "");
}

// A version quarantined in level 3 (its restores failed there) is not
// taken from level 2 either: the next older one is.
TEST_F(Levels, AVersionQuarantinedInLevel3IsSkippedInLevel2) {
  ASSERT_EQ(Size(), 4) << "run at 4 ranks (ckpt-levels-np4.sh)";
  auto ck = Make(2);
  ASSERT_TRUE(ck);
  auto arrays = MakeArrays(Size(), Rank());
  ASSERT_TRUE(RegisterAll(ck.get(), &arrays).ok());
  for (int64_t step = 1; step <= 2; ++step) {
    FillAll(&arrays, step);
    ASSERT_TRUE(ck->Save(step).ok());
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (Rank() == 0) {
    auto v = Versions(root_);
    ASSERT_EQ(v.size(), 2u);
    for (int i = 0; i < 2; ++i) {
      EXPECT_TRUE(ckpt::RecordRestoreFailure(ckpt::fs::Env::Default(), v[1], "test: corrupt").ok());
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  ZeroAll(&arrays);
  RestoreResult rr;
  Status s = ck->Restore(RestoreOptions(), &rr);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(rr.step, 1);
  EXPECT_EQ(rr.level, 2);
  EXPECT_EQ(rr.quarantined, 1);
  EXPECT_EQ(CheckAll(arrays, 1), "");
}

// A full node-local disk (ENOSPC under HDF5 on rank 1's local writes): the
// save falls back to level 3 with a warning and succeeds; restore reads it
// from level 3.
TEST_F(Levels, AFullLocalDiskFallsBackToLevel3) {
  ASSERT_EQ(Size(), 4) << "run at 4 ranks (ckpt-levels-np4.sh)";
  auto ck = Make(2, /*shared_every=*/5);
  ASSERT_TRUE(ck);
  auto arrays = MakeArrays(Size(), Rank());
  ASSERT_TRUE(RegisterAll(ck.get(), &arrays).ok());
  FillAll(&arrays, 1);
  ASSERT_TRUE(ck->Save(1).ok());  // the first save goes to both levels
  FillAll(&arrays, 2);
  if (Rank() == 1) ArmWriteFault(local_, ENOSPC);
  Status s = ck->Save(2);
  if (Rank() == 1) {
    EXPECT_GT(FailedWrites(), 0);
    DisarmWriteFault();
  }
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(ck->last_stats().level, 3);
  EXPECT_TRUE(ck->last_stats().shared);  // not due (shared_every 5), written because level 2 failed
  EXPECT_FALSE(ck->last_stats().level2_committed);
  EXPECT_NE(ck->last_stats().level2_failure, "");
  EXPECT_EQ(ck->last_stats().level3_failure, "");
  MPI_Barrier(MPI_COMM_WORLD);
  if (Rank() == 0) {
    auto shared = Versions(root_);
    ASSERT_EQ(shared.size(), 2u);
    EXPECT_EQ(shared[1].step, 2);
    EXPECT_EQ(shared[1].status, ckpt::VersionStatus::kComplete);
    // What the failed level-2 save left on the node (the other ranks'
    // shards and indexes) is gone: a full disk is not kept full by it.
    EXPECT_EQ(Steps(local_ + "/" + ck->run_id()), (std::vector<std::string>{"1"}));
  }
  RestoreResult rr;
  ASSERT_EQ(RestoreAndCheck(ck.get(), &arrays, 2, 3, &rr), "");
  // The disk has room again: the next save goes to level 2 (not due at
  // level 3), and level-2 retention ran.
  FillAll(&arrays, 3);
  s = ck->Save(3);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(ck->last_stats().level, 2);
  EXPECT_FALSE(ck->last_stats().shared);
  MPI_Barrier(MPI_COMM_WORLD);
  if (Rank() == 0) {
    EXPECT_EQ(Steps(local_ + "/" + ck->run_id()), (std::vector<std::string>{"1", "3"}));
  }
}

// A failed level-2 save left by an earlier run (a crash: shards, no
// manifest, newer than every complete version) is removed when the next
// Checkpointer of the directory starts (it holds the writer lock: no save
// is in progress).
TEST_F(Levels, ACrashedLevel2SaveOfAnEarlierRunIsRemovedAtStart) {
  ASSERT_EQ(Size(), 4) << "run at 4 ranks (ckpt-levels-np4.sh)";
  auto ck = Make(2);
  ASSERT_TRUE(ck);
  auto arrays = MakeArrays(Size(), Rank());
  ASSERT_TRUE(RegisterAll(ck.get(), &arrays).ok());
  FillAll(&arrays, 1);
  ASSERT_TRUE(ck->Save(1).ok());
  const std::string run = ck->run_id();
  ck.reset();
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string crashed = local_ + "/" + run + "/" + ckpt::VersionName(99, 2);
  if (Rank() == 0) {
    stdfs::create_directories(crashed);
    std::ofstream(crashed + "/shard-0.h5") << std::string(4096, 'x');
  }
  MPI_Barrier(MPI_COMM_WORLD);
  ck = Make(2);
  ASSERT_TRUE(ck);
  MPI_Barrier(MPI_COMM_WORLD);
  if (Rank() == 0) {
    EXPECT_FALSE(stdfs::exists(crashed));
    EXPECT_EQ(Steps(local_ + "/" + run), (std::vector<std::string>{"1"}));
  }
}

// Level 3's directory is the record (docs/recovery.md): versions removed
// from it (rm -r, or RemoveVersion as `baton ckpt gc` does: a user rolling
// back after a divergence) are not restored from their level-2 copies,
// here or in a requeued run; the newest version level 3 still holds is.
TEST_F(Levels, AVersionRemovedFromLevel3DoesNotComeBackFromLevel2) {
  ASSERT_EQ(Size(), 4) << "run at 4 ranks (ckpt-levels-np4.sh)";
  auto ck = Make(2);
  ASSERT_TRUE(ck);
  auto arrays = MakeArrays(Size(), Rank());
  ASSERT_TRUE(RegisterAll(ck.get(), &arrays).ok());
  for (int64_t step = 1; step <= 3; ++step) {
    FillAll(&arrays, step);
    ASSERT_TRUE(ck->Save(step).ok());
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (Rank() == 0) {
    auto v = Versions(root_);
    ASSERT_EQ(v.size(), 3u);
    EXPECT_EQ(Steps(local_ + "/" + ck->run_id()), (std::vector<std::string>{"2", "3"}));
    stdfs::remove_all(v[2].path);
    EXPECT_TRUE(ckpt::RemoveVersion(ckpt::fs::Env::Default(), v[1]).ok());
  }
  MPI_Barrier(MPI_COMM_WORLD);
  for (int run = 0; run < 2; ++run) {  // this Checkpointer, then a requeued run's
    std::optional<CheckpointMetadata> md;
    Status s = ck->ReadMetadata(RestoreOptions(), &md);
    ASSERT_TRUE(s.ok()) << s;
    ASSERT_TRUE(md.has_value());
    EXPECT_EQ(md->step, 1);
    RestoreResult rr;
    ASSERT_EQ(RestoreAndCheck(ck.get(), &arrays, 1, 3, &rr), "");
    ck.reset();
    ck = Make(2);
    ASSERT_TRUE(ck);
    ASSERT_TRUE(RegisterAll(ck.get(), &arrays).ok());
  }
}

// A version level 3 never got (shared_every 2) follows the level-3 version
// newest at its save: restored from level 2 while that one is there, not
// once it is removed (the rollback goes on to what level 3 holds).
TEST_F(Levels, ALevel2OnlyVersionIsNotRestoredOnceTheVersionItFollowedIsRemoved) {
  ASSERT_EQ(Size(), 4) << "run at 4 ranks (ckpt-levels-np4.sh)";
  auto ck = Make(2, /*shared_every=*/2);
  ASSERT_TRUE(ck);
  auto arrays = MakeArrays(Size(), Rank());
  ASSERT_TRUE(RegisterAll(ck.get(), &arrays).ok());
  for (int64_t step = 1; step <= 4; ++step) {
    FillAll(&arrays, step);
    ASSERT_TRUE(ck->Save(step).ok());
  }
  // Level 3: steps 1 and 3; level 2: steps 3 and 4.
  ZeroAll(&arrays);
  RestoreResult rr;
  Status s = ck->Restore(RestoreOptions(), &rr);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(rr.step, 4);
  EXPECT_EQ(rr.level, 2);
  MPI_Barrier(MPI_COMM_WORLD);
  if (Rank() == 0) {
    auto v = Versions(root_);
    ASSERT_EQ(v.size(), 2u);
    EXPECT_EQ(v[1].step, 3);
    stdfs::remove_all(v[1].path);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  ASSERT_EQ(RestoreAndCheck(ck.get(), &arrays, 1, 3, &rr), "");
}

// Level 3 failing (EIO on rank 1's copy to the shared directory) does not
// abandon a version level 2 committed: the save returns OK, reports the
// outcome per level, leaves no partial version in level 3, and restores
// (here and in a requeued run) use the level-2 copy.
TEST_F(Levels, AFailedLevel3KeepsTheVersionLevel2Committed) {
  ASSERT_EQ(Size(), 4) << "run at 4 ranks (ckpt-levels-np4.sh)";
  ckpt::fs::FaultEnv fault;
  auto ck = Make(2, /*shared_every=*/1, &fault);
  ASSERT_TRUE(ck);
  auto arrays = MakeArrays(Size(), Rank());
  ASSERT_TRUE(RegisterAll(ck.get(), &arrays).ok());
  FillAll(&arrays, 1);
  ASSERT_TRUE(ck->Save(1).ok());
  FillAll(&arrays, 2);
  if (Rank() == 1) fault.Inject(ckpt::fs::FaultEnv::Fault::kFailWrite, root_ + "/v");
  Status s = ck->Save(2);
  ASSERT_TRUE(s.ok()) << s;
  const CheckpointStats st = ck->last_stats();
  EXPECT_EQ(st.level, 2);
  EXPECT_FALSE(st.shared);
  EXPECT_TRUE(st.level2_committed);
  EXPECT_EQ(st.level2_failure, "");
  EXPECT_NE(st.level3_failure.find("rank 1"), std::string::npos) << st.level3_failure;
  EXPECT_EQ(st.version_path.rfind(local_, 0), 0u) << st.version_path;
  MPI_Barrier(MPI_COMM_WORLD);
  if (Rank() == 0) {
    EXPECT_EQ(Steps(root_), (std::vector<std::string>{"1"}));
    EXPECT_EQ(Steps(local_ + "/" + ck->run_id()), (std::vector<std::string>{"1", "2"}));
  }
  for (int run = 0; run < 2; ++run) {  // this Checkpointer, then a requeued run's
    RestoreResult rr;
    ASSERT_EQ(RestoreAndCheck(ck.get(), &arrays, 2, 2, &rr), "");
    ck.reset();
    ck = Make(2);
    ASSERT_TRUE(ck);
    ASSERT_TRUE(RegisterAll(ck.get(), &arrays).ok());
  }
  // The next save goes to both levels again.
  FillAll(&arrays, 3);
  s = ck->Save(3);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(ck->last_stats().shared);
  EXPECT_EQ(ck->last_stats().level3_failure, "");
}

// Both levels failing (ENOSPC on rank 1's node-local write, then EIO on
// the shared copy of rank 2): the save fails on every rank and neither
// level keeps anything of it.
TEST_F(Levels, BothLevelsFailingFailTheSave) {
  ASSERT_EQ(Size(), 4) << "run at 4 ranks (ckpt-levels-np4.sh)";
  ckpt::fs::FaultEnv fault;
  auto ck = Make(2, /*shared_every=*/1, &fault);
  ASSERT_TRUE(ck);
  auto arrays = MakeArrays(Size(), Rank());
  ASSERT_TRUE(RegisterAll(ck.get(), &arrays).ok());
  FillAll(&arrays, 1);
  ASSERT_TRUE(ck->Save(1).ok());
  FillAll(&arrays, 2);
  if (Rank() == 1) ArmWriteFault(local_, ENOSPC);
  if (Rank() == 2) fault.Inject(ckpt::fs::FaultEnv::Fault::kFailWrite, root_ + "/v");
  Status s = ck->Save(2);
  if (Rank() == 1) DisarmWriteFault();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("abandoned"), std::string::npos) << s;
  // Save writes as SaveAsync with level 2 on, but the program called Save:
  // no "asynchronous save" it never made is named (issue 32, item 11).
  EXPECT_NE(s.message().find("the save of step 2"), std::string::npos) << s;
  EXPECT_EQ(s.message().find("asynchronous"), std::string::npos) << s;
  MPI_Barrier(MPI_COMM_WORLD);
  if (Rank() == 0) {
    EXPECT_EQ(Steps(root_), (std::vector<std::string>{"1"}));
    EXPECT_EQ(Steps(local_ + "/" + ck->run_id()), (std::vector<std::string>{"1"}));
  }
  ZeroAll(&arrays);
  RestoreResult rr;
  s = ck->Restore(RestoreOptions(), &rr);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(rr.step, 1);
}

// WaitOrAbandon's bound holds through the commit of a level-2 save: with
// every shard written (and copied to level 3) in time, a partner exchange
// slowed to 2 s a piece (3 pieces a shard: 6 s and more unbounded) stops
// at the bound plus one piece; the version is then saved at level 3 (its
// shards were there), level 2's failure reported, no partner file left.
TEST_F(Levels, WaitOrAbandonBoundHoldsThroughASlowPartnerExchange) {
  ASSERT_EQ(Size(), 4) << "run at 4 ranks (ckpt-levels-np4.sh)";
  SlowPartnerEnv slow(2.0);
  auto ck = Make(2, /*shared_every=*/1, &slow);
  ASSERT_TRUE(ck);
  const uint64_t row = 1u << 20, rows = 33;  // 33 MiB a rank: pieces of 16, 16 and 1 MiB
  std::vector<uint8_t> big(rows * row, static_cast<uint8_t>(Rank() + 1));
  ASSERT_TRUE(ck->RegisterSharded("big", big.data(), DType::kU8, {rows * static_cast<uint64_t>(Size()), row},
                                  rows * static_cast<uint64_t>(Rank()), rows)
                  .ok());
  ASSERT_TRUE(ck->SaveAsync(1).ok());
  // Every writer done (its shard local and in level 3) before the stop.
  while (ck->async_status().state == AsyncSaveStatus::State::kWriting) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(ck->async_status().state, AsyncSaveStatus::State::kWritten);
  MPI_Barrier(MPI_COMM_WORLD);
  const double bound = 0.5;
  const auto t0 = std::chrono::steady_clock::now();
  Status s = ck->WaitOrAbandon(bound);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(s.ok()) << s;
  // The bound, one 2-s piece, and the level-3 commit's indexes, manifest
  // and fsyncs on a loaded machine; unbounded it is 6 s of pieces alone.
  EXPECT_LT(took, bound + 2.0 + 2.0);
  const CheckpointStats st = ck->last_stats();
  EXPECT_EQ(st.level, 3);
  EXPECT_TRUE(st.shared);
  EXPECT_FALSE(st.level2_committed);
  EXPECT_NE(st.level2_failure.find("deadline"), std::string::npos) << st.level2_failure;
  MPI_Barrier(MPI_COMM_WORLD);
  if (Rank() == 0) {
    EXPECT_EQ(Steps(root_), (std::vector<std::string>{"1"}));
    EXPECT_TRUE(Versions(local_ + "/" + ck->run_id()).empty()) << "the cut level-2 save is removed";
  }
  std::fill(big.begin(), big.end(), 0);
  RestoreResult rr;
  s = ck->Restore(RestoreOptions(), &rr);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(rr.step, 1);
  EXPECT_EQ(rr.level, 3);
  EXPECT_EQ(big.front(), static_cast<uint8_t>(Rank() + 1));
  EXPECT_EQ(big.back(), static_cast<uint8_t>(Rank() + 1));
}

// Issue 32, item 11: the node-local shard's blocks are reserved after HDF5
// creates it and before the rows: a node-local disk without room is a
// level-2 failure naming the file and the bytes, and level 3 takes the save.
TEST_F(Levels, ANodeLocalDiskWithoutRoomFailsTheReservation) {
  ASSERT_EQ(Size(), 4) << "run at 4 ranks (ckpt-levels-np4.sh)";
  ckpt::fs::FaultEnv fault;
  auto ck = Make(2, /*shared_every=*/5, &fault);
  ASSERT_TRUE(ck);
  auto arrays = MakeArrays(Size(), Rank());
  ASSERT_TRUE(RegisterAll(ck.get(), &arrays).ok());
  FillAll(&arrays, 1);
  ASSERT_TRUE(ck->Save(1).ok());
  FillAll(&arrays, 2);
  if (Rank() == 1) fault.Inject(ckpt::fs::FaultEnv::Fault::kNoSpaceToReserve, local_ + "/");
  Status s = ck->Save(2);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(ck->last_stats().level, 3);
  EXPECT_FALSE(ck->last_stats().level2_committed);
  const std::string& why = ck->last_stats().level2_failure;
  if (Rank() == 1) {
    EXPECT_NE(why.find("shard-1.h5 (reserving "), std::string::npos) << why;
    EXPECT_NE(why.find("No space left on device"), std::string::npos) << why;
  }
  ZeroAll(&arrays);
  RestoreResult rr;
  s = ck->Restore(RestoreOptions(), &rr);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(rr.step, 2);
  EXPECT_EQ(CheckAll(arrays, 2), "");
}

// Issue 32, item 11: partner/ replaced by a symlink to a copy outside the
// version is never read through: with node 1's own copies gone, the
// restore does not take its ranks' shards from the link (level 3 instead).
TEST_F(Levels, APartnerDirectoryThatIsASymlinkIsNotUsed) {
  ASSERT_EQ(Size(), 4) << "run at 4 ranks (ckpt-levels-np4.sh)";
  auto ck = Make(2);
  ASSERT_TRUE(ck);
  auto arrays = MakeArrays(Size(), Rank());
  ASSERT_TRUE(RegisterAll(ck.get(), &arrays).ok());
  FillAll(&arrays, 1);
  ASSERT_TRUE(ck->Save(1).ok());
  MPI_Barrier(MPI_COMM_WORLD);
  if (Rank() == 0) {
    auto local = Versions(local_ + "/" + ck->run_id());
    ASSERT_EQ(local.size(), 1u);
    const std::string outside = local_ + "/../outside-partner";
    stdfs::rename(local[0].path + "/partner", outside);
    stdfs::create_directory_symlink(outside, local[0].path + "/partner");
    ckpt::fs::Env* env = ckpt::fs::Env::Default();
    Status s = ckpt::CheckPartnerDir(env, local[0].path);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s;
    EXPECT_NE(s.message().find(local[0].path + "/partner is a symlink"), std::string::npos) << s;
    for (int k = 2; k < 4; ++k) {
      stdfs::remove(local[0].path + "/shard-" + std::to_string(k) + ".h5");
      stdfs::remove(local[0].path + "/shard-" + std::to_string(k) + ".json");
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  ZeroAll(&arrays);
  RestoreResult rr;
  Status s = ck->Restore(RestoreOptions(), &rr);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(rr.step, 1);
  EXPECT_EQ(rr.level, 3) << "node 1's shards were read through partner/'s symlink";
  EXPECT_EQ(ck->last_stats().total_bytes_partner, 0u);
  EXPECT_EQ(CheckAll(arrays, 1), "");
}

// Issue 32, item 11: a pre-made node-local run directory of mode 0777, or
// owned by another user, was used without complaint. It is refused
// (NodeLocalLevel::Open names the path, its mode and owner) and level 2
// stays off: the save goes to level 3 alone, nothing is written there.
TEST_F(Levels, APreMadeRunDirectoryOpenToOthersIsRefused) {
  ASSERT_EQ(Size(), 4) << "run at 4 ranks (ckpt-levels-np4.sh)";
  std::string run_id;
  {
    auto ck = Make(2);
    ASSERT_TRUE(ck);
    run_id = ck->run_id();
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string run_dir = local_ + "/" + run_id;
  const bool root = ::geteuid() == 0;
  if (!root && Rank() == 0) std::printf("SKIP: the directory of another user needs root (chown); mode 0777 only\n");
  for (int c = 0; c < (root ? 2 : 1); ++c) {
    if (Rank() == 0) {
      stdfs::remove_all(run_dir);
      ASSERT_EQ(::mkdir(run_dir.c_str(), 0700), 0) << run_dir;
      if (c == 0) {
        ASSERT_EQ(::chmod(run_dir.c_str(), 0777), 0);
      } else {
        ASSERT_EQ(::chown(run_dir.c_str(), 65534, 65534), 0);  // nobody
      }
      ckpt::NodeLocalLevel level;
      Status s = level.Open(ckpt::fs::Env::Default(), local_, run_id, 0700);
      EXPECT_EQ(s.code(), Code::kInvalidArgument) << s;
      EXPECT_NE(s.message().find(run_dir + " has mode " + (c == 0 ? "0777 and owner uid " + std::to_string(::geteuid()) : std::string("0700 and owner uid 65534"))),
                std::string::npos) << s;
      EXPECT_NE(s.message().find(c == 0 ? "writable by others" : "not this user's"), std::string::npos) << s;
      EXPECT_FALSE(level.on());
    }
    MPI_Barrier(MPI_COMM_WORLD);
    auto ck = Make(2);
    ASSERT_TRUE(ck);
    ASSERT_EQ(ck->run_id(), run_id) << "another run's directory would prove nothing";
    auto arrays = MakeArrays(Size(), Rank());
    ASSERT_TRUE(RegisterAll(ck.get(), &arrays).ok());
    FillAll(&arrays, c + 1);
    Status s = ck->Save(c + 1);
    ASSERT_TRUE(s.ok()) << s;
    MPI_Barrier(MPI_COMM_WORLD);
    if (Rank() == 0) {
      EXPECT_TRUE(stdfs::is_empty(run_dir)) << "level 2 wrote into the refused directory";
      EXPECT_EQ(Steps(root_).back(), std::to_string(c + 1));
    }
  }
}

// Rank 0 replaces everything in level-2 version `to` (every node's shards
// and indexes, the partner copies, the manifest) with version `from`'s, as
// a copy of an older, self-consistent version would; `to`'s level-3 record
// stays, so that the rule of item 1 alone would take it. Every rank waits.
void ReplaceLevel2Version(const std::string& run_dir, const std::string& from, const std::string& to) {
  if (Rank() == 0) {
    const stdfs::path t = stdfs::path(run_dir) / to, f = stdfs::path(run_dir) / from;
    for (const auto& e : stdfs::directory_iterator(t)) {
      if (e.path().filename() != ckpt::kLevel3RecordName) stdfs::remove_all(e.path());
    }
    for (const auto& e : stdfs::directory_iterator(f)) {
      if (e.path().filename() == ckpt::kLevel3RecordName) continue;
      stdfs::copy(e.path(), t / e.path().filename(), stdfs::copy_options::recursive);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// Issue 32, item 11: a node-local version is bound to its step. Version
// v2-s2 (level 2 alone, shared_every 2) holding v1-s1's consistent files:
// not restored as step 2 (it restored step 1's rows as step 2): level 2's
// manifest names step 1 where its directory says 2, and level 3's step 1
// is restored instead.
TEST_F(Levels, ANodeLocalVersionHoldingAnOlderOnesFilesIsNotRestored) {
  ASSERT_EQ(Size(), 4) << "run at 4 ranks (ckpt-levels-np4.sh)";
  auto ck = Make(2, /*shared_every=*/2);
  ASSERT_TRUE(ck);
  auto arrays = MakeArrays(Size(), Rank());
  ASSERT_TRUE(RegisterAll(ck.get(), &arrays).ok());
  for (int64_t step = 1; step <= 2; ++step) {
    FillAll(&arrays, step);
    ASSERT_TRUE(ck->Save(step).ok());
  }
  const std::string run_dir = local_ + "/" + ck->run_id();
  std::string v1, v2;
  if (Rank() == 0) {
    auto local = Versions(run_dir);
    ASSERT_EQ(local.size(), 2u);
    v1 = local[0].name;
    v2 = local[1].name;
    EXPECT_EQ(Steps(root_), (std::vector<std::string>{"1"}));
  }
  v1 = BcastString(v1);
  v2 = BcastString(v2);
  ReplaceLevel2Version(run_dir, v1, v2);
  RestoreResult rr;
  ASSERT_EQ(RestoreAndCheck(ck.get(), &arrays, 1, 3, &rr), "");
  ASSERT_TRUE(rr.level2_fallback.has_value());
  EXPECT_NE(rr.level2_fallback->reason.message().find("manifest step 1, but its version " + v2 + " is step 2"),
            std::string::npos)
      << rr.level2_fallback->reason;
}

// Issue 32, item 11: a node-local version is bound to level 3's copy of it.
// Step 6 saved twice (v2-s6, then v3-s6 of other rows, both levels); v3-s6's
// node-local files replaced by v2-s6's, whose step matches: level 3 holds
// v3-s6 under another manifest, so level 2's is not restored as it (it
// restored v2-s6's rows), level 3's is.
TEST_F(Levels, ANodeLocalVersionThatIsNotLevel3sCopyIsNotRestored) {
  ASSERT_EQ(Size(), 4) << "run at 4 ranks (ckpt-levels-np4.sh)";
  auto ck = Make(2);
  ASSERT_TRUE(ck);
  auto arrays = MakeArrays(Size(), Rank());
  ASSERT_TRUE(RegisterAll(ck.get(), &arrays).ok());
  FillAll(&arrays, 5);
  ASSERT_TRUE(ck->Save(5).ok());
  FillAll(&arrays, 6);
  ASSERT_TRUE(ck->Save(6).ok());
  FillAll(&arrays, 7);
  ASSERT_TRUE(ck->Save(6).ok());
  // Untouched, the newest step-6 version restores from level 2.
  ZeroAll(&arrays);
  RestoreResult rr;
  Status s = ck->Restore(RestoreOptions(), &rr);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(rr.level, 2);
  EXPECT_EQ(CheckAll(arrays, 7), "");
  const std::string run_dir = local_ + "/" + ck->run_id();
  std::string older, newer;
  if (Rank() == 0) {
    auto local = Versions(run_dir);
    ASSERT_EQ(local.size(), 2u);
    older = local[0].name;
    newer = local[1].name;
    EXPECT_EQ(local[0].step, 6);
    EXPECT_EQ(local[1].step, 6);
  }
  older = BcastString(older);
  newer = BcastString(newer);
  ReplaceLevel2Version(run_dir, older, newer);
  ZeroAll(&arrays);
  s = ck->Restore(RestoreOptions(), &rr);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(rr.step, 6);
  EXPECT_EQ(rr.level, 3);
  EXPECT_EQ(stdfs::path(rr.version_path).filename(), newer) << rr.version_path;
  EXPECT_EQ(CheckAll(arrays, 7), "");
  ASSERT_TRUE(rr.level2_fallback.has_value());
  EXPECT_NE(rr.level2_fallback->reason.message().find("its manifest is not level 3's of the same version"),
            std::string::npos)
      << rr.level2_fallback->reason;
}

}  // namespace
}  // namespace baton::ckpt_testing
