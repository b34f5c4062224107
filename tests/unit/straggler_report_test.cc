// base/straggler_report.h: who is slower than the median by the threshold.
#include "base/straggler_report.h"

#include <gtest/gtest.h>

namespace baton {
namespace {

TEST(FindStragglers, SlowerThanMedianByMoreThanThreshold) {
  StragglerReport r = FindStragglers(99, {1.0, 1.1, 1.19, 1.21, 2.0}, 0.2, 0.005);
  EXPECT_EQ(r.step, 99);
  EXPECT_DOUBLE_EQ(r.median_seconds, 1.19);
  // limit 1.19 * 1.2 = 1.428: only rank 4
  EXPECT_EQ(r.stragglers, std::vector<int>{4});
}

TEST(FindStragglers, SlowestFirstAndEvenCounts) {
  StragglerReport r = FindStragglers(0, {1.0, 3.0, 1.0, 2.0}, 0.2, 0.005);
  EXPECT_DOUBLE_EQ(r.median_seconds, 1.5);  // mean of the middle two
  EXPECT_EQ(r.stragglers, (std::vector<int>{1, 3}));
}

TEST(FindStragglers, NobodyWhenEven) {
  EXPECT_TRUE(FindStragglers(0, {1.0, 1.0, 1.0}, 0.2, 0.005).stragglers.empty());
  EXPECT_TRUE(FindStragglers(0, {}, 0.2, 0.005).stragglers.empty());
  EXPECT_TRUE(FindStragglers(0, {0.5}, 0.2, 0.005).stragglers.empty());
}

// Issue 14, item 11: a rank 20 us slower than the median at 40 us per
// step is 50 % slower, but nothing anyone can act on; the floor keeps it
// out. The same proportion at 40 ms per step is reported.
TEST(FindStragglers, AnAbsoluteFloorKeepsMicrosecondsOut) {
  StragglerReport fast = FindStragglers(0, {40e-6, 40e-6, 60e-6}, 0.2, 0.005);
  EXPECT_TRUE(fast.stragglers.empty()) << "20 us behind";
  EXPECT_DOUBLE_EQ(fast.min_seconds, 0.005);
  EXPECT_EQ(FindStragglers(0, {40e-3, 40e-3, 60e-3}, 0.2, 0.005).stragglers, std::vector<int>{2});
  // Both rules hold: 6 ms behind at 1 s per step is under the threshold.
  EXPECT_TRUE(FindStragglers(0, {1.0, 1.0, 1.006}, 0.2, 0.005).stragglers.empty());
  // A tiny floor leaves the threshold alone.
  EXPECT_EQ(FindStragglers(0, {40e-6, 40e-6, 60e-6}, 0.2, 1e-9).stragglers, std::vector<int>{2});
}

}  // namespace
}  // namespace baton
