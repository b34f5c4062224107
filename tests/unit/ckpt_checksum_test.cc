#include "ckpt/checksum.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "ckpt/base64.h"
#include "ckpt/overlapped_hash.h"

namespace baton::ckpt {
namespace {

TEST(CkptChecksum, KnownValueOfEmptyInput) {
  // XXH3_64bits of no bytes (seed 0), from xxHash's own test vectors.
  EXPECT_EQ(Xxh3("", 0), 0x2D06800538D394C2ull);
}

TEST(CkptChecksum, StreamEqualsOneShot) {
  std::string data(100000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 131 + 7);
  Xxh3Stream s;
  for (size_t i = 0; i < data.size(); i += 777) s.Update(data.data() + i, std::min<size_t>(777, data.size() - i));
  EXPECT_EQ(s.Digest(), Xxh3(data.data(), data.size()));
  EXPECT_NE(Xxh3(data.data(), data.size() - 1), Xxh3(data.data(), data.size()));
}

// The restore's use: pieces read into two buffers in turn, each buffer
// refilled as soon as the Submit after its own returns. A digest that
// differs means a piece was hashed out of order, twice, or after its
// buffer was refilled.
TEST(CkptChecksum, OverlappedHashOfPiecesInTwoBuffersEqualsOneShot) {
  std::string data(3 * 1000 * 1000 + 17, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 2654435761u >> 13);
  const size_t piece = 65536;
  std::string buf[2] = {std::string(piece, '\0'), std::string(piece, '\0')};
  OverlappedHash h;
  size_t k = 0;
  for (size_t at = 0; at < data.size(); at += piece, ++k) {
    const size_t n = std::min(piece, data.size() - at);
    std::string& b = buf[k % 2];
    b.assign(data, at, n);  // the buffer of piece k - 2: Submit(k - 1) returned, so it is free
    h.Submit(b.data(), n);
  }
  buf[k % 2].assign(piece, 'x');  // not the last piece's buffer: free since its Submit returned
  const uint64_t digest = h.Finish();
  EXPECT_EQ(digest, Xxh3(data.data(), data.size()));
  EXPECT_EQ(h.Finish(), digest);  // nothing in flight: the same digest again
  OverlappedHash none;
  none.Submit(data.data(), 0);
  EXPECT_EQ(none.Finish(), Xxh3("", 0));
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
