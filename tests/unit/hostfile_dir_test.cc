// The hostfile's directory: nothing planted by another user is used or
// blocks the step; every check is on the open descriptor; the removal runs
// as the user, reports the real errno and never waits past its bound.
// Run as root (as slurmstepd is), the tests plant directories owned by
// other users; as another user they skip what needs root, saying so.
#include "base/launch/hostfile_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>

namespace baton::launch {
namespace {

constexpr uid_t kOther = 4242;  // some other user

class HostfileDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp == '/' ? tmp : "/tmp") + "/baton-dir-test-XXXXXX";
    ASSERT_NE(mkdtemp(&tmpl[0]), nullptr);
    root_ = tmpl;
    // As root, a /tmp of our own (root's, sticky, writable by all); as
    // anyone else a directory of our own, writable by nobody else: a sticky
    // directory is safe only when root owns it (others could plant names).
    ASSERT_EQ(chmod(root_.c_str(), Root() ? 01777 : 0700), 0);
  }
  void TearDown() override { ASSERT_EQ(system(("rm -rf '" + root_ + "'").c_str()), 0); }
  std::string Path(const std::string& name) const { return root_ + "/" + name; }
  bool Root() const { return geteuid() == 0; }
  std::string root_;
};

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST_F(HostfileDirTest, AFreshDirectoryIsPrivateAndItsNameUnpredictable) {
  OpenDir a, b;
  ASSERT_TRUE(MakeFreshDir(root_, "baton.17.0.", &a).ok());
  ASSERT_TRUE(MakeFreshDir(root_, "baton.17.0.", &b).ok());
  EXPECT_NE(a.path, b.path);
  EXPECT_EQ(a.path.rfind(root_ + "/baton.17.0.", 0), 0u) << a.path;
  struct stat st;
  ASSERT_EQ(stat(a.path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_EQ(st.st_uid, geteuid());
  ASSERT_TRUE(WriteFileIn(a, "hostfile", "n1 slots=2\n").ok());
  EXPECT_EQ(Read(a.path + "/hostfile"), "n1 slots=2\n");
  ASSERT_EQ(stat((a.path + "/hostfile").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  ASSERT_TRUE(RemoveAsUser(a, "hostfile", geteuid(), getegid(), std::chrono::seconds(5)).ok());
  EXPECT_NE(access(a.path.c_str(), F_OK), 0) << "the directory it made is removed";
  CloseDir(&a);
  CloseDir(&b);
}

TEST_F(HostfileDirTest, NamesPlantedByAnotherUserCostNothing) {
  if (!Root()) GTEST_SKIP() << "planting another user's directory needs root";
  // The old default was /tmp/baton-<user>: anyone could make it first.
  // Plant every name of the old scheme and a link; the fresh directory
  // is still made and written.
  ASSERT_EQ(mkdir(Path("baton-alice").c_str(), 0777), 0);
  ASSERT_EQ(chown(Path("baton-alice").c_str(), kOther, kOther), 0);
  ASSERT_EQ(symlink("/etc", Path("baton.17.0.link").c_str()), 0);
  OpenDir d;
  Status s = MakeFreshDir(root_, "baton.17.0.", &d);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_TRUE(WriteFileIn(d, "hostfile", "x\n").ok());
  CloseDir(&d);
}

TEST_F(HostfileDirTest, ATemplatePathIsCheckedOnItsDescriptorsComponentByComponent) {
  // A link where a component should be is refused, never followed.
  ASSERT_EQ(symlink("/etc", Path("link").c_str()), 0);
  OpenDir d;
  Status s = OpenSafeDir(Path("link/sub"), true, &d);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("not a directory (a link or a file)"), std::string::npos) << s;
  // Made where missing, 0700, and then used.
  s = OpenSafeDir(Path("a/b/c"), true, &d);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(d.created);
  EXPECT_EQ(d.path, Path("a/b/c"));
  ASSERT_TRUE(WriteFileIn(d, "hostfile", "y\n").ok());
  CloseDir(&d);
  EXPECT_FALSE(OpenSafeDir(Path("a/../a"), false, &d).ok()) << "'..' is refused";
}

TEST_F(HostfileDirTest, ADirectoryWritableByItsGroupIsNotSafe) {
  if (!Root()) GTEST_SKIP() << "a root-owned directory needs root";
  // Root-owned but group-writable (root:users 0775): any member of the
  // group could replace the hostfile's directory. Only sticky saves it.
  ASSERT_EQ(mkdir(Path("shared").c_str(), 0775), 0);
  ASSERT_EQ(chmod(Path("shared").c_str(), 0775), 0);
  ASSERT_EQ(chown(Path("shared").c_str(), 0, kOther), 0);
  OpenDir d;
  Status s = OpenSafeDir(Path("shared/x"), true, &d);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("with mode 0775"), std::string::npos) << s;
  ASSERT_EQ(chmod(Path("shared").c_str(), 01775), 0);
  s = OpenSafeDir(Path("shared/x"), true, &d);
  EXPECT_TRUE(s.ok()) << "sticky, as /tmp: " << s;
  CloseDir(&d);
  // Another user's directory, however closed, is not the caller's to trust.
  ASSERT_EQ(mkdir(Path("theirs").c_str(), 0700), 0);
  ASSERT_EQ(chown(Path("theirs").c_str(), kOther, kOther), 0);
  s = OpenSafeDir(Path("theirs"), false, &d);
  EXPECT_NE(s.message().find("owned by uid 4242"), std::string::npos) << s;
}

TEST_F(HostfileDirTest, TheRemovalRunsAsTheUser) {
  if (!Root()) GTEST_SKIP() << "switching users needs root";
  OpenDir d;
  ASSERT_TRUE(MakeFreshDir(root_, "x.", &d).ok());
  ASSERT_EQ(fchown(d.fd, kOther, kOther), 0);
  ASSERT_TRUE(WriteFileIn(d, "hostfile", "z\n").ok());
  // As another user than the directory's owner (0700), nothing can be removed.
  Status s = RemoveAsUser(d, "hostfile", kOther + 1, kOther + 1, std::chrono::seconds(5));
  EXPECT_EQ(s.code(), Code::kIOError);
  EXPECT_NE(s.message().find(std::strerror(EACCES)), std::string::npos) << s;
  EXPECT_EQ(access((d.path + "/hostfile").c_str(), F_OK), 0);
  CloseDir(&d);
}

TEST(RunAsUser, ReportsTheRealErrno) {
  // errno & 0x3f turned ESTALE (116) into 52 (EBADE) and ENOTCONN (107)
  // into 43 (EIDRM).
  for (int err : {ESTALE, ENOTCONN, EACCES}) {
    Status s = RunAsUser("removing x", geteuid(), getegid(), std::chrono::seconds(5), [err] { return err; });
    EXPECT_EQ(s.code(), Code::kIOError);
    EXPECT_NE(s.message().find(std::strerror(err)), std::string::npos) << s;
  }
  EXPECT_TRUE(RunAsUser("x", geteuid(), getegid(), std::chrono::seconds(5), [] { return 0; }).ok());
}

TEST(RunAsUser, AHungFileSystemCostsTheBoundNotTheStep) {
  // The child blocks as on a hung NFS server; the caller goes on.
  const auto start = std::chrono::steady_clock::now();
  Status s = RunAsUser("removing hostfile '/nfs/x'", geteuid(), getegid(), std::chrono::milliseconds(300), [] {
    pause();
    return 0;
  });
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(s.code(), Code::kTimeout) << s;
  EXPECT_NE(s.message().find("'/nfs/x' did not finish within 0.3 s"), std::string::npos) << s;
  EXPECT_GE(took, std::chrono::milliseconds(300));
  EXPECT_LT(took, std::chrono::seconds(3));
}

}  // namespace
}  // namespace baton::launch
