// ckpt/metadata_checksum.h: the digest is xxh3 of exactly the bytes outside
// the extents, in order, however the reads are grouped; gaps close together
// are read together (few opens of the file), the data of a large dataset
// is not read at all.
#include "ckpt/metadata_checksum.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "ckpt/checksum.h"
#include "ckpt/fs/env.h"
#include "tests/unit/ckpt_temp_dir.h"

namespace baton::ckpt {
namespace {

using Extents = std::vector<std::pair<uint64_t, uint64_t>>;

// Counts the reads and the bytes they asked for.
class CountingEnv : public fs::EnvWrapper {
 public:
  CountingEnv() : fs::EnvWrapper(fs::Env::Default()) {}
  Status ReadAt(const std::string& path, uint64_t offset, size_t n, void* buf) override {
    ++reads;
    bytes += n;
    return target()->ReadAt(path, offset, n, buf);
  }
  int reads = 0;
  uint64_t bytes = 0;
};

class CkptMetadataChecksum : public ::testing::Test {
 protected:
  TempDir dir;
  std::string file;

  // A file of `size` bytes, each its own (offset-dependent) value.
  void Write(uint64_t size) {
    file = dir / "shard";
    content.resize(size);
    std::mt19937_64 rng(size);
    for (char& c : content) c = static_cast<char>(rng());
    ASSERT_TRUE(WriteWholeFile(fs::Env::Default(), file, content).ok());
  }
  // xxh3 of the bytes outside `extents`, byte by byte: the definition.
  uint64_t Expected(const Extents& extents) const {
    std::vector<bool> inside(content.size(), false);
    for (const auto& [b, e] : extents)
      for (uint64_t i = b; i < e && i < content.size(); ++i) inside[i] = true;
    std::string outside;
    for (size_t i = 0; i < content.size(); ++i)
      if (!inside[i]) outside += content[i];
    return Xxh3(outside.data(), outside.size());
  }
  std::string content;
};

// Many small datasets (the layout of a shard of 5,000 small tensors):
// the digest is the definition's, in a few reads, not one per gap.
TEST_F(CkptMetadataChecksum, ManySmallGapsAreReadInFewReads) {
  Extents extents;
  uint64_t at = 2048;
  for (int i = 0; i < 5000; ++i) {
    extents.emplace_back(at, at + 256);  // 64 floats of data, then ~300 bytes of metadata
    at += 256 + 300;
  }
  Write(at + 4096);
  CountingEnv env;
  uint64_t got = 0;
  ASSERT_TRUE(HashOutsideExtents(&env, file, content.size(), extents, &got).ok());
  EXPECT_EQ(got, Expected(extents));
  EXPECT_LE(env.reads, 4) << "one read per 1 MiB window, not one per gap (5,001 gaps)";
}

// A large dataset between metadata: its data are not read.
TEST_F(CkptMetadataChecksum, TheDataOfALargeDatasetAreNotRead) {
  const uint64_t data = 8 << 20;
  const Extents extents = {{4096, 4096 + data}, {4096 + data + 512, 4096 + data + 1024}};
  Write(4096 + data + 4096);
  CountingEnv env;
  uint64_t got = 0;
  ASSERT_TRUE(HashOutsideExtents(&env, file, content.size(), extents, &got).ok());
  EXPECT_EQ(got, Expected(extents));
  EXPECT_LE(env.bytes, 4096u + 4096u + 1024u) << "read " << env.bytes << " bytes";
}

// Random layouts: unsorted, overlapping, past the end, gaps larger than a
// read (1 MiB) and data just under and over the 64 KiB that joins two gaps.
TEST_F(CkptMetadataChecksum, RandomLayoutsGiveTheDefinitionsDigest) {
  Write(3 << 20);
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    Extents extents;
    const int n = static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      const uint64_t b = rng() % (content.size() + 1024);
      const uint64_t len = (rng() % 4 == 0) ? rng() % (200 << 10) : rng() % 2048;
      extents.emplace_back(b, b + len);
    }
    if (trial == 0) extents = {{100, 100 + (64 << 10)}, {200 + (64 << 10), 300 + (128 << 10) + 1}};
    CountingEnv env;
    uint64_t got = 0;
    ASSERT_TRUE(HashOutsideExtents(&env, file, content.size(), extents, &got).ok()) << trial;
    EXPECT_EQ(got, Expected(extents)) << "trial " << trial;
  }
}

}  // namespace
}  // namespace baton::ckpt
