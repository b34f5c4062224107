#include "ckpt/manifest.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ckpt/checksum.h"
#include "tests/unit/ckpt_test_manifest.h"

namespace baton::ckpt {
namespace {

void ExpectSame(const Manifest& a, const Manifest& b) {
  EXPECT_EQ(a.format, b.format);
  EXPECT_EQ(a.run_id, b.run_id);
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.world_size, b.world_size);
  EXPECT_EQ(a.group_size, b.group_size);
  EXPECT_EQ(a.time, b.time);
  EXPECT_EQ(a.baton_version, b.baton_version);
  EXPECT_EQ(a.user_blob, b.user_blob);
  ASSERT_EQ(a.arrays.size(), b.arrays.size());
  for (size_t i = 0; i < a.arrays.size(); ++i) {
    EXPECT_EQ(a.arrays[i].name, b.arrays[i].name);
    EXPECT_EQ(a.arrays[i].dtype, b.arrays[i].dtype);
    EXPECT_EQ(a.arrays[i].shape, b.arrays[i].shape);
    EXPECT_EQ(a.arrays[i].replicated, b.arrays[i].replicated);
  }
  ASSERT_EQ(a.shards.size(), b.shards.size());
  for (size_t s = 0; s < a.shards.size(); ++s) {
    const ShardMeta &x = a.shards[s], &y = b.shards[s];
    EXPECT_EQ(x.file, y.file);
    EXPECT_EQ(x.ranks, y.ranks);
    EXPECT_EQ(x.bytes, y.bytes);
    ASSERT_EQ(x.datasets.size(), y.datasets.size());
    for (size_t d = 0; d < x.datasets.size(); ++d) {
      EXPECT_EQ(x.datasets[d].array, y.datasets[d].array);
      EXPECT_EQ(x.datasets[d].rows, y.datasets[d].rows);
      ASSERT_EQ(x.datasets[d].chunks.size(), y.datasets[d].chunks.size());
      for (size_t k = 0; k < x.datasets[d].chunks.size(); ++k) {
        const Chunk &c = x.datasets[d].chunks[k], &e = y.datasets[d].chunks[k];
        EXPECT_EQ(c.rank, e.rank);
        EXPECT_EQ(c.first_row, e.first_row);
        EXPECT_EQ(c.rows, e.rows);
        EXPECT_EQ(c.dataset_row, e.dataset_row);
        EXPECT_EQ(c.xxh3, e.xxh3);
      }
    }
  }
}

TEST(CkptManifest, RoundTrip) {
  const Manifest m = MakeManifest(4, 2, 3, 2);
  std::string text;
  ASSERT_TRUE(WriteManifestJson(m, &text).ok());
  Manifest back;
  Status s = ParseManifestJson(text, &back);
  ASSERT_TRUE(s.ok()) << s << "\n" << text;
  ExpectSame(m, back);
  EXPECT_EQ(back.user_blob_xxh3, Xxh3(m.user_blob.data(), m.user_blob.size()));
  EXPECT_EQ(back.total_bytes(), m.total_bytes());
  EXPECT_EQ(m.total_bytes(), 8 * 3 * 4u + 5 * 3 * 2u + 8 * 3 * 4u);
  std::string again;
  ASSERT_TRUE(WriteManifestJson(back, &again).ok());
  EXPECT_EQ(again, text);
}

// ---- hostile input: one row per kind, applied to the small manifest below ----
//
// {
//   "format": 2, "run_id": "run-7", "step": 400, "world_size": 2, "group_size": 2, ...
//   "arrays": [
//     {"name": "layer0.weight", "dtype": "f32", "shape": [2, 3], "replicated": false},
//     {"name": "layer1.weight", "dtype": "bf16", "shape": [2, 3], "replicated": true}
//   ],
//   "shards": [
//     {"file": "shard-0.h5", "ranks": [0, 1], "bytes": 1000, "datasets": [
//       {"array": "layer0.weight", "rows": 2, "chunks": [[0, 0, 1, 0, "0123456789abcdef"], [1, 1, 1, 1, "0123456689abcdef"]]},
//       {"array": "layer1.weight", "rows": 2, "chunks": [[0, 0, 1, 0, "0123456789abcdee"], [1, 1, 1, 1, "0123456689abcdee"]]}
//     ]}
//   ],
//   "user_blob": {"xxh3": "bb3351fd4f0fff39", "base64": "bG9hZGVyAHN0YXRl/w=="}
// }
struct BadCase {
  const char* name;
  const char* from;  // replaced everywhere; "" = the whole text is `to`; "$" = `to` appended
  const char* to;
  const char* error;  // a fragment of the message
};

std::string SmallText() {
  std::string text;
  EXPECT_TRUE(WriteManifestJson(MakeManifest(2, 2, 2, 1), &text).ok());
  return text;
}

std::string Apply(const BadCase& c) {
  std::string text = SmallText();
  const std::string from = c.from;
  if (from.empty()) return c.to;
  if (from == "$") return text + c.to;
  size_t pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << c.name << ": " << from << " not in\n" << text;
  while (pos != std::string::npos) {
    text.replace(pos, from.size(), c.to);
    pos = text.find(from, pos + std::string(c.to).size());
  }
  return text;
}

class CkptManifestBad : public ::testing::TestWithParam<BadCase> {};

TEST_P(CkptManifestBad, IsCorruptionNamingPathAndValue) {
  const BadCase& c = GetParam();
  const std::string text = Apply(c);
  Manifest m;
  Status s = ParseManifestJson(text, &m);
  ASSERT_FALSE(s.ok()) << text;
  EXPECT_EQ(s.code(), Code::kCorruption) << s;
  EXPECT_EQ(s.component(), "ckpt");
  EXPECT_NE(s.message().find(c.error), std::string::npos) << "expected \"" << c.error << "\" in: " << s.message();
}

// Format 1 (written before run ids) is still read: no run_id.
TEST(CkptManifest, Format1IsStillRead) {
  Manifest m = MakeManifest(2, 2, 2, 3);
  m.format = 1;
  m.run_id.clear();
  std::string text;
  ASSERT_TRUE(WriteManifestJson(m, &text).ok());
  EXPECT_EQ(text.find("run_id"), std::string::npos) << text;
  Manifest back;
  Status s = ParseManifestJson(text, &back);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(back.format, 1);
  EXPECT_EQ(back.run_id, "");
  m.run_id = "x";
  EXPECT_EQ(WriteManifestJson(m, &text).code(), Code::kInvalidArgument);
}

// A newer format is not corruption (the version is not damaged, this
// baton cannot read it): InvalidArgument saying so, even when the rest of
// the text is nothing this baton could parse.
// Every format from 4 on ends with its checksum: a newer format is one
// whose checksum holds.
TEST(CkptManifest, ANewerFormatIsReportedAsNewerNotCorrupt) {
  Manifest m;
  std::string text;
  ASSERT_TRUE(WriteManifestJson(MakeManifest(2, 2, 2, 3), &text).ok());
  const std::string newer = "\"format\": " + std::to_string(kManifestFormat + 1);
  const size_t at = text.find("\"format\": ");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, newer.size(), newer);
  SealManifest(&text);
  std::string other = "{\"format\": " + std::to_string(kManifestFormat + 1) + ", \"chunks\": [[1,2,3,4,5,6]]}\n";
  SealManifest(&other);
  for (const std::string& t : {text, other}) {
    Status s = ParseManifestJson(t, &m);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s;
    EXPECT_NE(s.message().find("written by a newer baton"), std::string::npos) << s;
  }
  // Without a checksum that holds, a "newer" format is a damaged manifest.
  ASSERT_TRUE(UnsealManifest(&other));
  for (const std::string& t : {other, text.substr(0, text.size() - 3) + "0\"\n}\n"}) {
    Status s = ParseManifestJson(t, &m);
    EXPECT_EQ(s.code(), Code::kCorruption) << s;
    EXPECT_NE(s.message().find("without a valid manifest_xxh3"), std::string::npos) << s;
  }
}

