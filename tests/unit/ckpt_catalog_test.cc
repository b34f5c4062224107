#include "ckpt/catalog.h"

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <string>
#include <vector>

#include "ckpt/fs/fault_env.h"
#include "ckpt/manifest.h"
#include "ckpt/restore_failures.h"
#include "ckpt/retention.h"
#include "ckpt/version_removal.h"
#include "tests/unit/ckpt_temp_dir.h"

namespace baton::ckpt {
namespace {

TEST(CkptCatalog, VersionNames) {
  EXPECT_EQ(VersionName(12, 400), "v00000012-s400");
  EXPECT_EQ(VersionName(123456789, 0), "v123456789-s0");
  uint64_t seq = 0;
  int64_t step = 0;
  ASSERT_TRUE(ParseVersionName("v00000012-s400", &seq, &step));
  EXPECT_EQ(seq, 12u);
  EXPECT_EQ(step, 400);
  ASSERT_TRUE(ParseVersionName("v123456789-s7", &seq, &step));
  EXPECT_EQ(seq, 123456789u);
  for (const char* bad : {"", "v", "v00000012", "v0000012-s4", "v000000012-s4", "v00000012-s04", "v00000012-s",
                          "x00000012-s4", "v00000012-s-4", "v00000012-s+4", "v00000012-s4x", "v-0000012-s4",
                          "v99999999999999999999-s1", "v00000001-s99999999999999999999", "v00000012-s4.tmp"}) {
    EXPECT_FALSE(ParseVersionName(bad, &seq, &step)) << bad;
  }
}

class CkptCatalogDir : public ::testing::Test {
 protected:
  fs::Env* env = fs::Env::Default();
  TempDir dir;

