// ckpt/metadata_image.h: an image holds exactly a file's bytes outside its
// data extents, and written into an empty file gives a file of the same
// size whose bytes outside the extents are the original's and whose data
// space is zeros (sparse) until the rows are written; its checksum is
// HashOutsideExtents'. The images a checkpointer keeps: the last layout's,
// found only by the same layout, none over the size bound.
#include "ckpt/metadata_image.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "ckpt/fs/env.h"
#include "ckpt/metadata_checksum.h"
#include "tests/unit/ckpt_temp_dir.h"

namespace baton::ckpt {
namespace {

using Extents = std::vector<std::pair<uint64_t, uint64_t>>;

std::string Random(uint64_t size, uint64_t seed) {
  std::string s(size, '\0');
  std::mt19937_64 rng(seed);
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

std::string ReadAll(const std::string& path) {
  std::string out;
  EXPECT_TRUE(fs::Env::Default()->ReadFile(path, 1 << 30, &out).ok());
  return out;
}

TEST(CkptMetadataImage, WrittenIntoAnEmptyFileItIsTheFileOutsideItsDataAndZerosInside) {
  TempDir dir;
  fs::Env* env = fs::Env::Default();
  // Metadata, data, metadata, data (which ends the file), as HDF5 lays out
  // a shard: the image must keep the gaps apart and give the size.
  const Extents data{{4096, 70000}, {70100, 300000}};
  const std::string original = Random(300000, 7);
  ASSERT_TRUE(WriteWholeFile(env, dir / "a.h5", original).ok());
  MetadataImage image;
  ASSERT_TRUE(CaptureMetadataImage(env, dir / "a.h5", original.size(), data, "layout", {4096, 70100}, &image).ok());
  EXPECT_EQ(image.layout, "layout");
  EXPECT_EQ(image.file_bytes, original.size());
  EXPECT_EQ(image.offsets, (std::vector<uint64_t>{4096, 70100}));
  ASSERT_EQ(image.pieces.size(), 2u);
  EXPECT_EQ(image.pieces[0].first, 0u);
  EXPECT_EQ(image.pieces[0].second, original.substr(0, 4096));
  EXPECT_EQ(image.pieces[1].first, 70000u);
  EXPECT_EQ(image.pieces[1].second, original.substr(70000, 100));
  EXPECT_EQ(image.bytes(), 4196u);
  uint64_t hashed = 0;
  ASSERT_TRUE(HashOutsideExtents(env, dir / "a.h5", original.size(), data, &hashed).ok());
  EXPECT_EQ(image.meta_xxh3, hashed);

  ASSERT_TRUE(WriteWholeFile(env, dir / "b.h5", "").ok());  // created empty, as the shard writer does
  ASSERT_TRUE(WriteMetadataImage(env, dir / "b.h5", image).ok());
  std::string expected = original;
  std::fill(expected.begin() + 4096, expected.begin() + 70000, '\0');
  std::fill(expected.begin() + 70100, expected.end(), '\0');
  EXPECT_TRUE(ReadAll(dir / "b.h5") == expected) << "the image written is not the file outside its data";
  uint64_t again = 0;
  ASSERT_TRUE(HashOutsideExtents(env, dir / "b.h5", original.size(), data, &again).ok());
  EXPECT_EQ(again, image.meta_xxh3);
}

TEST(CkptMetadataImage, WritingIntoAMissingFileNamesIt) {
  TempDir dir;
  MetadataImage image;
  image.file_bytes = 10;
  image.pieces = {{0, "abc"}};
  Status s = WriteMetadataImage(fs::Env::Default(), dir / "missing.h5", image);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("missing.h5"), std::string::npos) << s;
}

std::shared_ptr<MetadataImage> Image(const std::string& layout, uint64_t bytes = 1) {
  auto image = std::make_shared<MetadataImage>();
  image->layout = layout;
  image->pieces = {{0, std::string(bytes, 'x')}};
  return image;
}

TEST(CkptMetadataImages, AnImageIsFoundByItsLayoutAlone) {
  MetadataImages images;
  EXPECT_EQ(images.Find("a"), nullptr);
  auto a = Image("a"), b = Image("b");
  images.Keep(a);
  images.Keep(b);  // a sync save's layout and an async save's: both kept
  EXPECT_EQ(images.Find("a"), a);
  EXPECT_EQ(images.Find("b"), b);
  EXPECT_EQ(images.Find("c"), nullptr);
  EXPECT_EQ(images.Find(""), nullptr);
  auto a2 = Image("a");
  images.Keep(a2);  // the same layout again: replaces its image
  EXPECT_EQ(images.Find("a"), a2);
  images.Forget("a");
  EXPECT_EQ(images.Find("a"), nullptr);
  EXPECT_EQ(images.Find("b"), b);
}

TEST(CkptMetadataImages, TheLeastRecentlyUsedGoesFirst) {
  MetadataImages images;
  for (size_t i = 0; i < MetadataImages::kMaxImages; ++i) images.Keep(Image("l" + std::to_string(i)));
  ASSERT_NE(images.Find("l0"), nullptr);  // used: now the most recent
  images.Keep(Image("new"));
  EXPECT_NE(images.Find("new"), nullptr);
  EXPECT_NE(images.Find("l0"), nullptr);
  EXPECT_EQ(images.Find("l1"), nullptr) << "the least recently used was kept";
  for (size_t i = 2; i < MetadataImages::kMaxImages; ++i) EXPECT_NE(images.Find("l" + std::to_string(i)), nullptr);
}

TEST(CkptMetadataImages, TheBytesKeptStayUnderTheBound) {
  MetadataImages images;
  auto big = Image("big", MetadataImages::kMaxBytes + 1);
  images.Keep(big);
  EXPECT_EQ(images.Find("big"), nullptr) << "one image over the bound alone";
  auto half = Image("half", MetadataImages::kMaxBytes / 2), other = Image("other", MetadataImages::kMaxBytes / 2 + 1);
  images.Keep(half);
  images.Keep(other);  // the newest kept, the older one dropped to stay under the bound
  EXPECT_EQ(images.Find("other"), other);
  EXPECT_EQ(images.Find("half"), nullptr);
}

}  // namespace
}  // namespace baton::ckpt