// Format 4: the top-level manifest ends with its checksum, the xxh3 of
// every byte before its key; any changed byte is Corruption naming it,
// before anything else is checked; Unseal and Seal are each other's
// inverse; a format-3 manifest (no checksum) still reads.
TEST(CkptManifest, TheTopManifestCarriesItsOwnChecksum) {
  Manifest m = MakeManifest(4, 2, 2, 2);
  m.format = kManifestFormat;
  for (ShardMeta& sh : m.shards) {
    sh.datasets.clear();
    sh.loaded = false;
    sh.index = sh.file + ".json";
  }
  std::string text;
  ASSERT_TRUE(WriteTopManifestJson(m, &text).ok());
  const size_t key = text.rfind("\"manifest_xxh3\": \"");
  ASSERT_NE(key, std::string::npos) << text;
  EXPECT_EQ(text.substr(key + 34), "\"\n}\n") << "the last line";
  EXPECT_EQ(text.substr(key + 18, 16), HexU64(Xxh3(text.data(), key))) << "the xxh3 of every byte before the key";
  Manifest back;
  ASSERT_TRUE(ParseManifestJson(text, &back).ok());
  for (size_t i = 0; i < key; i += 7) {  // every 7th byte before the key, one bit flipped
    std::string t = text;
    t[i] ^= 0x04;
    Status s = ParseManifestJson(t, &back);
    EXPECT_EQ(s.code(), Code::kCorruption) << "byte " << i;
    // (or the JSON, or the format digit: "format": 0, read before the rest)
    if (s.message().find("not valid JSON") == std::string::npos && s.message().find("format: ") == std::string::npos) {
      EXPECT_NE(s.message().find("manifest_xxh3"), std::string::npos) << "byte " << i << ": " << s;
    }
  }
  std::string unsealed = text;
  ASSERT_TRUE(UnsealManifest(&unsealed));
  EXPECT_EQ(unsealed.find("manifest_xxh3"), std::string::npos);
  Status s = ParseManifestJson(unsealed, &back);
  EXPECT_EQ(s.code(), Code::kCorruption) << s;
  EXPECT_NE(s.message().find("manifest_xxh3: missing"), std::string::npos) << s;
  SealManifest(&unsealed);
  EXPECT_EQ(unsealed, text);
  // Format 3, as the baton before wrote it: no checksum, still read.
  m.format = kSplitFormat;
  ASSERT_TRUE(WriteTopManifestJson(m, &text).ok());
  EXPECT_EQ(text.find("manifest_xxh3"), std::string::npos);
  EXPECT_TRUE(ParseManifestJson(text, &back).ok());
}

