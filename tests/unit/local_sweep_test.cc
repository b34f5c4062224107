// The sweep of node-local job directories: which it removes given what
// Slurm says of each job (base/launch/sweep_decision.h, no file system),
// and the sweep itself on a real tree (base/launch/local_sweep.h): ended
// jobs' directories go with everything in them, links are never followed,
// what is not the plugin's is left alone and named, and the time bound
// holds.
#include "base/launch/local_sweep.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

#include "base/launch/local_dir.h"
#include "base/launch/sweep_decision.h"

namespace baton::launch {
namespace {

JobRecord Known(uint32_t state) { return JobRecord{true, state}; }

TEST(SweepDecision, AJobTheControllerNoLongerKnowsHasEnded) { EXPECT_TRUE(EndedForGood(JobRecord{})); }

TEST(SweepDecision, EveryFinalStateHasEndedAlsoWhileCompleting) {
  constexpr uint32_t kCompleting = 1u << 15;
  for (uint32_t s : {kJobComplete, kJobCancelled, kJobFailed, kJobTimeout, kJobNodeFail, kJobPreempted, kJobBootFail,
                     kJobDeadline, kJobOom}) {
    EXPECT_TRUE(EndedForGood(Known(s))) << s;
    EXPECT_TRUE(EndedForGood(Known(s | kCompleting))) << s << " in its own epilog";
  }
}

TEST(SweepDecision, AJobThatMayRunAgainIsKept) {
  for (uint32_t s : {kJobPending, kJobRunning, kJobSuspended}) EXPECT_FALSE(EndedForGood(Known(s))) << s;
  // A requeue on its way (the epilog of a requeued run sees the old run's
  // final state with a requeue flag), held requeues, a resize.
  for (uint32_t flag : {kJobRequeueFlag, kJobRequeueHoldFlag, kJobSpecialExitFlag, kJobResizingFlag,
                        kJobReconfigFailFlag, kJobRequeueFedFlag})
    for (uint32_t s : {kJobComplete, kJobFailed, kJobNodeFail, kJobPreempted, kJobPending})
      EXPECT_FALSE(EndedForGood(Known(s | flag))) << s << " with flag " << flag;
  EXPECT_FALSE(EndedForGood(Known(kJobEnd))) << "a state this code does not know is kept";
  EXPECT_FALSE(EndedForGood(Known(40)));
}

TEST(SweepDecision, OnlyCanonicalNamesAreTheSweeps) {
  EXPECT_EQ(ParseJobDirName("17"), 17u);
  EXPECT_EQ(ParseJobDirName("4294967294"), 4294967294u);
  for (const char* bad : {"", "0", "017", "+17", "-17", "17a", " 17", "17 ", "4294967295", "99999999999", ".", ".."})
    EXPECT_FALSE(ParseJobDirName(bad)) << "'" << bad << "'";
  EXPECT_EQ(ParseUidDirName("0"), 0u);
  EXPECT_EQ(ParseUidDirName("1000"), 1000u);
  for (const char* bad : {"", "00", "01000", "root", "-1", "4294967295"}) EXPECT_FALSE(ParseUidDirName(bad)) << bad;
}

// <root>/1000/17, a directory of uid 1000's, seen by a root sweep.
SweepEntry UserJobDir() {
  SweepEntry e;
  e.dir_uid = 1000;
  e.name = "17";
  e.is_directory = true;
  e.owner = 1000;
  e.caller = 0;
  return e;
}

TEST(SweepDecision, EachEntryGetsItsVerdictAndWhy) {
  SweepEntry e = UserJobDir();
  e.job = Known(kJobComplete);
  std::string why;
  EXPECT_EQ(Decide(e, &why), SweepVerdict::kRemove);
  EXPECT_EQ(why, "");
  e.job = Known(kJobRunning);
  EXPECT_EQ(Decide(e, &why), SweepVerdict::kKeep);
  EXPECT_NE(why.find("may still run"), std::string::npos) << why;
  e.job.reset();
  EXPECT_EQ(Decide(e, &why), SweepVerdict::kLeave);
  EXPECT_NE(why.find("did not say"), std::string::npos) << why;
  e.job = JobRecord{};
  e.owner = 0;  // the caller's: a hand-over an earlier start did not finish
  EXPECT_EQ(Decide(e, &why), SweepVerdict::kRemove);
  e.owner = 1001;
  EXPECT_EQ(Decide(e, &why), SweepVerdict::kLeave);
  EXPECT_EQ(why, "owned by uid 1001, not by uid 1000");
  e.owner = 1000;
  e.is_directory = false;
  EXPECT_EQ(Decide(e, &why), SweepVerdict::kLeave);
  EXPECT_NE(why.find("a link"), std::string::npos) << why;
  e.is_directory = true;
  e.name = "lost+found";
  EXPECT_EQ(Decide(e, &why), SweepVerdict::kLeave);
  EXPECT_EQ(why, "not named after a job id");
}

// Issue 30 item 8: the ending job's own empty directory needs no answer
// from Slurm; the ownership rule still holds.
TEST(SweepDecision, TheEndingJobsEmptyDirectoryGoesWithoutAnAnswer) {
  SweepEntry e = UserJobDir();
  e.ending_job_and_empty = true;
  std::string why;
  EXPECT_EQ(Decide(e, &why), SweepVerdict::kRemove) << why;
  e.owner = 1001;
  EXPECT_EQ(Decide(e, &why), SweepVerdict::kLeave);
  EXPECT_EQ(why, "owned by uid 1001, not by uid 1000");
}

class LocalSweepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp == '/' ? tmp : "/tmp") + "/baton-sweep-test-XXXXXX";
    ASSERT_NE(mkdtemp(&tmpl[0]), nullptr);
    base_ = tmpl;
    ASSERT_EQ(chmod(base_.c_str(), 0755), 0);
    site_ = base_ + "/local";
  }
  void TearDown() override { ASSERT_EQ(system(("chmod -R u+rwx '" + base_ + "'; rm -rf '" + base_ + "'").c_str()), 0); }
  bool Root() const { return geteuid() == 0; }
  uid_t User() const { return Root() ? 4242 : geteuid(); }
  gid_t Group() const { return Root() ? 4242 : getegid(); }

  // Makes the job's directory as the plugin does and fills it as a job
  // might, owned by the job's user.
  std::string MakeJob(uint32_t job) {
    OpenDir d;
    Status s = OpenJobLocalDir(site_, User(), Group(), job, &d);
    EXPECT_TRUE(s.ok()) << s.ToString();
    CloseDir(&d);
    const std::string p = JobLocalDirPath(site_, User(), job);
    EXPECT_EQ(system(("mkdir -p '" + p + "/v1/rank0' && echo x > '" + p + "/v1/rank0/shard.h5' && echo y > '" + p +
                      "/manifest' && chown -R " + std::to_string(User()) + ":" + std::to_string(Group()) + " '" +
                      p + "'")
                         .c_str()),
              0);
    return p;
  }
  JobLookup Lookup() {
    return [this](uid_t, uint32_t job, JobRecord* r) -> Status {
      asked_.push_back(job);
      if (job == failing_) return Status::Unavailable("spank", "slurm_load_job failed for job " + std::to_string(job));
      auto it = states_.find(job);
      *r = it == states_.end() ? JobRecord{} : Known(it->second);
      return Status::OK();
    };
  }
  static bool Has(const std::vector<std::string>& v, const std::string& prefix) {
    return std::any_of(v.begin(), v.end(), [&](const std::string& s) { return s.rfind(prefix, 0) == 0; });
  }
  static bool Exists(const std::string& p) {
    struct stat st;
    return lstat(p.c_str(), &st) == 0;
  }

  std::string base_, site_;
  std::map<uint32_t, uint32_t> states_;
  uint32_t failing_ = 0;
  std::vector<uint32_t> asked_;
};

