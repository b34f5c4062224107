// The writer lock on cluster file systems (ckpt/writer_lock.h): issue 32,
// item 9 (flock missing or per node: ENOLCK, ENOSYS, Lustre localflock, NFS
// nolock) and item 11's lock-file findings (a read-only directory, a
// linked lock file). Failures are injected through the filesystem layer
// (FaultEnv's lock faults); Slurm through the JobLifeFn seam.
#include "ckpt/writer_lock.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <memory>
#include <string>

#include "ckpt/fs/fault_env.h"
#include "ckpt/run.h"
#include "tests/unit/ckpt_temp_dir.h"

namespace baton::ckpt {
namespace {

using Fault = fs::FaultEnv::Fault;

WriterIdentity Who(const std::string& host, const std::string& job, const std::string& step, long pid = 100) {
  WriterIdentity w;
  w.pid = pid;
  w.host = host;
  w.job = job;
  w.step = step;
  return w;
}

class CkptWriterLock : public ::testing::Test {
 protected:
  // Slurm as the test says; every question recorded.
  JobLifeFn Slurm() {
    return [this](const std::string& job) {
      asked.push_back(job);
      auto it = jobs.find(job);
      return it == jobs.end() ? JobLife::kUnknown : it->second;
    };
  }
  // The text another node's holder left in the file (its flock, per node,
  // is not seen here).
  void LeftBy(const WriterIdentity& who) {
    std::ofstream out(dir / kWriterLockName, std::ios::trunc);
    out << HolderText(who, "2026-01-01T00:00:00Z") << "\n";
    ASSERT_TRUE(out.good());
  }
  Status Take(Fault fault, const WriterIdentity& me, std::unique_ptr<fs::FileLock>* lock) {
    env.Inject(fault, kWriterLockName);
    std::string how;
    return AcquireWriterLock(&env, dir.path(), 0600, me, "now", Slurm(), lock, &how);
  }
  std::string LockText() {
    std::string text;
    EXPECT_TRUE(fs::Env::Default()->ReadFile(dir / kWriterLockName, 4096, &text).ok());
    return text;
  }

