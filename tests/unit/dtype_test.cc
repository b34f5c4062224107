// Element types: names, sizes, and the f16/bf16 conversions that the
// collectives use to reduce in f32 and round once.
#include "baton/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "baton/topology.h"

namespace baton {
namespace {

TEST(DType, NamesSizesAndParsing) {
  for (DType t : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16, DType::kI32, DType::kI64, DType::kU8}) {
    DType back;
    ASSERT_TRUE(ParseDType(DTypeName(t), &back).ok());
    EXPECT_EQ(back, t);
  }
  EXPECT_EQ(DTypeSize(DType::kBF16), 2u);
  EXPECT_EQ(DTypeSize(DType::kI64), 8u);
  DType t;
  Status s = ParseDType("f8", &t);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("'f8'"), std::string::npos);
  ReduceOp op;
  EXPECT_TRUE(ParseReduceOp("avg", &op).ok());
  EXPECT_EQ(op, ReduceOp::kAvg);
  EXPECT_FALSE(ParseReduceOp("prod", &op).ok());
}

TEST(Half, EveryFiniteHalfRoundTripsExactly) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00) continue;  // inf and nan
    ASSERT_EQ(FloatToHalf(HalfToFloat(static_cast<uint16_t>(h))), h) << std::hex << h;
  }
}

TEST(Half, KnownValuesAndRoundingToNearestEven) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);       // largest finite
  EXPECT_EQ(FloatToHalf(70000.0f), 0x7c00);       // overflow to inf
  EXPECT_EQ(FloatToHalf(5.9604645e-8f), 0x0001);  // smallest subnormal
  EXPECT_EQ(FloatToHalf(1.0f + 1.0f / 2048), 0x3c00) << "halfway rounds to even (down)";
  EXPECT_EQ(FloatToHalf(1.0f + 3.0f / 2048), 0x3c02) << "halfway rounds to even (up)";
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::nanf("")))));
  EXPECT_FLOAT_EQ(HalfToFloat(0x3555), 0.33325195f);
}

TEST(BFloat16, KnownValuesAndRoundingToNearestEven) {
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80);
  EXPECT_EQ(BFloat16ToFloat(0x4049), 3.140625f);
  EXPECT_EQ(FloatToBFloat16(1.0f + 1.0f / 256), 0x3f80) << "halfway rounds to even (down)";
  EXPECT_EQ(FloatToBFloat16(1.0f + 3.0f / 256), 0x3f82) << "halfway rounds to even (up)";
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(std::nanf("")))));
  for (uint32_t b = 0; b < 0x10000; ++b) {
    if ((b & 0x7f80) == 0x7f80) continue;
    ASSERT_EQ(FloatToBFloat16(BFloat16ToFloat(static_cast<uint16_t>(b))), b);
  }
}

TEST(DType, StoreThenLoadGivesTheValueBackInEveryType) {
  for (DType t : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16, DType::kI32, DType::kI64, DType::kU8}) {
    unsigned char buf[3 * 8] = {};
    for (size_t i = 0; i < 3; ++i) StoreValue(t, static_cast<double>(i * 7 + 1), buf, i);
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(LoadValue(t, buf, i), static_cast<double>(i * 7 + 1)) << DTypeName(t);
  }
  unsigned char half[2];
  StoreValue(DType::kBF16, 1.0 + 1.0 / 512, half, 0);  // below bf16's precision: rounded once, to even
  EXPECT_EQ(LoadValue(DType::kBF16, half, 0), 1.0);
}

TEST(Topology, DenseNodeIdsInOrderOfFirstRank) {
  Topology t = TopologyFromNodeKeys({7, 7, 3, 3, 9, 7});
  EXPECT_EQ(t.node_of, (std::vector<int>{0, 0, 1, 1, 2, 0}));
  EXPECT_EQ(t.num_nodes(), 3);
  EXPECT_EQ(t.RanksOn(0), (std::vector<int>{0, 1, 5}));
  EXPECT_FALSE(t.Uniform());
  EXPECT_TRUE(TopologyFromNodeKeys({0, 0, 1, 1}).Uniform());
  EXPECT_EQ(TopologyFromNodeKeys({}).num_nodes(), 0);
}

}  // namespace
}  // namespace baton