  std::string Version(uint64_t seq, int64_t step, bool complete) {
    const std::string p = dir / VersionName(seq, step);
    EXPECT_TRUE(env->CreateDir(p, 0755, false).ok());
    if (complete) {
      EXPECT_TRUE(WriteWholeFile(env, p + "/" + kManifestName, "{}").ok());
    }
    return p;
  }
  std::vector<VersionInfo> List(int max_failures = 2) {
    std::vector<VersionInfo> v;
    Status s = ListVersions(env, dir.path(), max_failures, &v);
    EXPECT_TRUE(s.ok()) << s;
    return v;
  }
};

TEST_F(CkptCatalogDir, ListsVersionsWithTheirStatus) {
  Version(3, 30, true);
  Version(1, 10, true);
  Version(2, 20, false);
  // A manifest that is a symlink does not make a version complete.
  const std::string v6 = Version(6, 60, false);
  ASSERT_EQ(::symlink((dir / "v00000001-s10/manifest.json").c_str(), (v6 + "/manifest.json").c_str()), 0);
  // Not versions: a symlink to a version, a file with a version's name, other names.
  ASSERT_EQ(::symlink((dir / "v00000001-s10").c_str(), (dir / "v00000004-s40").c_str()), 0);
  ASSERT_TRUE(WriteWholeFile(env, dir / "v00000005-s50", "").ok());
  ASSERT_TRUE(env->CreateDir(dir / "scratch", 0755, false).ok());
  const auto v = List();
  ASSERT_EQ(v.size(), 4u);
  EXPECT_EQ(v[0].name, "v00000001-s10");
  EXPECT_EQ(v[0].path, dir / "v00000001-s10");
  EXPECT_EQ(v[0].step, 10);
  EXPECT_EQ(v[0].status, VersionStatus::kComplete);
  EXPECT_EQ(v[1].status, VersionStatus::kIncomplete);
  EXPECT_EQ(v[2].seq, 3u);
  EXPECT_EQ(v[3].seq, 6u);
  EXPECT_EQ(v[3].status, VersionStatus::kIncomplete);
  EXPECT_EQ(NextSeq(v), 7u);
  EXPECT_EQ(NextSeq({}), 1u);
  EXPECT_EQ(VersionStatusName(VersionStatus::kQuarantined), "quarantined");
}

TEST_F(CkptCatalogDir, MissingDirectoryIsNotFound) {
  std::vector<VersionInfo> v;
  EXPECT_EQ(ListVersions(env, dir / "nope", 2, &v).code(), Code::kNotFound);
}

TEST_F(CkptCatalogDir, RestoreFailuresAreCountedAndQuarantine) {
  Version(1, 10, true);
  auto v = List();
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].restore_failures, 0);
  fs::FaultEnv fenv;
  ASSERT_TRUE(RecordRestoreFailure(&fenv, v[0], "rank 3: shard-1.h5: xxh3 mismatch\nin layer0").ok());
  const auto events = fenv.events();
  ASSERT_EQ(events.size(), 4u);
  // Durably (ckpt/fs/durable_write.h), through a temporary of its own.
  EXPECT_EQ(events[0].rfind("create " + v[0].path + "/.restore-failures.tmp.", 0), 0u) << events[0];
  EXPECT_EQ(events[2].rfind("rename " + v[0].path + "/.restore-failures.tmp.", 0), 0u) << events[2];
  EXPECT_EQ(events[3], "syncdir " + v[0].path);
  v = List();
  EXPECT_EQ(v[0].restore_failures, 1);
  EXPECT_EQ(v[0].status, VersionStatus::kComplete);
  ASSERT_TRUE(RecordRestoreFailure(env, v[0], "again").ok());
  v = List();
  EXPECT_EQ(v[0].restore_failures, 2);
  EXPECT_EQ(v[0].status, VersionStatus::kQuarantined);
  EXPECT_EQ(List(3)[0].status, VersionStatus::kComplete);
  EXPECT_EQ(List(0)[0].status, VersionStatus::kComplete);  // 0: never quarantine
  std::string text;
  ASSERT_TRUE(env->ReadFile(v[0].path + "/" + kRestoreFailuresName, 1 << 20, &text).ok());
  EXPECT_NE(text.find("Z rank 3: shard-1.h5: xxh3 mismatch in layer0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("Z again\n"), std::string::npos) << text;
  // Only the version, the manifest and the failures file: no temporary left.
  std::vector<std::string> names;
  ASSERT_TRUE(env->ListDir(v[0].path, &names).ok());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"manifest.json", "restore-failures"}));
}

// An attempt counts as a failure until it ends; ended, it leaves nothing
// (or the failure found); attempts that never end add up to quarantine.
TEST_F(CkptCatalogDir, UnfinishedRestoreAttemptsCountAsFailures) {
  Version(1, 10, true);
  auto v = List();
  ASSERT_EQ(v.size(), 1u);
  std::string token;
  ASSERT_TRUE(BeginRestoreAttempt(env, v[0], &token).ok());
  EXPECT_EQ(List()[0].restore_failures, 1);
  ASSERT_TRUE(EndRestoreAttempt(env, v[0], token, nullptr).ok());
  EXPECT_EQ(List()[0].restore_failures, 0);
  fs::FileInfo info;
  EXPECT_EQ(env->Stat(v[0].path + "/" + kRestoreFailuresName, &info).code(), Code::kNotFound)
      << "an ended attempt leaves no file";

  ASSERT_TRUE(BeginRestoreAttempt(env, v[0], &token).ok());  // never ended: the process "died"
  std::string second;
  ASSERT_TRUE(BeginRestoreAttempt(env, v[0], &second).ok());
  EXPECT_NE(second, token);
  const std::string reason = "rank 1: shard-0.h5: fails its checksum";
  ASSERT_TRUE(EndRestoreAttempt(env, v[0], second, &reason).ok());
  v = List();
  EXPECT_EQ(v[0].restore_failures, 2);
  EXPECT_EQ(v[0].status, VersionStatus::kQuarantined);
  std::string text;
  ASSERT_TRUE(env->ReadFile(v[0].path + "/" + kRestoreFailuresName, 1 << 20, &text).ok());
  EXPECT_NE(text.find("unfinished restore attempt " + token + " (the restoring process ended"), std::string::npos)
      << text;
  EXPECT_EQ(text.find(second), std::string::npos) << text;
  EXPECT_NE(text.find("Z " + reason + "\n"), std::string::npos) << text;
}

