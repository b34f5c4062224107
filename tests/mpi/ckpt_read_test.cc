// What a restore reads: the all-gather of a replicated array's parts at any
// size (ckpt/replicated_gather.h) and the bytes each rank reads from the
// shard files (CheckpointStats::bytes_read).
#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ckpt/chunk_digests.h"
#include "ckpt/fs/env.h"
#include "ckpt/layout.h"
#include "ckpt/manifest.h"
#include "ckpt/manifest_index.h"
#include "ckpt/replicated_gather.h"
#include "tests/mpi/ckpt_fixture.h"

namespace baton::ckpt_testing {
namespace {

// Every rank holds only its part; after the gather every rank holds every
// row, through one all-gather (the array fits one message) or through
// per-part broadcasts in messages of max_message bytes (an array past
// MPI's int count: there max_message is INT_MAX; smaller here so that
// parts are cut into several messages, a message ends inside a row, and
// a rank's part is not a whole number of messages).
// An array under ckpt::kWholeReplicatedBytes is held whole by its owner
// (ReplicatedPart) and reaches the others from it.
TEST(ReplicatedGather, EveryRankGetsEveryRowAtAnyMessageSize) {
  for (const uint64_t row_bytes : {uint64_t{12}, uint64_t{2000}}) {  // 444 bytes: kept whole; 74,000: split
    const uint64_t rows = 37;
    for (uint64_t max_message : {uint64_t{1}, uint64_t{5}, uint64_t{100}, rows * row_bytes - 1, rows * row_bytes,
                                 ckpt::kMaxGatherMessage}) {
      std::vector<char> data(rows * row_bytes, 0);
      uint64_t first = 0, n = 0;
      ckpt::ReplicatedPart("w", rows, row_bytes, Size(), Rank(), &first, &n);
      for (uint64_t i = first * row_bytes; i < (first + n) * row_bytes; ++i) data[i] = static_cast<char>(i * 7 + 3);
      Status s = ckpt::GatherReplicatedRows(MPI_COMM_WORLD, "w", data.data(), rows, row_bytes, max_message);
      EXPECT_TRUE(s.ok()) << s;
      uint64_t wrong = 0;
      for (uint64_t i = 0; i < data.size(); ++i) wrong += data[i] != static_cast<char>(i * 7 + 3);
      EXPECT_EQ(wrong, 0u) << "max_message " << max_message << ", row_bytes " << row_bytes;
    }
  }
}

// Issue 32 item 8: a restore that needs part of another rank's rows reads
// the chunks that hold them (a save cuts a rank's rows into chunks of at
// most kChunkBytes, each hashed), not that rank's rows whole. Each rank
// saves 32 MiB of rows (four chunks) and restores the middle half of them
// shifted by one row: before, it read its whole old part (2x what it
// needed); now at most one chunk more at each end. And every chunk read
// partly is still verified: a flipped byte in one is corruption.
TEST_F(CkptTest, PartOfARanksRowsIsReadWithoutTheRest) {
  constexpr uint64_t kRowFloats = 1024;                    // 4 KiB rows
  constexpr uint64_t kRowBytes = kRowFloats * sizeof(float);
  const uint64_t part = 4 * ckpt::kChunkBytes / kRowBytes;  // rows each rank saves
  const uint64_t rows = part * static_cast<uint64_t>(Size());
  const uint64_t saved_first = part * static_cast<uint64_t>(Rank());
  auto value = [](uint64_t row, uint64_t col, int step) {
    return static_cast<float>((row * 31 + col) % 100003) + static_cast<float>(step) * 0.5f;
  };
  CheckpointOptions o = Options(1);
  {
    std::vector<float> saved(part * kRowFloats);
    auto ck = MakeCheckpointer(o);
    ASSERT_TRUE(AllRanks(ck->RegisterSharded("w", saved.data(), DType::kF32, {rows, kRowFloats}, saved_first, part).ok()));
    for (int step : {1, 2}) {
      for (uint64_t i = 0; i < saved.size(); ++i) saved[i] = value(saved_first + i / kRowFloats, i % kRowFloats, step);
      ASSERT_TRUE(AllRanks(ck->Save(step).ok()));
    }
  }
  const uint64_t first = saved_first + part / 4 + 1, n = part / 2;
  std::vector<float> got(n * kRowFloats, -1.0f);
  auto ck = MakeCheckpointer(o);
  ASSERT_TRUE(AllRanks(ck->RegisterSharded("w", got.data(), DType::kF32, {rows, kRowFloats}, first, n).ok()));
  RestoreResult result;
  Status s = ck->Restore(RestoreOptions(), &result);
  ASSERT_TRUE(AllRanks(s.ok())) << s;
  EXPECT_EQ(result.step, std::optional<int64_t>(2));
  uint64_t wrong = 0;
  for (uint64_t i = 0; i < got.size(); ++i) wrong += got[i] != value(first + i / kRowFloats, i % kRowFloats, 2);
  EXPECT_EQ(wrong, 0u);
  const CheckpointStats& st = ck->last_stats();
  EXPECT_EQ(st.bytes, n * kRowBytes);
  EXPECT_GE(st.bytes_read, st.bytes);
  EXPECT_LE(st.bytes_read, st.bytes + 2 * ckpt::kChunkBytes);
  EXPECT_LT(st.bytes_read, part * kRowBytes) << "read the old rank's rows whole";
  // A flipped byte in the first chunk each rank reads partly (the second
  // chunk of its old rows, dataset rows part/4 .. part/2 - 1 of its own
  // shard): the restore finds it and goes back to step 1.
  if (Rank() == 0) {
    ckpt::Manifest m;
    ASSERT_TRUE(ReadManifest(result.version_path, &m).ok());
    const ckpt::DatasetMeta& d = m.shards[0].datasets[0];
    ASSERT_GE(d.chunks.size(), 4u) << "the rows of rank 0 are cut into chunks";
    EXPECT_EQ(d.chunks[1].first_row, part / 4);
    const std::string file = result.version_path + "/" + m.shards[0].file;
    int fd = open(file.c_str(), O_RDWR);
    ASSERT_GE(fd, 0) << file;
    const off_t at = static_cast<off_t>(d.offset + (part / 4 + 7) * kRowBytes + 5);
    unsigned char c = 0;
    ASSERT_EQ(pread(fd, &c, 1, at), 1);
    c ^= 0x10;
    ASSERT_EQ(pwrite(fd, &c, 1, at), 1);
    close(fd);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  result = RestoreResult();
  s = ck->Restore(RestoreOptions(), &result);
  ASSERT_TRUE(AllRanks(s.ok())) << s;
  EXPECT_EQ(result.step, std::optional<int64_t>(1));
  ASSERT_EQ(result.fallbacks.size(), 1u);
  EXPECT_EQ(result.fallbacks[0].reason.code(), Code::kCorruption) << result.fallbacks[0].reason;
  EXPECT_NE(result.fallbacks[0].reason.ToString().find("xxh3"), std::string::npos) << result.fallbacks[0].reason;
}

// Issue 32 item 7: format 5 writes one-file-per-rank shards as a compact
// table; versions an older baton wrote (format 4's list of shards, format
// 3 without checksums) still restore.
TEST_F(CkptTest, VersionsOfFormatsThreeAndFourStillRestore) {
  CheckpointOptions o = Options(1);
  auto arrays = MakeArrays(Size(), Rank());
  auto ck = MakeCheckpointer(o);
  ASSERT_TRUE(AllRanks(RegisterAll(ck.get(), &arrays).ok()));
  FillAll(&arrays, 5);
  ASSERT_TRUE(AllRanks(ck->Save(5).ok()));
  const std::string vdir = ck->last_stats().version_path;
  if (Rank() == 0) {
    EXPECT_NE(Slurp(vdir + "/manifest.json").find("\"table\": "), std::string::npos) << "format 5's compact shards";
  }
  for (int format : {4, 3}) {
    if (Rank() == 0) {
      // As the older baton wrote it: every index and the top-level manifest.
      ckpt::Manifest m;
      ASSERT_TRUE(ReadManifest(vdir, &m).ok());
      m.format = format;
      for (size_t s = 0; s < m.shards.size(); ++s) {
        std::remove((vdir + "/" + m.shards[s].index).c_str());  // written anew (O_EXCL)
        Status w = ckpt::WriteShardIndex(ckpt::fs::Env::Default(), vdir, s, 0600, &m);
        ASSERT_TRUE(w.ok()) << w;
      }
      for (ckpt::ShardMeta& sh : m.shards) {
        sh.datasets.clear();
        sh.loaded = false;
      }
      std::string text;
      ASSERT_TRUE(ckpt::WriteTopManifestJson(m, &text).ok());
      EXPECT_NE(text.find("\"format\": " + std::to_string(format)), std::string::npos);
      EXPECT_NE(text.find("\"index\": {\"file\": \"shard-0.json\""), std::string::npos) << text;
      EXPECT_EQ(text.find(ckpt::kManifestChecksumKey) != std::string::npos, format >= 4) << text;
      std::ofstream(vdir + "/manifest.json", std::ios::trunc) << text;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    ZeroAll(&arrays);
    RestoreResult result;
    Status s = ck->Restore(RestoreOptions(), &result);
    ASSERT_TRUE(AllRanks(s.ok())) << "format " << format << ": " << s;
    EXPECT_EQ(result.step, std::optional<int64_t>(5)) << "format " << format;
    EXPECT_TRUE(result.fallbacks.empty()) << "format " << format;
    EXPECT_EQ(CheckAll(arrays, 5), "") << "format " << format;
  }
}

// RestoreOptions::verify_before_write: each rank saves four chunks of rows;
// the last rank's last chunk of step 2 gets a flipped byte (found at byte
// `*at` of `*file`). Fills in the rows and returns this rank's saved rows.
struct FourChunks {
  static constexpr uint64_t kRowFloats = 1024;  // 4 KiB rows
  static constexpr uint64_t kRowBytes = kRowFloats * sizeof(float);
  uint64_t part = 4 * ckpt::kChunkBytes / kRowBytes, rows = 0, first = 0;
  static float Value(uint64_t row, uint64_t col, int step) {
    return static_cast<float>((row * 31 + col) % 100003) + static_cast<float>(step) * 0.5f;
  }
  // The file and byte of the last rank's last chunk of the version at `vdir` (rank 0 reads the manifest).
  static void LastChunkByte(const std::string& vdir, std::string* file, off_t* at) {
    ckpt::Manifest m;
    ASSERT_TRUE(ReadManifest(vdir, &m).ok());
    for (const ckpt::ShardMeta& sh : m.shards) {
      for (const ckpt::DatasetMeta& d : sh.datasets) {
        for (const ckpt::Chunk& c : d.chunks) {
          if (c.rank != Size() - 1 || c.rows == 0) continue;
          *file = vdir + "/" + sh.file;
          *at = static_cast<off_t>(d.offset + (c.dataset_row + c.rows - 2) * kRowBytes + 9);
        }
      }
    }
    ASSERT_FALSE(file->empty()) << "no chunk of rank " << Size() - 1 << " in " << vdir;
  }
  static void Flip(const std::string& file, off_t at) {
    int fd = open(file.c_str(), O_RDWR);
    ASSERT_GE(fd, 0) << file;
    unsigned char c = 0;
    ASSERT_EQ(pread(fd, &c, 1, at), 1);
    c ^= 0x10;
    ASSERT_EQ(pwrite(fd, &c, 1, at), 1);
    close(fd);
  }
};

// Saves steps 1 and 2 of FourChunks' rows; `vdirs` gets the two versions.
void SaveFourChunks(const CheckpointOptions& o, FourChunks* f, std::vector<std::string>* vdirs) {
  f->rows = f->part * static_cast<uint64_t>(Size());
  f->first = f->part * static_cast<uint64_t>(Rank());
  std::vector<float> saved(f->part * FourChunks::kRowFloats);
  auto ck = MakeCheckpointer(o);
  ASSERT_TRUE(AllRanks(
      ck->RegisterSharded("w", saved.data(), DType::kF32, {f->rows, FourChunks::kRowFloats}, f->first, f->part).ok()));
  for (int step : {1, 2}) {
    for (uint64_t i = 0; i < saved.size(); ++i) {
      saved[i] = FourChunks::Value(f->first + i / FourChunks::kRowFloats, i % FourChunks::kRowFloats, step);
    }
    ASSERT_TRUE(AllRanks(ck->Save(step).ok()));
    vdirs->push_back(ck->last_stats().version_path);
  }
}

// How a restore reads the shard files (BATON_CKPT_READ, ckpt/hdf5/shard_reader.h),
// set on every rank for a scope: each read-mode test runs both.
class ScopedReadMode {
 public:
  explicit ScopedReadMode(const char* mode) { setenv("BATON_CKPT_READ", mode, 1); }
  ~ScopedReadMode() { unsetenv("BATON_CKPT_READ"); }
};
constexpr const char* kReadModes[] = {"mmap", "pread"};

// A version whose last chunk (of the last rank) fails leaves every rank's
// array untouched with verify_before_write: no rank writes before every rank
// verified. Without it, the chunks read before the bad one are in the
// arrays (what Python's front ends paid a whole-size scratch copy to avoid).
// Both read modes: a mapped chunk is copied out only once it matched.
TEST_F(CkptTest, VerifyBeforeWriteLeavesEveryArrayUntouchedByAFailedVersion) {
  for (const char* mode : kReadModes) {
    ScopedReadMode read(mode);
    CheckpointOptions o = Options(1);
    FourChunks f;
    std::vector<std::string> vdirs;
    SaveFourChunks(o, &f, &vdirs);
    ASSERT_EQ(vdirs.size(), 2u);
    if (Rank() == 0) {
      std::string file;
      off_t at = 0;
      FourChunks::LastChunkByte(vdirs[1], &file, &at);
      FourChunks::Flip(file, at);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    std::vector<float> got(f.part * FourChunks::kRowFloats, -1.0f);
    auto ck = MakeCheckpointer(o);
    ASSERT_TRUE(AllRanks(
        ck->RegisterSharded("w", got.data(), DType::kF32, {f.rows, FourChunks::kRowFloats}, f.first, f.part).ok()));
    for (bool verify_first : {true, false}) {
      std::fill(got.begin(), got.end(), -1.0f);
      RestoreOptions ro;
      ro.version = vdirs[1].substr(vdirs[1].rfind('/') + 1);  // pinned: its failure fails the restore
      ro.verify_before_write = verify_first;
      RestoreResult result;
      Status s = ck->Restore(ro, &result);
      EXPECT_TRUE(AllRanks(!s.ok())) << mode << ": " << s;
      EXPECT_NE(s.ToString().find("xxh3"), std::string::npos) << mode << ": " << s;
      uint64_t written = 0;
      for (float v : got) written += v != -1.0f;
      if (verify_first) {
        EXPECT_EQ(written, 0u) << mode << ", rank " << Rank() << ": rows of the failed version written";
      } else if (Rank() == Size() - 1) {
        EXPECT_GT(written, 0u) << mode << ": the chunks before the bad one go in as they are read";
      }
    }
  }
}

// An Env whose Mark(event) runs `change` once (a test changes a shard
// file between the two reads of verify_before_write: "restore-copy VDIR").
class ChangingEnv : public ckpt::fs::EnvWrapper {
 public:
  ChangingEnv(std::string event, std::function<void()> change)
      : EnvWrapper(ckpt::fs::Env::Default()), event_(std::move(event)), change_(std::move(change)) {}
  void Mark(const std::string& event) override {
    if (event == event_ && change_) std::exchange(change_, nullptr)();
    EnvWrapper::Mark(event);
  }

 private:
  std::string event_;
  std::function<void()> change_;
};

// The second read of verify_before_write finds a file that changed after
// the first read verified it (here: a byte flipped between the two, at the
// "restore-copy" mark): the version is counted as damaged and the restore
// goes on to the older version, which every array then holds whole. Both
// read modes: the mapping shows the file as it is now, and is hashed again.
TEST_F(CkptTest, VerifyBeforeWriteFallsBackWholeWhenAFileChangesBetweenItsReads) {
  for (const char* mode : kReadModes) {
    ScopedReadMode read(mode);
    CheckpointOptions o = Options(1);
    FourChunks f;
    std::vector<std::string> vdirs;
    SaveFourChunks(o, &f, &vdirs);
    ASSERT_EQ(vdirs.size(), 2u);
    std::string file;
    off_t at = 0;
    if (Rank() == Size() - 1) FourChunks::LastChunkByte(vdirs[1], &file, &at);
    ChangingEnv env("restore-copy " + vdirs[1], [&] {
      if (!file.empty()) FourChunks::Flip(file, at);
    });
    o.env = &env;
    std::vector<float> got(f.part * FourChunks::kRowFloats, -1.0f);
    auto ck = MakeCheckpointer(o);
    ASSERT_TRUE(AllRanks(
        ck->RegisterSharded("w", got.data(), DType::kF32, {f.rows, FourChunks::kRowFloats}, f.first, f.part).ok()));
    RestoreOptions ro;
    ro.verify_before_write = true;
    RestoreResult result;
    Status s = ck->Restore(ro, &result);
    ASSERT_TRUE(AllRanks(s.ok())) << mode << ": " << s;
    EXPECT_EQ(result.step, std::optional<int64_t>(1)) << mode;
    ASSERT_EQ(result.fallbacks.size(), 1u) << mode;
    EXPECT_EQ(result.fallbacks[0].reason.code(), Code::kCorruption) << mode << ": " << result.fallbacks[0].reason;
    EXPECT_NE(result.fallbacks[0].reason.ToString().find("second read"), std::string::npos)
        << mode << ": " << result.fallbacks[0].reason;
    uint64_t wrong = 0;
    for (uint64_t i = 0; i < got.size(); ++i) {
      wrong += got[i] != FourChunks::Value(f.first + i / FourChunks::kRowFloats, i % FourChunks::kRowFloats, 1);
    }
    EXPECT_EQ(wrong, 0u) << mode << ", rank " << Rank() << ": not wholly step 1";
  }
}

// A shard file cut short after the restore opened it (here between the two
// reads of verify_before_write, in the last chunk): an error on every rank
// naming the file, in both read modes. A mapped page past the file's new
// end would raise SIGBUS and kill the process: the mapped read checks the
// file's size before it touches a chunk (ShardReader::MapRows).
TEST_F(CkptTest, AShardCutShortAfterItWasOpenedIsAnErrorNamingTheFile) {
  for (const char* mode : kReadModes) {
    ScopedReadMode read(mode);
    CheckpointOptions o = Options(1);
    FourChunks f;
    std::vector<std::string> vdirs;
    SaveFourChunks(o, &f, &vdirs);
    ASSERT_EQ(vdirs.size(), 2u);
    std::string file;
    off_t at = 0;
    FourChunks::LastChunkByte(vdirs[1], &file, &at);  // every rank: the file the error must name
    ChangingEnv env("restore-copy " + vdirs[1], [&] {
      if (Rank() == Size() - 1) {
        ASSERT_EQ(truncate(file.c_str(), at), 0) << file;
      }
    });
    o.env = &env;
    std::vector<float> got(f.part * FourChunks::kRowFloats, -1.0f);
    auto ck = MakeCheckpointer(o);
    ASSERT_TRUE(AllRanks(
        ck->RegisterSharded("w", got.data(), DType::kF32, {f.rows, FourChunks::kRowFloats}, f.first, f.part).ok()));
    RestoreOptions ro;
    ro.version = vdirs[1].substr(vdirs[1].rfind('/') + 1);
    ro.verify_before_write = true;
    RestoreResult result;
    Status s = ck->Restore(ro, &result);
    EXPECT_TRUE(AllRanks(!s.ok())) << mode << ": " << s;
    EXPECT_NE(s.ToString().find(file), std::string::npos) << mode << ": " << s;
    EXPECT_NE(s.ToString().find(std::string(mode) == "mmap" ? "shrank" : "end of file"), std::string::npos)
        << mode << ": " << s;
  }
}

// BATON_CKPT_READ takes mmap or pread; any other value fails the restore
// on every rank, naming the variable and the value, before anything is read.
TEST_F(CkptTest, ABadReadModeIsAnErrorNamingIt) {
  auto ck = MakeCheckpointer(Options(1));
  auto arrays = MakeArrays(Size(), Rank());
  FillAll(&arrays, 3);
  ASSERT_TRUE(AllRanks(RegisterAll(ck.get(), &arrays).ok()));
  ASSERT_TRUE(AllRanks(ck->Save(3).ok()));
  ZeroAll(&arrays);
  {
    ScopedReadMode read("mapped");
    RestoreResult result;
    Status s = ck->Restore(RestoreOptions(), &result);
    EXPECT_TRUE(AllRanks(s.code() == Code::kInvalidArgument)) << s;
    EXPECT_NE(s.ToString().find("BATON_CKPT_READ='mapped'"), std::string::npos) << s;
  }
  for (const char* mode : kReadModes) {
    ScopedReadMode read(mode);
    ZeroAll(&arrays);
    RestoreResult result;
    Status s = ck->Restore(RestoreOptions(), &result);
    ASSERT_TRUE(AllRanks(s.ok())) << mode << ": " << s;
    EXPECT_EQ(CheckAll(arrays, 3), "") << mode;
  }
}

}  // namespace
}  // namespace baton::ckpt_testing
