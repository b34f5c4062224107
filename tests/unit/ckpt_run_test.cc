// The run a checkpoint directory belongs to (ckpt/run.h) and the writer
// lock (Env::LockFile): issue 15, item 3.
#include "ckpt/run.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/catalog.h"
#include "ckpt/fs/durable_write.h"
#include "ckpt/fs/fault_env.h"
#include "tests/unit/ckpt_temp_dir.h"

namespace baton::ckpt {
namespace {

class CkptRun : public ::testing::Test {
 protected:
  fs::Env* env = fs::Env::Default();
  TempDir dir;
};

TEST_F(CkptRun, ANewDirectoryGetsARunIdKeptAfterwards) {
  RunInfo a, b;
  ASSERT_TRUE(OpenRun(env, dir.path(), "", 0600, &a).ok());
  EXPECT_EQ(a.run_id.size(), 32u) << a.run_id;
  EXPECT_TRUE(ValidRunId(a.run_id));
  EXPECT_EQ(a.last_seq, 0u);
  ASSERT_TRUE(OpenRun(env, dir.path(), "", 0600, &b).ok());  // a requeue or a chained job
  EXPECT_EQ(b.run_id, a.run_id);
  ASSERT_TRUE(OpenRun(env, dir.path(), a.run_id, 0600, &b).ok());  // asked for by name
  EXPECT_NE(NewRunId(), NewRunId());
}

TEST_F(CkptRun, AnotherRunIdIsRefusedNamingBoth) {
  RunInfo a;
  ASSERT_TRUE(OpenRun(env, dir.path(), "llama-7b.lr3e-4", 0600, &a).ok());
  EXPECT_EQ(a.run_id, "llama-7b.lr3e-4");
  Status s = OpenRun(env, dir.path(), "llama-7b.lr1e-4", 0600, &a);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("belongs to run llama-7b.lr3e-4, not to run llama-7b.lr1e-4"), std::string::npos) << s;
  for (const char* bad : {"a b", "x/y", "", "\x1b[2J", "0123456789012345678901234567890123456789012345678901234567890123456789"}) {
    if (*bad == '\0') continue;  // "" means "the directory's"
    EXPECT_EQ(OpenRun(env, dir.path(), bad, 0600, &a).code(), Code::kInvalidArgument) << bad;
  }
}

// A crash while the run file was replaced leaves its temporary and the old
// run file (still the one read); the next writer to open the run (the lock's
// holder) removes the leftover, and no other file.
TEST_F(CkptRun, ACrashedRunWriteLeavesTheOldFileAndItsLeftoverGoes) {
  RunInfo run;
  ASSERT_TRUE(OpenRun(env, dir.path(), "r1", 0600, &run).ok());
  fs::FaultEnv crash;
  crash.Inject(fs::FaultEnv::Fault::kCrashBeforeRename);
  RunInfo next = run;
  next.last_seq = 7;
  Status s = WriteRun(&crash, dir.path(), next, 0600);
  EXPECT_NE(s.message().find("writing " + dir / "run: rename failed"), std::string::npos) << s;
  std::vector<std::string> names;
  ASSERT_TRUE(env->ListDir(dir.path(), &names).ok());
  ASSERT_EQ(names.size(), 2u);
  const std::string other = fs::DurableTemporaryName("restore-failures");
  ASSERT_TRUE(WriteWholeFile(env, dir / other, "not run's").ok());
  RunInfo again;
  ASSERT_TRUE(OpenRun(env, dir.path(), "", 0600, &again).ok());
  EXPECT_EQ(again.last_seq, 0u);  // the old file
  ASSERT_TRUE(env->ListDir(dir.path(), &names).ok());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{other, "run"}));
}

// Sequence numbers only grow, even when the newest version is removed.
TEST_F(CkptRun, SequenceNumbersAreNeverReused) {
  ASSERT_TRUE(env->CreateDir(dir / VersionName(4, 40), 0700, false).ok());  // written before run files
  RunInfo run;
  ASSERT_TRUE(OpenRun(env, dir.path(), "", 0600, &run).ok());
  EXPECT_EQ(run.last_seq, 4u);
  std::vector<VersionInfo> versions;
  ASSERT_TRUE(ListVersions(env, dir.path(), 2, &versions).ok());
  uint64_t seq = 0;
  ASSERT_TRUE(ReserveSeq(env, dir.path(), 0600, versions, &run, &seq).ok());
  EXPECT_EQ(seq, 5u);
  ASSERT_TRUE(env->CreateDir(dir / VersionName(5, 50), 0700, false).ok());
  ASSERT_TRUE(env->RemoveTree(dir / VersionName(5, 50)).ok());  // gone, e.g. removed by hand
  RunInfo again;
  ASSERT_TRUE(OpenRun(env, dir.path(), "", 0600, &again).ok());  // the next job
  ASSERT_TRUE(ListVersions(env, dir.path(), 2, &versions).ok());
  ASSERT_TRUE(ReserveSeq(env, dir.path(), 0600, versions, &again, &seq).ok());
  EXPECT_EQ(seq, 6u) << "5 was given out before";
}