// Runs fn, failing (and ending) the test binary if it blocks 10 s: a FIFO
// opened for reading without O_NONBLOCK waits for a writer for ever.
template <typename Fn>
void WithoutBlocking(Fn&& fn) {
  auto done = std::async(std::launch::async, std::forward<Fn>(fn));
  if (done.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    ADD_FAILURE() << "blocked";
    std::_Exit(1);
  }
  done.get();
}

// A FIFO as restore-failures (or the manifest) neither hangs nor fails the
// listing; the version's problem says so; a restore attempt replaces it.
TEST_F(CkptCatalogDir, AFifoInAVersionIsRefusedWithoutBlocking) {
  const std::string v1 = Version(1, 10, true);
  const std::string v2 = Version(2, 20, false);
  ASSERT_EQ(::mkfifo((v1 + "/" + kRestoreFailuresName).c_str(), 0600), 0);
  ASSERT_EQ(::mkfifo((v2 + "/" + kManifestName).c_str(), 0600), 0);
  std::vector<VersionInfo> v;
  WithoutBlocking([&] { v = List(); });
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].status, VersionStatus::kComplete);
  EXPECT_EQ(v[0].restore_failures, 0);
  EXPECT_NE(v[0].problem.find("not a regular file (a FIFO)"), std::string::npos) << v[0].problem;
  EXPECT_EQ(v[1].status, VersionStatus::kIncomplete) << "a FIFO is no manifest";
  std::string text;
  Status s;
  WithoutBlocking([&] { s = env->ReadFile(v2 + "/" + kManifestName, 1 << 20, &text); });
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s;
  std::string token;
  WithoutBlocking([&] { s = BeginRestoreAttempt(env, v[0], &token); });
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(List()[0].restore_failures, 1) << "the FIFO was replaced by the attempt's mark";
}

// One version that cannot be examined (here a stale handle) does not fail
// the listing; it is listed with its problem, and retention leaves it.
TEST_F(CkptCatalogDir, OneUnreadableVersionDoesNotFailTheListing) {
  for (uint64_t seq = 1; seq <= 4; ++seq) Version(seq, static_cast<int64_t>(seq * 10), true);
  fs::FaultEnv fenv;
  fenv.Inject(fs::FaultEnv::Fault::kStaleStat, VersionName(2, 20));
  std::vector<VersionInfo> v;
  Status s = ListVersions(&fenv, dir.path(), 2, &v);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(v.size(), 4u);
  EXPECT_NE(v[1].problem.find("Stale file handle"), std::string::npos) << v[1].problem;
  EXPECT_EQ(v[1].status, VersionStatus::kIncomplete);
  const auto remove = PlanRetention(v, 1);
  ASSERT_EQ(remove.size(), 2u);
  EXPECT_EQ(remove[0].seq, 1u);
  EXPECT_EQ(remove[1].seq, 3u);
}

TEST_F(CkptCatalogDir, AFailedRecordLeavesNoTemporary) {
  Version(1, 10, true);
  auto v = List();
  fs::FaultEnv fenv;
  fenv.Inject(fs::FaultEnv::Fault::kFailRename);
  EXPECT_FALSE(RecordRestoreFailure(&fenv, v[0], "x").ok());
  std::vector<std::string> names;
  ASSERT_TRUE(env->ListDir(v[0].path, &names).ok());
  EXPECT_EQ(names, (std::vector<std::string>{"manifest.json"}));
  EXPECT_EQ(List()[0].restore_failures, 0);
}

VersionInfo V(uint64_t seq, VersionStatus status) {
  VersionInfo v;
  v.seq = seq;
  v.step = static_cast<int64_t>(seq) * 10;
  v.name = VersionName(v.seq, v.step);
  v.status = status;
  return v;
}

