// Format 3: the top-level manifest and the shard indexes on disk
// (ckpt/manifest_index.h): round trip, a restoring rank loading only the
// indexes with its rows (at the same and at another world size), and
// damaged or swapped indexes refused as corruption before they are parsed.
#include "ckpt/manifest_index.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "ckpt/layout.h"
#include "tests/unit/ckpt_temp_dir.h"
#include "tests/unit/ckpt_test_manifest.h"

namespace baton::ckpt {
namespace {

// The version of `m` (a complete manifest) written in format 3 into dir;
// the parsed top-level manifest in *top.
void WriteSplit(const std::string& dir, Manifest m, Manifest* top) {
  m.format = kManifestFormat;
  for (size_t s = 0; s < m.shards.size(); ++s) ASSERT_TRUE(WriteShardIndex(fs::Env::Default(), dir, s, 0600, &m).ok());
  for (ShardMeta& sh : m.shards) {
    sh.datasets.clear();
    sh.loaded = false;
  }
  std::string text;
  Status s = WriteTopManifestJson(m, &text);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_TRUE(WriteWholeFile(fs::Env::Default(), dir + "/" + kManifestName, text).ok());
  s = ParseManifestJson(text, top);
  ASSERT_TRUE(s.ok()) << s << "\n" << text;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(CkptManifestIndex, RoundTripLoadsEveryShard) {
  TempDir dir;
  const Manifest m = MakeManifest(8, 2, 3, 4);
  Manifest top;
  WriteSplit(dir.path(), m, &top);
  EXPECT_EQ(top.format, kManifestFormat);
  ASSERT_EQ(top.shards.size(), 4u);
  EXPECT_FALSE(top.complete());
  EXPECT_EQ(top.shards[1].index, "shard-1.json");
  EXPECT_EQ(top.total_bytes(), m.total_bytes()) << "known from the arrays, without the indexes";
  Status s = LoadAllShardIndexes(fs::Env::Default(), dir.path(), &top);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_TRUE(top.complete());
  for (size_t i = 0; i < m.shards.size(); ++i) {
    ASSERT_EQ(top.shards[i].datasets.size(), m.shards[i].datasets.size());
    for (size_t d = 0; d < m.shards[i].datasets.size(); ++d) {
      const DatasetMeta &x = top.shards[i].datasets[d], &y = m.shards[i].datasets[d];
      EXPECT_EQ(x.array, y.array);
      EXPECT_EQ(x.rows, y.rows);
      EXPECT_EQ(x.offset, y.offset);
      ASSERT_EQ(x.chunks.size(), y.chunks.size());
      for (size_t k = 0; k < x.chunks.size(); ++k) EXPECT_EQ(x.chunks[k].xxh3, y.chunks[k].xxh3);
    }
  }
}

TEST(CkptManifestIndex, SameWorldSizeReadsOnlyItsOwnIndex) {
  TempDir dir;
  const Manifest m = MakeManifest(8, 2, 3, 4);
  Manifest top;
  WriteSplit(dir.path(), m, &top);
  const int rank = 5;  // in shards[2]
  std::vector<RowRange> wants;
  for (uint32_t a = 0; a < top.arrays.size(); ++a) {
    RowRange w{a, 0, 0};
    if (top.arrays[a].replicated) {
      ReplicatedRows(top.arrays[a].rows(), 8, rank, &w.first_row, &w.rows);
    } else {
      w.first_row = rank * 4;
      w.rows = 4;
    }
    wants.push_back(w);
  }
  IndexLoadStats stats;
  Status s = LoadShardIndexesFor(fs::Env::Default(), dir.path(), wants, ShardOfRank(top, rank), rank, &top, &stats);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(ShardOfRank(top, rank), 2u);
  EXPECT_EQ(stats.indexes_read, 1);
  EXPECT_EQ(stats.bytes_read, top.shards[2].index_bytes);
  EXPECT_TRUE(top.shards[2].loaded);
  EXPECT_FALSE(top.shards[0].loaded);
  for (const DatasetMeta& d : top.shards[2].datasets) {
    ASSERT_EQ(d.chunks.size(), 1u) << "only rank 5's chunks are kept";
    EXPECT_EQ(d.chunks[0].rank, rank);
  }
  for (const RowRange& w : wants) {
    std::vector<ReadPiece> pieces;
    s = PlanRead(top, w.array, w.first_row, w.rows, &pieces);
    EXPECT_TRUE(s.ok()) << s;
  }
}

TEST(CkptManifestIndex, AnotherWorldSizeFindsEveryRow) {
  TempDir dir;
  const Manifest m = MakeManifest(8, 2, 2, 4);  // array 0: 32 rows over 8 ranks
  Manifest top;
  WriteSplit(dir.path(), m, &top);
  // At 3 ranks, rank 1 restores rows [11, 22) of array 0: ranks 2-5's chunks, shards 1 and 2.
  std::vector<RowRange> wants = {RowRange{0, 11, 11}};
  IndexLoadStats stats;
  // Rows spread evenly: row 11 of 32 was old rank 2's (shards[1]).
  EXPECT_EQ(FirstShardFor(top, wants, 1, 3), 1u);
  Status s = LoadShardIndexesFor(fs::Env::Default(), dir.path(), wants, FirstShardFor(top, wants, 1, 3), -1, &top,
                                 &stats);
  ASSERT_TRUE(s.ok()) << s;
  std::vector<ReadPiece> pieces;
  s = PlanRead(top, 0, 11, 11, &pieces);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(pieces.size(), 4u);  // ranks 2-5: [8, 12) [12, 16) [16, 20) [20, 24)
  EXPECT_EQ(pieces[0].first_row, 11u);
  EXPECT_EQ(stats.indexes_read, 2) << "shards 1 and 2, outwards from shards[1]";
  EXPECT_FALSE(top.shards[0].loaded);
  EXPECT_FALSE(top.shards[3].loaded);
  // From a poor start (shards[3]): 3, then the shards where rows 11 and 21 would be (1, 2).
  Manifest again;
  ASSERT_TRUE(ParseManifestJson(Slurp(dir / kManifestName), &again).ok());
  IndexLoadStats stats2;
  s = LoadShardIndexesFor(fs::Env::Default(), dir.path(), wants, 3, -1, &again, &stats2);
  ASSERT_TRUE(s.ok()) << s;
  s = PlanRead(again, 0, 11, 11, &pieces);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(stats2.indexes_read, 3);
}


TEST(CkptManifestIndex, DamagedIndexesAreCorruption) {
  const Manifest m = MakeManifest(4, 2, 2, 2);
  auto load = [&](const std::function<void(const std::string& dir)>& damage) {
    TempDir dir;
    Manifest top;
    WriteSplit(dir.path(), m, &top);
    damage(dir.path());
    return LoadAllShardIndexes(fs::Env::Default(), dir.path(), &top);
  };
  Status s = load([](const std::string& d) { std::remove((d + "/shard-1.json").c_str()); });
  EXPECT_EQ(s.code(), Code::kCorruption) << s;
  EXPECT_NE(s.message().find("shard-1.json: missing"), std::string::npos) << s;

  s = load([](const std::string& d) {
    std::string t = Slurp(d + "/shard-0.json");
    t[t.find("\"rows\": ") + 8] ^= 1;
    std::ofstream(d + "/shard-0.json", std::ios::trunc) << t;
  });
  EXPECT_EQ(s.code(), Code::kCorruption) << s;
  EXPECT_NE(s.message().find("shard-0.json: xxh3"), std::string::npos) << s;

  s = load([](const std::string& d) { std::ofstream(d + "/shard-0.json", std::ios::app) << " "; });
  EXPECT_EQ(s.code(), Code::kCorruption) << s;
  EXPECT_NE(s.message().find("larger than the"), std::string::npos) << s;

  s = load([](const std::string& d) {
    std::string t = Slurp(d + "/shard-0.json");
    std::ofstream(d + "/shard-0.json", std::ios::trunc) << t.substr(0, t.size() - 1);
  });
  EXPECT_EQ(s.code(), Code::kCorruption) << s;
}

TEST(CkptManifestIndex, AnIndexOfAnotherShardIsRefused) {
  // Indexes whose checksums match (a top-level manifest edited to name
  // shard 0's index for shard 1) are still checked against the manifest.
  const Manifest m = MakeManifest(4, 2, 2, 2);
  Manifest top = m;
  top.format = kManifestFormat;
  std::string text0;
  ASSERT_TRUE(WriteShardIndexJson(top, 0, &text0).ok());
  for (ShardMeta& sh : top.shards) {
    sh.datasets.clear();
    sh.loaded = false;
  }
  Status s = ParseShardIndexJson(text0, 1, &top);
  EXPECT_EQ(s.code(), Code::kCorruption) << s;
  EXPECT_NE(s.message().find("shard: 0, expected 1"), std::string::npos) << s;
  EXPECT_FALSE(top.shards[1].loaded);
  s = ParseShardIndexJson(text0, 0, &top);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_TRUE(top.shards[0].loaded);
}

// Issue 32 item 7: one file per rank (level 2 forces it) made the top-level
// manifest ~190 bytes a rank (199,600 bytes at 1,024 ranks, ~3.1 MB
// received by every rank at 16,384). Format 5 writes the canonical shards
// as run-length groups and one table of 32 bytes a shard (base64): under
// 45 bytes a rank, the same shards parsed back.
TEST(CkptManifestIndex, FormatFiveWritesOneFilePerRankCompactly) {
  constexpr int kRanks = 4096;
  Manifest m = MakeManifest(kRanks, 1, 4, 2);
  m.format = kManifestFormat;
  for (size_t s = 0; s < m.shards.size(); ++s) {
    ShardMeta& sh = m.shards[s];
    sh.datasets.clear();
    sh.loaded = false;
    sh.index = ShardIndexName(sh.file);
    sh.index_bytes = 700 + s % 13;
    sh.index_xxh3 = 0x9e3779b97f4a7c15ull * (s + 1);
    sh.meta_xxh3 = 0xc2b2ae3d27d4eb4full * (s + 3);
  }
  std::string text;
  Status s = WriteTopManifestJson(m, &text);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_NE(text.find("\"groups\": [[4096, 1]]"), std::string::npos) << text.substr(0, 2000);
  EXPECT_LT(text.size(), 45u * kRanks) << "bytes a rank: " << text.size() / kRanks;
  Manifest back;
  s = ParseManifestJson(text, &back);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(back.format, kManifestFormat);
  ASSERT_EQ(back.shards.size(), m.shards.size());
  for (size_t i = 0; i < m.shards.size(); ++i) {
    const ShardMeta &x = back.shards[i], &y = m.shards[i];
    ASSERT_EQ(x.file, y.file);
    ASSERT_EQ(x.index, y.index);
    ASSERT_EQ(x.ranks, y.ranks);
    ASSERT_EQ(x.bytes, y.bytes);
    ASSERT_EQ(x.meta_xxh3, y.meta_xxh3);
    ASSERT_EQ(x.index_bytes, y.index_bytes);
    ASSERT_EQ(x.index_xxh3, y.index_xxh3);
    ASSERT_FALSE(x.loaded);
  }
  // Groups of 8 with a shorter last group: two runs.
  Manifest g = MakeManifest(30, 8, 2, 2);
  g.format = kManifestFormat;
  for (ShardMeta& sh : g.shards) {
    sh.datasets.clear();
    sh.loaded = false;
    sh.index = ShardIndexName(sh.file);
  }
  ASSERT_TRUE(WriteTopManifestJson(g, &text).ok());
  EXPECT_NE(text.find("\"groups\": [[3, 8], [1, 6]]"), std::string::npos) << text;
  ASSERT_TRUE(ParseManifestJson(text, &back).ok());
  ASSERT_EQ(back.shards.size(), 4u);
  EXPECT_EQ(back.shards[3].ranks, (std::vector<int>{24, 25, 26, 27, 28, 29}));
  // Shards that are not the canonical ones keep format 4's list.
  g.shards[1].file = "other.h5";
  g.shards[1].index = ShardIndexName("other.h5");
  ASSERT_TRUE(WriteTopManifestJson(g, &text).ok());
  EXPECT_EQ(text.find("\"groups\""), std::string::npos) << text;
  ASSERT_TRUE(ParseManifestJson(text, &back).ok());
  EXPECT_EQ(back.shards[1].file, "other.h5");
}

// A compact table that does not add up is corruption, found before a
// shard is made (a short text cannot claim a million shards).
TEST(CkptManifestIndex, ADamagedCompactTableIsCorruption) {
  Manifest m = MakeManifest(16, 4, 2, 2);
  m.format = kManifestFormat;
  for (ShardMeta& sh : m.shards) {
    sh.datasets.clear();
    sh.loaded = false;
    sh.index = ShardIndexName(sh.file);
  }
  std::string text;
  ASSERT_TRUE(WriteTopManifestJson(m, &text).ok());
  ASSERT_TRUE(UnsealManifest(&text));
  for (const auto& [from, to, want] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"[[4, 4]]", "[[4, 5]]", "more ranks than the world size 16"},
           {"[[4, 4]]", "[[3, 4]]", "12 ranks, but the world size is 16"},
           {"[[4, 4]]", "[[1000000, 1]]", "more ranks than the world size"},
           {"[[4, 4]]", "[[2, 4], [4, 2]]", "172 characters, but 6 shards take 256"},
           {"[[4, 4]]", "[[0, 4], [4, 4]]", "a run of no shards"},
           {"[[4, 4]]", "[4, 4]", "expected [count, ranks], got 4"},
           {"\"table\": \"", "\"table\": \"!", "characters, but 4 shards take"}}) {
    std::string t = text;
    const size_t at = t.find(from);
    ASSERT_NE(at, std::string::npos) << from << "\n" << t;
    t.replace(at, from.size(), to);
    SealManifest(&t);
    Manifest back;
    Status s = ParseManifestJson(t, &back);
    EXPECT_EQ(s.code(), Code::kCorruption) << from << " -> " << to << ": " << s;
    EXPECT_NE(s.message().find(want), std::string::npos) << s;
  }
}

// Issue 32, item 11: an index's errors name its fields as the index file
// has them ("shard index datasets[0].rows"), not as a manifest path
// ("manifest shards[1].datasets[0].rows") that no file holds.
TEST(CkptManifestIndex, AnIndexErrorNamesTheIndexField) {
  const Manifest m = MakeManifest(4, 2, 2, 2);
  Manifest top = m;
  top.format = kManifestFormat;
  std::string text1;
  ASSERT_TRUE(WriteShardIndexJson(top, 1, &text1).ok());
  for (ShardMeta& sh : top.shards) {
    sh.datasets.clear();
    sh.loaded = false;
  }
  const size_t at = text1.find("\"rows\": ");
  ASSERT_NE(at, std::string::npos) << text1;
  std::string bad = text1;
  bad.insert(at + 8, "1000000");  // more rows than the array has
  Status s = ParseShardIndexJson(bad, 1, &top);
  EXPECT_EQ(s.code(), Code::kCorruption) << s;
  EXPECT_EQ(s.message().rfind("shard index datasets[0].rows: ", 0), 0u) << s;
  EXPECT_EQ(s.message().find("manifest"), s.message().find("manifest's")) << s;
  EXPECT_EQ(s.message().find("shards["), std::string::npos) << s;
  bad = text1;
  const std::string shard1 = "\"shard\": 1";
  bad.replace(bad.find(shard1), shard1.size(), "\"shard\": 0");
  s = ParseShardIndexJson(bad, 1, &top);
  EXPECT_EQ(s.message(), "shard index shard: 0, expected 1") << s;
  EXPECT_FALSE(top.shards[1].loaded);
}

TEST(CkptManifestIndex, TopManifestRefusesBadIndexNames) {
  Manifest m = MakeManifest(4, 2, 2, 2);
  m.format = 4;  // the list of shards (format 5 writes these canonical ones as a table)
  for (ShardMeta& sh : m.shards) {
    sh.datasets.clear();
    sh.loaded = false;
    sh.index = ShardIndexName(sh.file);
  }
  std::string text;
  ASSERT_TRUE(WriteTopManifestJson(m, &text).ok());
  for (const auto& [from, to, want] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"\"shard-1.json\"", "\"../shard-1.json\"", "index.file: \"../shard-1.json\" is not a plain file name"},
           {"\"shard-1.json\"", "\"shard-0.json\"", "is also a file of shards[0]"},
           {"\"shard-1.json\"", "\"manifest.json\"", "is not a plain file name"},
           {"\"shard-1.json\"", "\"shard-1.h5\"", "is also a file of shards[1]"}}) {
    std::string t = text;
    ASSERT_TRUE(UnsealManifest(&t));  // resealed below: the check behind the checksum is under test
    t.replace(t.find(from), from.size(), to);
    SealManifest(&t);
    Manifest back;
    Status s = ParseManifestJson(t, &back);
    EXPECT_EQ(s.code(), Code::kCorruption) << to;
    EXPECT_NE(s.message().find(want), std::string::npos) << s;
  }
}

