// Which node each rank runs on: Slurm's counts, its step layouts, the
// distributions that rebuild them, and the task map.
#include "base/launch/step_layout.h"

#include <gtest/gtest.h>


namespace baton::launch {
namespace {

StepLayout Layout(std::vector<std::string> nodes, std::vector<std::vector<int>> tids) {
  StepLayout l;
  Status s = LayoutFromNodeTasks(std::move(nodes), tids, &l);
  EXPECT_TRUE(s.ok()) << s;
  return l;
}

TEST(TasksPerNode, ParsesSlurmsCompressedCounts) {
  std::vector<int> c;
  ASSERT_TRUE(ParseTasksPerNode("2(x3),1", &c).ok());
  EXPECT_EQ(c, (std::vector<int>{2, 2, 2, 1}));
  ASSERT_TRUE(ParseTasksPerNode("4", &c).ok());
  EXPECT_EQ(c, (std::vector<int>{4}));
  ASSERT_TRUE(ParseTasksPerNode("1,3(x2),2", &c).ok());
  EXPECT_EQ(c, (std::vector<int>{1, 3, 3, 2}));
}

TEST(TasksPerNode, RejectsMalformedNamingTheValue) {
  std::vector<int> c;
  for (const char* bad : {"", "2(x", "2(3)", "x", "2(x0)", "-1", "+1", " 1", "2,,1", "2(x3)junk", "99999999999"}) {
    Status s = ParseTasksPerNode(bad, &c);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << "'" << bad << "'";
    EXPECT_NE(s.message().find("'" + std::string(bad) + "'"), std::string::npos) << s;
  }
  EXPECT_FALSE(ParseTasksPerNode("1(x99999999)", &c).ok()) << "no allocation beyond reason";
  EXPECT_FALSE(ParseTasksPerNode("16777216(x1000)", &c).ok()) << "the tasks count, not only the nodes";
}

TEST(StepLayout, BlockCyclicPlaneAndArbitraryFromTaskIds) {
  // srun -N2 -n4 -m block / cyclic / plane=2 over 3 nodes / arbitrary.
  StepLayout block = Layout({"n1", "n2"}, {{0, 1}, {2, 3}});
  EXPECT_EQ(block.task_node, (std::vector<int>{0, 0, 1, 1}));
  StepLayout cyclic = Layout({"n1", "n2"}, {{0, 2}, {1, 3}});
  EXPECT_EQ(cyclic.task_node, (std::vector<int>{0, 1, 0, 1}));
  StepLayout plane = Layout({"a", "b", "c"}, {{0, 1, 6}, {2, 3}, {4, 5}});
  EXPECT_EQ(plane.task_node, (std::vector<int>{0, 0, 1, 1, 2, 2, 0}));
  StepLayout arbitrary = Layout({"n1", "n2", "n3"}, {{1}, {0, 3}, {2}});
  EXPECT_EQ(arbitrary.task_node, (std::vector<int>{1, 0, 2, 1}));
  EXPECT_EQ(arbitrary.TasksPerNode(), (std::vector<int>{1, 2, 1}));
}

TEST(StepLayout, MasterNodeIsWhereRankZeroRuns) {
  EXPECT_EQ(Layout({"n1", "n2"}, {{0, 1}, {2, 3}}).MasterNode(), 0);
  // srun -m arbitrary with SLURM_HOSTFILE "n3 n1 n1 n2 n3": rank 0 on n3.
  EXPECT_EQ(Layout({"n1", "n2", "n3"}, {{1, 2}, {3}, {0, 4}}).MasterNode(), 2);
}

TEST(StepLayout, RejectsDuplicateMissingOrOutOfRangeTaskIds) {
  StepLayout l;
  EXPECT_EQ(LayoutFromNodeTasks({"n1", "n2"}, {{0, 1}, {1}}, &l).code(), Code::kInvalidArgument);
  EXPECT_EQ(LayoutFromNodeTasks({"n1", "n2"}, {{0, 5}, {1}}, &l).code(), Code::kInvalidArgument);
  EXPECT_EQ(LayoutFromNodeTasks({"n1"}, {{0}, {1}}, &l).code(), Code::kInvalidArgument);
  Status s = LayoutFromNodeTasks({"n1", "n2"}, {{0, 1}, {1}}, &l);
  EXPECT_NE(s.message().find("appears on both n1 and n2"), std::string::npos) << s;
  // The one way Slurm's own layout repeats a task id, named with the way out.
  EXPECT_NE(s.message().find("inside an allocation that is not a heterogeneous job"), std::string::npos) << s;
}

// --- distributions: the few bytes that stand for a layout ------------------------

TEST(Distribution, NamesTheDistributionThatRebuildsTheLayout) {
  EXPECT_EQ(DistributionOf(Layout({"n1", "n2"}, {{0, 1}, {2, 3}})), "block");
  EXPECT_EQ(DistributionOf(Layout({"n1", "n2"}, {{0, 2}, {1, 3}})), "cyclic");
  // -N3 -n7 cyclic: the first node gets the seventh task.
  EXPECT_EQ(DistributionOf(Layout({"a", "b", "c"}, {{0, 3, 6}, {1, 4}, {2, 5}})), "cyclic");
  EXPECT_EQ(DistributionOf(Layout({"a", "b", "c"}, {{0, 1, 6}, {2, 3}, {4, 5}})), "plane=2");
  EXPECT_EQ(DistributionOf(Layout({"n1", "n2", "n3"}, {{1}, {0, 3}, {2}})), std::nullopt) << "arbitrary";
  // Cyclic up to the CPUs, then over-subscribed cyclic (Slurm's two rounds):
  // the counts {2,4} alone would rebuild another layout, so none is named.
  EXPECT_EQ(DistributionOf(Layout({"a", "b"}, {{0, 4}, {1, 2, 3, 5}})), std::nullopt);
}

TEST(Distribution, RebuildsEachNamedLayoutExactly) {
  const std::vector<std::vector<std::vector<int>>> cases = {
      {{0, 1, 2}, {3, 4}, {5, 6}},  // block, uneven
      {{0, 3, 6}, {1, 4}, {2, 5}},  // cyclic, uneven
      {{0, 1, 6}, {2, 3}, {4, 5}},  // plane=2
      {{0}, {1}, {2}},              // one task per node
  };
  for (const auto& tids : cases) {
    StepLayout truth = Layout({"a", "b", "c"}, tids);
    std::optional<std::string> d = DistributionOf(truth);
    ASSERT_TRUE(d.has_value());
    StepLayout rebuilt;
    ASSERT_TRUE(LayoutFromDistribution(truth.nodes, truth.TasksPerNode(), *d, &rebuilt).ok());
    EXPECT_EQ(rebuilt.task_node, truth.task_node) << *d;
  }
}

TEST(Distribution, BadNamesAreErrorsNamingThem) {
  StepLayout l;
  Status s = LayoutFromDistribution({"a"}, {2}, "arbitrary", &l);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("'arbitrary'"), std::string::npos) << s;
  EXPECT_FALSE(LayoutFromDistribution({"a"}, {2}, "plane=0", &l).ok());
  EXPECT_FALSE(LayoutFromDistribution({"a"}, {2}, "plane=x", &l).ok());
  EXPECT_FALSE(LayoutFromDistribution({"a", "b"}, {2}, "block", &l).ok()) << "2 nodes, 1 count";
}

// fuzz_layout (scripts/check --full, 2026-12-02): counts "0,0" were laid
// out as a step of no tasks, whose task map ("") DecodeTaskMap refuses.
TEST(Distribution, CountsOfNoTaskAtAllAreRefusedWhileSomeZerosAreFine) {
  StepLayout l;
  for (const char* d : {"block", "cyclic", "plane=2"}) {
    Status s = LayoutFromDistribution({"a", "b"}, {0, 0}, d, &l);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << d;
    EXPECT_NE(s.message().find("0 tasks"), std::string::npos) << s;
  }
  EXPECT_FALSE(LayoutFromCounts({}, {}, &l).ok()) << "no node, no count";
  ASSERT_TRUE(LayoutFromDistribution({"a", "b", "c"}, {0, 2, 0}, "cyclic", &l).ok());
  EXPECT_EQ(l.task_node, (std::vector<int>{1, 1}));
  std::vector<int> back;
  ASSERT_TRUE(DecodeTaskMap(EncodeTaskMap(l.task_node), l.num_nodes(), &back).ok());
  EXPECT_EQ(back, l.task_node);
}

// --- the task map ------------------------------------------------------------------

TEST(TaskMap, EncodesRunsAndRoundTrips) {
  EXPECT_EQ(EncodeTaskMap({0, 0, 1, 1}), "0*2,1*2");
  EXPECT_EQ(EncodeTaskMap({0, 1, 0, 1}), "0,1,0,1");
  for (std::vector<int> m : {std::vector<int>{0, 0, 0, 2, 1, 1}, std::vector<int>{2, 1, 0}}) {
    std::vector<int> back;
    ASSERT_TRUE(DecodeTaskMap(EncodeTaskMap(m), 3, &back).ok());
    EXPECT_EQ(back, m);
  }
}

TEST(TaskMap, RejectsEmptyNodesOutsideTheStepAndGarbage) {
  std::vector<int> m;
  Status s = DecodeTaskMap("", 3, &m);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("empty"), std::string::npos) << s;
  EXPECT_FALSE(DecodeTaskMap("0*2,3", 3, &m).ok());
  EXPECT_FALSE(DecodeTaskMap("0*0", 3, &m).ok());
  EXPECT_FALSE(DecodeTaskMap("a", 3, &m).ok());
  EXPECT_FALSE(DecodeTaskMap("-0", 3, &m).ok());
  EXPECT_FALSE(DecodeTaskMap("0*99999999999", 3, &m).ok());
  EXPECT_FALSE(DecodeTaskMap("0", 0, &m).ok()) << "no node at all";
}

}  // namespace
}  // namespace baton::launch