std::vector<uint64_t> Seqs(const std::vector<VersionInfo>& v) {
  std::vector<uint64_t> s;
  for (const VersionInfo& x : v) s.push_back(x.seq);
  return s;
}

constexpr VersionStatus C = VersionStatus::kComplete, I = VersionStatus::kIncomplete, Q = VersionStatus::kQuarantined;

TEST_F(CkptCatalogDir, RemoveVersionTakesTheManifestFirst) {
  const std::string p = Version(4, 40, true);
  ASSERT_TRUE(WriteWholeFile(env, p + "/shard-0.h5", "data").ok());
  fs::FaultEnv faults(env);
  // "Killed" right after the manifest went: what is left is an incomplete
  // version (a crashed save for the next retention), never a committed one
  // that lacks its shards.
  VersionInfo v = List()[0];
  ASSERT_EQ(v.status, VersionStatus::kComplete);
  ASSERT_TRUE(faults.RemoveFile(p + "/" + kManifestName).ok());
  EXPECT_EQ(List()[0].status, VersionStatus::kIncomplete);
  // The whole removal: the manifest event comes before any other removal.
  const std::string q = Version(5, 50, true);
  ASSERT_TRUE(WriteWholeFile(env, q + "/shard-0.h5", "data").ok());
  faults.ClearEvents();
  Status s = RemoveVersion(&faults, List().back());
  ASSERT_TRUE(s.ok()) << s;
  const std::vector<std::string> ev = faults.events();
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0], "remove " + q + "/" + kManifestName);
  EXPECT_EQ(ev[1], "syncdir " + q);
  EXPECT_EQ(ev[2], "remove " + q);
  EXPECT_EQ(List().size(), 1u);
}

// The version directory swapped for a symlink between the listing and the
// removal (gc's race, hit 3 times in 7 tries by the review): the removal
// fails and the manifest.json the link leads to is still there.
TEST_F(CkptCatalogDir, AVersionSwappedForASymlinkIsNotFollowed) {
  const std::string p = Version(4, 40, true);
  const VersionInfo v = List()[0];
  TempDir outside;
  ASSERT_TRUE(WriteWholeFile(env, outside / kManifestName, "precious").ok());
  ASSERT_TRUE(env->RemoveTree(p).ok());
  ASSERT_EQ(::symlink(outside.path().c_str(), p.c_str()), 0);
  Status s = RemoveVersion(env, v);
  EXPECT_FALSE(s.ok());
  std::string text;
  ASSERT_TRUE(env->ReadFile(outside / kManifestName, 100, &text).ok()) << "the file outside was removed";
  EXPECT_EQ(text, "precious");
}