// A step past 2^53 - 1 is refused by the writer, the parser (2^63 - 1: a
// job "done" without training) and Save's check; a manifest's step must be
// its directory's.
TEST(CkptManifest, TheStepIsBoundedAndBoundToItsDirectory) {
  Manifest m = MakeManifest(2, 2, 2, 3);
  std::string text;
  m.step = kMaxStep;
  ASSERT_TRUE(WriteManifestJson(m, &text).ok());
  Manifest back;
  ASSERT_TRUE(ParseManifestJson(text, &back).ok());
  EXPECT_EQ(back.step, kMaxStep);
  m.step = kMaxStep + 1;
  EXPECT_EQ(WriteManifestJson(m, &text).code(), Code::kInvalidArgument);
  m.step = kMaxStep;
  ASSERT_TRUE(WriteManifestJson(m, &text).ok());
  const std::string was = "\"step\": " + std::to_string(kMaxStep);
  text.replace(text.find(was), was.size(), "\"step\": 9223372036854775807");
  Status s = ParseManifestJson(text, &back);
  EXPECT_EQ(s.code(), Code::kCorruption) << s;
  EXPECT_NE(s.message().find("step: 9223372036854775807 is more than 9007199254740991"), std::string::npos) << s;
  EXPECT_TRUE(CheckSaveStep("Save(1)", 1).ok());
  EXPECT_TRUE(CheckSaveStep("Save(max)", kMaxStep).ok());
  for (int64_t bad : {int64_t{-1}, kMaxStep + 1, INT64_MAX}) {
    s = CheckSaveStep("Save", bad);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find(std::to_string(bad)), std::string::npos) << s;
  }
  m.step = 20;
  EXPECT_TRUE(CheckManifestStep(m, 20, "v00000002-s20").ok());
  s = CheckManifestStep(m, 19, "v00000002-s19");
  EXPECT_EQ(s.code(), Code::kCorruption);
  EXPECT_NE(s.message().find("manifest step 20, but its version v00000002-s19 is step 19"), std::string::npos) << s;
}

