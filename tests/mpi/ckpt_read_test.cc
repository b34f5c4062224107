// What a restore reads: the all-gather of a replicated array's parts at any
// size (ckpt/replicated_gather.h) and the bytes each rank reads from the
// shard files (CheckpointStats::bytes_read).
#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/chunk_digests.h"
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
TEST(ReplicatedGather, EveryRankGetsEveryRowAtAnyMessageSize) {
  const uint64_t rows = 37, row_bytes = 12;
  for (uint64_t max_message : {uint64_t{1}, uint64_t{5}, uint64_t{100}, rows * row_bytes - 1, rows * row_bytes,
                               ckpt::kMaxGatherMessage}) {
    std::vector<char> data(rows * row_bytes, 0);
    uint64_t first = 0, n = 0;
    ckpt::ReplicatedRows(rows, Size(), Rank(), &first, &n);
    for (uint64_t i = first * row_bytes; i < (first + n) * row_bytes; ++i) data[i] = static_cast<char>(i * 7 + 3);
    Status s = ckpt::GatherReplicatedRows(MPI_COMM_WORLD, data.data(), rows, row_bytes, max_message);
    EXPECT_TRUE(s.ok()) << s;
    uint64_t wrong = 0;
    for (uint64_t i = 0; i < data.size(); ++i) wrong += data[i] != static_cast<char>(i * 7 + 3);
    EXPECT_EQ(wrong, 0u) << "max_message " << max_message;
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

}  // namespace
}  // namespace baton::ckpt_testing