// Retention's removal off the saving thread: the rename takes the versions
// out of every listing at once; what remains to remove (with what a removal
// killed half-way left behind) is returned for RemoveVersion, manifest first.
TEST_F(CkptCatalogDir, SetAsideTakesVersionsOutOfTheListingAtOnce) {
  Version(1, 10, true);
  Version(2, 20, false);
  Version(3, 30, true);
  // Left by a process that died while it removed it: a manifest and a shard.
  const std::string left = dir / (std::string(kRemovingPrefix) + VersionName(0, 5));
  ASSERT_TRUE(env->CreateDir(left, 0755, false).ok());
  ASSERT_TRUE(WriteWholeFile(env, left + "/" + kManifestName, "{}").ok());
  ASSERT_TRUE(WriteWholeFile(env, left + "/shard-0.h5", "data").ok());
  std::vector<VersionInfo> all = List();
  ASSERT_EQ(all.size(), 3u) << "a set-aside name is listed as no version";
  const std::vector<VersionInfo> go(all.begin(), all.begin() + 2);
  const std::vector<VersionInfo> aside = SetAsideForRemoval(env, dir.path(), go);
  std::vector<VersionInfo> now = List();
  ASSERT_EQ(now.size(), 1u);
  EXPECT_EQ(now[0].step, 30);
  std::vector<std::string> names;
  for (const VersionInfo& v : aside) names.push_back(v.name);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{kRemovingPrefix + VersionName(0, 5), kRemovingPrefix + VersionName(1, 10),
                                             kRemovingPrefix + VersionName(2, 20)}));
  fs::FaultEnv faults(env);
  for (const VersionInfo& v : aside) {
    EXPECT_TRUE(IsRemovingName(v.name));
    EXPECT_EQ(v.path, dir / v.name);
    faults.ClearEvents();
    Status s = RemoveVersion(&faults, v);
    ASSERT_TRUE(s.ok()) << s;
    // A complete version's manifest (and the leftover's) before anything else of it.
    if (v.name != kRemovingPrefix + VersionName(2, 20)) {
      ASSERT_FALSE(faults.events().empty());
      EXPECT_EQ(faults.events()[0], "remove " + v.path + "/" + kManifestName);
    }
  }
  std::vector<std::string> left_names;
  ASSERT_TRUE(env->ListDir(dir.path(), &left_names).ok());
  EXPECT_EQ(left_names, (std::vector<std::string>{VersionName(3, 30)}));
  EXPECT_FALSE(IsRemovingName(VersionName(3, 30)));
}

// Only the prefix followed by a version name is a removal's leftover: somebody
// else's ".removing-notes" beside the versions is neither listed nor removed.
TEST_F(CkptCatalogDir, LeftoverRemovalsTakeOnlyTheSetAsideNames) {
  const std::string left = dir / (std::string(kRemovingPrefix) + VersionName(4, 40));
  const std::string notes = dir / (std::string(kRemovingPrefix) + "notes");
  ASSERT_TRUE(env->CreateDir(left, 0755, false).ok());
  ASSERT_TRUE(env->CreateDir(notes, 0755, false).ok());
  ASSERT_TRUE(WriteWholeFile(env, dir / (std::string(kRemovingPrefix) + "v1-s1"), "not canonical").ok());
  EXPECT_TRUE(IsRemovingName(std::string(kRemovingPrefix) + VersionName(4, 40)));
  EXPECT_FALSE(IsRemovingName(std::string(kRemovingPrefix) + "notes"));
  EXPECT_FALSE(IsRemovingName(kRemovingPrefix));
  EXPECT_FALSE(IsRemovingName(std::string(kRemovingPrefix) + "v1-s1"));
  const std::vector<VersionInfo> leftovers = LeftoverRemovals(env, dir.path());
  ASSERT_EQ(leftovers.size(), 1u);
  EXPECT_EQ(leftovers[0].path, left);
  EXPECT_TRUE(LeftoverRemovals(env, dir / "missing").empty());
}

// A version whose rename fails is returned as it is, and removed where it is.
TEST_F(CkptCatalogDir, SetAsideReturnsAVersionItCannotRenameAsItIs) {
  Version(1, 10, true);
  Version(2, 20, true);
  // The set-aside name taken by a directory that is not empty: rename(2) refuses.
  const std::string taken = dir / (std::string(kRemovingPrefix) + VersionName(1, 10));
  ASSERT_TRUE(env->CreateDir(taken, 0755, false).ok());
  ASSERT_TRUE(WriteWholeFile(env, taken + "/x", "x").ok());
  const std::vector<VersionInfo> all = List();
  const std::vector<VersionInfo> aside = SetAsideForRemoval(env, dir.path(), {all[0]});
  ASSERT_EQ(aside.size(), 2u);  // the taken name (a leftover), then the version itself
  EXPECT_EQ(aside[0].name, kRemovingPrefix + VersionName(1, 10));
  EXPECT_EQ(aside[1].name, VersionName(1, 10));
  EXPECT_EQ(aside[1].path, all[0].path);
  EXPECT_EQ(List().size(), 2u) << "not renamed: still listed";
  for (const VersionInfo& v : aside) EXPECT_TRUE(RemoveVersion(env, v).ok());
  const std::vector<VersionInfo> now = List();
  ASSERT_EQ(now.size(), 1u);
  EXPECT_EQ(now[0].step, 20);
}