// last_seq at 2^64-1 (an edited run file), or a version directory of
// that seq: the next save is refused naming the value, never wrapped.
TEST_F(CkptRun, TheLargestSequenceNumberIsRefusedNotWrapped) {
  const std::string max = "18446744073709551615";
  ASSERT_TRUE(fs::WriteFileDurably(env, dir.path(), kRunFileName, "run_id r1\nlast_seq " + max + "\n").ok());
  RunInfo run;
  ASSERT_TRUE(OpenRun(env, dir.path(), "", 0600, &run).ok());
  EXPECT_EQ(run.last_seq, std::numeric_limits<uint64_t>::max());
  std::vector<VersionInfo> versions;
  uint64_t seq = 7;
  Status s = ReserveSeq(env, dir.path(), 0600, versions, &run, &seq);
  EXPECT_EQ(s.code(), Code::kCorruption) << s;
  EXPECT_NE(s.message().find(max), std::string::npos) << s;
  EXPECT_NE(s.message().find("last_seq"), std::string::npos) << s;
  EXPECT_EQ(seq, 7u);
  run.last_seq = 3;
  ASSERT_TRUE(env->CreateDir(dir / VersionName(std::numeric_limits<uint64_t>::max(), 1), 0700, false).ok());
  ASSERT_TRUE(ListVersions(env, dir.path(), 2, &versions).ok());
  ASSERT_EQ(versions.size(), 1u);
  s = ReserveSeq(env, dir.path(), 0600, versions, &run, &seq);
  EXPECT_EQ(s.code(), Code::kCorruption) << s;
  EXPECT_NE(s.message().find(max), std::string::npos) << s;
  EXPECT_EQ(seq, 7u);
}

TEST_F(CkptRun, ADamagedRunFileIsCorruptionNamingTheLine) {
  ASSERT_TRUE(WriteWholeFile(env, dir / kRunFileName, "run_id abc\nlast_seq twelve\n").ok());
  RunInfo run;
  Status s = ReadRun(env, dir.path(), &run);
  EXPECT_EQ(s.code(), Code::kCorruption) << s;
  EXPECT_NE(s.message().find("line 2: not a sequence number"), std::string::npos) << s;
}

// A run id names a directory (<local_dir>/<run id>/ of level 2, which
// `baton ckpt gc --level node-local` prunes): "." and ".." would name the
// local directory or its parent, so a run file saying so is corruption.
TEST_F(CkptRun, DotAndDotDotAreNotRunIds) {
  EXPECT_FALSE(ValidRunId("."));
  EXPECT_FALSE(ValidRunId(".."));
  EXPECT_TRUE(ValidRunId("..."));
  EXPECT_TRUE(ValidRunId(".hidden"));
  ASSERT_TRUE(WriteWholeFile(env, dir / kRunFileName, "run_id ..\nlast_seq 3\n").ok());
  RunInfo run;
  Status s = ReadRun(env, dir.path(), &run);
  EXPECT_EQ(s.code(), Code::kCorruption) << s;
  EXPECT_NE(s.message().find("not a run id"), std::string::npos) << s;
  RunInfo opened;
  s = OpenRun(env, dir / "other", "..", 0600, &opened);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s;
}

// A second lock of the same file is refused with the holder's text, at
// once; the first one's end (or its process's death) frees it.
TEST_F(CkptRun, TheWriterLockIsExclusiveAndDiesWithItsHolder) {
  const std::string path = dir / kWriterLockName;
  std::unique_ptr<fs::FileLock> first, second;
  ASSERT_TRUE(env->LockFile(path, 0600, "pid 1 on n1, job 7", &first).ok());
  Status s = env->LockFile(path, 0600, "pid 2 on n2, job 8", &second);
  EXPECT_EQ(s.code(), Code::kUnavailable) << s;
  EXPECT_NE(s.message().find("is locked by pid 1 on n1, job 7"), std::string::npos) << s;
  first.reset();
  ASSERT_TRUE(env->LockFile(path, 0600, "pid 2 on n2, job 8", &second).ok());
  second.reset();

  // A child takes it and is killed while holding it: the lock is free.
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::unique_ptr<fs::FileLock> held;
    const bool ok = env->LockFile(path, 0600, "the child", &held).ok();
    (void)!write(ready[1], ok ? "y" : "n", 1);
    pause();  // until SIGKILL
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  EXPECT_EQ(c, 'y');
  s = env->LockFile(path, 0600, "parent", &second);
  EXPECT_NE(s.message().find("is locked by the child"), std::string::npos) << s;
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(env->LockFile(path, 0600, "parent", &second).ok());
  close(ready[0]);
  close(ready[1]);
}

TEST_F(CkptRun, ALockThatIsNotARegularFileIsRefusedWithoutBlocking) {
  const std::string path = dir / kWriterLockName;
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  std::unique_ptr<fs::FileLock> lock;
  Status s = env->LockFile(path, 0600, "me", &lock);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not a regular file"), std::string::npos) << s;
}

}  // namespace
}  // namespace baton::ckpt
