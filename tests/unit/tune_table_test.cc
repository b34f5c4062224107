// The tuning table behind algorithm auto: parsing, lookup by job shape and
// size, the round trip through the file format, and the load that every
// rank shares (here without MPI: `share` is the identity).
#include "mpi_runtime/mpi/tune_table.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <string>

#include <unistd.h>

namespace baton::mpi {
namespace {

constexpr const char* kTable = R"({"version": 1, "entries": [
  {"ranks": 8, "nodes": 4, "ranks_per_node": 2,
   "sizes": [{"bytes": 8, "algo": "native"}, {"bytes": 4096, "algo": "hierarchical"},
             {"bytes": 1048576, "algo": "ring"}]},
  {"ranks": 8, "nodes": 1, "ranks_per_node": 8, "sizes": [{"bytes": 8, "algo": "ring"}]}]})";

const TuneKey k8x4{8, 4, 2};

TEST(TuneTable, ExactKeyAndNearestSizeAtOrBelow) {
  TuneTable t;
  ASSERT_TRUE(ParseTuneTable(kTable, "t.json", &t).ok());
  EXPECT_EQ(LookupTuned(t, k8x4, 8), TunedAlgo::kNative);
  EXPECT_EQ(LookupTuned(t, k8x4, 4095), TunedAlgo::kNative);
  EXPECT_EQ(LookupTuned(t, k8x4, 4096), TunedAlgo::kHierarchical);
  EXPECT_EQ(LookupTuned(t, k8x4, 1048575), TunedAlgo::kHierarchical);
  EXPECT_EQ(LookupTuned(t, k8x4, 1048576), TunedAlgo::kRing);
  EXPECT_EQ(LookupTuned(t, k8x4, size_t{1} << 40), TunedAlgo::kRing);
  // Below every measured size: the smallest measured size's choice.
  EXPECT_EQ(LookupTuned(t, TuneKey{8, 1, 8}, 1), TunedAlgo::kRing);
}

TEST(TuneTable, MissingKeyIsNative) {
  TuneTable t;
  ASSERT_TRUE(ParseTuneTable(kTable, "t.json", &t).ok());
  EXPECT_EQ(LookupTuned(t, TuneKey{8, 2, 4}, 1 << 20), TunedAlgo::kNative);  // same ranks, other shape
  EXPECT_EQ(LookupTuned(t, TuneKey{16, 4, 4}, 1 << 20), TunedAlgo::kNative);
  EXPECT_EQ(LookupTuned(TuneTable{}, k8x4, 1 << 20), TunedAlgo::kNative);
}

TEST(TuneTable, KeyOfTopology) {
  Topology two_per_node = TopologyFromNodeKeys({5, 5, 9, 9});
  EXPECT_EQ(KeyOf(two_per_node), (TuneKey{4, 2, 2}));
  Topology uneven = TopologyFromNodeKeys({1, 1, 2});
  EXPECT_EQ(KeyOf(uneven), (TuneKey{3, 2, 0}));
}

TEST(TuneTable, FormatRoundTrips) {
  TuneTable t;
  ASSERT_TRUE(ParseTuneTable(kTable, "t.json", &t).ok());
  TuneTable back;
  Status s = ParseTuneTable(FormatTuneTable(t), "formatted", &back);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(back, t);
}

struct Bad {
  const char* text;
  const char* expect;  // in the message
};

TEST(TuneTable, MalformedNamesFileAndProblem) {
  const Bad cases[] = {
      {"{not json", "not valid JSON"},
      {"[1]", "expected a JSON object"},
      {R"({"entries": []})", "missing \"version\""},
      {R"({"version": 2, "entries": []})", "version 2 is not 1"},
      {R"({"version": 1})", "\"entries\" must be an array"},
      {R"({"version": 1, "entries": [{"ranks": 8, "nodes": 4, "ranks_per_node": 2, "sizes": []}]})",
       "entries[0]: \"sizes\" must be a non-empty array"},
      {R"({"version": 1, "entries": [{"ranks": "8", "nodes": 4, "ranks_per_node": 2, "sizes": []}]})",
       "entries[0]: \"ranks\" must be an integer >= 1, not \"8\""},
      {R"({"version": 1, "entries": [{"ranks": 8, "nodes": 4, "ranks_per_node": 2,
           "sizes": [{"bytes": 8, "algo": "fastest"}]}]})",
       "entries[0].sizes[0]: algorithm 'fastest' is not one of native, hierarchical, ring"},
      {R"({"version": 1, "entries": [{"ranks": 8, "nodes": 4, "ranks_per_node": 2, "sizes": [{"bytes": 8, "algo": "ring"}]},
                                     {"ranks": 8, "nodes": 4, "ranks_per_node": 2, "sizes": [{"bytes": 8, "algo": "ring"}]}]})",
       "entries[1] repeats the job shape"},
  };
  for (const Bad& c : cases) {
    TuneTable t{{k8x4, {{8, TunedAlgo::kRing}}}};
    Status s = ParseTuneTable(c.text, "/x/tune.json", &t);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << c.text;
    EXPECT_NE(s.message().find("/x/tune.json"), std::string::npos) << s;
    EXPECT_NE(s.message().find(c.expect), std::string::npos) << s;
    EXPECT_TRUE(t.empty()) << "a bad table leaves nothing behind, so auto is native";
    EXPECT_EQ(LookupTuned(t, k8x4, 8), TunedAlgo::kNative);
  }
}

