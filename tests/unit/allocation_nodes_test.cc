// Which nodes of an allocation can run the next step
// (base/launch/allocation_nodes.h): every unusable state and flag is left
// out and named, --exclude, --count and --min, and the question through the
// deadline wrapper when the controller does not answer.
#include "base/launch/allocation_nodes.h"

#include <gtest/gtest.h>

#include <chrono>

#include "tests/unit/fake_slurm.h"

namespace baton::launch {
namespace {

Allocation Of(std::vector<NodeHealth> nodes) {
  Allocation a;
  a.job = 42;
  a.nodes = std::move(nodes);
  return a;
}

TEST(AllocationNodes, AllocatedAndMixedNodesAreUsableInSlurmsOrder) {
  std::vector<std::string> nodes, out;
  ASSERT_TRUE(ChooseStepNodes(Of({{"n3", kNodeAllocated, ""}, {"n1", kNodeMixed, ""}, {"n2", kNodeIdle, ""}}), {},
                              &nodes, &out)
                  .ok());
  EXPECT_EQ(nodes, (std::vector<std::string>{"n3", "n1", "n2"}));
  EXPECT_TRUE(out.empty());
}

TEST(AllocationNodes, EveryUnusableStateIsLeftOutAndNamed) {
  struct Case {
    uint32_t state;
    const char* why;
  } cases[] = {
      {kNodeDown, "DOWN"},
      {kNodeUnknown, "UNKNOWN"},
      {kNodeAllocated | kNodeDrainFlag, "DRAIN"},
      {kNodeAllocated | kNodeFailFlag, "FAIL"},
      {kNodeAllocated | kNodeNoRespondFlag, "NOT_RESPONDING"},
      {kNodeDown | kNodeNoRespondFlag, "DOWN+NOT_RESPONDING"},
      {kNodeIdle | kNodePoweredDownFlag, "POWERED_DOWN"},
      {kNodeAllocated | kNodeRebootIssuedFlag, "REBOOTING"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> nodes, out;
    ASSERT_TRUE(ChooseStepNodes(Of({{"n1", kNodeAllocated, ""}, {"n2", c.state, ""}}), {}, &nodes, &out).ok());
    EXPECT_EQ(nodes, std::vector<std::string>{"n1"}) << c.why;
    EXPECT_EQ(out, std::vector<std::string>{std::string("n2 (") + c.why + ")"});
  }
}

TEST(AllocationNodes, TheNodesReasonIsShown) {
  EXPECT_EQ(Unusable({"n2", kNodeDown, "Not responding"}), "DOWN: Not responding");
  EXPECT_EQ(Unusable({"n2", kNodeAllocated, "ignored while usable"}), "");
}

TEST(AllocationNodes, CountTakesTheFirstUsableAndExcludeLeavesOut) {
  std::vector<std::string> nodes, out;
  StepNodeRequest r;
  r.count = 2;
  r.exclude = {"n1"};
  ASSERT_TRUE(ChooseStepNodes(Of({{"n1", kNodeAllocated, ""},
                                  {"n2", kNodeDown, ""},
                                  {"n3", kNodeAllocated, ""},
                                  {"n4", kNodeAllocated, ""},
                                  {"n5", kNodeAllocated, ""}}),
                              r, &nodes, &out)
                  .ok());
  EXPECT_EQ(nodes, (std::vector<std::string>{"n3", "n4"}));
  EXPECT_EQ(out, (std::vector<std::string>{"n1 (excluded)", "n2 (DOWN)"}));
}

TEST(AllocationNodes, FewerThanCountFailsNamingTheJobAndEachNodeLeftOut) {
  std::vector<std::string> nodes, out;
  StepNodeRequest r;
  r.count = 3;
  Status s = ChooseStepNodes(Of({{"n1", kNodeAllocated, ""}, {"n2", kNodeDown, "Kill task failed"}, {"n4", kNodeAllocated, ""}}),
                             r, &nodes, &out);
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_NE(s.message().find("job 42 has 2 node(s) that can run a step, fewer than the 3 asked for"),
            std::string::npos)
      << s;
  EXPECT_NE(s.message().find("n2 (DOWN: Kill task failed)"), std::string::npos) << s;
  EXPECT_TRUE(nodes.empty());
}

TEST(AllocationNodes, MinLetsAStepShrink) {
  std::vector<std::string> nodes, out;
  StepNodeRequest r;
  r.count = 3;
  r.min = 2;
  const Allocation a = Of({{"n1", kNodeAllocated, ""}, {"n2", kNodeDown, ""}, {"n3", kNodeAllocated, ""}});
  ASSERT_TRUE(ChooseStepNodes(a, r, &nodes, &out).ok());
  EXPECT_EQ(nodes, (std::vector<std::string>{"n1", "n3"}));
  r.min = 3;
  EXPECT_EQ(ChooseStepNodes(a, r, &nodes, &out).code(), Code::kUnavailable);
  r.min = 4;
  Status s = ChooseStepNodes(a, r, &nodes, &out);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("--min 4 is more than --count 3"), std::string::npos) << s;
}

TEST(AllocationNodes, AnAllocationOfNoNodesSaysSo) {
  std::vector<std::string> nodes, out;
  Status s = ChooseStepNodes(Of({}), {}, &nodes, &out);
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_NE(s.message().find("the controller lists no node for it"), std::string::npos) << s;
}

TEST(AllocationNodes, ASilentControllerIsATimeoutNamingTheQuestion) {
  FakeSlurm fake;
  fake.HangQuestions();
  auto bounded = WithDeadline(fake, std::chrono::milliseconds(50), "test");
  Allocation a;
  Status s = bounded->AllocationNodes(7, &a);
  fake.Release();
  EXPECT_EQ(s.code(), Code::kTimeout);
  EXPECT_NE(s.message().find("the nodes of job 7"), std::string::npos) << s;
}

TEST(AllocationNodes, AFailedAnswerIsAnnotatedWithTheQuestion) {
  FakeSlurm fake;
  fake.allocation_failure = Status::Unavailable("spank", "slurm_load_job failed: Invalid job id specified");
  auto bounded = WithDeadline(fake, std::chrono::seconds(5), "test");
  Allocation a;
  Status s = bounded->AllocationNodes(7, &a);
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_NE(s.ToString().find("Invalid job id"), std::string::npos) << s;
  EXPECT_NE(s.ToString().find("the nodes of job 7"), std::string::npos) << s;
}

}  // namespace
}  // namespace baton::launch
