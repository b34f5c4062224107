// The hostfile's directory: nothing planted by another user is used or
// blocks the step; every check is on the open descriptor; the removal runs
// as the user, reports the real errno and never waits past its bound.
// Run as root (as slurmstepd is), the tests plant directories owned by
// other users; as another user they skip what needs root, saying so.
#include "base/launch/bounded_child.h"
#include "base/launch/hostfile_view.h"
#include "base/launch/safe_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

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

TEST_F(HostfileDirTest, ADirectoryMadeInTheChildComesBackOpen) {
  OpenDir d;
  Status s = MakeDirBounded("making x", std::chrono::seconds(5), [&](OpenDir* out) {
    BATON_RETURN_IF_ERROR(MakeFreshDir(root_, "x.", out));
    return WriteFileIn(*out, "hostfile", "n1 slots=2\n");
  }, &d);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(d.created);
  EXPECT_EQ(d.path.rfind(root_ + "/x.", 0), 0u) << d.path;
  EXPECT_EQ(Read(d.path + "/hostfile"), "n1 slots=2\n");
  // The descriptors are the parent's now: the removal works through them.
  EXPECT_TRUE(RemoveAsUser(d, "hostfile", geteuid(), getegid(), std::chrono::seconds(5)).ok());
  CloseDir(&d);
  struct stat st;
  EXPECT_NE(stat(d.path.c_str(), &st), 0);
}

TEST_F(HostfileDirTest, AFailureInTheChildComesBackWithItsCodeAndMessage) {
  OpenDir d;
  Status s = MakeDirBounded("making x", std::chrono::seconds(5),
                            [&](OpenDir* out) { return MakeFreshDir(Path("missing"), "x.", out); }, &d);
  EXPECT_EQ(s.code(), Code::kIOError) << s;
  EXPECT_NE(s.message().find("'" + Path("missing") + "'"), std::string::npos) << s;
  EXPECT_NE(s.message().find(std::strerror(ENOENT)), std::string::npos) << s;
  EXPECT_EQ(d.fd, -1);
  ASSERT_EQ(mkdir(Path("open").c_str(), 0777), 0);
  ASSERT_EQ(chmod(Path("open").c_str(), 0777), 0);
  s = MakeDirBounded("making x", std::chrono::seconds(5),
                     [&](OpenDir* out) { return OpenSafeDir(Path("open"), false, out); }, &d);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("is not safe to use"), std::string::npos) << s;
}

// A file system that never answers, as a hung NFS server: a FUSE mount
// whose server never reads its requests (/dev/fuse opened, mounted, left
// alone). mkdir in it blocks in the kernel (state D, killable, as on a
// hard NFS mount). Done in a child with its own mount namespace, so the
// mount is nobody else's; the child reports what MakeDirBounded said.
TEST_F(HostfileDirTest, AHungFileSystemCostsUserInitTheBoundNotTheStep) {
  if (!Root()) GTEST_SKIP() << "mounting a FUSE file system needs root";
  if (access("/dev/fuse", R_OK | W_OK) != 0) GTEST_SKIP() << "no /dev/fuse: " << std::strerror(errno);
  int report[2];
  ASSERT_EQ(pipe(report), 0);
  const std::string mnt = Path("nfs");
  ASSERT_EQ(mkdir(mnt.c_str(), 0755), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(report[0]);
    auto say = [&](const std::string& line) {
      ssize_t ignored = write(report[1], line.data(), line.size());
      (void)ignored;
      _exit(0);
    };
    if (unshare(CLONE_NEWNS) != 0) say(std::string("skip unshare(CLONE_NEWNS): ") + std::strerror(errno));
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
      say(std::string("skip mount --make-rprivate /: ") + std::strerror(errno));
    const int fuse = open("/dev/fuse", O_RDWR | O_CLOEXEC);
    if (fuse < 0) say(std::string("skip open /dev/fuse: ") + std::strerror(errno));
    const std::string opts = "fd=" + std::to_string(fuse) + ",rootmode=40000,user_id=0,group_id=0";
    if (mount("baton-hung", mnt.c_str(), "fuse", MS_NOSUID | MS_NODEV, opts.c_str()) != 0)
      say(std::string("skip mount -t fuse: ") + std::strerror(errno));
    const auto start = std::chrono::steady_clock::now();
    OpenDir d;
    Status s = MakeDirBounded("making the hostfile's directory in '" + mnt + "'", std::chrono::milliseconds(500),
                              [&](OpenDir* out) {
                                BATON_RETURN_IF_ERROR(MakeFreshDir(mnt, "baton.1.0.", out));
                                return WriteFileIn(*out, "hostfile", "n1\n");
                              },
                              &d);
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
    close(fuse);  // aborts the connection: the stuck helper, if still there, gets ENOTCONN
    umount2(mnt.c_str(), MNT_DETACH);
    say(std::to_string(took.count()) + " " + s.ToString());
  }
  close(report[1]);
  std::string line;
  char buf[512];
  ssize_t n;
  while ((n = read(report[0], buf, sizeof buf)) > 0) line.append(buf, static_cast<size_t>(n));
  close(report[0]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  if (line.rfind("skip ", 0) == 0) GTEST_SKIP() << "cannot mount a hung FUSE file system here: " << line.substr(5);
  const long took_ms = std::strtol(line.c_str(), nullptr, 10);
  EXPECT_NE(line.find("Timeout"), std::string::npos) << line;
  EXPECT_NE(line.find("making the hostfile's directory in '" + mnt + "' did not finish within 0.5 s"),
            std::string::npos)
      << line;
  EXPECT_GE(took_ms, 500) << line;
  EXPECT_LT(took_ms, 3000) << line;
}

// --- the hostfile in the task's view (job_container/tmpfs) -----------------------------

TEST_F(HostfileDirTest, ADirectoryReplacedAtItsPathIsNotSeenThere) {
  OpenDir d;
  ASSERT_TRUE(OpenSafeDir(Path("a"), /*create=*/true, &d).ok());
  bool same = false;
  ASSERT_TRUE(SeenAtItsPath(d, &same).ok());
  EXPECT_TRUE(same);
  ASSERT_EQ(rename(Path("a").c_str(), Path("b").c_str()), 0);
  ASSERT_TRUE(SeenAtItsPath(d, &same).ok());
  EXPECT_FALSE(same) << "nothing at the path";
  ASSERT_EQ(mkdir(Path("a").c_str(), 0700), 0);
  ASSERT_TRUE(SeenAtItsPath(d, &same).ok());
  EXPECT_FALSE(same) << "another directory at the path";
  CloseDir(&d);
}

TEST_F(HostfileDirTest, EveryTaskOfANodePlacesTheHostfileAtOnceAndOneCopyStands) {
  const std::string dir = Path("sub/baton.9.0.abc");
  std::vector<pid_t> kids;
  for (int i = 0; i < 8; ++i) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) _exit(PlaceInThisView(dir, "hostfile", "n1 slots=2\n").ok() ? 0 : 1);
    kids.push_back(pid);
  }
  for (pid_t pid : kids) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a task failed to place the hostfile";
  }
  EXPECT_EQ(Read(dir + "/hostfile"), "n1 slots=2\n");
  std::vector<std::string> left;
  DIR* sub = opendir(Path("sub").c_str());
  ASSERT_NE(sub, nullptr);
  while (const dirent* e = readdir(sub))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) left.push_back(e->d_name);
  closedir(sub);
  EXPECT_EQ(left, std::vector<std::string>{"baton.9.0.abc"}) << "the losers' fresh directories are gone";
  struct stat st;
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_TRUE(PlaceInThisView(dir, "hostfile", "n1 slots=2\n").ok()) << "a later task finds it in place";
}