std::string TempPath(const char* name) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/baton_tune_test_" + std::to_string(::getpid()) + "_" + name;
}

TEST(TuneTable, LoadSharesTheRootsText) {
  const std::string path = TempPath("ok.json");
  ASSERT_TRUE(WriteTuneFile(path, kTable).ok());
  TuneTable t;
  // A non-root rank reads nothing itself: what `share` brings is what counts.
  std::string seen;
  auto share = [&](std::string* text) {
    if (text->empty()) *text = "T" + std::string(kTable);  // the root's message
    seen = *text;
    return Status::OK();
  };
  ASSERT_TRUE(LoadTuneTable("/nonexistent/for/this/rank", false, share, &t).ok());
  EXPECT_EQ(LookupTuned(t, k8x4, 4096), TunedAlgo::kHierarchical);
  auto identity = [](std::string*) { return Status::OK(); };
  TuneTable r;
  ASSERT_TRUE(LoadTuneTable(path, true, identity, &r).ok());
  EXPECT_EQ(r, t);
  std::remove(path.c_str());
}

TEST(TuneTable, LoadWithoutFileIsEmptyAndOk) {
  auto identity = [](std::string*) { return Status::OK(); };
  TuneTable t;
  EXPECT_TRUE(LoadTuneTable(TempPath("missing.json"), true, identity, &t).ok());
  EXPECT_TRUE(t.empty());
  EXPECT_TRUE(LoadTuneTable("", true, identity, &t).ok());
}

TEST(TuneTable, LoadMalformedNamesTheFile) {
  const std::string path = TempPath("bad.json");
  ASSERT_TRUE(WriteTuneFile(path, "{\"version\": 1, \"entries\": [").ok());
  auto identity = [](std::string*) { return Status::OK(); };
  TuneTable t;
  Status s = LoadTuneTable(path, true, identity, &t);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find(path), std::string::npos) << s;
  EXPECT_TRUE(t.empty());
  std::remove(path.c_str());
}

TEST(TuneTable, PickTunedKeepsNativeUnlessClearlyBeaten) {
  EXPECT_EQ(PickTuned(100, 96, 200), TunedAlgo::kNative) << "4 % faster is within the noise margin";
  EXPECT_EQ(PickTuned(100, 94, 200), TunedAlgo::kHierarchical);
  EXPECT_EQ(PickTuned(100, 300, 80), TunedAlgo::kRing);
  EXPECT_EQ(PickTuned(100, 90, 85), TunedAlgo::kRing) << "the faster of the two alternatives";
  EXPECT_EQ(PickTuned(50, 90, 85), TunedAlgo::kNative);
  EXPECT_EQ(PickTuned(100, 96, 200, 0.0), TunedAlgo::kHierarchical) << "margin 0: plain fastest";
}

TEST(TuneTable, DefaultPath) {
  auto keep = [](const char* n) { const char* v = std::getenv(n); return v ? std::string(v) : std::string("\x01"); };
  const std::string f = keep("BATON_TUNE_FILE"), x = keep("XDG_CACHE_HOME"), h = keep("HOME");
  setenv("BATON_TUNE_FILE", "/a/t.json", 1);
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  setenv("HOME", "/home/u", 1);
  EXPECT_EQ(DefaultTunePath(), "/a/t.json");
  unsetenv("BATON_TUNE_FILE");
  EXPECT_EQ(DefaultTunePath(), "/xdg/baton/tune.json");
  unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(DefaultTunePath(), "/home/u/.cache/baton/tune.json");
  auto restore = [](const char* n, const std::string& v) { v == "\x01" ? unsetenv(n) : setenv(n, v.c_str(), 1); };
  restore("BATON_TUNE_FILE", f);
  restore("XDG_CACHE_HOME", x);
  restore("HOME", h);
}

}  // namespace
}  // namespace baton::mpi