uint64_t StatusBytes(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::string key = std::string(field) + ":";
  while (std::getline(in, line)) {
    if (line.compare(0, key.size(), key) == 0) return std::stoull(line.substr(key.size())) * 1024;
  }
  return 0;
}

// Issue 15, 7d: a hostile manifest of many arrays beside a small shard was
// parsed whole into a DOM ~11 times its size. The limit from the version's
// files stops it early; the peak of the parse stays within tens of MB.
TEST(CkptManifestIndex, ManifestValueLimitBoundsMemory) {
  TempDir dir;
  ASSERT_TRUE(WriteWholeFile(fs::Env::Default(), dir / "shard-0.h5", std::string(4096, 'h')).ok());
  std::string text = "{\"format\": 2, \"run_id\": \"r\", \"step\": 1, \"world_size\": 1, \"group_size\": 0, "
                     "\"time\": \"t\", \"baton_version\": \"v\", \"arrays\": [";
  const int arrays = 200000;  // ~1.4M values in ~25 MB of text
  for (int a = 0; a < arrays; ++a) {
    text += (a ? ", " : "") + std::string("{\"name\": \"a") + std::to_string(a) +
            "\", \"dtype\": \"f32\", \"shape\": [1, 2], \"replicated\": false}";
  }
  text += "], \"shards\": [], \"user_blob\": {\"xxh3\": \"0000000000000000\", \"base64\": \"\"}}";
  ASSERT_TRUE(WriteWholeFile(fs::Env::Default(), dir / kManifestName, text).ok());
  uint64_t limit = 0;
  ASSERT_TRUE(ManifestValueLimit(fs::Env::Default(), dir.path(), text.size(), &limit).ok());
  EXPECT_EQ(limit, kBaseManifestValues + 4096 / kManifestValueBytes) << "the manifest itself does not count";
  { std::ofstream("/proc/self/clear_refs") << "5"; }
  const uint64_t rss0 = StatusBytes("VmRSS");
  Manifest m;
  Status s = ParseManifestJson(text, &m, limit);
  const uint64_t peak = StatusBytes("VmHWM") - rss0;
  EXPECT_EQ(s.code(), Code::kCorruption) << s;
  EXPECT_NE(s.message().find("JSON values outside the chunk lists, more than this version's files allow"),
            std::string::npos) << s;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // AddressSanitizer's redzones and freed-memory quarantine, and
  // ThreadSanitizer's shadow of every byte touched, inflate the resident
  // peak (113 MB measured for this parse under either): the bound is checked
  // in the ordinary build only; the refusal above is checked in all.
  std::printf("ManifestValueLimitBoundsMemory: peak not compared under a sanitizer\n");
#else
  EXPECT_LT(peak, 64ull << 20) << "the parse of " << text.size() << " bytes stopped at " << limit
                               << " values took " << peak << " bytes";
#endif
  std::printf("ManifestValueLimitBoundsMemory: %zu bytes of text, refused at %llu values, peak %llu bytes\n",
              text.size(), static_cast<unsigned long long>(limit), static_cast<unsigned long long>(peak));
}