TEST(CkptRetention, KeepsTheNewestKComplete) {
  const std::vector<VersionInfo> v = {V(1, C), V(2, C), V(3, C), V(4, C)};
  EXPECT_EQ(Seqs(PlanRetention(v, 2)), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(Seqs(PlanRetention(v, 4)), (std::vector<uint64_t>{}));
  EXPECT_EQ(Seqs(PlanRetention(v, 9)), (std::vector<uint64_t>{}));
  // keep 0 would remove everything: never the newest complete.
  EXPECT_EQ(Seqs(PlanRetention(v, 0)), (std::vector<uint64_t>{1, 2, 3}));
}

TEST(CkptRetention, CrashedSavesGoASaveInProgressStays) {
  const std::vector<VersionInfo> v = {V(1, I), V(2, C), V(3, I), V(4, C), V(5, I), V(6, I)};
  EXPECT_EQ(Seqs(PlanRetention(v, 5)), (std::vector<uint64_t>{1, 3}));
  EXPECT_EQ(Seqs(PlanRetention(v, 1)), (std::vector<uint64_t>{1, 2, 3}));
}

TEST(CkptRetention, QuarantinedOlderThanTheNewestCompleteGo) {
  const std::vector<VersionInfo> v = {V(1, Q), V(2, C), V(3, Q)};
  // 3 is newer than every complete version: kept (its failures are evidence).
  EXPECT_EQ(Seqs(PlanRetention(v, 3)), (std::vector<uint64_t>{1}));
  // Quarantined versions do not count towards keep.
  const std::vector<VersionInfo> w = {V(1, C), V(2, Q), V(3, C)};
  EXPECT_EQ(Seqs(PlanRetention(w, 2)), (std::vector<uint64_t>{2}));
}

TEST(CkptRetention, NothingCompleteRemovesNothing) {
  const std::vector<VersionInfo> v = {V(1, I), V(2, Q), V(3, I)};
  EXPECT_TRUE(PlanRetention(v, 1).empty());
  EXPECT_TRUE(PlanRetention({}, 1).empty());
}

TEST(CkptRetention, UnsortedInputGivesAscendingOutput) {
  const std::vector<VersionInfo> v = {V(4, C), V(1, C), V(3, I), V(2, C)};
  EXPECT_EQ(Seqs(PlanRetention(v, 1)), (std::vector<uint64_t>{1, 2, 3}));
}

TEST_F(CkptCatalogDir, ResolveInsideAcceptsOnlyPlainRegularFiles) {
  const std::string v = Version(1, 10, true);
  ASSERT_TRUE(WriteWholeFile(env, dir / "secret", "s").ok());
  ASSERT_EQ(::symlink((dir / "secret").c_str(), (v + "/shard-0.h5").c_str()), 0);
  ASSERT_TRUE(env->CreateDir(v + "/sub", 0755, false).ok());
  std::string path;
  ASSERT_TRUE(ResolveInside(env, v, "manifest.json", &path).ok());
  EXPECT_EQ(path, v + "/manifest.json");
  for (const char* bad : {"../secret", "/etc/passwd", "a/b", "", "..", "."}) {
    Status s = ResolveInside(env, v, bad, &path);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("\"" + std::string(bad) + "\""), std::string::npos) << s;
  }
  Status s = ResolveInside(env, v, "shard-0.h5", &path);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("symlink"), std::string::npos) << s;
  EXPECT_EQ(ResolveInside(env, v, "sub", &path).code(), Code::kInvalidArgument);
  EXPECT_EQ(ResolveInside(env, v, "missing.h5", &path).code(), Code::kNotFound);
}

}  // namespace
}  // namespace baton::ckpt
