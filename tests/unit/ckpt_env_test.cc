#include "ckpt/fs/env.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tests/unit/ckpt_temp_dir.h"

namespace baton::ckpt::fs {
namespace {

class CkptPosixEnv : public ::testing::Test {
 protected:
  Env* env = Env::Default();
  TempDir dir;
};

TEST_F(CkptPosixEnv, WritesReadsAndStats) {
  const std::string p = dir / "a";
  ASSERT_TRUE(WriteWholeFile(env, p, "hello world").ok());
  std::string back;
  ASSERT_TRUE(env->ReadFile(p, 100, &back).ok());
  EXPECT_EQ(back, "hello world");
  char buf[5];
  ASSERT_TRUE(env->ReadAt(p, 6, 5, buf).ok());
  EXPECT_EQ(std::string(buf, 5), "world");
  FileInfo info;
  ASSERT_TRUE(env->Stat(p, &info).ok());
  EXPECT_EQ(info.type, FileType::kRegular);
  EXPECT_EQ(info.size, 11u);
  EXPECT_GT(info.mtime_ns, 0);
  EXPECT_TRUE(env->SyncFile(p).ok());
  EXPECT_TRUE(env->SyncDir(dir.path()).ok());
}

// A shard group's members write their rows into the one file at offsets.
TEST_F(CkptPosixEnv, OpenForWriteAtWritesFromTheOffsetAndNeitherCreatesNorTruncates) {
  const std::string p = dir / "a";
  ASSERT_TRUE(WriteWholeFile(env, p, "0123456789").ok());
  std::unique_ptr<WritableFile> f;
  ASSERT_TRUE(env->OpenForWriteAt(p, 3, &f).ok());
  ASSERT_TRUE(f->Append("ab", 2).ok());
  ASSERT_TRUE(f->Append("c", 1).ok());
  ASSERT_TRUE(f->Close().ok());
  ASSERT_TRUE(env->OpenForWriteAt(p, 12, &f).ok());  // past the end: a hole, then the bytes
  ASSERT_TRUE(f->Append("z", 1).ok());
  ASSERT_TRUE(f->Close().ok());
  std::string back;
  ASSERT_TRUE(env->ReadFile(p, 100, &back).ok());
  EXPECT_EQ(back, std::string("012abc6789\0\0z", 13));

  Status s = env->OpenForWriteAt(dir / "none", 0, &f);
  EXPECT_EQ(s.code(), Code::kNotFound) << s;
  EXPECT_NE(s.message().find(dir / "none"), std::string::npos) << s;
  ASSERT_EQ(::symlink(p.c_str(), (dir / "link").c_str()), 0);
  s = env->OpenForWriteAt(dir / "link", 0, &f);
  EXPECT_FALSE(s.ok()) << "followed a symlink";
  ASSERT_TRUE(env->CreateDir(dir / "d", 0700, false).ok());
  EXPECT_FALSE(env->OpenForWriteAt(dir / "d", 0, &f).ok());
}

// A member's rows of several arrays through one descriptor: Seek moves the
// next Append, before or after what was written (issue 48).
TEST_F(CkptPosixEnv, SeekMovesTheNextAppend) {
  const std::string p = dir / "a";
  ASSERT_TRUE(WriteWholeFile(env, p, "0123456789").ok());
  std::unique_ptr<WritableFile> f;
  ASSERT_TRUE(env->OpenForWriteAt(p, 6, &f).ok());
  ASSERT_TRUE(f->Append("xy", 2).ok());
  f->StartWriteback();
  ASSERT_TRUE(f->Seek(1).ok());
  ASSERT_TRUE(f->Append("ab", 2).ok());
  ASSERT_TRUE(f->Seek(11).ok());
  ASSERT_TRUE(f->Append("z", 1).ok());
  ASSERT_TRUE(f->Close().ok());
  std::string back;
  ASSERT_TRUE(env->ReadFile(p, 100, &back).ok());
  EXPECT_EQ(back, std::string("0ab345xy89\0z", 12));
  Status s = f->Seek(0);
  EXPECT_EQ(s.code(), Code::kIOError) << s;
  EXPECT_NE(s.message().find(p), std::string::npos) << s;
}

// StartWriteback between pieces (the shard writer's use) changes no byte,
// from offset 0 or from an offset, and is harmless on a closed file. Its
// effect, the disk writing during the copy, is measured by baton bench ckpt.
TEST_F(CkptPosixEnv, StartWritebackBetweenPiecesKeepsEveryByte) {
  const std::string p = dir / "w";
  std::string whole(3 * 65536 + 5, '\0');
  for (size_t i = 0; i < whole.size(); ++i) whole[i] = static_cast<char>(i * 7 + 1);
  std::unique_ptr<WritableFile> f;
  ASSERT_TRUE(env->NewWritableFile(p, 0600, &f).ok());
  f->StartWriteback();  // nothing appended yet
  for (size_t at = 0; at < whole.size(); at += 65536) {
    ASSERT_TRUE(f->Append(whole.data() + at, std::min<size_t>(65536, whole.size() - at)).ok());
    f->StartWriteback();
    f->StartWriteback();  // twice: nothing new since the last
  }
  ASSERT_TRUE(f->Sync().ok());
  ASSERT_TRUE(f->Close().ok());
  f->StartWriteback();  // closed: no effect, no error
  ASSERT_TRUE(env->OpenForWriteAt(p, 65536 + 3, &f).ok());
  ASSERT_TRUE(f->Append("xyz", 3).ok());
  f->StartWriteback();
  ASSERT_TRUE(f->Close().ok());
  whole.replace(65536 + 3, 3, "xyz");
  std::string back;
  ASSERT_TRUE(env->ReadFile(p, whole.size() + 1, &back).ok());
  EXPECT_TRUE(back == whole) << "the file differs from what was appended";
}

TEST_F(CkptPosixEnv, CreatesFilesAndDirsWithTheRequestedModeWhateverTheUmask) {
  const mode_t old = ::umask(077);
  ASSERT_TRUE(WriteWholeFile(env, dir / "f", "x", 0644).ok());
  ASSERT_TRUE(env->CreateDir(dir / "d", 0755, false).ok());
  ::umask(old);
  FileInfo info;
  ASSERT_TRUE(env->Stat(dir / "f", &info).ok());
  EXPECT_EQ(info.mode, 0644u);
  ASSERT_TRUE(env->Stat(dir / "d", &info).ok());
  EXPECT_EQ(info.type, FileType::kDirectory);
  EXPECT_EQ(info.mode, 0755u);
}

TEST_F(CkptPosixEnv, NewWritableFileIsExclusive) {
  ASSERT_TRUE(WriteWholeFile(env, dir / "a", "1").ok());
  std::unique_ptr<WritableFile> f;
  Status s = env->NewWritableFile(dir / "a", 0644, &f);
  EXPECT_EQ(s.code(), Code::kIOError);
  EXPECT_NE(s.message().find("File exists"), std::string::npos) << s;
  EXPECT_NE(s.message().find(dir / "a"), std::string::npos) << s;
}

TEST_F(CkptPosixEnv, ErrorsNameTheCallThePathAndErrnoText) {
  std::string out;
  Status s = env->ReadFile(dir / "missing", 10, &out);
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_EQ(s.component(), "ckpt");
  EXPECT_NE(s.message().find("open(" + (dir / "missing") + ")"), std::string::npos) << s;
  EXPECT_NE(s.message().find("No such file or directory"), std::string::npos) << s;
  EXPECT_NE(s.message().find("posix_env.cc:"), std::string::npos) << s;
  s = env->Rename(dir / "missing", dir / "b");
  EXPECT_NE(s.message().find("rename(" + (dir / "missing") + " -> " + (dir / "b") + ")"), std::string::npos) << s;
}

TEST_F(CkptPosixEnv, ShortReadNamesOffsetAndSize) {
  ASSERT_TRUE(WriteWholeFile(env, dir / "a", "abc").ok());
  char buf[8];
  Status s = env->ReadAt(dir / "a", 1, 8, buf);
  EXPECT_EQ(s.code(), Code::kIOError);
  EXPECT_NE(s.message().find("short file: wanted 8 bytes at offset 1, got 2"), std::string::npos) << s;
}

TEST_F(CkptPosixEnv, ReadFileRefusesWhatIsTooLarge) {
  ASSERT_TRUE(WriteWholeFile(env, dir / "a", std::string(100, 'x')).ok());
  std::string out;
  Status s = env->ReadFile(dir / "a", 99, &out);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("100 bytes, more than the limit of 99"), std::string::npos) << s;
  EXPECT_TRUE(env->ReadFile(dir / "a", 100, &out).ok());
}

TEST_F(CkptPosixEnv, DoesNotFollowSymlinks) {
  ASSERT_TRUE(WriteWholeFile(env, dir / "target", "secret").ok());
  ASSERT_EQ(::symlink((dir / "target").c_str(), (dir / "link").c_str()), 0);
  FileInfo info;
  ASSERT_TRUE(env->Stat(dir / "link", &info).ok());
  EXPECT_EQ(info.type, FileType::kSymlink);
  std::string out;
  EXPECT_FALSE(env->ReadFile(dir / "link", 100, &out).ok());
  std::unique_ptr<WritableFile> f;
  EXPECT_FALSE(env->NewWritableFile(dir / "link", 0644, &f).ok());
}

TEST_F(CkptPosixEnv, CreateDirExistOk) {
  ASSERT_TRUE(env->CreateDir(dir / "d", 0755, false).ok());
  EXPECT_TRUE(env->CreateDir(dir / "d", 0755, true).ok());
  EXPECT_FALSE(env->CreateDir(dir / "d", 0755, false).ok());
  ASSERT_TRUE(WriteWholeFile(env, dir / "f", "").ok());
  Status s = env->CreateDir(dir / "f", 0755, true);
  EXPECT_NE(s.message().find("not a directory"), std::string::npos) << s;
}

TEST_F(CkptPosixEnv, ListDirAndRemoveFile) {
  ASSERT_TRUE(WriteWholeFile(env, dir / "a", "").ok());
  ASSERT_TRUE(env->CreateDir(dir / "b", 0755, false).ok());
  std::vector<std::string> names;
  ASSERT_TRUE(env->ListDir(dir.path(), &names).ok());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b"}));
  ASSERT_TRUE(env->RemoveFile(dir / "a").ok());
  EXPECT_EQ(env->RemoveFile(dir / "a").code(), Code::kNotFound);
}

TEST_F(CkptPosixEnv, RemoveTreeRemovesEverythingButNeverFollowsSymlinks) {
  // Outside the tree: must survive.
  ASSERT_TRUE(env->CreateDir(dir / "outside", 0755, false).ok());
  ASSERT_TRUE(WriteWholeFile(env, dir / "outside/keep", "k").ok());
  const std::string t = dir / "tree";
  ASSERT_TRUE(env->CreateDir(t, 0755, false).ok());
  ASSERT_TRUE(env->CreateDir(t + "/sub", 0755, false).ok());
  ASSERT_TRUE(env->CreateDir(t + "/sub/deeper", 0700, false).ok());
  ASSERT_TRUE(WriteWholeFile(env, t + "/sub/deeper/f", "x").ok());
  ASSERT_TRUE(WriteWholeFile(env, t + "/g", "y").ok());
  ASSERT_EQ(::symlink((dir / "outside").c_str(), (t + "/dirlink").c_str()), 0);
  ASSERT_EQ(::symlink((dir / "outside/keep").c_str(), (t + "/sub/filelink").c_str()), 0);
  ASSERT_TRUE(env->RemoveTree(t).ok());
  FileInfo info;
  EXPECT_EQ(env->Stat(t, &info).code(), Code::kNotFound);
  EXPECT_TRUE(env->Stat(dir / "outside/keep", &info).ok());
  // The tree itself a symlink: refused, target untouched.
  ASSERT_EQ(::symlink((dir / "outside").c_str(), (dir / "link").c_str()), 0);
  Status s = env->RemoveTree(dir / "link");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(dir / "link"), std::string::npos) << s;
  EXPECT_TRUE(env->Stat(dir / "outside/keep", &info).ok());
}

TEST_F(CkptPosixEnv, ClosedFileRefusesWrites) {
  std::unique_ptr<WritableFile> f;
  ASSERT_TRUE(env->NewWritableFile(dir / "a", 0600, &f).ok());
  ASSERT_TRUE(f->Close().ok());
  EXPECT_TRUE(f->Close().ok());
  EXPECT_FALSE(f->Append("x", 1).ok());
}

}  // namespace
}  // namespace baton::ckpt::fs
