#include "base/printable.h"

#include <gtest/gtest.h>

#include <string>

namespace baton {
namespace {

// Terminal controls (ESC, the C1 CSI U+009B in UTF-8, a bidi override
// U+202E), newlines and backslashes come out as \xNN; printable ASCII as it is.
TEST(Printable, EscapesEverythingButPrintableAscii) {
  EXPECT_EQ(Printable("w_1.bias"), "w_1.bias");
  EXPECT_EQ(Printable("\x1b[2J"), "\\x1b[2J");
  EXPECT_EQ(Printable("a\xc2\x9b" "b"), "a\\xc2\\x9bb");
  EXPECT_EQ(Printable("\xe2\x80\xae"), "\\xe2\\x80\\xae");
  EXPECT_EQ(Printable("x\ny\\"), "x\\x0ay\\x5c");
  EXPECT_EQ(Printable(std::string("a\0b", 3)), "a\\x00b");
}

// A huge field (a 100 MB manifest time) is cut, saying how much was left out.
TEST(Printable, CutsLongTextAndSaysHowMuchIsLeftOut) {
  const std::string huge(100u << 20, 'T');
  const std::string out = Printable(huge);
  EXPECT_EQ(out, std::string(kPrintableMaxBytes, 'T') + "...(" + std::to_string(huge.size() - kPrintableMaxBytes) +
                     " more bytes)");
  EXPECT_EQ(Printable("abcdef", 3), "abc...(3 more bytes)");
  EXPECT_EQ(Printable("abc", 3), "abc");
}

}  // namespace
}  // namespace baton
