// ckpt/fs/durable_write.h through the fault Env: what each failure point
// leaves, and that the temporaries stay out of every listing of ckpt.
#include "ckpt/fs/durable_write.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ckpt/catalog.h"
#include "ckpt/fs/fault_env.h"
#include "ckpt/manifest.h"
#include "tests/unit/ckpt_temp_dir.h"

namespace baton::ckpt::fs {
namespace {

class CkptDurableWrite : public ::testing::Test {
 protected:
  FaultEnv env;
  TempDir dir;

  std::string Contents(const std::string& path) {
    std::string out;
    Status s = Env::Default()->ReadFile(path, 1 << 20, &out);
    return s.ok() ? out : "<" + s.ToString() + ">";
  }
  std::vector<std::string> Entries() {
    std::vector<std::string> names;
    EXPECT_TRUE(Env::Default()->ListDir(dir.path(), &names).ok());
    std::sort(names.begin(), names.end());
    return names;
  }
  // The target holds `old`; the write of "new bytes" meets the armed fault.
  Status FailedReplace() {
    EXPECT_TRUE(WriteWholeFile(Env::Default(), dir / "f", "old").ok());
    return WriteFileDurably(&env, dir.path(), "f", "new bytes");
  }
};

std::string TmpPart() { return "/.f.tmp."; }

TEST_F(CkptDurableWrite, SuccessLeavesExactlyTheTargetInProtocolOrder) {
  DurableWriteOptions o;
  o.mode = 0640;
  ASSERT_TRUE(WriteFileDurably(&env, dir.path(), "f", "hello", o).ok());
  EXPECT_EQ(Entries(), std::vector<std::string>{"f"});
  EXPECT_EQ(Contents(dir / "f"), "hello");
  FileInfo info;
  ASSERT_TRUE(Env::Default()->Stat(dir / "f", &info).ok());
  EXPECT_EQ(info.mode, 0640u);
  const std::vector<std::string> ev = env.events();
  ASSERT_EQ(ev.size(), 4u);
  EXPECT_EQ(ev[0].rfind("create " + dir.path() + TmpPart(), 0), 0u) << ev[0];
  EXPECT_EQ(ev[1].rfind("sync " + dir.path() + TmpPart(), 0), 0u) << ev[1];
  EXPECT_EQ(ev[2].rfind("rename " + dir.path() + TmpPart(), 0), 0u) << ev[2];
  EXPECT_NE(ev[2].find(" -> " + dir / "f"), std::string::npos) << ev[2];
  EXPECT_EQ(ev[3], "syncdir " + dir.path());
}

TEST_F(CkptDurableWrite, ReplacesAnExistingFile) {
  ASSERT_TRUE(WriteWholeFile(&env, dir / "f", "old").ok());
  ASSERT_TRUE(WriteFileDurably(&env, dir.path(), "f", "new").ok());
  EXPECT_EQ(Contents(dir / "f"), "new");
  EXPECT_EQ(Entries(), std::vector<std::string>{"f"});
}

TEST_F(CkptDurableWrite, AFailedCreateNamesTheTargetAndTheStep) {
  Status s = WriteFileDurably(&env, dir / "missing", "f", "x");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kNotFound) << s;
  EXPECT_NE(s.message().find("writing " + dir / "missing/f: creating its temporary failed"), std::string::npos) << s;
  EXPECT_NE(s.message().find("No such file or directory"), std::string::npos) << s;
}

struct WriteFault {
  FaultEnv::Fault fault;
  const char* text;
};

class CkptDurableWriteFault : public CkptDurableWrite, public ::testing::WithParamInterface<WriteFault> {};

TEST_P(CkptDurableWriteFault, LeavesNoTemporaryAndTheOldFile) {
  env.Inject(GetParam().fault, TmpPart());
  Status s = FailedReplace();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("writing " + dir / "f: write failed"), std::string::npos) << s;
  EXPECT_NE(s.message().find(GetParam().text), std::string::npos) << s;
  EXPECT_EQ(Entries(), std::vector<std::string>{"f"});
  EXPECT_EQ(Contents(dir / "f"), "old");
}

INSTANTIATE_TEST_SUITE_P(Writes, CkptDurableWriteFault,
                         ::testing::Values(WriteFault{FaultEnv::Fault::kNoSpace, "No space left on device"},
                                           WriteFault{FaultEnv::Fault::kShortWrite, "short write of 4 of 9 bytes"},
                                           WriteFault{FaultEnv::Fault::kFailWrite, "Input/output error"}));

TEST_F(CkptDurableWrite, AFailedFsyncLeavesNoTemporary) {
  env.Inject(FaultEnv::Fault::kFailSync, TmpPart());
  Status s = FailedReplace();
  EXPECT_NE(s.message().find("writing " + dir / "f: fsync failed: fsync(" + dir.path() + TmpPart()),
            std::string::npos) << s;
  EXPECT_EQ(Entries(), std::vector<std::string>{"f"});
  EXPECT_EQ(Contents(dir / "f"), "old");
}

TEST_F(CkptDurableWrite, AFailedRenameLeavesNoTemporary) {
  env.Inject(FaultEnv::Fault::kFailRename);
  Status s = FailedReplace();
  EXPECT_NE(s.message().find("writing " + dir / "f: rename failed"), std::string::npos) << s;
  EXPECT_NE(s.message().find("Input/output error"), std::string::npos) << s;
  EXPECT_EQ(Entries(), std::vector<std::string>{"f"});
  EXPECT_EQ(Contents(dir / "f"), "old");
}

