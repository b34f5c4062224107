#include "ckpt/fs/fault_env.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/unit/ckpt_temp_dir.h"

namespace baton::ckpt::fs {
namespace {

class CkptFaultEnv : public ::testing::Test {
 protected:
  FaultEnv env;
  TempDir dir;

  std::string Contents(const std::string& path) {
    std::string out;
    Status s = Env::Default()->ReadFile(path, 1 << 20, &out);
    return s.ok() ? out : "<" + s.ToString() + ">";
  }
};

TEST_F(CkptFaultEnv, FailWriteLeavesNothingAndIsOneShot) {
  env.Inject(FaultEnv::Fault::kFailWrite);
  std::unique_ptr<WritableFile> f;
  ASSERT_TRUE(env.NewWritableFile(dir / "a", 0644, &f).ok());
  Status s = f->Append("abcd", 4);
  EXPECT_EQ(s.code(), Code::kIOError);
  EXPECT_NE(s.message().find("Input/output error (injected)"), std::string::npos) << s;
  EXPECT_NE(s.message().find(dir / "a"), std::string::npos) << s;
  EXPECT_TRUE(f->Append("ef", 2).ok());
  ASSERT_TRUE(f->Close().ok());
  EXPECT_EQ(Contents(dir / "a"), "ef");
}

TEST_F(CkptFaultEnv, ShortWriteLeavesATornFile) {
  env.Inject(FaultEnv::Fault::kShortWrite);
  Status s = WriteWholeFile(&env, dir / "a", "abcdefgh");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("short write of 4 of 8 bytes"), std::string::npos) << s;
  EXPECT_EQ(Contents(dir / "a"), "abcd");
}

// A shard member's rows go through OpenForWriteAt: its writes take the faults too.
TEST_F(CkptFaultEnv, OpenForWriteAtTakesWriteFaults) {
  ASSERT_TRUE(WriteWholeFile(&env, dir / "a", "....").ok());
  env.Inject(FaultEnv::Fault::kNoSpace, "a");
  std::unique_ptr<WritableFile> f;
  ASSERT_TRUE(env.OpenForWriteAt(dir / "a", 1, &f).ok());
  Status s = f->Append("xy", 2);
  EXPECT_NE(s.message().find("No space left on device"), std::string::npos) << s;
  EXPECT_TRUE(f->Append("xy", 2).ok());
  ASSERT_TRUE(f->Close().ok());
  EXPECT_EQ(Contents(dir / "a"), ".xy.");
}

TEST_F(CkptFaultEnv, NoSpace) {
  env.Inject(FaultEnv::Fault::kNoSpace);
  Status s = WriteWholeFile(&env, dir / "a", "x");
  EXPECT_NE(s.message().find("No space left on device"), std::string::npos) << s;
}

TEST_F(CkptFaultEnv, FailSyncAppliesToFilesSyncFileAndSyncDir) {
  env.Inject(FaultEnv::Fault::kFailSync);
  EXPECT_FALSE(WriteWholeFile(&env, dir / "a", "x").ok());
  ASSERT_TRUE(WriteWholeFile(&env, dir / "b", "x").ok());
  env.Inject(FaultEnv::Fault::kFailSync);
  EXPECT_FALSE(env.SyncFile(dir / "b").ok());
  env.Inject(FaultEnv::Fault::kFailSync);
  EXPECT_FALSE(env.SyncDir(dir.path()).ok());
  EXPECT_TRUE(env.SyncDir(dir.path()).ok());
}

TEST_F(CkptFaultEnv, PathPartAndSkipChooseTheOperation) {
  env.Inject(FaultEnv::Fault::kFailWrite, "shard", 1);
  EXPECT_TRUE(WriteWholeFile(&env, dir / "manifest", "x").ok());  // other path
  EXPECT_TRUE(WriteWholeFile(&env, dir / "shard-0", "x").ok());   // skipped
  EXPECT_FALSE(WriteWholeFile(&env, dir / "shard-1", "x").ok());  // this one
  EXPECT_TRUE(WriteWholeFile(&env, dir / "shard-2", "x").ok());   // one-shot
}

// Transient read-side failures, one-shot: EIO and EACCES on reads, ESTALE
// on a stat; the file itself is untouched.
TEST_F(CkptFaultEnv, ReadAndStatFaults) {
  ASSERT_TRUE(WriteWholeFile(&env, dir / "a", "abc").ok());
  std::string text;
  char buf[3];
  env.Inject(FaultEnv::Fault::kFailRead, "a");
  Status s = env.ReadFile(dir / "a", 100, &text);
  EXPECT_EQ(s.code(), Code::kIOError) << s;
  EXPECT_NE(s.message().find("Input/output error (injected)"), std::string::npos) << s;
  env.Inject(FaultEnv::Fault::kDenyRead, "a");
  s = env.ReadAt(dir / "a", 0, 3, buf);
  EXPECT_NE(s.message().find("Permission denied (injected)"), std::string::npos) << s;
  env.Inject(FaultEnv::Fault::kStaleStat, "a");
  FileInfo info;
  s = env.Stat(dir / "a", &info);
  EXPECT_NE(s.message().find("Stale file handle (injected)"), std::string::npos) << s;
  EXPECT_TRUE(env.ReadFile(dir / "a", 100, &text).ok());
  EXPECT_EQ(text, "abc");
  EXPECT_TRUE(env.Stat(dir / "a", &info).ok());
}

TEST_F(CkptFaultEnv, FailRename) {
  ASSERT_TRUE(WriteWholeFile(&env, dir / "a", "x").ok());
  env.Inject(FaultEnv::Fault::kFailRename);
  EXPECT_FALSE(env.Rename(dir / "a", dir / "b").ok());
  EXPECT_FALSE(env.crashed());
  EXPECT_TRUE(env.Rename(dir / "a", dir / "b").ok());
}

TEST_F(CkptFaultEnv, CrashBeforeRenameFailsEverythingAfterUntilCleared) {
  ASSERT_TRUE(WriteWholeFile(&env, dir / "a", "x").ok());
  env.Inject(FaultEnv::Fault::kCrashBeforeRename, "manifest");
  EXPECT_TRUE(env.Rename(dir / "a", dir / "b").ok());  // path does not match
  ASSERT_TRUE(WriteWholeFile(&env, dir / "manifest.json.tmp", "m").ok());
  Status s = env.Rename(dir / "manifest.json.tmp", dir / "manifest.json");
  EXPECT_NE(s.message().find("crashed"), std::string::npos) << s;
  EXPECT_TRUE(env.crashed());
  FileInfo info;
  EXPECT_FALSE(env.Stat(dir / "b", &info).ok());
  EXPECT_FALSE(env.SyncDir(dir.path()).ok());
  EXPECT_FALSE(env.CreateDir(dir / "d", 0755, false).ok());
  EXPECT_FALSE(WriteWholeFile(&env, dir / "c", "x").ok());
  std::vector<std::string> names;
  EXPECT_FALSE(env.ListDir(dir.path(), &names).ok());
  // What a crash leaves: the temporary file, no manifest.
  EXPECT_EQ(Env::Default()->Stat(dir / "manifest.json", &info).code(), Code::kNotFound);
  EXPECT_TRUE(Env::Default()->Stat(dir / "manifest.json.tmp", &info).ok());
  env.Clear();
  EXPECT_FALSE(env.crashed());
  EXPECT_TRUE(env.Rename(dir / "manifest.json.tmp", dir / "manifest.json").ok());
}

TEST_F(CkptFaultEnv, RecordsTheOrderOfSuccessfulCalls) {
  ASSERT_TRUE(env.CreateDir(dir / "v", 0755, false).ok());
  ASSERT_TRUE(WriteWholeFile(&env, dir / "v/shard", "s").ok());
  ASSERT_TRUE(env.SyncFile(dir / "v/shard").ok());
  env.Mark("agreed");
  ASSERT_TRUE(WriteWholeFile(&env, dir / "v/manifest.tmp", "m").ok());
  env.Inject(FaultEnv::Fault::kFailRename);
  EXPECT_FALSE(env.Rename(dir / "v/manifest.tmp", dir / "v/manifest.json").ok());
  ASSERT_TRUE(env.Rename(dir / "v/manifest.tmp", dir / "v/manifest.json").ok());
  ASSERT_TRUE(env.SyncDir(dir / "v").ok());
  ASSERT_TRUE(env.RemoveFile(dir / "v/shard").ok());
  ASSERT_TRUE(env.RemoveTree(dir / "v").ok());
  const std::string v = dir / "v";
  EXPECT_EQ(env.events(), (std::vector<std::string>{
                              "create " + v + "/shard",
                              "sync " + v + "/shard",
                              "sync " + v + "/shard",
                              "mark agreed",
                              "create " + v + "/manifest.tmp",
                              "sync " + v + "/manifest.tmp",
                              "rename " + v + "/manifest.tmp -> " + v + "/manifest.json",
                              "syncdir " + v,
                              "remove " + v + "/shard",
                              "remove " + v,
                          }));
  env.ClearEvents();
  EXPECT_TRUE(env.events().empty());
}

}  // namespace
}  // namespace baton::ckpt::fs
