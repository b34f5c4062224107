// Hostile shard files (issue 15, items 6 and 7): links out of the file,
// a damaged HDF5 metadata region, what a reader opens before it trusts.
//
// Run at 1, 3 and 8 ranks with the other ckpt tests (ckpt-np*.sh); the
// damage and the checks are rank 0's, on a version all ranks saved.
#include <fcntl.h>
#include <hdf5.h>
#include <mpi.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "baton/checkpointer.h"
#include "ckpt/hdf5/h5_check.h"
#include "ckpt/hdf5/shard_reader.h"
#include "ckpt/manifest.h"
#include "ckpt/verify.h"
#include "tests/mpi/ckpt_fixture.h"

namespace baton::ckpt_testing {
namespace {

// Every rank saves the standard arrays (MakeArrays, filled for `step`) at
// `step` with `o` (a group of the world: one shard); the version's
// directory, "" where the save failed.
std::string SaveInOneShard(const CheckpointOptions& o, int64_t step) {
  auto ck = MakeCheckpointer(o);
  auto arrays = MakeArrays(Size(), Rank());
  FillAll(&arrays, step);
  if (!AllRanks(RegisterAll(ck.get(), &arrays).ok()) || !AllRanks(ck->Save(step).ok())) return "";
  return ck->last_stats().version_path;
}

// The reader of shard-0.h5 for what the manifest says, sizes as they are now.
Status ReadThrough(const std::string& vdir, const ckpt::Manifest& m, const std::string& array) {
  struct stat st;
  if (stat((vdir + "/shard-0.h5").c_str(), &st) != 0) return Status::NotFound("test", "no shard-0.h5");
  std::unique_ptr<ckpt::h5::ShardReader> reader;
  // Past the size and metadata checks (format 1 has none): the link check is under test.
  ckpt::Manifest old = m;
  old.format = 1;
  old.run_id.clear();
  old.shards[0].bytes = static_cast<uint64_t>(st.st_size);
  BATON_RETURN_IF_ERROR(ckpt::h5::ShardReader::Open(ckpt::fs::Env::Default(), vdir, old, 0, &reader));
  for (const ckpt::DatasetMeta& d : m.shards[0].datasets) {
    const ckpt::ArrayMeta& a = m.arrays[d.array];
    if (a.name != array) continue;
    std::vector<char> buf(d.rows * a.row_bytes());
    return reader->ReadRows(a, d.rows, 0, d.rows, buf.data());
  }
  return Status::NotFound("test", "no dataset " + array);
}

// A dataset replaced by a link to identical data elsewhere (the same file,
// or a file outside the version directory): refused, not followed.
TEST_F(CkptTest, ADatasetThatIsALinkIsRefused) {
  const std::string vdir = SaveInOneShard(Options(Size()), 3);
  ASSERT_FALSE(vdir.empty());
  if (Rank() == 0) {
    ckpt::Manifest m;
    ASSERT_TRUE(ReadManifest(vdir, &m).ok());
    const std::string shard = vdir + "/shard-0.h5", outside = root_ + "/../outside.h5";
    // The same bytes outside, then the shard's datasets become links to them.
    hid_t out = H5Fcreate(outside.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t f = H5Fopen(shard.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(out, 0);
    ASSERT_GE(f, 0);
    ASSERT_GE(H5Ocopy(f, "s_f32", out, "s_f32", H5P_DEFAULT, H5P_DEFAULT), 0);
    ASSERT_GE(H5Ldelete(f, "s_f32", H5P_DEFAULT), 0);
    ASSERT_GE(H5Lcreate_external(outside.c_str(), "s_f32", f, "s_f32", H5P_DEFAULT, H5P_DEFAULT), 0);
    ASSERT_GE(H5Ocopy(f, "r_f64", f, "copy_of_r_f64", H5P_DEFAULT, H5P_DEFAULT), 0);
    ASSERT_GE(H5Ldelete(f, "r_f64", H5P_DEFAULT), 0);
    ASSERT_GE(H5Lcreate_soft("/copy_of_r_f64", f, "r_f64", H5P_DEFAULT, H5P_DEFAULT), 0);
    H5Fclose(f);
    H5Fclose(out);
    Status s = ReadThrough(vdir, m, "s_f32");
    EXPECT_EQ(s.code(), Code::kCorruption) << s;
    EXPECT_NE(s.message().find("dataset s_f32: an external link, not a dataset of this file"), std::string::npos) << s;
    s = ReadThrough(vdir, m, "r_f64");
    EXPECT_EQ(s.code(), Code::kCorruption) << s;
    EXPECT_NE(s.message().find("dataset r_f64: a soft link, not a dataset of this file"), std::string::npos) << s;
    s = ReadThrough(vdir, m, "r_f32");  // untouched
    EXPECT_TRUE(s.ok()) << s;
  }
}


// Format 2 reads a dataset at the manifest's offset with no HDF5 call of
// its own (the metadata checksum proved the file's structure the
// writer's); format 1 asks HDF5 for the dataset's offset, type and dims.
// Both must give every dataset's rows byte for byte alike.
TEST_F(CkptTest, AFormat2ShardReadsEveryDatasetAsHdf5LocatesIt) {
  const std::string vdir = SaveInOneShard(Options(Size()), 5);
  ASSERT_FALSE(vdir.empty());
  if (Rank() != 0) return;
  ckpt::Manifest m;
  ASSERT_TRUE(ReadManifest(vdir, &m).ok());
  ASSERT_GE(m.format, 2);
  ckpt::Manifest old = m;
  old.format = 1;
  old.run_id.clear();
  std::unique_ptr<ckpt::h5::ShardReader> fast, checked;
  ASSERT_TRUE(ckpt::h5::ShardReader::Open(ckpt::fs::Env::Default(), vdir, m, 0, &fast).ok());
  ASSERT_TRUE(ckpt::h5::ShardReader::Open(ckpt::fs::Env::Default(), vdir, old, 0, &checked).ok());
  int compared = 0;
  for (const ckpt::DatasetMeta& d : m.shards[0].datasets) {
    const ckpt::ArrayMeta& a = m.arrays[d.array];
    if (d.rows == 0) continue;
    std::vector<char> x(d.rows * a.row_bytes(), 'x'), y(d.rows * a.row_bytes(), 'y');
    ASSERT_TRUE(fast->ReadRows(a, d.rows, 0, d.rows, x.data()).ok()) << a.name;
    ASSERT_TRUE(checked->ReadRows(a, d.rows, 0, d.rows, y.data()).ok()) << a.name;
    EXPECT_EQ(x, y) << a.name;
    ++compared;
  }
  EXPECT_GE(compared, 3);
}

// Issue 32, item 11, messages: a shard's size that differs from the
// manifest's names both sizes and the difference, guessing no cause (an
// overstated size in the manifest was called "(truncated)"); verify's line
// names the file once (it said "shard-0.h5: /.../shard-0.h5: ...").
TEST_F(CkptTest, AShardOfAnotherSizeNamesBothSizesAndTheFileOnce) {
  const std::string vdir = SaveInOneShard(Options(Size()), 4);
  ASSERT_FALSE(vdir.empty());
  if (Rank() != 0) return;
  ckpt::Manifest m;
  ASSERT_TRUE(ReadManifest(vdir, &m).ok());
  const uint64_t real = m.shards[0].bytes;
  for (const auto& [said, want] : std::vector<std::pair<uint64_t, std::string>>{
           {real + 10, " (10 fewer)"}, {real - 10, " (10 more)"}}) {
    ckpt::Manifest edited = m;
    edited.shards[0].bytes = said;
    std::unique_ptr<ckpt::h5::ShardReader> reader;
    Status s = ckpt::h5::ShardReader::Open(ckpt::fs::Env::Default(), vdir, edited, 0, &reader);
    EXPECT_EQ(s.code(), Code::kCorruption) << s;
    EXPECT_NE(s.message().find("shard-0.h5: " + std::to_string(real) + " bytes, the manifest says " +
                               std::to_string(said) + want),
              std::string::npos)
        << s;
    EXPECT_EQ(s.message().find("truncated"), std::string::npos) << s;
    std::vector<std::string> failures;
    uint64_t bytes = 0;
    ASSERT_TRUE(ckpt::VerifyVersion(ckpt::fs::Env::Default(), vdir, edited, &failures, &bytes).ok());
    ASSERT_EQ(failures.size(), 1u);
    EXPECT_EQ(failures[0], "shard-0.h5: " + std::to_string(real) + " bytes, the manifest says " +
                               std::to_string(said) + want);
  }
}

// Issue 32, item 11: an HDF5 failure names the call's source file as the
// source tree has it, not the directories of the build that compiled it.
TEST(CkptMessages, AnHdf5FailureNamesTheSourceNotTheBuildPath) {
  H5Eclear2(H5E_DEFAULT);  // no earlier call's stack in the messages
  EXPECT_EQ(ckpt::h5::CheckH5(-1, "H5Fopen(path)", "/build/baton-1.0/ckpt/hdf5/shard_reader.cc", 77).message(),
            "H5Fopen failed at ckpt/hdf5/shard_reader.cc:77");
  EXPECT_EQ(ckpt::h5::CheckH5(-1, "H5Dopen2", "../ckpt/hdf5/shard_reader.cc", 8).message(),
            "H5Dopen2 failed at ckpt/hdf5/shard_reader.cc:8");
  EXPECT_EQ(ckpt::h5::CheckH5(-1, "H5Dopen2", "/home/me/ckpt/src/ckpt/hdf5/a.cc", 8).message(),
            "H5Dopen2 failed at ckpt/hdf5/a.cc:8");
  EXPECT_EQ(ckpt::h5::CheckH5(-1, "H5Dopen2", "/src/tests/mpi/x_test.cc", 9).message(), "H5Dopen2 failed at x_test.cc:9");
}

// Every single byte of a shard's HDF5 metadata changed in turn (one byte
// once made verify die with SIGSEGV inside H5Dopen2): the reader refuses
// the file as corrupt before HDF5 parses it, every time; the file is in
// HDF5 1.8's format (superblock 2: HDF5 checksums its metadata too).
TEST_F(CkptTest, EveryChangedMetadataByteIsCorruptionBeforeHdf5ParsesIt) {
  auto ck = MakeCheckpointer(Options(Size()));
  auto arrays = MakeArrays(Size(), Rank());
  FillAll(&arrays, 5);
  ASSERT_TRUE(AllRanks(RegisterAll(ck.get(), &arrays).ok()));
  ASSERT_TRUE(AllRanks(ck->Save(5).ok()));
  const std::string vdir = ck->last_stats().version_path, shard = vdir + "/shard-0.h5";
  if (Rank() == 0) {
    ckpt::Manifest m;
    ASSERT_TRUE(ReadManifest(vdir, &m).ok());
    hid_t f = H5Fopen(shard.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    H5F_info2_t info;
    ASSERT_GE(H5Fget_info2(f, &info), 0);
    EXPECT_GE(info.super.version, 2u) << "not HDF5 1.8's format: no checksummed superblock";
    H5Fclose(f);
    // The metadata bytes: everything outside the datasets' data.
    std::vector<bool> data(m.shards[0].bytes, false);
    for (const ckpt::DatasetMeta& d : m.shards[0].datasets) {
      const uint64_t bytes = d.rows * m.arrays[d.array].row_bytes();
      for (uint64_t b = d.offset; b < d.offset + bytes; ++b) data[b] = true;
    }
    int fd = open(shard.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    int tried = 0, refused = 0;
    std::string first_other;
    for (uint64_t at = 0; at < data.size(); ++at) {
      if (data[at]) continue;
      unsigned char c = 0;
      ASSERT_EQ(pread(fd, &c, 1, static_cast<off_t>(at)), 1);
      const unsigned char flipped = static_cast<unsigned char>(c ^ 0x5a);
      ASSERT_EQ(pwrite(fd, &flipped, 1, static_cast<off_t>(at)), 1);
      std::unique_ptr<ckpt::h5::ShardReader> reader;
      Status s = ckpt::h5::ShardReader::Open(ckpt::fs::Env::Default(), vdir, m, 0, &reader);
      ++tried;
      if (s.code() == Code::kCorruption && s.message().find("HDF5 metadata fail their checksum") != std::string::npos) {
        ++refused;
      } else if (first_other.empty()) {
        first_other = "byte " + std::to_string(at) + ": " + s.ToString();
      }
      ASSERT_EQ(pwrite(fd, &c, 1, static_cast<off_t>(at)), 1);
    }
    close(fd);
    EXPECT_GT(tried, 100) << "fewer metadata bytes than an HDF5 file has";
    EXPECT_EQ(refused, tried) << first_other;
    std::printf("%d metadata bytes of %zu changed one at a time: %d refused before HDF5 parsed them\n", tried,
                data.size(), refused);
  }
  // End to end: one metadata byte changed, the restore finds it corrupt.
  if (Rank() == 0) {
    int fd = open(shard.c_str(), O_RDWR);
    unsigned char c = 0;
    ASSERT_EQ(pread(fd, &c, 1, 0), 1);  // the superblock's signature
    c ^= 1;
    ASSERT_EQ(pwrite(fd, &c, 1, 0), 1);
    close(fd);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  RestoreResult result;
  Status s = ck->Restore(RestoreOptions(), &result);
  EXPECT_EQ(s.code(), Code::kNotFound) << s;  // the only version
  ASSERT_EQ(result.fallbacks.size(), 1u);
  EXPECT_TRUE(result.fallbacks[0].counted);
  EXPECT_NE(result.fallbacks[0].reason.message().find("HDF5 metadata fail their checksum"), std::string::npos)
      << result.fallbacks[0].reason;
}


// A checkpoint directory given as a symlink (a link to scratch space) is
// followed once, as given, and works: saves land in the real directory
// (before: Create refused it, "exists and is not a directory"; the CLI
// said "Not a directory" yet worked with a trailing slash).
TEST_F(CkptTest, ADirectoryGivenAsASymlinkIsTheDirectoryItNames) {
  const std::string base = stdfs::path(root_).parent_path().string();
  if (Rank() == 0) {
    ASSERT_EQ(mkdir((base + "/real").c_str(), 0700), 0);
    ASSERT_EQ(symlink((base + "/real").c_str(), (base + "/link").c_str()), 0);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  CheckpointOptions o = Options();
  o.dir = base + "/link";
  auto ck = MakeCheckpointer(o);
  ASSERT_TRUE(AllRanks(ck != nullptr));
  EXPECT_EQ(ck->dir(), base + "/real");
  std::vector<int64_t> w(4, 7);
  EXPECT_TRUE(ck->RegisterReplicated("w", w, {4}).ok());
  ASSERT_TRUE(AllRanks(ck->Save(1).ok()));
  EXPECT_EQ(ck->last_stats().version_path, base + "/real/" + ckpt::VersionName(1, 1));
  std::fill(w.begin(), w.end(), 0);
  std::optional<int64_t> step;
  ASSERT_TRUE(AllRanks(ck->Restore(&step).ok()));
  EXPECT_EQ(w, std::vector<int64_t>(4, 7));
}

}  // namespace
}  // namespace baton::ckpt_testing