const char* const kChunk00 = R"([[0, 0, 1, 0, "0123456789abcdef"])";
const char* const kChunk01 = R"([1, 1, 1, 1, "0123456689abcdef"])";

const BadCase kBadCases[] = {
    // not JSON at all
    {"empty", "", "", "not valid JSON"},
    {"garbage", "", "{\"format\": 1,", "not valid JSON"},
    {"trailing_garbage", "$", "x", "not valid JSON"},
    {"invalid_utf8", "\"time\": \"2026", "\"time\": \"\xff", "not valid JSON"},
    {"too_deep", "", "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
     "nested deeper than 16 levels"},
    // structure
    {"top_level_array", "", "[1, 2]", "(top level): expected an object, got an array"},
    {"unknown_format", "\"format\": 2", "\"format\": 0", "format: 0 is not a manifest format this baton reads"},
    {"format_as_string", "\"format\": 2", "\"format\": \"2\"", "format: \"2\" is not a manifest format"},
    {"run_id_missing", "\"run_id\": \"run-7\",", "", "run_id: missing"},
    {"run_id_bad", "\"run-7\"", "\"run 7\\u001b[2J\"", "run_id: \"run 7"},
    {"run_id_in_format_1", "\"format\": 2", "\"format\": 1", "run_id: unknown key"},
    {"missing_key", "\"step\": 400,", "", "step: missing"},
    {"unknown_key", "\"step\": 400,", "\"step\": 400, \"stpe\": 1,", "stpe: unknown key"},
    {"duplicate_key", "\"step\": 400,", "\"step\": 400, \"step\": 400,", "step: duplicate key"},
    {"unknown_blob_key", "\"base64\":", "\"b64\":", "user_blob.b64: unknown key"},
    {"time_not_string", "\"time\": \"2026-11-29T16:03:03Z\"", "\"time\": 7", "time: expected a string, got 7"},
    {"unknown_key_after_an_object", "\"arrays\": [\n", "\"arrays\": {\"a\": 1}, \"x\": [\n", "x: unknown key"},
    // numbers
    {"negative_step", "\"step\": 400", "\"step\": -4", "step: -4 is negative"},
    {"minus_zero_step", "\"step\": 400", "\"step\": -0", "step: -0 is not an unsigned integer (a minus sign)"},
    {"float_step", "\"step\": 400", "\"step\": 4.5", "step: 4.5 is not an unsigned 64-bit integer"},
    {"beyond_uint64", "\"step\": 400", "\"step\": 18446744073709551616", "step: 1.8446744073709552e+19 is not"},
    {"step_beyond_int64", "\"step\": 400", "\"step\": 9223372036854775808", "step: 9223372036854775808 is more than"},
    {"world_zero", "\"world_size\": 2", "\"world_size\": 0", "world_size: 0 is not a world size"},
    {"world_beyond_int", "\"world_size\": 2", "\"world_size\": 4294967296", "world_size: 4294967296 is more than 2147483647"},
    {"world_as_string", "\"world_size\": 2", "\"world_size\": \"2\"", "world_size: expected an unsigned integer, got \"2\""},
    {"negative_dim", "\"shape\": [2, 3], \"replicated\": false", "\"shape\": [2, -3], \"replicated\": false",
     "arrays[0].shape[1]: -3 is negative"},
    // overflow
    {"row_overflow", "\"shape\": [2, 3], \"replicated\": false",
     "\"shape\": [2, 4611686018427387904], \"replicated\": false", "arrays[0].shape: a row of this shape overflows 64 bits"},
    {"array_overflow", "\"shape\": [2, 3], \"replicated\": false",
     "\"shape\": [2305843009213693952, 3], \"replicated\": false",
     "arrays[0].shape: 2305843009213693952 rows of 12 bytes overflow 64 bits"},
    {"chunk_overflow", kChunk00, R"([[0, 0, 18446744073709551615, 0, "0123456789abcdef"])",
     "shards[0].datasets[0].chunks[0].rows: 18446744073709551615 rows of 12 bytes overflow 64 bits"},
    {"dataset_overflow", "\"rows\": 2, \"offset\": 96,", "\"rows\": 18446744073709551615, \"offset\": 96,",
     "shards[0].datasets[0].rows: 18446744073709551615 rows of 12 bytes overflow 64 bits"},
    // arrays
    {"bad_dtype", "\"dtype\": \"f32\"", "\"dtype\": \"f33\"", "arrays[0].dtype: \"f33\" is not a dtype"},
    {"replicated_not_bool", "\"replicated\": false", "\"replicated\": 0", "arrays[0].replicated: expected true or false, got 0"},
    {"duplicate_array", "\"name\": \"layer1.weight\"", "\"name\": \"layer0.weight\"",
     "arrays[1].name: \"layer0.weight\" is also arrays[0]"},
    {"array_name_not_plain", "layer0.weight", "../x", "arrays[0].name: \"../x\" is not a plain name"},
    // shards
    {"file_absolute", "\"shard-0.h5\"", "\"/etc/passwd\"", "shards[0].file: \"/etc/passwd\" is not a plain file name"},
    {"file_dotdot", "\"shard-0.h5\"", "\"..\"", "shards[0].file: \"..\" is not a plain file name"},
    {"file_subdir", "\"shard-0.h5\"", "\"../v2/shard-0.h5\"", "shards[0].file: \"../v2/shard-0.h5\" is not a plain"},
    {"rank_out_of_range", "\"ranks\": [0, 1]", "\"ranks\": [0, 2]", "shards[0].ranks[1]: 2 is not a rank of world size 2"},
    {"rank_negative", "\"ranks\": [0, 1]", "\"ranks\": [0, -1]", "shards[0].ranks[1]: -1 is not a rank"},
    {"ranks_descending", "\"ranks\": [0, 1]", "\"ranks\": [1, 0]", "shards[0].ranks[1]: 0 is not in ascending order"},
    {"rank_in_no_shard", "\"world_size\": 2", "\"world_size\": 3", "shards: rank 2 is in no shard"},
    {"chunk_rank_not_in_shard", "\"ranks\": [0, 1]", "\"ranks\": [0]",
     "shards[0].datasets[0].chunks[1].rank: 1 is not one of the shard's ranks"},
    // datasets and chunks
    {"dataset_unknown_array", "\"array\": \"layer0.weight\"", "\"array\": \"nope\"",
     "shards[0].datasets[0].array: \"nope\" names no array"},
    {"dataset_twice", "\"array\": \"layer1.weight\"", "\"array\": \"layer0.weight\"",
     "shards[0].datasets[1].array: \"layer0.weight\" has two datasets in this shard"},
    {"chunks_not_array", "\"chunks\": [[0, 0, 1, 0, \"0123456789abcdef\"], [1, 1, 1, 1, \"0123456689abcdef\"]]",
     "\"chunks\": 5", "shards[0].datasets[0].chunks: expected an array of [rank"},
    {"chunk_is_object", kChunk00, "[{}", "shards[0].datasets[0].chunks[0]: expected [rank, first_row, rows, dataset_row, \"xxh3\"], got an object"},
    {"chunk_is_number", kChunk00, "[7", "shards[0].datasets[0].chunks[0]: expected [rank, first_row, rows, dataset_row, \"xxh3\"], got 7"},
    {"chunk_four_fields", kChunk00, "[[0, 0, 1, 0]", "shards[0].datasets[0].chunks[0]: has 4 fields"},
    {"chunk_six_fields", kChunk00, R"([[0, 0, 1, 0, "0123456789abcdef", 7])", "chunks[0]: more than 5 fields"},
    {"chunk_nested", kChunk00, R"([[0, [0], 1, 0, "0123456789abcdef"])", "chunks[0].first_row: expected a number, got an array"},
    {"chunk_null", kChunk00, R"([[0, null, 1, 0, "0123456789abcdef"])", "chunks[0].first_row: expected a number, got null"},
    {"chunk_negative", kChunk00, R"([[0, -1, 1, 0, "0123456789abcdef"])", "shards[0].datasets[0].chunks[0].first_row: -1 is negative"},
    {"chunk_float", kChunk00, R"([[0, 0, 1.5, 0, "0123456789abcdef"])", "chunks[0].rows: 1.5 is not an unsigned"},
    {"chunk_rank_huge", kChunk00, R"([[2147483648, 0, 1, 0, "0123456789abcdef"])", "chunks[0].rank: 2147483648 is not a rank"},
    {"chunk_bad_hex", "0123456789abcdef\"]", "0123456789abcdeg\"]", "chunks[0].xxh3: \"0123456789abcdeg\" is not 16 hex digits"},
    {"chunk_hex_number", R"("0123456789abcdef"])", "5]", "chunks[0].xxh3: expected \"xxh3\" hex digits, got 5"},
    {"chunk_gap_in_dataset", kChunk01, R"([1, 1, 1, 2, "0123456689abcdef"])",
     "chunks[1].dataset_row: 2, expected 1 (chunks tile the dataset in order)"},
    {"dataset_rows_not_chunks", "\"rows\": 2, \"offset\": 96,", "\"rows\": 1, \"offset\": 96,",
     "shards[0].datasets[0].chunks[1].rows: 1 rows go past the dataset's 1"},
    {"dataset_rows_more", "\"rows\": 2, \"offset\": 96,", "\"rows\": 3, \"offset\": 96,",
     "shards[0].datasets[0].rows: 3 is more than the 2 rows of \"layer0.weight\""},
    // format 2: where the data lie, the metadata's checksum, the dimensions
    {"dataset_past_file", "\"offset\": 96,", "\"offset\": 9999,",
     "shards[0].datasets[0].offset: 9999 + 24 bytes go past the file's"},
    {"datasets_overlap", "\"offset\": 120,", "\"offset\": 100,", "shards[0].datasets: the data at bytes 100 overlaps"},
    {"offset_missing", "\"offset\": 96, ", "", "shards[0].datasets[0].offset: missing"},
    {"meta_xxh3_bad", "\"meta_xxh3\": \"feedface00000000\"", "\"meta_xxh3\": \"nope\"",
     "shards[0].meta_xxh3: \"nope\" is not 16 hex digits"},
    {"too_many_dims", "\"shape\": [2, 3]", "\"shape\": [2, 1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,3]",
     "arrays[0].shape: 33 dimensions, more than HDF5's 32"},
    {"chunk_past_array", kChunk01, R"([1, 2, 1, 1, "0123456689abcdef"])",
     "chunks[1].first_row: 2 + 1 rows go past the 2 rows of \"layer0.weight\""},
    {"array_rows_in_two_chunks", kChunk01, R"([1, 0, 1, 1, "0123456689abcdef"])",
     "arrays[0] (\"layer0.weight\"): row 0 is in two chunks"},
    {"array_row_in_no_chunk", "\"shape\": [2, 3], \"replicated\": false", "\"shape\": [3, 3], \"replicated\": false",
     "arrays[0] (\"layer0.weight\"): row 2 is in no chunk"},
    {"replicated_row_in_no_chunk", "\"shape\": [2, 3], \"replicated\": true", "\"shape\": [3, 3], \"replicated\": true",
     "arrays[1] (\"layer1.weight\"): row 2 is in no chunk"},
    // the user blob
    {"blob_not_base64", "bG9hZGVyAHN0YXRl/w==", "bG9hZGVyAHN0YXRl/w=", "user_blob.base64: \"bG9hZGVyAHN0YXRl/w=\" is not base64"},
    {"blob_checksum", "bb3351fd4f0fff39", "bb3351fd4f0fff38",
     "user_blob.xxh3: bb3351fd4f0fff38, but the blob's bytes hash to bb3351fd4f0fff39"},
    {"blob_xxh3_not_hex", "bb3351fd4f0fff39", "xyz", "user_blob.xxh3: \"xyz\" is not 16 hex digits"},
};