// After the rename the new bytes are the file: a failed directory fsync is
// reported (the entry may not be durable) but removes nothing.
TEST_F(CkptDurableWrite, AFailedDirectoryFsyncIsNamedAndKeepsTheNewFile) {
  env.Inject(FaultEnv::Fault::kFailSync, dir.path(), /*skip=*/1);  // the file's fsync, then the directory's
  Status s = FailedReplace();
  EXPECT_NE(s.message().find("writing " + dir / "f: fsync of the directory failed: fsync(" + dir.path() + ")"),
            std::string::npos) << s;
  EXPECT_EQ(Entries(), std::vector<std::string>{"f"});
  EXPECT_EQ(Contents(dir / "f"), "new bytes");
}

// A crash before the rename: the old file stays; the temporary a dead
// process cannot remove is a leftover, which RemoveDurableTemporaries
// clears (and no other file).
TEST_F(CkptDurableWrite, ACrashBeforeTheRenameKeepsTheOldFile) {
  ASSERT_TRUE(WriteWholeFile(Env::Default(), dir / "g", "other").ok());
  env.Inject(FaultEnv::Fault::kCrashBeforeRename);
  EXPECT_FALSE(FailedReplace().ok());
  EXPECT_TRUE(env.crashed());
  EXPECT_EQ(Contents(dir / "f"), "old");
  std::vector<std::string> left = Entries();
  ASSERT_EQ(left.size(), 3u);
  EXPECT_TRUE(IsDurableTemporary(left[0])) << left[0];
  EXPECT_EQ(left[0].rfind(".f.tmp.", 0), 0u) << left[0];
  env.Clear();
  ASSERT_TRUE(WriteWholeFile(Env::Default(), dir / DurableTemporaryName("g"), "g's").ok());
  int removed = 0;
  ASSERT_TRUE(RemoveDurableTemporaries(&env, dir.path(), "f", &removed).ok());
  EXPECT_EQ(removed, 1);
  left = Entries();
  ASSERT_EQ(left.size(), 3u);  // f, g and g's temporary
  EXPECT_EQ(left[0].rfind(".g.tmp.", 0), 0u) << left[0];
  ASSERT_TRUE(RemoveDurableTemporaries(&env, dir.path(), "", &removed).ok());
  EXPECT_EQ(removed, 1);
  EXPECT_EQ(Entries(), (std::vector<std::string>{"f", "g"}));
  EXPECT_EQ(Contents(dir / "f"), "old");
}

// The streaming form: pieces, the cache dropped after the fsync and before
// the rename; destroyed uncommitted, it leaves nothing.
TEST_F(CkptDurableWrite, StreamingCommitDropsTheCacheAfterTheFsync) {
  DurableWriteOptions o;
  o.drop_cache = true;
  std::unique_ptr<DurableFile> f;
  ASSERT_TRUE(DurableFile::Create(&env, dir.path(), "big", o, &f).ok());
  EXPECT_EQ(f->path(), dir / "big");
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(f->Append("0123", 4).ok());
  f->StartWriteback();
  ASSERT_TRUE(f->Commit().ok());
  EXPECT_EQ(Contents(dir / "big"), "012301230123");
  const std::vector<std::string> ev = env.events();
  ASSERT_EQ(ev.size(), 5u);
  EXPECT_EQ(ev[1], "sync " + f->temporary());
  EXPECT_EQ(ev[2], "dropcache " + f->temporary());
  EXPECT_EQ(ev[3].rfind("rename " + f->temporary(), 0), 0u);
  EXPECT_FALSE(f->Commit().ok());  // once only
  f.reset();
  EXPECT_EQ(Entries(), std::vector<std::string>{"big"});

  ASSERT_TRUE(DurableFile::Create(&env, dir.path(), "other", o, &f).ok());
  ASSERT_TRUE(f->Append("x", 1).ok());
  f.reset();  // a copy abandoned half-way
  EXPECT_EQ(Entries(), std::vector<std::string>{"big"});
}

// The names no listing of ckpt may take for its own: versions, manifests,
// shards and partner copies (node_local_level.cc), the run file.
TEST_F(CkptDurableWrite, TemporariesCollideWithNothingListed) {
  const std::string a = DurableTemporaryName(kManifestName), b = DurableTemporaryName(kManifestName);
  EXPECT_NE(a, b);
  for (const std::string& target : {std::string("v00000012-s4"), std::string(kManifestName),
                                    std::string("shard-3.h5"), std::string("run"), std::string(kRestoreFailuresName)}) {
    const std::string t = DurableTemporaryName(target);
    EXPECT_TRUE(IsDurableTemporary(t)) << t;
    EXPECT_EQ(t[0], '.') << t;
    uint64_t seq = 0;
    int64_t step = 0;
    EXPECT_FALSE(ParseVersionName(t, &seq, &step)) << t;
    EXPECT_NE(t.rfind(kManifestName, 0), 0u) << t;
    EXPECT_NE(t.rfind("shard-", 0), 0u) << t;
    EXPECT_LT(t.size(), 255u) << t;
  }
  for (const char* name : {"manifest.json", "manifest.json.tmp", ".hidden", "v00000001-s1", "shard-0.h5.tmp"}) {
    EXPECT_FALSE(IsDurableTemporary(name)) << name;
  }
  // A version directory's temporary (of a rename into place) is not listed as a version.
  ASSERT_TRUE(Env::Default()->CreateDir(dir / DurableTemporaryName("v00000001-s1"), 0755, false).ok());
  ASSERT_TRUE(Env::Default()->CreateDir(dir / "v00000002-s2", 0755, false).ok());
  std::vector<VersionInfo> versions;
  ASSERT_TRUE(ListVersions(&env, dir.path(), 0, &versions).ok());
  ASSERT_EQ(versions.size(), 1u);
  EXPECT_EQ(versions[0].name, "v00000002-s2");
}

}  // namespace
}  // namespace baton::ckpt::fs
