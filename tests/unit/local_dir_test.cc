// The job's node-local directory (base/launch/local_dir.h): made private to
// the job's user under parents only the caller (root in slurmstepd) writes,
// the same path on every run of the job, and refused, naming the path,
// where a link was planted or a parent is writable by others. Run as root
// (as slurmstepd is) the tests hand directories to another uid; as anyone
// else they skip what needs root, saying so.
#include "base/launch/local_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace baton::launch {
namespace {

constexpr uid_t kOther = 4242;

class LocalDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp == '/' ? tmp : "/tmp") + "/baton-local-test-XXXXXX";
    ASSERT_NE(mkdtemp(&tmpl[0]), nullptr);
    base_ = tmpl;
    ASSERT_EQ(chmod(base_.c_str(), 0755), 0);
    site_ = base_ + "/local";  // the site's local_root; made by the first job
  }
  void TearDown() override { ASSERT_EQ(system(("rm -rf '" + base_ + "'").c_str()), 0); }
  bool Root() const { return geteuid() == 0; }
  // The job's user: another user as root, else ourselves.
  uid_t User() const { return Root() ? kOther : geteuid(); }
  gid_t Group() const { return Root() ? kOther : getegid(); }
  std::string base_, site_;
};

struct stat Stat(const std::string& path) {
  struct stat st = {};
  EXPECT_EQ(lstat(path.c_str(), &st), 0) << path;
  return st;
}

TEST_F(LocalDirTest, TheJobGetsAPrivateDirectoryUnderParentsOnlyTheCallerWrites) {
  OpenDir d;
  Status s = OpenJobLocalDir(site_, User(), Group(), 17, &d);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const std::string uid_dir = site_ + "/" + std::to_string(User());
  EXPECT_EQ(d.path, uid_dir + "/17");
  EXPECT_EQ(d.path, JobLocalDirPath(site_ + "/", User(), 17)) << "a trailing slash changes nothing";
  EXPECT_TRUE(d.created);
  struct stat job = Stat(d.path), parent = Stat(uid_dir), root = Stat(site_);
  EXPECT_EQ(job.st_uid, User());
  EXPECT_EQ(job.st_gid, Group());
  EXPECT_EQ(job.st_mode & 07777, 0700u);
  for (const struct stat& p : {parent, root}) {
    EXPECT_EQ(p.st_uid, geteuid());
    EXPECT_EQ(p.st_mode & 07777, 0755u) << "searchable by the user, writable by the caller alone";
  }
  CloseDir(&d);
}

TEST_F(LocalDirTest, TheSamePathOnEveryRunOfTheJobAndWhatItHoldsStays) {
  OpenDir first, again;
  ASSERT_TRUE(OpenJobLocalDir(site_, User(), Group(), 17, &first).ok());
  { std::ofstream(first.path + "/level2.h5") << "shard"; }
  CloseDir(&first);
  Status s = OpenJobLocalDir(site_, User(), Group(), 17, &again);  // the requeued run
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(again.path, first.path);
  EXPECT_FALSE(again.created);
  std::ifstream in(again.path + "/level2.h5");
  std::string got;
  in >> got;
  EXPECT_EQ(got, "shard");
  CloseDir(&again);
}

TEST_F(LocalDirTest, ALinkPlantedForTheJobsDirectoryIsRefusedNamingIt) {
  const std::string uid_dir = site_ + "/" + std::to_string(User());
  ASSERT_EQ(mkdir(site_.c_str(), 0755), 0);
  ASSERT_EQ(mkdir(uid_dir.c_str(), 0755), 0);
  const std::string target = base_ + "/elsewhere";
  ASSERT_EQ(mkdir(target.c_str(), 0755), 0);
  ASSERT_EQ(symlink(target.c_str(), (uid_dir + "/17").c_str()), 0);
  OpenDir d;
  Status s = OpenJobLocalDir(site_, User(), Group(), 17, &d);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.ToString().find("'" + uid_dir + "/17'"), std::string::npos) << s.ToString();
  EXPECT_NE(s.ToString().find("a link"), std::string::npos) << s.ToString();
  EXPECT_EQ(Stat(target).st_uid, geteuid()) << "the link's target was not handed over";
}

