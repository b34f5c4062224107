// base/straggler_report.h: who is slower than the median by the threshold.
#include "base/straggler_report.h"

#include <gtest/gtest.h>

namespace baton {
namespace {

TEST(FindStragglers, SlowerThanMedianByMoreThanThreshold) {
  StragglerReport r = FindStragglers(99, {1.0, 1.1, 1.19, 1.21, 2.0}, 0.2);
  EXPECT_EQ(r.step, 99);
  EXPECT_DOUBLE_EQ(r.median_seconds, 1.19);
  // limit 1.19 * 1.2 = 1.428: only rank 4
  EXPECT_EQ(r.stragglers, std::vector<int>{4});
}

TEST(FindStragglers, SlowestFirstAndEvenCounts) {
  StragglerReport r = FindStragglers(0, {1.0, 3.0, 1.0, 2.0}, 0.2);
  EXPECT_DOUBLE_EQ(r.median_seconds, 1.5);  // mean of the middle two
  EXPECT_EQ(r.stragglers, (std::vector<int>{1, 3}));
}

TEST(FindStragglers, NobodyWhenEven) {
  EXPECT_TRUE(FindStragglers(0, {1.0, 1.0, 1.0}, 0.2).stragglers.empty());
  EXPECT_TRUE(FindStragglers(0, {}, 0.2).stragglers.empty());
  EXPECT_TRUE(FindStragglers(0, {0.5}, 0.2).stragglers.empty());
}

}  // namespace
}  // namespace baton
