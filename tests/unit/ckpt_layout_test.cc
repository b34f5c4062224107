#include "ckpt/layout.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "tests/unit/ckpt_test_manifest.h"

namespace baton::ckpt {
namespace {

TEST(CkptLayout, ShardGroupsBySizeAndByNode) {
  Topology t;
  t.node_of = {0, 0, 0, 1, 1};
  EXPECT_EQ(ShardGroups(t, 2), (std::vector<int>{0, 0, 1, 1, 2}));
  EXPECT_EQ(ShardGroups(t, 8), (std::vector<int>{0, 0, 0, 0, 0}));
  EXPECT_EQ(ShardGroups(t, 1), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(ShardGroups(t, 0), (std::vector<int>{0, 0, 0, 1, 1}));
  t.node_of = {1, 1, 0, 0, 1};  // not dense in rank order: renumbered
  EXPECT_EQ(ShardGroups(t, 0), (std::vector<int>{0, 0, 1, 1, 0}));
}

TEST(CkptLayout, ReplicatedRowsSplitEvenlyFirstRanksOneMore) {
  std::vector<std::pair<uint64_t, uint64_t>> got;
  for (int r = 0; r < 4; ++r) {
    uint64_t first = 0, count = 0;
    ReplicatedRows(10, 4, r, &first, &count);
    got.emplace_back(first, count);
  }
  EXPECT_EQ(got, (std::vector<std::pair<uint64_t, uint64_t>>{{0, 3}, {3, 3}, {6, 2}, {8, 2}}));
  uint64_t first = 9, count = 9;
  ReplicatedRows(2, 4, 3, &first, &count);
  EXPECT_EQ(count, 0u);
  EXPECT_EQ(first, 2u);
  ReplicatedRows(1, 1, 0, &first, &count);  // a scalar
  EXPECT_EQ(first, 0u);
  EXPECT_EQ(count, 1u);
}

// Issue 48: an array under kWholeReplicatedBytes is one part's whole (the
// owner every rank derives from its name), nothing of the others'; from
// that size up, the even split. Many small arrays spread over the parts.
TEST(CkptLayout, SmallReplicatedArraysAreWholeInOnePart) {
  const uint64_t small_rows = kWholeReplicatedBytes / 4 - 1, big_rows = kWholeReplicatedBytes / 4;  // f32 rows
  std::vector<int> owned(4, 0);
  for (int a = 0; a < 400; ++a) {
    const std::string name = "model/layer" + std::to_string(a) + ".bias";
    int holders = 0;
    for (int p = 0; p < 4; ++p) {
      uint64_t first = 9, count = 9;
      ReplicatedPart(name, small_rows, 4, 4, p, &first, &count);
      EXPECT_EQ(first, 0u);
      if (count == 0) continue;
      EXPECT_EQ(count, small_rows);
      int owner = -1;
      ASSERT_TRUE(ReplicatedWhole(name, small_rows, 4, 4, &owner));
      EXPECT_EQ(owner, p);
      ++holders;
      ++owned[static_cast<size_t>(p)];
    }
    EXPECT_EQ(holders, 1) << name;
    for (int p = 0; p < 4; ++p) {  // 64 KiB: split as ReplicatedRows
      uint64_t first = 0, count = 0, even_first = 0, even_count = 0;
      ReplicatedPart(name, big_rows, 4, 4, p, &first, &count);
      ReplicatedRows(big_rows, 4, p, &even_first, &even_count);
      EXPECT_EQ(std::make_pair(first, count), std::make_pair(even_first, even_count));
    }
  }
  for (int n : owned) EXPECT_GT(n, 60) << "400 arrays over 4 parts";
  int owner = -1;
  EXPECT_FALSE(ReplicatedWhole("w", 1, 4, 1, &owner));  // one part: nothing to spread
  uint64_t first = 9, count = 9;
  ReplicatedPart("w", 1, 4, 1, 0, &first, &count);
  EXPECT_EQ(count, 1u);
  EXPECT_FALSE(ReplicatedWhole("w", UINT64_MAX, 2, 4, &owner));  // rows x row_bytes overflows: not small
}

// A restore reads a replicated array in a part per node, every rank of a
// node the whole part, exchanged between the ranks of the same index on
// each node; nodes of unequal sizes: a part per rank over the world.
TEST(CkptLayout, ReplicatedReadPartPerNodeOnUniformNodes) {
  auto plans = [](std::vector<int> node_of) {
    Topology t;
    t.node_of = std::move(node_of);
    std::vector<std::tuple<int, int, int, int>> out;
    for (int r = 0; r < static_cast<int>(t.node_of.size()); ++r) {
      const ReplicatedReadPlan p = PlanReplicatedRead(t, r);
      out.emplace_back(p.parts, p.part, p.color, p.key);
    }
    return out;
  };
  using Plans = std::vector<std::tuple<int, int, int, int>>;
  // One node: one part, read whole by every rank, nothing exchanged.
  EXPECT_EQ(plans({0, 0, 0}), (Plans{{1, 0, 0, 0}, {1, 0, 1, 0}, {1, 0, 2, 0}}));
  // Two nodes of two, ranks cyclic over the nodes: node k reads part k; the
  // communicators are {0, 1} and {2, 3}, ordered by node.
  EXPECT_EQ(plans({0, 1, 1, 0}), (Plans{{2, 0, 0, 0}, {2, 1, 0, 1}, {2, 1, 1, 1}, {2, 0, 1, 0}}));
  // A rank per node: a part per rank, as the world's ranks.
  EXPECT_EQ(plans({0, 1, 2}), (Plans{{3, 0, 0, 0}, {3, 1, 0, 1}, {3, 2, 0, 2}}));
  // Unequal nodes: a part per rank, gathered over the world.
  EXPECT_EQ(plans({0, 0, 1}), (Plans{{3, 0, 0, 0}, {3, 1, 0, 1}, {3, 2, 0, 2}}));
  // A rank outside the topology reads the whole array and exchanges nothing.
  Topology t;
  t.node_of = {0, 1};
  EXPECT_EQ(PlanReplicatedRead(t, 2).parts, 1);
}

// Every rank of the new world reads its even share of `array`: the pieces
// lie inside their chunks, in row order, without gaps.
void CheckReshard(const Manifest& m, uint32_t array, int new_world) {
  const uint64_t rows = m.arrays[array].rows();
  for (int r = 0; r < new_world; ++r) {
    uint64_t first = 0, count = 0;
    ReplicatedRows(rows, new_world, r, &first, &count);
    std::vector<ReadPiece> pieces;
    Status s = PlanRead(m, array, first, count, &pieces);
    ASSERT_TRUE(s.ok()) << s;
    uint64_t next = first;
    for (const ReadPiece& p : pieces) {
      ASSERT_LT(p.shard, m.shards.size());
      const ShardMeta& sh = m.shards[p.shard];
      ASSERT_LT(p.dataset, sh.datasets.size());
      const DatasetMeta& ds = sh.datasets[p.dataset];
      EXPECT_EQ(ds.array, array);
      ASSERT_LT(p.chunk, ds.chunks.size());
      const Chunk& c = ds.chunks[p.chunk];
      EXPECT_EQ(p.first_row, next);
      EXPECT_GE(p.first_row, c.first_row);
      EXPECT_LE(p.first_row + p.rows, c.first_row + c.rows);
      EXPECT_GT(p.rows, 0u);
      next += p.rows;
    }
    EXPECT_EQ(next, first + count) << "rank " << r << " of " << new_world;
  }
}

class CkptLayoutReshard : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(CkptLayoutReshard, EveryRankGetsItsRows) {
  const auto [old_world, new_world] = GetParam();
  const Manifest m = MakeManifest(old_world, 2, 2, 3);  // array 0 sharded, 1 replicated
  CheckReshard(m, 0, new_world);
  CheckReshard(m, 1, new_world);
}

INSTANTIATE_TEST_SUITE_P(Worlds, CkptLayoutReshard,
                         ::testing::Values(std::make_tuple(8, 8), std::make_tuple(8, 4), std::make_tuple(4, 8),
                                           std::make_tuple(8, 3), std::make_tuple(3, 8), std::make_tuple(5, 1)));

TEST(CkptLayout, EightToThreeByHand) {
  // 8 ranks, 3 rows each: 24 rows; rank 0 of 3 reads rows [0, 8): all of
  // old ranks 0 and 1, the first two rows of old rank 2 (shard 1, group of 2).
  const Manifest m = MakeManifest(8, 2, 1, 3);
  std::vector<ReadPiece> p;
  ASSERT_TRUE(PlanRead(m, 0, 0, 8, &p).ok());
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(std::make_tuple(p[0].shard, p[0].chunk, p[0].first_row, p[0].rows), std::make_tuple(size_t{0}, size_t{0}, uint64_t{0}, uint64_t{3}));
  EXPECT_EQ(std::make_tuple(p[1].shard, p[1].chunk, p[1].first_row, p[1].rows), std::make_tuple(size_t{0}, size_t{1}, uint64_t{3}, uint64_t{3}));
  EXPECT_EQ(std::make_tuple(p[2].shard, p[2].chunk, p[2].first_row, p[2].rows), std::make_tuple(size_t{1}, size_t{0}, uint64_t{6}, uint64_t{2}));
  // Same world: one piece, the rank's own chunk.
  ASSERT_TRUE(PlanRead(m, 0, 9, 3, &p).ok());
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].shard, 1u);
  EXPECT_EQ(p[0].chunk, 1u);
  EXPECT_EQ(m.shards[1].datasets[0].chunks[1].rank, 3);
}

TEST(CkptLayout, ReplicatedArrayIsReadWholeFromEveryWriter) {
  const Manifest m = MakeManifest(4, 2, 2, 2);  // array 1: 5 rows over 4 ranks
  std::vector<ReadPiece> p;
  ASSERT_TRUE(PlanRead(m, 1, 0, m.arrays[1].rows(), &p).ok());
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[0].rows, 2u);
  EXPECT_EQ(p[3].first_row, 4u);
}

TEST(CkptLayout, MissingRowsAndBadArguments) {
  Manifest m = MakeManifest(4, 2, 1, 2);
  std::vector<ReadPiece> p;
  EXPECT_TRUE(PlanRead(m, 0, 3, 0, &p).ok());
  EXPECT_TRUE(p.empty());
  Status s = PlanRead(m, 0, 6, 4, &p);
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_NE(s.message().find("row 8 is in no chunk"), std::string::npos) << s;
  EXPECT_TRUE(p.empty());
  m.shards[0].datasets[0].chunks.pop_back();  // rows [2, 4) gone
  s = PlanRead(m, 0, 0, 8, &p);
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_NE(s.message().find("\"layer0.weight\" rows [0, 8): row 2 is in no chunk"), std::string::npos) << s;
  EXPECT_EQ(PlanRead(m, 7, 0, 1, &p).code(), Code::kInvalidArgument);
  EXPECT_EQ(PlanRead(m, 0, UINT64_MAX, 2, &p).code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace baton::ckpt
