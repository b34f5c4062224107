// Heterogeneous steps and jobs as one world (issue 30 item 1): each
// component's layout from its own job, concatenated; slurmstepd's
// component-local node ids and task ids placed in the whole step; a plain
// step inside a heterogeneous batch job stays an ordinary step; components
// sharing a node refused. And the batch script's claimed MASTER_PORT
// (item 7).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/launch/port_claim.h"
#include "base/launch/slurm_facts.h"
#include "tests/unit/fake_slurm.h"

namespace baton::launch {
namespace {

// Answers StepTasks per job: each component of a heterogeneous job is its
// own job to Slurm.
class HetSlurm : public FakeSlurm {
 public:
  std::map<std::string, std::pair<std::vector<std::string>, std::vector<std::vector<int>>>> steps;
  std::vector<std::string> asked;
  Status StepTasks(const std::string& job, long step, std::vector<std::string>* n,
                   std::vector<std::vector<int>>* t) override {
    asked.push_back(job + "." + std::to_string(step));
    auto it = steps.find(job);
    if (it == steps.end()) return Status::Unavailable("spank", "slurm_job_step_layout_get failed: Invalid job id");
    *n = it->second.first;
    *t = it->second.second;
    return Status::OK();
  }
};

// srun -N1 -n1 A : -N2 -n3 -m cyclic B, jobs 5 and 6, as slurmstepd of
// component `job` on its node `node` sees it (or a task, with the leader's
// job id and the global node id).
Env HetEnv(const std::string& job, const std::string& node) {
  return {{"SLURM_JOB_ID", job},          {"SLURM_STEP_ID", "0"},
          {"SLURM_STEP_NODELIST", "n[1-3]"}, {"SLURM_STEP_NUM_NODES", "3"},
          {"SLURM_NODEID", node},         {"SLURM_STEP_TASKS_PER_NODE", "1,2,1"},
          {"SLURM_HET_SIZE", "2"},        {"SLURM_JOB_ID_PACK_GROUP_0", "5"},
          {"SLURM_JOB_ID_PACK_GROUP_1", "6"}};
}

void TwoComponents(HetSlurm* slurm) {
  slurm->steps["5"] = {{"n1"}, {{0}}};
  slurm->steps["6"] = {{"n2", "n3"}, {{0, 2}, {1}}};
}

TEST(HetStep, SlurmstepdOfTheSecondComponentPlacesItsNodeAndRanks) {
  HetSlurm slurm;
  TwoComponents(&slurm);
  StepInfo info;
  Status s = StepInfoFromEnvironment(HetEnv("6", "1"), slurm, &info);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(info.heterogeneous);
  EXPECT_EQ(info.job_id, "5");
  EXPECT_EQ(info.layout.nodes, (std::vector<std::string>{"n1", "n2", "n3"}));
  EXPECT_EQ(info.layout.task_node, (std::vector<int>{0, 1, 2, 1}));
  EXPECT_EQ(*info.node_index, 2);  // its node 1 is the step's node 2
  EXPECT_EQ(info.component_first_rank, 1);
  EXPECT_EQ(info.master_addr, "addr-of-n1");
}

TEST(HetStep, ATaskSeesTheLeadersJobAndGlobalIds) {
  HetSlurm slurm;
  TwoComponents(&slurm);
  Env env = HetEnv("5", "1");
  env["SLURM_PROCID"] = "3";
  env["SLURM_LOCALID"] = "1";
  StepInfo info;
  Status s = StepInfoFromEnvironment(env, slurm, &info);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(*info.node_index, 1);
  EXPECT_EQ(*info.rank, 3);
  EnvList out;
  ASSERT_TRUE(DeriveLaunchEnv(info, {}, PluginConfig{}, &out).ok());
  std::map<std::string, std::string> m(out.begin(), out.end());
  EXPECT_EQ(m["WORLD_SIZE"], "4");
  EXPECT_EQ(m["RANK"], "3");
  EXPECT_EQ(m["NODE_RANK"], "1");
  EXPECT_EQ(m["LOCAL_WORLD_SIZE"], "2");
  EXPECT_EQ(m["BATON_NNODES"], "3");
}

TEST(HetStep, TheHandOverOfTheFirstComponentIsNotTrusted) {
  HetSlurm slurm;
  TwoComponents(&slurm);
  Env env = HetEnv("5", "0");
  env["BATON_STEP_TASK_MAP"] = "5.0:block";
  env["BATON_STEP_MASTER_ADDR"] = "5.0:wrong";
  StepInfo info;
  ASSERT_TRUE(StepInfoFromEnvironment(env, slurm, &info).ok());
  EXPECT_EQ(info.layout.task_node, (std::vector<int>{0, 1, 2, 1}));
  EXPECT_EQ(info.master_addr, "addr-of-n1");
}

TEST(HetStep, APlainStepInsideAHeterogeneousBatchJobIsOrdinary) {
  HetSlurm slurm;
  TwoComponents(&slurm);
  slurm.steps["5"] = {{"n1"}, {{0}}};
  Env env = HetEnv("5", "0");
  env["SLURM_STEP_NODELIST"] = "n1";
  env["SLURM_STEP_NUM_NODES"] = "1";
  env["SLURM_STEP_TASKS_PER_NODE"] = "1";
  StepInfo info;
  Status s = StepInfoFromEnvironment(env, slurm, &info);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_FALSE(info.heterogeneous);
  EXPECT_EQ(info.layout.num_tasks(), 1);
  EXPECT_EQ(slurm.asked, (std::vector<std::string>{"5.0"}));  // component 1 never asked
}

TEST(HetStep, AStepOfTheSecondComponentAloneIsThatComponentsOrdinaryStep) {
  // srun --het-group=1 inside the batch script: the tasks carry the
  // leader's SLURM_JOB_ID (5); the step is job 6's.
  HetSlurm slurm;
  slurm.steps["6"] = {{"n2", "n3"}, {{0, 2}, {1}}};
  Env env = HetEnv("5", "1");
  env["SLURM_STEP_NODELIST"] = "n[2-3]";
  env["SLURM_STEP_NUM_NODES"] = "2";
  env["SLURM_STEP_TASKS_PER_NODE"] = "2,1";
  env["SLURM_PROCID"] = "1";
  StepInfo info;
  Status s = StepInfoFromEnvironment(env, slurm, &info);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_FALSE(info.heterogeneous);
  EXPECT_EQ(info.job_id, "6");
  EXPECT_EQ(info.layout.task_node, (std::vector<int>{0, 1, 0}));
  EXPECT_EQ(*info.node_index, 1);
}

TEST(HetStep, ComponentsSharingANodeAreRefusedNamingWhy) {
  HetSlurm slurm;
  slurm.steps["5"] = {{"n1"}, {{0}}};
  slurm.steps["6"] = {{"n1", "n2"}, {{0}, {1}}};
  Env env = HetEnv("5", "0");  // component 0: its layout is not the whole step
  env["SLURM_STEP_NODELIST"] = "n[1-2]";
  env["SLURM_STEP_NUM_NODES"] = "2";
  env["SLURM_STEP_TASKS_PER_NODE"] = "2,1";
  StepInfo info;
  Status s = StepInfoFromEnvironment(env, slurm, &info);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("components on distinct nodes"), std::string::npos) << s;
}

TEST(HetJob, TheBatchScriptsAllocationHoldsEveryComponent) {
  FakeSlurm slurm;
  Env env = {{"SLURM_JOB_ID", "11"},
             {"SLURM_NODEID", "0"},
             {"SLURM_JOB_NODELIST", "n1"},
             {"SLURM_JOB_NUM_NODES", "1"},
             {"SLURM_TASKS_PER_NODE", "1"},
             {"SLURM_HET_SIZE", "2"},
             {"SLURM_JOB_ID_HET_GROUP_0", "11"},
             {"SLURM_JOB_ID_HET_GROUP_1", "12"},
             {"SLURM_JOB_NODELIST_HET_GROUP_0", "n1"},
             {"SLURM_JOB_NODELIST_HET_GROUP_1", "n[3-4]"},
             {"SLURM_JOB_NUM_NODES_HET_GROUP_0", "1"},
             {"SLURM_JOB_NUM_NODES_HET_GROUP_1", "2"},
             {"SLURM_TASKS_PER_NODE_HET_GROUP_0", "1"},
             {"SLURM_TASKS_PER_NODE_HET_GROUP_1", "2(x2)"}};
  StepInfo info;
  Status s = StepInfoFromEnvironment(env, slurm, &info);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(info.layout.nodes, (std::vector<std::string>{"n1", "n3", "n4"}));
  EXPECT_EQ(info.layout.TasksPerNode(), (std::vector<int>{1, 2, 2}));
  EXPECT_EQ(FormatHostfile(HostfileFormat::kOpenMpi, info), "n1 slots=1\nn3 slots=2\nn4 slots=2\n");
}

// --- item 7: the batch script's port, claimed on its node -----------------------------

TEST(ClaimPort, TwoHoldersNeverShareAPortAndAReleasedOneIsFree) {
  if (geteuid() != 0) GTEST_SKIP() << "SKIP: the claim directory must be root's (running as uid " << geteuid() << ")";
  char tmpl[] = "/tmp/baton-port-claim.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = std::string(tmpl) + "/ports";
  int a = 0, b = 0, fa = -1, fb = -1, fc = -1, c = 0;
  ASSERT_TRUE(ClaimPort(dir, 61000, 61001, 61001, &a, &fa).ok());
  ASSERT_TRUE(ClaimPort(dir, 61000, 61001, 61001, &b, &fb).ok());
  EXPECT_EQ(a, 61001);
  EXPECT_EQ(b, 61000);  // wrapped past the held one
  Status full = ClaimPort(dir, 61000, 61001, 61000, &c, &fc);
  EXPECT_EQ(full.code(), Code::kUnavailable) << full;
  EXPECT_NE(full.ToString().find("61000-61001"), std::string::npos) << full;
  ReleasePort(&fa);
  ASSERT_TRUE(ClaimPort(dir, 61000, 61001, 61000, &c, &fc).ok());
  EXPECT_EQ(c, 61001);
  ReleasePort(&fb);
  ReleasePort(&fc);
  EXPECT_EQ(system(("rm -rf " + std::string(tmpl)).c_str()), 0);
}

TEST(ClaimPort, ADirectoryOthersCanWriteIsRefused) {
  char tmpl[] = "/tmp/baton-port-claim.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  ASSERT_EQ(chmod(tmpl, 0777), 0);
  int port = 0, fd = -1;
  Status s = ClaimPort(tmpl, 61000, 61001, 61000, &port, &fd);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("only root can write"), std::string::npos) << s;
  EXPECT_EQ(fd, -1);
  rmdir(tmpl);
}

}  // namespace
}  // namespace baton::launch
