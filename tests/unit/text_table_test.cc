#include "cli/text_table.h"

#include <gtest/gtest.h>

namespace baton::cli {
namespace {

TEST(TextTable, ColumnsAreAsWideAsTheirWidestCell) {
  TextTable t({"ARRAY", "DTYPE", "SHAPE"});
  t.AddRow({"w", "f32", "[4]"});
  t.AddRow({"model.layers.0.self_attn.q_proj.weight", "float8_e4m3fnuz", "[4096, 4096]"});
  EXPECT_EQ(t.Render(),
            "ARRAY                                   DTYPE            SHAPE\n"
            "w                                       f32              [4]\n"
            "model.layers.0.self_attn.q_proj.weight  float8_e4m3fnuz  [4096, 4096]\n");
}

TEST(TextTable, RightAlignedColumnsAndNoTrailingBlanks) {
  TextTable t({"SHARD", "BYTES", "RANKS"}, {TextTable::Align::kLeft, TextTable::Align::kRight});
  t.AddRow({"shard-0.h5", "1234567", "0-2"});
  t.AddRow({"s1.h5", "9", ""});
  EXPECT_EQ(t.Render(),
            "SHARD         BYTES  RANKS\n"
            "shard-0.h5  1234567  0-2\n"
            "s1.h5             9\n");
}

TEST(TextTable, ARowOfTheWrongLengthIsPaddedOrCutNotFatal) {
  TextTable t({"A", "B"});
  t.AddRow({"x"});
  t.AddRow({"y", "z", "dropped"});
  EXPECT_EQ(t.Render(), "A  B\nx\ny  z\n");
}

}  // namespace
}  // namespace baton::cli
