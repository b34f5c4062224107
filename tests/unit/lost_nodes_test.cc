// Which of a step's nodes Slurm no longer lets run a step
// (base/launch/lost_nodes.h), as `baton run` and `baton step-end` ask it:
// through a fake controller, with its failures, and without asking libslurm
// at all when SLURM_CONF names no file.
#include "base/launch/lost_nodes.h"

#include <gtest/gtest.h>

#include "tests/unit/fake_slurm.h"

namespace baton::launch {
namespace {

TEST(LostNodes, ADeadNodeAndOneThatLeftTheAllocationAreNamedInTheStepsOrder) {
  FakeSlurm slurm;
  slurm.allocation.nodes = {{"n1", kNodeAllocated, ""},
                            {"n3", kNodeDown | kNodeNoRespondFlag, "Not responding"},
                            {"n4", kNodeIdle, ""}};
  std::vector<LostNode> lost;
  ASSERT_TRUE(AskLostNodes(slurm, "", "run", 42, {"n3", "n1", "n2"}, &lost).ok());
  EXPECT_EQ(slurm.allocation_calls, 1);
  EXPECT_EQ(lost, (std::vector<LostNode>{{"n3", "DOWN+NOT_RESPONDING: Not responding"},
                                         {"n2", "left the allocation"}}));
}

TEST(LostNodes, AHealthyStepLostNothing) {
  FakeSlurm slurm;
  slurm.allocation.nodes = {{"n1", kNodeAllocated, ""}, {"n2", kNodeMixed, ""}};
  std::vector<LostNode> lost = {{"stale", "from before"}};
  ASSERT_TRUE(AskLostNodes(slurm, "/dev/null", "run", 42, {"n1", "n2"}, &lost).ok());  // a file: asked
  EXPECT_EQ(slurm.allocation_calls, 1);
  EXPECT_TRUE(lost.empty());
}

TEST(LostNodes, ASlurmConfThatNamesNoFileIsNamedAndSlurmIsNotAsked) {
  FakeSlurm slurm;
  std::vector<LostNode> lost = {{"stale", "from before"}};
  const Status s = AskLostNodes(slurm, "/nonexistent/slurm.conf", "step-end", 42, {"n1"}, &lost);
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_EQ(s.component(), "step-end");
  EXPECT_EQ(s.message(), "SLURM_CONF='/nonexistent/slurm.conf' names no file");
  EXPECT_EQ(slurm.allocation_calls, 0);
  EXPECT_TRUE(lost.empty());  // unknown, never "none lost" from an earlier answer
  EXPECT_TRUE(SlurmConfPresent("", "run").ok());
  EXPECT_TRUE(SlurmConfPresent("/dev/null", "run").ok());
}

TEST(LostNodes, AControllerThatDoesNotAnswerIsItsStatusNotAnEmptyList) {
  FakeSlurm slurm;
  slurm.allocation_failure = Status::Timeout("run", "the controller must answer for baton run");
  std::vector<LostNode> lost = {{"stale", "from before"}};
  const Status s = AskLostNodes(slurm, "", "run", 42, {"n1"}, &lost);
  EXPECT_EQ(s.code(), Code::kTimeout);
  EXPECT_EQ(s.message(), "the controller must answer for baton run");
  EXPECT_TRUE(lost.empty());
}

}  // namespace
}  // namespace baton::launch