INSTANTIATE_TEST_SUITE_P(Table, CkptManifestBad, ::testing::ValuesIn(kBadCases),
                         [](const ::testing::TestParamInfo<BadCase>& info) { return std::string(info.param.name); });

TEST(CkptManifest, TheSmallTextIsWhatTheTableAssumes) {
  const std::string text = SmallText();
  EXPECT_NE(text.find(kChunk00), std::string::npos) << text;
  EXPECT_NE(text.find(kChunk01), std::string::npos) << text;
  EXPECT_NE(text.find("\"xxh3\": \"bb3351fd4f0fff39\", \"base64\": \"bG9hZGVyAHN0YXRl/w==\""), std::string::npos) << text;
}

TEST(CkptManifest, EveryTruncationFailsCleanly) {
  const std::string text = SmallText();
  // The text ends with "}\n": every shorter prefix but the one without the newline is cut short.
  for (size_t n = 0; n + 1 < text.size(); ++n) {
    Manifest m;
    Status s = ParseManifestJson(std::string_view(text.data(), n), &m);
    EXPECT_EQ(s.code(), Code::kCorruption) << n;
  }
}

TEST(CkptManifest, BlobOverTheLimit) {
  Manifest m = MakeManifest(2, 2, 1, 1);
  m.user_blob.assign(kMaxUserBlobBytes + 1, 'x');
  std::string text;
  Status s = WriteManifestJson(m, &text);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("user_blob: 67108865 bytes, more than the limit of 67108864"), std::string::npos) << s;
  // Parsing: the base64 text alone says it is too large; nothing is decoded.
  m.user_blob = "ab";
  ASSERT_TRUE(WriteManifestJson(m, &text).ok());
  const size_t at = text.find("\"YWI=\"");
  ASSERT_NE(at, std::string::npos);
  text.replace(at + 1, 4, std::string((kMaxUserBlobBytes / 3 + 2) * 4, 'A'));
  Manifest back;
  s = ParseManifestJson(text, &back);
  EXPECT_EQ(s.code(), Code::kCorruption);
  EXPECT_NE(s.message().find("user_blob.base64: 89478492 characters, more than a blob of at most 67108864 bytes needs"),
            std::string::npos) << s;
}

