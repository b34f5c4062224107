// Algorithm auto's online measurement (mpi_runtime/mpi/online_tuner.h),
// without MPI: the rotation of candidates, when a size class asks for
// agreement, the decision rule, and that classes are apart.
#include "mpi_runtime/mpi/online_tuner.h"

#include <gtest/gtest.h>

#include <vector>

namespace baton::mpi {
namespace {

const std::vector<TunedAlgo> kAll{TunedAlgo::kNative, TunedAlgo::kHierarchical, TunedAlgo::kRing};

// Runs the class of `bytes` to its decision with per-candidate times.
TunedAlgo Explore(OnlineTuner* t, size_t bytes, double native, double hier, double ring) {
  for (int k = 0;; ++k) {
    bool measure = false;
    const TunedAlgo a = t->Next(bytes, &measure);
    EXPECT_TRUE(measure);
    const double s = a == TunedAlgo::kNative ? native : a == TunedAlgo::kHierarchical ? hier : ring;
    if (t->Record(bytes, s)) return t->Decide(bytes, t->Medians(bytes));
    EXPECT_LT(k, 100) << "never asked for agreement";
    if (k >= 100) return TunedAlgo::kNative;
  }
}

TEST(OnlineTuner, RotatesCandidatesThenAsksForAgreementOnce) {
  OnlineTuner t(kAll, 2);
  std::vector<TunedAlgo> seen;
  for (int k = 0; k < 6; ++k) {
    bool measure = false;
    seen.push_back(t.Next(1000, &measure));
    ASSERT_TRUE(measure);
    EXPECT_FALSE(t.IsDecided(1000));
    EXPECT_EQ(t.Record(1000, 1.0), k == 5) << "agreement after n x samples calls, not before, at call " << k;
  }
  EXPECT_EQ(seen, (std::vector<TunedAlgo>{TunedAlgo::kNative, TunedAlgo::kHierarchical, TunedAlgo::kRing,
                                           TunedAlgo::kNative, TunedAlgo::kHierarchical, TunedAlgo::kRing}));
  EXPECT_EQ(t.Decide(1000, t.Medians(1000)), TunedAlgo::kNative) << "a tie keeps native";
  bool measure = true;
  EXPECT_EQ(t.Next(1000, &measure), TunedAlgo::kNative);
  EXPECT_FALSE(measure) << "a decided class is not measured again";
  EXPECT_FALSE(t.Record(1000, 5.0));
}

TEST(OnlineTuner, PicksTheClearWinnerAndKeepsNativeWithinTheMargin) {
  OnlineTuner a(kAll, 3);
  EXPECT_EQ(Explore(&a, 64, 100, 80, 300), TunedAlgo::kHierarchical);
  OnlineTuner b(kAll, 3);
  EXPECT_EQ(Explore(&b, 64, 100, 300, 60), TunedAlgo::kRing);
  OnlineTuner c(kAll, 3);
  EXPECT_EQ(Explore(&c, 64, 100, 97, 96), TunedAlgo::kNative) << "4 % is within the noise margin";
}

TEST(OnlineTuner, MediansIgnoreOneOutlierPerCandidate) {
  OnlineTuner t({TunedAlgo::kNative, TunedAlgo::kRing}, 3);
  const double native[] = {100, 5000, 100}, ring[] = {50, 50, 50};
  for (int k = 0; k < 6; ++k) {
    bool measure = false;
    const TunedAlgo a = t.Next(4096, &measure);
    t.Record(4096, a == TunedAlgo::kNative ? native[k / 2] : ring[k / 2]);
  }
  const std::vector<double> m = t.Medians(4096);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0], 100);
  EXPECT_EQ(m[1], 50);
}

TEST(OnlineTuner, DecidesFromTheAgreedTimesNotItsOwn) {
  // This rank saw ring fastest; the slowest rank's medians (the agreed
  // MAX) say native: every rank must follow the agreed figures.
  OnlineTuner t(kAll, 1);
  for (int k = 0; k < 3; ++k) {
    bool measure = false;
    const TunedAlgo a = t.Next(8, &measure);
    t.Record(8, a == TunedAlgo::kRing ? 1.0 : 9.0);
  }
  EXPECT_EQ(t.Decide(8, {10.0, 12.0, 11.0}), TunedAlgo::kNative);
  EXPECT_EQ(t.Decided(8), TunedAlgo::kNative);
}

TEST(OnlineTuner, SizeClassesArePowersOfTwoAndIndependent) {
  EXPECT_EQ(OnlineTuner::ClassOf(0), 0);
  EXPECT_EQ(OnlineTuner::ClassOf(1), 0);
  EXPECT_EQ(OnlineTuner::ClassOf(8), 3);
  EXPECT_EQ(OnlineTuner::ClassOf(15), 3);
  EXPECT_EQ(OnlineTuner::ClassOf(16), 4);
  EXPECT_EQ(OnlineTuner::ClassOf(~size_t{0}), 63);
  OnlineTuner t(kAll, 1);
  EXPECT_EQ(Explore(&t, 1 << 20, 100, 300, 50), TunedAlgo::kRing);
  EXPECT_TRUE(t.IsDecided((1 << 21) - 1)) << "same class";
  EXPECT_FALSE(t.IsDecided(1 << 21));
  EXPECT_EQ(t.Decided(1 << 21), TunedAlgo::kNative) << "undecided classes run native (non-blocking calls)";
  EXPECT_EQ(Explore(&t, 1 << 21, 100, 300, 500), TunedAlgo::kNative);
  EXPECT_EQ(t.Decided(1 << 20), TunedAlgo::kRing);
}

TEST(OnlineTuner, NativeIsAlwaysTheFirstCandidate) {
  OnlineTuner t({TunedAlgo::kRing}, 1);
  ASSERT_EQ(t.candidates().size(), 2u);
  EXPECT_EQ(t.candidates()[0], TunedAlgo::kNative);
  OnlineTuner alone({TunedAlgo::kNative}, 4);
  bool measure = true;
  EXPECT_EQ(alone.Next(100, &measure), TunedAlgo::kNative);
  EXPECT_FALSE(measure) << "one candidate: nothing to measure";
}

// A decision kept from an earlier run (BATON_AUTO_FILE) decides its class
// at once, even halfway through a measurement, and only that class.
TEST(OnlineTuner, PresetDecidesItsClassWithoutMeasuring) {
  OnlineTuner t(kAll, 2);
  bool measure = false;
  t.Next(1000, &measure);
  ASSERT_FALSE(t.Record(1000, 1.0));
  t.Preset(512, TunedAlgo::kRing);  // the same class as 1000 (512..1023)
  EXPECT_TRUE(t.IsDecided(1000));
  EXPECT_EQ(t.Next(1000, &measure), TunedAlgo::kRing);
  EXPECT_FALSE(measure);
  EXPECT_FALSE(t.Record(1000, 1.0)) << "a preset class takes no samples";
  EXPECT_FALSE(t.IsDecided(2048));
  t.Next(2048, &measure);
  EXPECT_TRUE(measure) << "another class is measured";
}

}  // namespace
}  // namespace baton::mpi
