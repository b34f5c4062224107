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
  for (DType t : kAllDTypes) {
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
  EXPECT_NE(s.message().find("u8, bool, i8, i16, u16, u32, u64, f8e4m3, f8e5m2"), std::string::npos) << s;
  ReduceOp op;
  EXPECT_TRUE(ParseReduceOp("avg", &op).ok());
  EXPECT_EQ(op, ReduceOp::kAvg);
  EXPECT_FALSE(ParseReduceOp("prod", &op).ok());
}

// The names and sizes the Python extension maps numpy's and torch's dtypes to.
TEST(DType, TheNewerTypesHaveTheirNamesAndSizes) {
  const std::pair<const char*, size_t> want[] = {{"bool", 1}, {"i8", 1},     {"i16", 2},    {"u16", 2},
                                                 {"u32", 4},  {"u64", 8},    {"f8e4m3", 1}, {"f8e5m2", 1}};
  for (auto [name, size] : want) {
    DType t;
    ASSERT_TRUE(ParseDType(name, &t).ok()) << name;
    EXPECT_EQ(DTypeName(t), name);
    EXPECT_EQ(DTypeSize(t), size) << name;
  }
  EXPECT_TRUE(IsFloating(DType::kF8E4M3));
  EXPECT_FALSE(IsFloating(DType::kBool));
}

// Which reductions the collectives take: every refusal names op and dtype.
TEST(DType, ReductionsThatMakeNoSenseAreRefused) {
  EXPECT_TRUE(CheckReducible(DType::kBool, ReduceOp::kMax).ok());
  EXPECT_TRUE(CheckReducible(DType::kBool, ReduceOp::kMin).ok());
  EXPECT_TRUE(CheckReducible(DType::kU64, ReduceOp::kSum).ok());
  EXPECT_TRUE(CheckReducible(DType::kI8, ReduceOp::kMin).ok());
  EXPECT_TRUE(CheckReducible(DType::kF16, ReduceOp::kAvg).ok());
  const std::pair<DType, ReduceOp> refused[] = {
      {DType::kBool, ReduceOp::kSum},   {DType::kBool, ReduceOp::kAvg},   {DType::kF8E4M3, ReduceOp::kSum},
      {DType::kF8E4M3, ReduceOp::kMax}, {DType::kF8E5M2, ReduceOp::kAvg}, {DType::kI16, ReduceOp::kAvg}};
  for (auto [t, op] : refused) {
    Status s = CheckReducible(t, op);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << DTypeName(t);
    EXPECT_NE(s.message().find("reduce op " + std::string(ReduceOpName(op)) + " on dtype " + std::string(DTypeName(t))),
              std::string::npos)
        << s;
  }
}

// Every code of both 8-bit formats decodes and encodes back to itself
// (NaNs to the format's NaN), known values match the OCP definitions, and
// rounding is to nearest even with overflow to NaN (e4m3) or inf (e5m2).
TEST(Float8, EveryCodeRoundTripsAndKnownValuesMatch) {
  for (uint32_t b = 0; b < 256; ++b) {
    const float f4 = Float8E4M3ToFloat(static_cast<uint8_t>(b));
    if ((b & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(f4)) << b;
    } else {
      EXPECT_EQ(FloatToFloat8E4M3(f4), b) << std::hex << b << " " << f4;
    }
    const float f5 = Float8E5M2ToFloat(static_cast<uint8_t>(b));
    if ((b & 0x7c) == 0x7c && (b & 3) != 0) {
      EXPECT_TRUE(std::isnan(f5)) << b;
    } else {
      EXPECT_EQ(FloatToFloat8E5M2(f5), b) << std::hex << b << " " << f5;
    }
  }
  EXPECT_EQ(Float8E4M3ToFloat(0x7e), 448.0f);
  EXPECT_EQ(Float8E4M3ToFloat(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(Float8E4M3ToFloat(0x38), 1.0f);
  EXPECT_EQ(Float8E5M2ToFloat(0x7b), 57344.0f);
  EXPECT_EQ(Float8E5M2ToFloat(0x3c), 1.0f);
  EXPECT_TRUE(std::isinf(Float8E5M2ToFloat(0x7c)));
  EXPECT_EQ(FloatToFloat8E4M3(1.0f + 1.0f / 16), 0x38) << "halfway rounds to even (down)";
  EXPECT_EQ(FloatToFloat8E4M3(1.0f + 3.0f / 16), 0x3a) << "halfway rounds to even (up)";
  EXPECT_EQ(FloatToFloat8E4M3(1000.0f), 0x7f) << "past 448: NaN";
  EXPECT_EQ(FloatToFloat8E5M2(1e6f), 0x7c) << "past 57344: inf";
  EXPECT_EQ(FloatToFloat8E4M3(-0.0f), 0x80);
  EXPECT_EQ(FloatToFloat8E5M2(std::ldexp(1.0f, -17)), 0x00) << "half the smallest subnormal rounds to even: 0";
  EXPECT_EQ(FloatToFloat8E5M2(std::ldexp(3.0f, -17)), 0x02) << "1.5 subnormal units round to even: 2";
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
  for (DType t : kAllDTypes) {
    if (t == DType::kBool) continue;  // below: 0 or 1
    unsigned char buf[3 * 8] = {};
    for (size_t i = 0; i < 3; ++i) StoreValue(t, static_cast<double>(i * 6 + 2), buf, i);
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(LoadValue(t, buf, i), static_cast<double>(i * 6 + 2)) << DTypeName(t);
  }
  unsigned char b[3];
  for (size_t i = 0; i < 3; ++i) StoreValue(DType::kBool, static_cast<double>(i), b, i);
  EXPECT_EQ(b[0], 0);
  EXPECT_EQ(b[1], 1);
  EXPECT_EQ(b[2], 1) << "bool stores whether the value is not 0";
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