TEST_F(HostfileDirTest, APlantedLinkInTheTasksViewIsRefused) {
  ASSERT_EQ(symlink(root_.c_str(), Path("baton.9.0.abc").c_str()), 0);
  Status s = PlaceInThisView(Path("baton.9.0.abc"), "hostfile", "x\n");
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("not safe to use"), std::string::npos) << s;
}

TEST_F(HostfileDirTest, ATaskInAnotherMountNamespaceGetsTheHostfileAtTheSamePath) {
  // job_container/tmpfs without contain_spank: user_init writes the file in
  // slurmstepd's view; the task has a private tmpfs over the directory's
  // parent. Before, BATON_HOSTFILE named nothing there.
  if (!Root()) GTEST_SKIP() << "a mount namespace of one's own needs root";
  OpenDir d;
  ASSERT_TRUE(MakeFreshDir(root_, "baton.9.0.", &d).ok());
  ASSERT_TRUE(WriteFileIn(d, "hostfile", "n1 slots=2\n").ok());
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(pipefd[0]);
    auto say = [&](const std::string& m) {
      (void)!write(pipefd[1], m.data(), m.size());
      _exit(0);
    };
    if (unshare(CLONE_NEWNS) != 0) say(std::string("skip unshare(CLONE_NEWNS): ") + std::strerror(errno));
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) say(std::string("skip private /: ") + std::strerror(errno));
    if (mount("tmpfs", root_.c_str(), "tmpfs", 0, "mode=1777") != 0) say(std::string("skip tmpfs: ") + std::strerror(errno));
    bool same = true;
    Status s = SeenAtItsPath(d, &same);
    if (!s.ok() || same) say("fail: the task's view was taken for user_init's");
    s = PlaceInThisView(d.path, "hostfile", "n1 slots=2\n");
    if (!s.ok()) say("fail: " + s.ToString());
    say("content " + Read(d.path + "/hostfile"));
  }
  close(pipefd[1]);
  std::string line;
  char buf[512];
  ssize_t n;
  while ((n = read(pipefd[0], buf, sizeof buf)) > 0) line.append(buf, static_cast<size_t>(n));
  close(pipefd[0]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  if (line.rfind("skip ", 0) == 0) GTEST_SKIP() << "cannot make a mount namespace here: " << line.substr(5);
  EXPECT_EQ(line, "content n1 slots=2\n");
  bool same = false;
  ASSERT_TRUE(SeenAtItsPath(d, &same).ok());
  EXPECT_TRUE(same) << "user_init's view keeps its own";
  CloseDir(&d);
}

}  // namespace
}  // namespace baton::launch