TEST_F(LocalSweepTest, EndedJobsGoTheOthersStay) {
  const std::string completed = MakeJob(1), running = MakeJob(2), unknown = MakeJob(3), requeued = MakeJob(4),
                    unanswered = MakeJob(5), cancelled = MakeJob(6);
  states_ = {{1, kJobComplete}, {2, kJobRunning}, {4, kJobPending | kJobRequeueFlag}, {6, kJobCancelled | (1u << 15)}};
  failing_ = 5;
  SweepReport r;
  Status s = SweepLocalRoot(site_, Lookup(), SweepLimits{}, &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_FALSE(Exists(completed));
  EXPECT_FALSE(Exists(unknown));
  EXPECT_FALSE(Exists(cancelled));
  EXPECT_TRUE(Exists(running + "/v1/rank0/shard.h5"));
  EXPECT_TRUE(Exists(requeued + "/v1/rank0/shard.h5"));
  EXPECT_TRUE(Exists(unanswered + "/manifest"));
  EXPECT_EQ(r.removed, (std::vector<std::string>{completed, unknown, cancelled}));
  EXPECT_EQ(r.kept, (std::vector<std::string>{running, requeued}));
  ASSERT_EQ(r.left.size(), 1u);
  EXPECT_NE(r.left[0].find(unanswered + ": Slurm did not say whether the job ended"), std::string::npos) << r.left[0];
  EXPECT_NE(r.left[0].find("slurm_load_job failed for job 5"), std::string::npos) << r.left[0];
  EXPECT_FALSE(r.out_of_time);
  EXPECT_TRUE(Exists(site_ + "/" + std::to_string(User()))) << "the user's directory stays (a step may be making a job's in it)";
}

// Issue 30 item 8: one question per user directory, whatever the number
// of its job directories (before: one slurm_load_job per directory, on
// every node at each job's end).
TEST_F(LocalSweepTest, OneQuestionPerUserAnswersEveryJobDirectory) {
  const std::string completed = MakeJob(11), running = MakeJob(12), unknown = MakeJob(13);
  std::vector<uid_t> asked_users;
  JobLookup lookup = LookupByUser([&](uid_t user, std::map<uint32_t, uint32_t>* states) -> Status {
    asked_users.push_back(user);
    *states = {{11, kJobComplete}, {12, kJobRunning}};
    return Status::OK();
  });
  SweepReport r;
  ASSERT_TRUE(SweepLocalRoot(site_, lookup, SweepLimits{}, &r).ok());
  EXPECT_EQ(asked_users, (std::vector<uid_t>{User()}));
  EXPECT_FALSE(Exists(completed));
  EXPECT_FALSE(Exists(unknown)) << "a job the controller no longer lists has ended";
  EXPECT_TRUE(Exists(running + "/manifest"));
}

// Issue 30 item 8: at a job's end (its epilog on each of its nodes) the
// job's own directory costs no question when it is empty, and one about
// that job alone when it holds data; before, the per-user question was
// asked on every node of every ending job.
TEST_F(LocalSweepTest, TheEndingJobsEmptyDirectoryGoesWithoutAQuestion) {
  OpenDir d;
  ASSERT_TRUE(OpenJobLocalDir(site_, User(), Group(), 31, &d).ok());
  CloseDir(&d);
  const std::string empty = JobLocalDirPath(site_, User(), 31);
  int user_questions = 0, job_questions = 0;
  JobLookup lookup = LookupByUser([&](uid_t, std::map<uint32_t, uint32_t>*) -> Status {
    ++user_questions;
    return Status::OK();
  });
  EndingJob ending{User(), 31, [&](uint32_t, JobRecord*) -> Status {
                     ++job_questions;
                     return Status::OK();
                   }};
  SweepReport r;
  ASSERT_TRUE(SweepLocalRoot(site_, lookup, SweepLimits{}, &r, &ending).ok());
  EXPECT_EQ(user_questions, 0);
  EXPECT_EQ(job_questions, 0);
  EXPECT_FALSE(Exists(empty));
  EXPECT_EQ(r.removed, (std::vector<std::string>{empty}));
}

TEST_F(LocalSweepTest, TheEndingJobsDirectoryWithDataCostsOneQuestionAboutThatJob) {
  const std::string requeued = MakeJob(32);
  int user_questions = 0;
  std::vector<uint32_t> jobs_asked;
  JobLookup lookup = LookupByUser([&](uid_t, std::map<uint32_t, uint32_t>*) -> Status {
    ++user_questions;
    return Status::OK();
  });
  uint32_t state = kJobComplete | kJobRequeueFlag;
  EndingJob ending{User(), 32, [&](uint32_t job, JobRecord* record) -> Status {
                     jobs_asked.push_back(job);
                     *record = Known(state);
                     return Status::OK();
                   }};
  SweepReport r;
  ASSERT_TRUE(SweepLocalRoot(site_, lookup, SweepLimits{}, &r, &ending).ok());
  EXPECT_EQ(user_questions, 0);
  EXPECT_EQ(jobs_asked, (std::vector<uint32_t>{32}));
  EXPECT_TRUE(Exists(requeued + "/manifest")) << "a requeued run's data stays";
  state = kJobComplete;
  ASSERT_TRUE(SweepLocalRoot(site_, lookup, SweepLimits{}, &r, &ending).ok());
  EXPECT_EQ(user_questions, 0);
  EXPECT_FALSE(Exists(requeued));
  // A failed question leaves the data, naming why.
  const std::string other = MakeJob(33);
  EndingJob failing{User(), 33, [](uint32_t, JobRecord*) -> Status {
                      return Status::Timeout("spank", "Slurm did not answer within 5.0 s");
                    }};
  ASSERT_TRUE(SweepLocalRoot(site_, lookup, SweepLimits{}, &r, &failing).ok());
  EXPECT_TRUE(Exists(other + "/manifest"));
  ASSERT_EQ(r.left.size(), 1u);
  EXPECT_NE(r.left[0].find("did not answer within 5.0 s"), std::string::npos) << r.left[0];
}

TEST_F(LocalSweepTest, AFailedUserQuestionLeavesThatUsersJobsAndIsNotRepeated) {
  const std::string a = MakeJob(21), b = MakeJob(22);
  int questions = 0;
  JobLookup lookup = LookupByUser([&](uid_t, std::map<uint32_t, uint32_t>*) -> Status {
    ++questions;
    return Status::Timeout("spank", "Slurm did not answer within 5.0 s");
  });
  SweepReport r;
  ASSERT_TRUE(SweepLocalRoot(site_, lookup, SweepLimits{}, &r).ok());
  EXPECT_EQ(questions, 1);
  EXPECT_TRUE(Exists(a + "/manifest"));
  EXPECT_TRUE(Exists(b + "/manifest"));
  EXPECT_EQ(r.left.size(), 2u);
}

TEST_F(LocalSweepTest, LinksAreNeverFollowedAndWhatIsNotTheSweepsIsLeftNamed) {
  // Outside the root: what a planted link points at must survive.
  const std::string precious = base_ + "/precious";
  ASSERT_EQ(mkdir(precious.c_str(), 0755), 0);
  { std::ofstream(precious + "/keep") << "k"; }
  const std::string job = MakeJob(7);
  ASSERT_EQ(symlink(precious.c_str(), (job + "/v1/link-to-dir").c_str()), 0);
  ASSERT_EQ(symlink((precious + "/keep").c_str(), (job + "/link-to-file").c_str()), 0);
  const std::string user_dir = site_ + "/" + std::to_string(User());
  ASSERT_EQ(symlink(precious.c_str(), (user_dir + "/8").c_str()), 0);  // a link named like a job
  ASSERT_EQ(mkdir((user_dir + "/lost+found").c_str(), 0700), 0);
  ASSERT_EQ(mkdir((site_ + "/not-a-uid").c_str(), 0700), 0);
  SweepReport r;
  ASSERT_TRUE(SweepLocalRoot(site_, Lookup(), SweepLimits{}, &r).ok());  // every job unknown: ended
  EXPECT_FALSE(Exists(job));
  EXPECT_TRUE(Exists(precious + "/keep"));
  EXPECT_TRUE(Exists(user_dir + "/8")) << "a link is not a job's directory";
  EXPECT_TRUE(Exists(user_dir + "/lost+found"));
  EXPECT_TRUE(Has(r.left, user_dir + "/8: not a directory (a link or a file)"));
  EXPECT_TRUE(Has(r.left, user_dir + "/lost+found: not named after a job id"));
  EXPECT_TRUE(Has(r.left, site_ + "/not-a-uid: not named after a uid"));
  EXPECT_EQ(asked_, (std::vector<uint32_t>{7})) << "Slurm is asked only about job directories";
}

TEST_F(LocalSweepTest, DeepTreesAndDirectoriesWithoutPermissionsGoToo) {
  const std::string job = MakeJob(9);
  std::string deep = job + "/d";
  for (int i = 0; i < 300; ++i) deep += "/d";  // deeper than any fixed stack of descriptors
  ASSERT_EQ(system(("mkdir -p '" + deep + "' && touch '" + deep + "/f' && mkdir '" + job + "/locked' && touch '" +
                    job + "/locked/f' && chown -R " + std::to_string(User()) + ":" + std::to_string(Group()) +
                    " '" + job + "' && chmod 0 '" + job + "/locked' && chmod 0500 '" + job + "/v1/rank0'")
                       .c_str()),
            0);
  SweepReport r;
  ASSERT_TRUE(SweepLocalRoot(site_, Lookup(), SweepLimits{}, &r).ok());
  EXPECT_FALSE(Exists(job)) << (r.left.empty() ? "" : r.left[0]);
  EXPECT_EQ(r.removed, (std::vector<std::string>{job}));
}

TEST_F(LocalSweepTest, ARootWritableByOthersIsRefusedNamingItAndNothingIsRemoved) {
  const std::string job = MakeJob(10);
  ASSERT_EQ(chmod(site_.c_str(), 0777), 0);
  SweepReport r;
  Status s = SweepLocalRoot(site_, Lookup(), SweepLimits{}, &r);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("node-local root '" + site_ + "' is not safe to use"), std::string::npos)
      << s.ToString();
  EXPECT_TRUE(Exists(job + "/manifest"));
  EXPECT_TRUE(asked_.empty());
}

