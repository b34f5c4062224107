// Which restore failures count toward a version's quarantine (issue 15,
// item 1): only corruption (a checksum, size or format mismatch); an I/O
// error, a stale handle or a permission error is transient and leaves the
// version as good as it was. A manifest of a newer format is a hard error,
// and every fallback is in the RestoreResult with its reason.
//
// Run at 1, 3 and 8 ranks with the other ckpt tests (ckpt-np*.sh).
#include <mpi.h>

#include <gtest/gtest.h>

#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "baton/checkpointer.h"
#include "ckpt/catalog.h"
#include "ckpt/fs/fault_env.h"
#include "ckpt/manifest.h"
#include "tests/mpi/ckpt_fixture.h"

namespace baton::ckpt_testing {
namespace {

using ckpt::fs::FaultEnv;

class CkptTransient : public CkptDamage {
 protected:
  // Two versions written through env_ (group size 1: shard-<rank>.h5).
  void SaveTwoWithFaults() {
    CheckpointOptions o = Options(1);
    o.env = &env_;
    ck_ = MakeCheckpointer(o);
    arrays_ = MakeArrays(Size(), Rank());
    ASSERT_TRUE(AllRanks(RegisterAll(ck_.get(), &arrays_).ok()));
    FillAll(&arrays_, 1);
    ASSERT_TRUE(AllRanks(ck_->Save(1).ok()));
    FillAll(&arrays_, 2);
    ASSERT_TRUE(AllRanks(ck_->Save(2).ok()));
    newest_ = ck_->last_stats().version_path;
  }

  // A restore that falls back to step 1 because of a transient failure:
  // reported, not counted, not recorded.
  void ExpectTransientFallback(const std::string& reason) {
    MPI_Barrier(MPI_COMM_WORLD);
    ZeroAll(&arrays_);
    RestoreResult result;
    Status s = ck_->Restore(RestoreOptions(), &result);
    ASSERT_TRUE(AllRanks(s.ok())) << s;
    EXPECT_EQ(result.step, std::optional<int64_t>(1));
    EXPECT_EQ(CheckAll(arrays_, 1), "");
    ASSERT_EQ(result.fallbacks.size(), 1u);
    EXPECT_EQ(result.fallbacks[0].path, newest_);
    EXPECT_FALSE(result.fallbacks[0].counted);
    EXPECT_EQ(result.fallbacks[0].reason.code(), Code::kIOError) << result.fallbacks[0].reason;
    EXPECT_NE(result.fallbacks[0].reason.message().find(reason), std::string::npos) << result.fallbacks[0].reason;
    if (Rank() == 0) {
      EXPECT_FALSE(stdfs::exists(newest_ + "/" + ckpt::kRestoreFailuresName)) << "a transient failure was recorded";
    }
  }

  // After the transient failures, the newest version still restores.
  void ExpectNewestRestores() {
    MPI_Barrier(MPI_COMM_WORLD);
    ZeroAll(&arrays_);
    RestoreResult result;
    Status s = ck_->Restore(RestoreOptions(), &result);
    ASSERT_TRUE(AllRanks(s.ok())) << s;
    EXPECT_EQ(result.step, std::optional<int64_t>(2));
    EXPECT_TRUE(result.fallbacks.empty());
    EXPECT_EQ(CheckAll(arrays_, 2), "");
    if (Rank() == 0) {
      for (const ckpt::VersionInfo& v : Versions(root_)) EXPECT_EQ(v.status, ckpt::VersionStatus::kComplete) << v.name;
    }
  }

  FaultEnv env_;
};

// Rank 0 cannot read the newest manifest (EIO, then EACCES), more times
// than max_restore_failures: the version is never quarantined.
TEST_F(CkptTransient, AnUnreadableManifestIsNotCounted) {
  SaveTwoWithFaults();
  if (Rank() == 0) env_.Inject(FaultEnv::Fault::kFailRead, newest_ + "/manifest.json");
  ExpectTransientFallback("Input/output error (injected)");
  if (Rank() == 0) env_.Inject(FaultEnv::Fault::kDenyRead, newest_ + "/manifest.json");
  ExpectTransientFallback("Permission denied (injected)");
  if (Rank() == 0) env_.Inject(FaultEnv::Fault::kFailRead, newest_ + "/manifest.json");
  ExpectTransientFallback("Input/output error (injected)");
  ExpectNewestRestores();
}

// The last rank's shard gives a stale handle, three times: not counted.
TEST_F(CkptTransient, AStaleShardHandleIsNotCounted) {
  SaveTwoWithFaults();
  const std::string shard = newest_ + "/shard-" + std::to_string(Size() - 1) + ".h5";
  for (int i = 0; i < 3; ++i) {
    if (Rank() == Size() - 1) env_.Inject(FaultEnv::Fault::kStaleStat, shard);
    ExpectTransientFallback("Stale file handle (injected)");
  }
  ExpectNewestRestores();
}

// One rank's corrupt chunk decides, even when a lower rank failed
// transiently at the same time: counted, the reason is the corruption.
TEST_F(CkptTransient, CorruptionOnOneRankCountsOverATransientFailureOnAnother) {
  if (Size() == 1) GTEST_SKIP() << "needs two ranks";
  SaveTwoWithFaults();
  const std::string victim = "shard-" + std::to_string(Size() - 1) + ".h5";
  if (Rank() == 0) {
    env_.Inject(FaultEnv::Fault::kStaleStat, newest_ + "/shard-0.h5");
    stdfs::resize_file(newest_ + "/" + victim, 100);
  }
  ExpectFallback(victim);
}

// A manifest written by a newer baton: InvalidArgument saying so, no
// fallback to the older version (that would silently go back in time),
// nothing recorded, the buffers untouched.
TEST_F(CkptDamage, ANewerManifestFormatIsAHardError) {
  SaveTwo();
  if (Rank() == 0) {
    std::string text = Slurp(newest_ + "/manifest.json");
    const std::string was = "\"format\": " + std::to_string(ckpt::kManifestFormat);
    const size_t at = text.find(was);
    ASSERT_NE(at, std::string::npos) << text;
    text.replace(at, was.size(), "\"format\": 99");
    std::ofstream(newest_ + "/manifest.json", std::ios::trunc) << text;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  ZeroAll(&arrays_);
  RestoreResult result;
  Status s = ck_->Restore(RestoreOptions(), &result);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("manifest format 99 was written by a newer baton"), std::string::npos) << s;
  EXPECT_FALSE(result.step.has_value());
  EXPECT_TRUE(result.fallbacks.empty());
  for (const TestArray& a : arrays_) {
    EXPECT_EQ(a.buf, std::vector<char>(a.buf.size(), 0)) << a.name << " was written";
  }
  if (Rank() == 0) {
    EXPECT_FALSE(stdfs::exists(newest_ + "/" + ckpt::kRestoreFailuresName));
  }
}

}  // namespace
}  // namespace baton::ckpt_testing