TEST_F(LocalDirTest, ALinkPlantedForTheUsersDirectoryIsRefusedNamingIt) {
  ASSERT_EQ(mkdir(site_.c_str(), 0755), 0);
  const std::string target = base_ + "/elsewhere";
  ASSERT_EQ(mkdir(target.c_str(), 0755), 0);
  const std::string uid_dir = site_ + "/" + std::to_string(User());
  ASSERT_EQ(symlink(target.c_str(), uid_dir.c_str()), 0);
  OpenDir d;
  Status s = OpenJobLocalDir(site_, User(), Group(), 17, &d);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("node-local directory '" + uid_dir + "' is not safe to use"), std::string::npos)
      << s.ToString();
  EXPECT_NE(access((target + "/17").c_str(), F_OK), 0) << "nothing made through the link";
}

TEST_F(LocalDirTest, AParentWritableByOthersIsRefusedNamingIt) {
  ASSERT_EQ(mkdir(site_.c_str(), 0755), 0);
  ASSERT_EQ(chmod(site_.c_str(), 0777), 0);  // any user could swap <uid> under the plugin
  OpenDir d;
  Status s = OpenJobLocalDir(site_, User(), Group(), 17, &d);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("node-local directory '" + site_ + "' is not safe to use"), std::string::npos)
      << s.ToString();
  EXPECT_NE(s.ToString().find("mode 0777"), std::string::npos) << s.ToString();
  ASSERT_EQ(chmod(site_.c_str(), 0775), 0);  // writable by its group: not safe either
  s = OpenJobLocalDir(site_, User(), Group(), 17, &d);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("mode 0775"), std::string::npos) << s.ToString();
}

TEST_F(LocalDirTest, AUserDirectoryOwnedByTheUserIsRefused) {
  if (!Root()) GTEST_SKIP() << "a directory of another user needs root";
  // A user who owned <root>/<uid> could rename the job's directory away
  // and plant a link where the sweep looks.
  const std::string uid_dir = site_ + "/" + std::to_string(kOther);
  ASSERT_EQ(mkdir(site_.c_str(), 0755), 0);
  ASSERT_EQ(mkdir(uid_dir.c_str(), 0755), 0);
  ASSERT_EQ(chown(uid_dir.c_str(), kOther, kOther), 0);
  OpenDir d;
  Status s = OpenJobLocalDir(site_, kOther, kOther, 17, &d);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("'" + uid_dir + "' is not safe to use: owned by uid 4242"), std::string::npos)
      << s.ToString();
}

TEST_F(LocalDirTest, AJobDirectoryOfAnotherUserIsRefusedNamingBoth) {
  if (!Root()) GTEST_SKIP() << "a directory of another user needs root";
  OpenDir d;
  ASSERT_TRUE(OpenJobLocalDir(site_, kOther + 1, kOther + 1, 17, &d).ok());
  CloseDir(&d);
  // The same job id under another uid is another directory; its own is
  // refused when its owner is not the job's user.
  const std::string job_dir = site_ + "/" + std::to_string(kOther) + "/17";
  ASSERT_TRUE(OpenJobLocalDir(site_, kOther, kOther, 18, &d).ok());
  CloseDir(&d);
  ASSERT_EQ(mkdir(job_dir.c_str(), 0700), 0);
  ASSERT_EQ(chown(job_dir.c_str(), kOther + 1, kOther + 1), 0);
  Status s = OpenJobLocalDir(site_, kOther, kOther, 17, &d);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("'" + job_dir + "' belongs to uid 4243, not to the job's user (uid 4242)"),
            std::string::npos)
      << s.ToString();
}

TEST_F(LocalDirTest, ADirectoryAnEarlierStartLeftToTheCallerIsHandedOver) {
  if (!Root()) GTEST_SKIP() << "handing a directory to another user needs root";
  const std::string uid_dir = site_ + "/" + std::to_string(kOther);
  ASSERT_EQ(mkdir(site_.c_str(), 0755), 0);
  ASSERT_EQ(mkdir(uid_dir.c_str(), 0755), 0);
  ASSERT_EQ(mkdir((uid_dir + "/17").c_str(), 0755), 0);  // made, then the step died before fchown
  OpenDir d;
  Status s = OpenJobLocalDir(site_, kOther, kOther, 17, &d);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(Stat(uid_dir + "/17").st_uid, kOther);
  EXPECT_EQ(Stat(uid_dir + "/17").st_mode & 07777, 0700u);
  CloseDir(&d);
}

}  // namespace
}  // namespace baton::launch