TEST_F(LocalSweepTest, AUserDirectoryWritableByOthersIsLeftNamed) {
  const std::string job = MakeJob(11);
  const std::string user_dir = site_ + "/" + std::to_string(User());
  ASSERT_EQ(chmod(user_dir.c_str(), 0777), 0);
  SweepReport r;
  ASSERT_TRUE(SweepLocalRoot(site_, Lookup(), SweepLimits{}, &r).ok());
  EXPECT_TRUE(Exists(job + "/manifest"));
  EXPECT_TRUE(Has(r.left, user_dir + ": ")) << (r.left.empty() ? "" : r.left[0]);
  EXPECT_NE(r.left.at(0).find("is not safe to use"), std::string::npos) << r.left[0];
}

TEST_F(LocalSweepTest, AMissingRootIsNothingToSweep) {
  SweepReport r;
  EXPECT_TRUE(SweepLocalRoot(base_ + "/never-made", Lookup(), SweepLimits{}, &r).ok());
  EXPECT_TRUE(r.removed.empty() && r.left.empty() && r.kept.empty());
}

TEST_F(LocalSweepTest, TheDeadlineStopsTheSweepAndTheRestWaits) {
  const std::string job = MakeJob(12);
  SweepReport r;
  ASSERT_TRUE(SweepLocalRoot(site_, Lookup(), SweepLimits{std::chrono::milliseconds(0), std::chrono::seconds(1)}, &r)
                  .ok());
  EXPECT_TRUE(r.out_of_time);
  EXPECT_TRUE(Exists(job + "/manifest"));
  EXPECT_TRUE(asked_.empty());
}

TEST_F(LocalSweepTest, TheContentsAreRemovedAsTheirOwnerNotAsRoot) {
  if (!Root()) GTEST_SKIP() << "a job directory of another user needs root";
  // A file the user cannot remove (in a root-owned, sticky directory the
  // user reached through a hard link is out of reach; simplest: a root-owned
  // directory inside the job's, not writable by the user) stays: the
  // removal has the user's rights, not root's.
  const std::string job = MakeJob(13);
  ASSERT_EQ(mkdir((job + "/rootowned").c_str(), 0755), 0);
  { std::ofstream(job + "/rootowned/f") << "r"; }
  SweepReport r;
  ASSERT_TRUE(SweepLocalRoot(site_, Lookup(), SweepLimits{}, &r).ok());
  EXPECT_TRUE(Exists(job + "/rootowned/f")) << "removed with root's rights";
  ASSERT_EQ(r.left.size(), 1u);
  EXPECT_NE(r.left[0].find("removing '" + job + "'"), std::string::npos) << r.left[0];
  EXPECT_NE(r.left[0].find("Permission denied"), std::string::npos) << r.left[0];
}

}  // namespace
}  // namespace baton::launch
