#include "ckpt/manifest_parse_cache.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/unit/ckpt_test_manifest.h"

namespace baton::ckpt {
namespace {

std::string TextOf(const Manifest& m) {
  std::string text;
  EXPECT_TRUE(WriteManifestJson(m, &text).ok());
  return text;
}

TEST(CkptManifestParseCache, TheSameTextGivesTheSameParseAndACopyTheCallerMayChange) {
  ManifestParseCache cache;
  const std::string text = TextOf(MakeManifest(4, 2, 3, 2));
  Manifest first, second;
  ASSERT_TRUE(cache.Parse(text, &first).ok());
  first.arrays[0].name = "changed by its holder";  // a restore loads shard indexes into its copy
  ASSERT_TRUE(cache.Parse(text, &second).ok());
  Manifest fresh;
  ASSERT_TRUE(ParseManifestJson(text, &fresh).ok());
  EXPECT_EQ(second.arrays[0].name, fresh.arrays[0].name);
  EXPECT_EQ(second.user_blob, fresh.user_blob);
  EXPECT_EQ(second.shards.size(), fresh.shards.size());
}

TEST(CkptManifestParseCache, AnotherTextIsParsedAnew) {
  ManifestParseCache cache;
  Manifest a = MakeManifest(4, 2, 3, 2), b = a;
  b.step = 401;  // the same shape, one value apart: the whole text is the key
  Manifest out;
  ASSERT_TRUE(cache.Parse(TextOf(a), &out).ok());
  ASSERT_TRUE(cache.Parse(TextOf(b), &out).ok());
  EXPECT_EQ(out.step, 401);
  ASSERT_TRUE(cache.Parse(TextOf(a), &out).ok());
  EXPECT_EQ(out.step, 400);
}

TEST(CkptManifestParseCache, AParseUnderALooserLimitDoesNotAnswerATighterOne) {
  ManifestParseCache cache;
  const std::string text = TextOf(MakeManifest(4, 2, 3, 2));
  Manifest out;
  ASSERT_TRUE(cache.Parse(text, &out).ok());  // no limit
  Manifest direct;
  const Status want = ParseManifestJson(text, &direct, 4);
  ASSERT_FALSE(want.ok());  // the manifest holds more than 4 values
  const Status got = cache.Parse(text, &out, 4);
  EXPECT_EQ(got.code(), want.code()) << got;
  // A parse that held under a limit answers any looser one, and no limit.
  ManifestParseCache tight;
  ASSERT_TRUE(tight.Parse(text, &out, 1u << 20).ok());
  EXPECT_TRUE(tight.Parse(text, &out, 1u << 21).ok());
  EXPECT_TRUE(tight.Parse(text, &out).ok());
}

TEST(CkptManifestParseCache, AFailedParseIsNotKept) {
  ManifestParseCache cache;
  const std::string good = TextOf(MakeManifest(4, 2, 3, 2));
  Manifest out;
  ASSERT_TRUE(cache.Parse(good, &out).ok());
  std::string bad = good;
  bad[bad.size() / 2] ^= 0x01;  // fails the manifest's own checksum, or its JSON
  EXPECT_FALSE(cache.Parse(bad, &out).ok());
  EXPECT_FALSE(cache.Parse(bad, &out).ok());  // the second time too: the failure was not cached
  EXPECT_TRUE(cache.Parse(good, &out).ok());
}

}  // namespace
}  // namespace baton::ckpt
