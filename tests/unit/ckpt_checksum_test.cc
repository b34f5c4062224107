#include "ckpt/checksum.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ckpt/base64.h"
#include "ckpt/chunk_digests.h"

namespace baton::ckpt {
namespace {

TEST(CkptChecksum, KnownValueOfEmptyInput) {
  // XXH3_64bits of no bytes (seed 0), from xxHash's own test vectors.
  EXPECT_EQ(Xxh3("", 0), 0x2D06800538D394C2ull);
}

// A long input takes the vector path (AVX2 or AVX-512 through xxHash's x86
// dispatcher where the library has it, m4/baton_xxhash.m4): its digests
// must be those of the library's plain SSE2 entry points, which wrote every
// checkpoint so far (value from XXH3_64bits of libxxhash 0.8.1, SSE2).
TEST(CkptChecksum, KnownValueOfLongInputWhateverTheVectorPath) {
  std::string data(1000003, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 2654435761u >> 13);
  EXPECT_EQ(Xxh3(data.data(), data.size()), 0xb6c4165033e2eeeeull);
  Xxh3Stream s;
  for (size_t i = 0; i < data.size(); i += 4099) s.Update(data.data() + i, std::min<size_t>(4099, data.size() - i));
  EXPECT_EQ(s.Digest(), 0xb6c4165033e2eeeeull);
}

TEST(CkptChecksum, StreamEqualsOneShot) {
  std::string data(100000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 131 + 7);
  Xxh3Stream s;
  for (size_t i = 0; i < data.size(); i += 777) s.Update(data.data() + i, std::min<size_t>(777, data.size() - i));
  EXPECT_EQ(s.Digest(), Xxh3(data.data(), data.size()));
  EXPECT_NE(Xxh3(data.data(), data.size() - 1), Xxh3(data.data(), data.size()));
}

// A save cuts a rank's rows into chunks of at most kChunkBytes (at least a
// row): the digests of the chunks, whatever pieces the bytes come in.
TEST(CkptChecksum, ChunkHasherCutsRowsIntoChunks) {
  EXPECT_EQ(ChunkRows(4096), kChunkBytes / 4096);
  EXPECT_EQ(ChunkRows(kChunkBytes + 1), 1u);
  EXPECT_EQ(ChunkRows(0), kChunkBytes);
  EXPECT_EQ(ChunkCount(0, 4), 0u);
  EXPECT_EQ(ChunkCount(1, 4), 1u);
  const uint64_t row = 3000;  // a chunk of 2796 rows: not a power of two
  const uint64_t per = ChunkRows(row);
  const uint64_t rows = 2 * per + 5;
  EXPECT_EQ(ChunkCount(rows, row), 3u);
  std::string data(rows * row, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 131 + (i >> 17));
  const std::vector<uint64_t> want = {Xxh3(data.data(), per * row), Xxh3(data.data() + per * row, per * row),
                                      Xxh3(data.data() + 2 * per * row, 5 * row)};
  EXPECT_EQ(ChunkDigests(data.data(), rows, row), want);
  ChunkHasher h(rows, row);
  for (size_t at = 0; at < data.size(); at += 777777) h.Update(data.data() + at, std::min<size_t>(777777, data.size() - at));
  EXPECT_EQ(h.Finish(), want);
  // Rows of no bytes: chunks that hash nothing.
  EXPECT_EQ(ChunkDigests(nullptr, 3, 0), std::vector<uint64_t>{Xxh3("", 0)});
  EXPECT_TRUE(ChunkDigests(nullptr, 0, 8).empty());
}

TEST(CkptChecksum, HexRoundTripAndStrictness) {
  EXPECT_EQ(HexU64(0x0123456789abcdefull), "0123456789abcdef");
  EXPECT_EQ(HexU64(0), "0000000000000000");
  uint64_t v = 0;
  ASSERT_TRUE(ParseHexU64("ffffffffffffffff", &v));
  EXPECT_EQ(v, UINT64_MAX);
  ASSERT_TRUE(ParseHexU64(HexU64(0xdeadbeef12345678ull), &v));
  EXPECT_EQ(v, 0xdeadbeef12345678ull);
  EXPECT_FALSE(ParseHexU64("", &v));
  EXPECT_FALSE(ParseHexU64("123", &v));
  EXPECT_FALSE(ParseHexU64("0123456789abcdef0", &v));
  EXPECT_FALSE(ParseHexU64("0123456789abcdeg", &v));
  EXPECT_FALSE(ParseHexU64("-123456789abcdef", &v));
}

TEST(CkptBase64, RoundTripsEveryLengthModuloThree) {
  for (size_t n = 0; n < 10; ++n) {
    std::string bytes;
    for (size_t i = 0; i < n; ++i) bytes += static_cast<char>(250 - i * 37);
    std::string back;
    ASSERT_TRUE(Base64Decode(Base64Encode(bytes), &back)) << n;
    EXPECT_EQ(back, bytes);
  }
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
}

TEST(CkptBase64, RejectsWhatIsNotCanonical) {
  std::string out;
  EXPECT_FALSE(Base64Decode("Zm8", &out));      // length
  EXPECT_FALSE(Base64Decode("Zm9=Zm8=", &out)); // padding in the middle
  EXPECT_FALSE(Base64Decode("Zm9=", &out));     // unused bits set
  EXPECT_FALSE(Base64Decode("Z*8=", &out));     // not in the alphabet
  EXPECT_FALSE(Base64Decode("====", &out));
  EXPECT_TRUE(Base64Decode("", &out));
  EXPECT_TRUE(out.empty());
}

}  // namespace
}  // namespace baton::ckpt
