// Shards of groups that span ranks (issue 15, items 4 and 5): every rank
// that wrote into a shard flushes it before the commit, and one member's
// failed data write reaches the group through an agreement before any
// further collective HDF5 call, so the group fails together instead of
// hanging in mismatched collectives.
//
// Run at 1, 3 and 8 ranks with the other ckpt tests (ckpt-np*.sh).
#include <mpi.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "baton/checkpointer.h"
#include "ckpt/fs/fault_env.h"
#include "tests/mpi/ckpt_fixture.h"
#include "tests/mpi/write_fault.h"

namespace baton::ckpt_testing {
namespace {

using ckpt::fs::FaultEnv;

// Fails the test process (not just the test) if `body` takes longer than
// `seconds`: a hang in a collective would otherwise hang the suite.
template <typename Fn>
void WithinSeconds(int seconds, const char* what, Fn&& body) {
  std::atomic<bool> done{false};
  std::thread watchdog([&] {
    for (int i = 0; i < seconds * 10 && !done.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (!done.load()) {
      std::fprintf(stderr, "FAIL: %s did not finish within %d s (a rank is stuck in a collective)\n", what, seconds);
      std::_Exit(1);
    }
  });
  body();
  done = true;
  watchdog.join();
}

// One shard for the whole job: every rank writes rows into shard-0.h5.
// Each must sync it (on its own node its pages are its own) before the
// ranks agree the shards are written.
TEST_F(CkptTest, EveryRankThatWroteSyncsTheShardBeforeTheCommit) {
  FaultEnv env;
  CheckpointOptions o = Options(Size());
  o.env = &env;
  auto ck = MakeCheckpointer(o);
  auto arrays = MakeArrays(Size(), Rank());
  ASSERT_TRUE(AllRanks(RegisterAll(ck.get(), &arrays).ok()));
  env.ClearEvents();
  Status s = ck->Save(1);
  ASSERT_TRUE(AllRanks(s.ok())) << s;
  const std::string shard = "sync " + ck->last_stats().version_path + "/shard-0.h5";
  int synced = -1, agreed = -1;
  const std::vector<std::string> ev = env.events();
  for (size_t i = 0; i < ev.size(); ++i) {
    if (ev[i] == shard && synced < 0) synced = static_cast<int>(i);
    if (ev[i] == "mark agreed") agreed = static_cast<int>(i);
  }
  EXPECT_GE(synced, 0) << "rank " << Rank() << " wrote rows of shard-0.h5 and never synced it";
  EXPECT_GT(agreed, synced);
}

// A sync that fails on the last member (not the group's first rank) fails
// the save on every rank, naming that rank and the file.
TEST_F(CkptTest, AShardSyncFailingOnAnyMemberFailsTheSave) {
  FaultEnv env;
  CheckpointOptions o = Options(Size());
  o.env = &env;
  auto ck = MakeCheckpointer(o);
  auto arrays = MakeArrays(Size(), Rank());
  ASSERT_TRUE(AllRanks(RegisterAll(ck.get(), &arrays).ok()));
  const int victim = Size() - 1;
  if (Rank() == victim) env.Inject(FaultEnv::Fault::kFailSync, "shard-0.h5");
  Status s = ck->Save(1);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("rank " + std::to_string(victim) + ": "), std::string::npos) << s;
  EXPECT_NE(s.message().find("shard-0.h5"), std::string::npos) << s;
  MPI_Barrier(MPI_COMM_WORLD);
  if (Rank() == 0) {
    for (const ckpt::VersionInfo& v : Versions(root_)) EXPECT_NE(v.status, ckpt::VersionStatus::kComplete) << v.name;
  }
}

// One rank's data write into the shard fails (ENOSPC from write(2), the
// last rank's first plain write into the shard: its rows, written after
// the group created and closed the file, by Env::Default): every rank
// returns the failure, naming that rank, within a deadline (before: the
// group hung);
// no version is committed; the next save works. Independent transfers (the
// default); collective ones: ALostCollectiveWriteFailsTheSave below.
TEST_F(CkptTest, OneMembersFailedDataWriteReachesTheGroup) {
  CheckpointOptions o = Options(Size());
  auto ck = MakeCheckpointer(o);
  auto arrays = MakeArrays(Size(), Rank(), 64 * static_cast<uint64_t>(Size()));
  ASSERT_TRUE(AllRanks(RegisterAll(ck.get(), &arrays).ok()));
  const int victim = Size() - 1;
  // Inside a version directory: not the run file, nor ompio's files named after the shard.
  if (Rank() == victim) ArmWriteFault(root_ + "/v", ENOSPC, 1, WriteCalls::kPlainOnly);
  Status s;
  WithinSeconds(120, "a save with one member's failed write", [&] { s = ck->Save(1); });
  const int failed_writes = FailedWrites();
  DisarmWriteFault();
  if (Rank() == victim) {
    EXPECT_EQ(failed_writes, 1) << "the fault did not hit one write: the test tests nothing";
  }
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("rank " + std::to_string(victim) + ": "), std::string::npos) << s;
  EXPECT_NE(s.message().find("shard-0.h5"), std::string::npos) << s;
  MPI_Barrier(MPI_COMM_WORLD);
  if (Rank() == 0) {
    for (const ckpt::VersionInfo& v : Versions(root_)) EXPECT_NE(v.status, ckpt::VersionStatus::kComplete) << v.name;
  }
  FillAll(&arrays, 2);
  WithinSeconds(120, "the save after the fault", [&] { s = ck->Save(2); });
  ASSERT_TRUE(AllRanks(s.ok())) << s;
  ASSERT_EQ(RestoreNewestOnEveryRank(ck.get(), &arrays, 2), "");
}

// Collective transfers: the rows reach the file through MPI-IO's two-phase
// path, where an aggregator writes other ranks' rows and Open MPI 4.1's
// ompio drops its failed pwrite (H5Dwrite and H5Fclose succeed). Each rank
// then reads its rows back and compares their hash, so the lost write fails
// the save on every rank (before: the save committed a shard whose bytes
// were never written, found only by the restore's checksums). The fault:
// the first pwrite into the shard on every rank that makes one (here the
// aggregator's first: a piece of the rows of the first dataset).
TEST_F(CkptTest, ALostCollectiveWriteFailsTheSave) {
  CheckpointOptions o = Options(Size());
  o.transfer = Transfer::kCollective;
  auto ck = MakeCheckpointer(o);
  auto arrays = MakeArrays(Size(), Rank(), 64 * static_cast<uint64_t>(Size()));
  ASSERT_TRUE(AllRanks(RegisterAll(ck.get(), &arrays).ok()));
  FillAll(&arrays, 1);  // not zeros: a lost write reads back as zeros
  ArmWriteFault(root_ + "/v", ENOSPC, 1);
  Status s;
  WithinSeconds(120, "a save with a lost collective write", [&] { s = ck->Save(1); });
  const int failed_writes = FailedWrites();
  DisarmWriteFault();
  int total = 0;
  MPI_Allreduce(&failed_writes, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  ASSERT_GE(total, 1) << "the fault hit no write: the test tests nothing";
  EXPECT_FALSE(s.ok()) << "rank " << Rank() << ": " << total << " writes failed and the save succeeded";
  // Reported by the read-back, or by HDF5 where ompio does report it (one
  // rank: no two-phase aggregation).
  EXPECT_TRUE(s.message().find("read back") != std::string::npos ||
              s.message().find("H5Dwrite failed") != std::string::npos)
      << s;
  EXPECT_NE(s.message().find("shard-0.h5"), std::string::npos) << s;
  MPI_Barrier(MPI_COMM_WORLD);
  if (Rank() == 0) {
    for (const ckpt::VersionInfo& v : Versions(root_)) EXPECT_NE(v.status, ckpt::VersionStatus::kComplete) << v.name;
  }
  FillAll(&arrays, 2);
  WithinSeconds(120, "the save after the fault", [&] { s = ck->Save(2); });
  ASSERT_TRUE(AllRanks(s.ok())) << s;
  ASSERT_EQ(RestoreNewestOnEveryRank(ck.get(), &arrays, 2), "");
}

// Collective transfers: the metadata HDF5 writes at the close goes through
// MPI-IO's collective path (H5Pset_coll_metadata_write), where ompio drops
// a failed pwrite: with ENOSPC for every positioned write of the group's
// first rank, H5Fclose, the sync and the save succeeded and committed a
// shard no reader can open (with independent transfers, the default, this
// was so until the metadata moved to the first rank alone: the next case).
// The first rank now opens the closed file again, and each rank reads its
// rows back: the save fails on every rank, the previous version stays the
// newest. Runs from three ranks up (ckpt-np3, ckpt-np8): at one rank ompio
// reports the failed write, H5Fclose fails, and HDF5 1.10 then crashes at
// MPI_Finalize (HDFFV-11052: H5F__dest frees the file but leaves its ID,
// which the library's clean-up closes again; fixed in HDF5 1.14.1); at two
// ranks HDF5 1.10's collective metadata flush hangs after the failed write
// (rank 0 in MPI_File_set_view's allreduce, rank 1 in the barrier of
// H5AC__run_sync_point), inside one HDF5 call where no agreement of baton's
// can reach. Both are limits of HDF5 1.10 (docs/checkpoint-format.md).
TEST_F(CkptTest, MetadataLostAtTheCloseFailsTheSave) {
  if (Size() < 3) {
    GTEST_SKIP() << Size() << " rank(s): HDF5 1.10 " << (Size() == 1 ? "crashes at MPI_Finalize after the failed H5Fclose (HDFFV-11052)" : "hangs in its own collective metadata flush after the failed write")
                 << "; this case runs at 3 and 8 ranks";
  }
  CheckpointOptions o = Options(Size());
  o.transfer = Transfer::kCollective;
  auto ck = MakeCheckpointer(o);
  auto arrays = MakeArrays(Size(), Rank(), 64 * static_cast<uint64_t>(Size()));
  ASSERT_TRUE(AllRanks(RegisterAll(ck.get(), &arrays).ok()));
  FillAll(&arrays, 1);
  Status s = ck->Save(1);
  ASSERT_TRUE(AllRanks(s.ok())) << s;
  FillAll(&arrays, 2);
  if (Rank() == 0) ArmWriteFault(root_ + "/v", ENOSPC, -1, WriteCalls::kPositionedOnly);
  WithinSeconds(120, "a save whose metadata write is lost", [&] { s = ck->Save(2); });
  const int failed_writes = FailedWrites();
  DisarmWriteFault();
  if (Rank() == 0) {
    EXPECT_GE(failed_writes, 1) << "the fault hit no write: the test tests nothing";
  }
  EXPECT_FALSE(s.ok()) << "rank " << Rank() << ": the save succeeded without its metadata";
  // The metadata check, or the rows' read-back when the lost write was a
  // piece of rows (rank 0's positioned writes carry both).
  EXPECT_TRUE(s.message().find("did not reach the file") != std::string::npos ||
              s.message().find("read back") != std::string::npos)
      << s;
  MPI_Barrier(MPI_COMM_WORLD);
  if (Rank() == 0) {
    for (const ckpt::VersionInfo& v : Versions(root_)) {
      if (v.step == 2) {
        EXPECT_NE(v.status, ckpt::VersionStatus::kComplete) << v.name;
      }
    }
  }
  ASSERT_EQ(RestoreNewestOnEveryRank(ck.get(), &arrays, 1), "");
}

// Independent transfers (the default): the group's first rank alone writes
// the file's metadata, with sec2; the other members write only their rows,
// with write(2). So a positioned write (the pwrite family: HDF5 through
// MPI-IO, or ompio itself) on any other member is a failure armed for
// nothing: none is made, and the save succeeds. Before, the metadata was
// written collectively through MPI-IO, its entries spread over the members
// (HDF5's distributed strategy), each member's failure dropped or hung.
TEST_F(CkptTest, OnlyTheGroupsFirstRankWritesTheMetadata) {
  CheckpointOptions o = Options(Size());
  auto ck = MakeCheckpointer(o);
  auto arrays = MakeArrays(Size(), Rank(), 64 * static_cast<uint64_t>(Size()));
  ASSERT_TRUE(AllRanks(RegisterAll(ck.get(), &arrays).ok()));
  FillAll(&arrays, 1);
  if (Rank() != 0) ArmWriteFault(root_ + "/v", EIO, -1, WriteCalls::kPositionedOnly);
  Status s;
  WithinSeconds(120, "a save with every positioned write of the other members failing", [&] { s = ck->Save(1); });
  const int failed_writes = FailedWrites();
  DisarmWriteFault();
  if (Rank() != 0) {  // (rank 0 was not armed: its count is an earlier case's)
    EXPECT_EQ(failed_writes, 0) << "rank " << Rank() << " made positioned writes into the shard";
  }
  ASSERT_TRUE(AllRanks(s.ok())) << s;
  ASSERT_EQ(RestoreNewestOnEveryRank(ck.get(), &arrays, 1), "");
}

}  // namespace
}  // namespace baton::ckpt_testing