  TempDir dir;
  fs::FaultEnv env;
  std::map<std::string, JobLife> jobs;
  std::vector<std::string> asked;
};

TEST(CkptLockReach, EachFileSystemsCase) {
  std::string why;
  EXPECT_EQ(fs::LockReachOf("ext4", "rw,relatime", &why), fs::LockReach::kCluster);
  EXPECT_EQ(fs::LockReachOf("nfs4", "rw,vers=4.2,local_lock=none", &why), fs::LockReach::kCluster);
  EXPECT_EQ(fs::LockReachOf("nfs", "rw,vers=3,nolock", &why), fs::LockReach::kNode);
  EXPECT_NE(why.find("nolock"), std::string::npos) << why;
  EXPECT_EQ(fs::LockReachOf("nfs4", "rw,local_lock=flock", &why), fs::LockReach::kNode);
  EXPECT_EQ(fs::LockReachOf("nfs", "rw,local_lock=all", &why), fs::LockReach::kNode);
  EXPECT_EQ(fs::LockReachOf("lustre", "rw,flock,lazystatfs", &why), fs::LockReach::kCluster);
  EXPECT_EQ(fs::LockReachOf("lustre", "rw,localflock", &why), fs::LockReach::kNode);
  EXPECT_EQ(fs::LockReachOf("lustre", "rw,lazystatfs", &why), fs::LockReach::kNone);
  EXPECT_EQ(fs::LockReachOf("fuse.beegfs", "rw", &why), fs::LockReach::kNode);
  EXPECT_EQ(fs::LockReachOf("beegfs", "rw", &why), fs::LockReach::kNode);
  EXPECT_EQ(fs::LockReachOf("gpfs", "rw", &why), fs::LockReach::kCluster);
}

TEST(CkptHolderText, ParsesItsOwnTextAndTheEarlierOne) {
  WriterIdentity w;
  ASSERT_TRUE(ParseHolderText(HolderText(Who("n1", "77", "0", 42), "2026-01-01T00:00:00Z"), &w));
  EXPECT_EQ(w.pid, 42);
  EXPECT_EQ(w.host, "n1");
  EXPECT_EQ(w.job, "77");
  EXPECT_EQ(w.step, "0");
  ASSERT_TRUE(ParseHolderText("pid 9 on n2, job -, since 2026-01-01T00:00:00Z", &w));  // before the step
  EXPECT_EQ(w.host, "n2");
  EXPECT_EQ(w.job, "");
  EXPECT_EQ(w.step, "");
  EXPECT_FALSE(ParseHolderText("something else", &w));
}

// ENOLCK (NFS without lockd) and ENOSYS (Lustre without -o flock) once
// failed Create with no way out: now the lock is the holder text alone.
TEST_F(CkptWriterLock, WithoutFlockTheLockIsALeaseCheckedAgainstSlurm) {
  for (Fault fault : {Fault::kLockNoLockd, Fault::kLockNoFlock}) {
    SCOPED_TRACE(fault == Fault::kLockNoLockd ? "ENOLCK" : "ENOSYS");
    std::unique_ptr<fs::FileLock> first, second;
    ASSERT_TRUE(Take(fault, Who("n1", "7", "0"), &first).ok());
    EXPECT_EQ(first->reach(), fs::LockReach::kNone);
    EXPECT_NE(first->reach_reason().find(fault == Fault::kLockNoLockd ? "No locks available" : "not implemented"),
              std::string::npos)
        << first->reach_reason();
    EXPECT_NE(LockText().find("job 7"), std::string::npos) << LockText();

    // Another job while job 7 runs: refused, naming the holder.
    jobs["7"] = JobLife::kRunning;
    Status s = Take(fault, Who("n2", "8", "0"), &second);
    EXPECT_EQ(s.code(), Code::kUnavailable) << s;
    EXPECT_NE(s.message().find("pid 100 on n1, job 7"), std::string::npos) << s;
    EXPECT_NE(s.message().find("still runs"), std::string::npos) << s;
    // Slurm cannot say: refused too, and the message says what to do.
    jobs.erase("7");
    s = Take(fault, Who("n2", "8", "0"), &second);
    EXPECT_EQ(s.code(), Code::kUnavailable) << s;
    EXPECT_NE(s.message().find("remove the file"), std::string::npos) << s;
    // Job 7 ended (killed: its text stays): taken over.
    jobs["7"] = JobLife::kEnded;
    first.reset();
    LeftBy(Who("n1", "7", "0"));
    ASSERT_TRUE(Take(fault, Who("n2", "8", "0"), &second).ok());
    EXPECT_NE(LockText().find("job 8"), std::string::npos) << LockText();
    // A clean end leaves no holder text behind.
    second.reset();
    EXPECT_EQ(LockText(), "");
  }
}

// Lustre localflock, NFS nolock: flock works on each node, so two nodes
// could both hold it; another node's holder is known by its text only.
TEST_F(CkptWriterLock, APerNodeFlockHonoursAnotherNodesLiveHolder) {
  std::unique_ptr<fs::FileLock> lock;
  LeftBy(Who("n2", "8", "0"));
  jobs["8"] = JobLife::kRunning;
  Status s = Take(Fault::kLockNodeLocal, Who("n1", "9", "0"), &lock);
  EXPECT_EQ(s.code(), Code::kUnavailable) << s;
  EXPECT_NE(s.message().find("this node only"), std::string::npos) << s;
  EXPECT_NE(LockText().find("job 8"), std::string::npos) << "the live holder's text was overwritten";

  jobs["8"] = JobLife::kEnded;
  ASSERT_TRUE(Take(Fault::kLockNodeLocal, Who("n1", "9", "0"), &lock).ok());
  EXPECT_EQ(lock->reach(), fs::LockReach::kNode);
  EXPECT_NE(LockText().find("job 9"), std::string::npos);
}

// A holder text of this node under a per-node flock: flock was free, so
// its holder is dead; a text of this job and step: an earlier run of this
// job (a requeue). Neither asks Slurm (the requeued job runs: "running").
TEST_F(CkptWriterLock, ADeadHolderOnThisNodeOrAnEarlierRunOfThisJobIsReplaced) {
  std::unique_ptr<fs::FileLock> lock;
  LeftBy(Who("n1", "8", "0"));
  ASSERT_TRUE(Take(Fault::kLockNodeLocal, Who("n1", "9", "0"), &lock).ok());
  lock.reset();
  LeftBy(Who("n3", "9", "0"));
  ASSERT_TRUE(Take(Fault::kLockNoLockd, Who("n1", "9", "0"), &lock).ok());
  lock.reset();
  EXPECT_TRUE(asked.empty());
  // Another step of this job, on another node: still a live writer.
  LeftBy(Who("n3", "9", "1"));
  Status s = Take(Fault::kLockNoLockd, Who("n1", "9", "0"), &lock);
  EXPECT_EQ(s.code(), Code::kUnavailable) << s;
  EXPECT_NE(s.message().find("another step of this job"), std::string::npos) << s;
}

// Where flock reaches every node nothing changes: a text left by a killed
// holder is replaced without asking Slurm.
TEST_F(CkptWriterLock, ACoherentFlockIsTheLockAlone) {
  std::unique_ptr<fs::FileLock> lock;
  LeftBy(Who("n2", "8", "0"));
  jobs["8"] = JobLife::kRunning;
  std::string how;
  ASSERT_TRUE(AcquireWriterLock(fs::Env::Default(), dir.path(), 0600, Who("n1", "9", "0"), "now", Slurm(), &lock, &how)
                  .ok());
  EXPECT_TRUE(asked.empty());
  EXPECT_NE(LockText().find("job 9"), std::string::npos);
}

// Item 11: the ELOOP of a linked lock file ("Too many levels of symbolic
// links") named what is wrong only to those who know O_NOFOLLOW.
TEST_F(CkptWriterLock, ALinkedLockFileIsNamedAsSuch) {
  ASSERT_EQ(::symlink("/etc/passwd", (dir / kWriterLockName).c_str()), 0);
  std::unique_ptr<fs::FileLock> lock;
  std::string how;
  Status s = AcquireWriterLock(fs::Env::Default(), dir.path(), 0600, Who("n1", "9", "0"), "now", Slurm(), &lock, &how);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("is a symbolic link"), std::string::npos) << s;
  EXPECT_EQ(s.message().find("Too many levels"), std::string::npos) << s;
}

TEST_F(CkptWriterLock, AReadOnlyDirectoryIsToldAsSuch) {
  std::string why;
  EXPECT_FALSE(env.ReadOnly(dir.path(), &why)) << why;
  env.Inject(Fault::kReadOnly, dir.path());
  EXPECT_TRUE(env.ReadOnly(dir.path(), &why));
  EXPECT_NE(why.find("read-only"), std::string::npos) << why;
  std::unique_ptr<fs::FileLock> lock;
  std::string how;
  Status s = AcquireWriterLock(&env, dir.path(), 0600, Who("n1", "9", "0"), "now", Slurm(), &lock, &how);
  EXPECT_NE(s.message().find("Read-only file system"), std::string::npos) << s;
}

}  // namespace
}  // namespace baton::ckpt