TEST(CkptManifest, WriterRefusesWhatTheParserWould) {
  Manifest m = MakeManifest(2, 2, 1, 1);
  m.shards[0].file = "../escape.h5";
  std::string text;
  Status s = WriteManifestJson(m, &text);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("shards[0].file: \"../escape.h5\" is not a plain file name"), std::string::npos) << s;

  m = MakeManifest(2, 2, 1, 1);
  m.arrays[0].name = "bad\xff";
  s = WriteManifestJson(m, &text);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("arrays[0].name"), std::string::npos) << s;

  m = MakeManifest(2, 2, 1, 1);
  m.user_blob_xxh3 = 1;
  s = WriteManifestJson(m, &text);
  EXPECT_NE(s.message().find("user_blob.xxh3: 0000000000000001, but the blob's bytes hash to"), std::string::npos) << s;

  m = MakeManifest(2, 2, 1, 1);
  m.shards[0].datasets[0].chunks.pop_back();
  m.shards[0].datasets[0].rows = 1;
  s = WriteManifestJson(m, &text);
  EXPECT_NE(s.message().find("arrays[0] (\"layer0.weight\"): row 1 is in no chunk"), std::string::npos) << s;
}

TEST(CkptManifest, ScalarsEmptyArraysAndEmptyBlob) {
  Manifest m = MakeManifest(3, 3, 0, 1);
  m.group_size = 0;  // one shard per node
  ArrayMeta scalar;
  scalar.name = "lr";
  scalar.dtype = DType::kF64;
  scalar.replicated = true;  // one row, written by rank 0
  m.arrays.push_back(scalar);
  ArrayMeta empty;
  empty.name = "nothing";
  empty.shape = {0, 5};
  m.arrays.push_back(empty);
  m.user_blob.clear();
  for (ShardMeta& sh : m.shards) {
    DatasetMeta ds;
    ds.array = 0;
    if (sh.ranks[0] == 0) {
      ds.rows = 1;
      ds.chunks.push_back(Chunk{0, 0, 1, 0, 42});
    }
    sh.datasets.push_back(ds);
  }
  std::string text;
  Status s = WriteManifestJson(m, &text);
  ASSERT_TRUE(s.ok()) << s;
  Manifest back;
  s = ParseManifestJson(text, &back);
  ASSERT_TRUE(s.ok()) << s << text;
  ExpectSame(m, back);
  EXPECT_EQ(back.arrays[0].rows(), 1u);
  EXPECT_EQ(back.arrays[0].row_bytes(), 8u);
  EXPECT_EQ(back.arrays[1].rows(), 0u);
}

