// Hostlists expanded by libslurm itself (the same functions the plugin
// takes from srun and slurmstepd); no cluster needed.
#include <gtest/gtest.h>

#include "base/launch/slurm_facts.h"

namespace baton::launch {
namespace {

TEST(LibslurmHostlist, ExpandsRangesAndSeveralPrefixes) {
  std::vector<std::string> hosts;
  ASSERT_TRUE(Libslurm().ExpandHostlist("n[1-3,7],gpu-[01-04]", 8, &hosts).ok());
  EXPECT_EQ(hosts, (std::vector<std::string>{"n1", "n2", "n3", "n7", "gpu-01", "gpu-02", "gpu-03", "gpu-04"}));
  ASSERT_TRUE(Libslurm().ExpandHostlist("single", 1, &hosts).ok());
  EXPECT_EQ(hosts, (std::vector<std::string>{"single"}));
}

TEST(LibslurmHostlist, MalformedIsAnErrorNamingIt) {
  std::vector<std::string> hosts;
  Status s = Libslurm().ExpandHostlist("n[3-1]", kMaxNodes, &hosts);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("'n[3-1]'"), std::string::npos) << s;
  EXPECT_FALSE(Libslurm().ExpandHostlist("n[1-99999999]", kMaxNodes, &hosts).ok()) << "too many hosts";
}

// Found by tests/fuzz/fuzz_layout: a range holding what is not a number
// (a letter, a control character). libslurm refuses it (and leaks the
// range's text, a few bytes: tests/fuzz/lsan.supp); baton names the list.
TEST(LibslurmHostlist, AMalformedRangeIsRefusedNamingIt) {
  for (const std::string& list : std::vector<std::string>{"n[a]", "n[1-x]", "gpu-[1-2]-[\x10" "1-03]", "n[01-0x]"}) {
    std::vector<std::string> hosts;
    Status s = Libslurm().ExpandHostlist(list, kMaxNodes, &hosts);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << list << ": " << s;
    EXPECT_NE(s.message().find("host list"), std::string::npos) << s;
    EXPECT_TRUE(hosts.empty()) << list;
  }
}

TEST(LibslurmHostlist, CountsBeforeExpanding) {
  std::vector<std::string> hosts;
  Status s = Libslurm().ExpandHostlist("n[1-3]", 2, &hosts);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("names 3 hosts, more than the 2 it can hold"), std::string::npos) << s;
  EXPECT_TRUE(hosts.empty());
}

TEST(LibslurmHostlist, CompressesAddressesKeepingTheirOrder) {
  std::string list;
  ASSERT_TRUE(Libslurm().CompressHostlist({"10.0.0.12", "10.0.0.13", "10.0.0.11"}, &list).ok());
  std::vector<std::string> back;
  ASSERT_TRUE(Libslurm().ExpandHostlist(list, 3, &back).ok());
  EXPECT_EQ(back, (std::vector<std::string>{"10.0.0.12", "10.0.0.13", "10.0.0.11"})) << list;
}

// fuzz_layout (2026-12-02): libslurm reads a name's trailing digits as an
// unsigned long, so a name whose number passes 2^64 came back from the
// compressed list as another name. Compressing now refuses it, naming it.
TEST(LibslurmHostlist, ANameLibslurmCannotHoldIsRefusedNotHandedOverChanged) {
  const std::string big = "node33333333333333333333333001";
  std::string list = "left over";
  Status s = Libslurm().CompressHostlist({big, "node33333333333333333333333002"}, &list);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("'" + big + "'"), std::string::npos) << s;
  EXPECT_EQ(list, "");
  ASSERT_TRUE(Libslurm().CompressHostlist({"node001", "node002", "node003"}, &list).ok());
  EXPECT_EQ(list, "node[001-003]");
}

}  // namespace
}  // namespace baton::launch
