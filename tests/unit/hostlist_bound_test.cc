// The count of a host list's hosts made from its text, before libslurm
// builds them (base/launch/hostlist_bound.h).
#include "base/launch/hostlist_bound.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "base/launch/slurm_queries.h"

namespace baton::launch {
namespace {

TEST(HostlistBound, ListsSlurmWritesPassAtTheirExactCount) {
  // n1, n2, n3, n7 and gpu-01..04: 8 hosts; one more group multiplies.
  EXPECT_TRUE(CheckHostlistBound("n[1-3,7],gpu-[01-04]", 8).ok());
  EXPECT_FALSE(CheckHostlistBound("n[1-3,7],gpu-[01-04]", 7).ok());
  EXPECT_TRUE(CheckHostlistBound("rack[1-2]-n[01-03]", 6).ok());
  EXPECT_FALSE(CheckHostlistBound("rack[1-2]-n[01-03]", 5).ok());
  EXPECT_TRUE(CheckHostlistBound("single", 1).ok());
  EXPECT_TRUE(CheckHostlistBound("10.0.0.[11-13]", 3).ok());
}

// fuzz_layout (2026-12-02): libslurm multiplies every bracket group of an
// entry, across ':' too, and builds all the hosts inside
// slurm_hostlist_create, before it can be asked how many there are. Four
// groups of 301 held it for minutes; now the list is refused from its
// text, naming it and the count, in no time.
TEST(HostlistBound, AListOfBillionsIsRefusedBeforeLibslurmBuildsIt) {
  const std::string list = "a[0-300][0-300]:b[0-300][0-300]";
  Status s = CheckHostlistBound(list, 4096);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("'" + list + "'"), std::string::npos) << s;
  EXPECT_NE(s.message().find("names 8208541201 hosts, more than the 4096"), std::string::npos) << s;

  std::vector<std::string> hosts;
  const auto start = std::chrono::steady_clock::now();
  s = Libslurm().ExpandHostlist(list, 4096, &hosts);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s;
  EXPECT_TRUE(hosts.empty());
  // Not a timing test: without the bound this call does not return for
  // minutes; a minute's slack is for a loaded machine.
  EXPECT_LT(seconds, 60.0);
  // The same product through ':' at a size that fits is what libslurm makes.
  ASSERT_TRUE(Libslurm().ExpandHostlist("a[0-2][0-1]:b[0-1][0-1]", 24, &hosts).ok());
  EXPECT_EQ(hosts.size(), 24u);
  EXPECT_FALSE(CheckHostlistBound("a[0-2][0-1]:b[0-1][0-1]", 23).ok());
}

TEST(HostlistBound, CountsPastTwoToTheSixtyFourSaturate) {
  Status s = CheckHostlistBound("n[0-18446744073709551615][0-9]", 4096);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("2^64 or more hosts"), std::string::npos) << s;
  s = CheckHostlistBound("n[0-18446744073709551616]", 4096);
  EXPECT_NE(s.message().find("is malformed: range '0-18446744073709551616'"), std::string::npos) << s;
}

TEST(HostlistBound, MalformedBracketsAreRefusedNamingWhatIsWrong) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"n[3-1]", "range '3-1' runs backwards"},
      {"n[]", "an empty range []"},
      {"n[1-2", "a '[' never closed"},
      {"n[0de[0-011008][0-10328]", "a '[' inside another"},
      {"n1]", "a ']' with no '[' before it"},
      {"n[a]", "range 'a' is not a number"},
      {"n[1-]", "range '1-' is not a number"},
      {"n[1,,2]", "range '' is not a number"},
      {"n[-1]", "range '-1' is not a number"},
      {"n[1-2-3]", "range '1-2-3' is not a number"},
  };
  for (const auto& [list, why] : cases) {
    Status s = CheckHostlistBound(list, 4096);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << list;
    EXPECT_NE(s.message().find("host list '" + list + "' is malformed: " + why), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace baton::launch