TEST(CkptManifest, AMillionChunksParse) {
  // 16,384 ranks in groups of 8 with 64 arrays: the size the benchmark times
  // (`baton bench manifest`); here only that it works.
  const Manifest m = MakeManifest(16384, 8, 64, 1);
  std::string text;
  ASSERT_TRUE(WriteManifestJson(m, &text).ok());
  Manifest back;
  Status s = ParseManifestJson(text, &back);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(back.shards.size(), 2048u);
  size_t chunks = 0;
  for (const ShardMeta& sh : back.shards) {
    for (const DatasetMeta& ds : sh.datasets) chunks += ds.chunks.size();
  }
  EXPECT_EQ(chunks, 16384u * 64u);
  EXPECT_EQ(back.shards[2047].datasets[63].chunks[7].rank, 16383);
}

TEST(CkptManifest, IsPlainFileName) {
  EXPECT_TRUE(IsPlainFileName("shard-00000.h5"));
  EXPECT_TRUE(IsPlainFileName("..."));
  EXPECT_TRUE(IsPlainFileName(".hidden"));
  EXPECT_FALSE(IsPlainFileName(""));
  EXPECT_FALSE(IsPlainFileName("."));
  EXPECT_FALSE(IsPlainFileName(".."));
  EXPECT_FALSE(IsPlainFileName("/abs"));
  EXPECT_FALSE(IsPlainFileName("a/b"));
  EXPECT_FALSE(IsPlainFileName("../a"));
  EXPECT_FALSE(IsPlainFileName(std::string_view("a\0b", 3)));
}

}  // namespace
}  // namespace baton::ckpt