// Issue 32, item 11: a 998 MB manifest peaked at 3.6 GB before it was
// refused. Its size is now checked against what the version's files allow
// before it is read: a sparse ~1 GB manifest beside a small shard is refused
// naming its size and the limit, and ReadFile is never called for it.
class CountingReads : public fs::EnvWrapper {
 public:
  CountingReads() : EnvWrapper(fs::Env::Default()) {}
  Status ReadFile(const std::string& path, uint64_t max_bytes, std::string* out) override {
    ++reads;
    return EnvWrapper::ReadFile(path, max_bytes, out);
  }
  int reads = 0;
};

TEST(CkptManifestIndex, OversizedManifestRefusedBeforeItIsRead) {
  TempDir dir;
  ASSERT_TRUE(WriteWholeFile(fs::Env::Default(), dir / "shard-0.h5", std::string(4096, 'h')).ok());
  const std::string path = dir / kManifestName;
  const uint64_t size = 998ull << 20;
  { std::ofstream(path).put('{'); }
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(size)), 0) << std::strerror(errno);
  CountingReads env;
  std::string text;
  uint64_t max_values = 0;
  Status s = ReadManifestText(&env, dir.path(), path, &text, &max_values);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s;
  EXPECT_NE(s.message().find(std::to_string(size) + " bytes, more than the limit of " +
                             std::to_string(kBaseManifestBytes + 4096)),
            std::string::npos) << s;
  EXPECT_EQ(env.reads, 0) << "the manifest was read before it was refused";
  EXPECT_TRUE(text.empty());

  // Within the limit it is read, with the value limit of the same listing.
  ASSERT_EQ(::truncate(path.c_str(), 1 << 20), 0) << std::strerror(errno);
  s = ReadManifestText(&env, dir.path(), path, &text, &max_values);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(env.reads, 1);
  EXPECT_EQ(text.size(), 1u << 20);
  EXPECT_EQ(max_values, kBaseManifestValues + 4096 / kManifestValueBytes);
}

}  // namespace
}  // namespace baton::ckpt
