// Heterogeneous steps and jobs as one world (issue 30 item 1): each
// component's layout from its own job, concatenated; slurmstepd's
// component-local node ids and task ids placed in the whole step; a plain
// step inside a heterogeneous batch job stays an ordinary step; components
// sharing a node refused. srun's hand-over of the whole step (item 3):
// one question per component in srun, none on the nodes. And the batch
// script's claimed MASTER_PORT (item 7).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/launch/hand_over.h"
#include "base/launch/het_step.h"
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
    if (it == steps.end()) return Status::NotFound("spank", "slurm_job_step_layout_get failed: Invalid job id");
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

// What srun's environment gives one component's tasks, without the
// component list that makes a heterogeneous step's hand-over whole.
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

// --- item 3: srun hands the whole step over; no node asks -----------------------------

// The hand-over as slurmstepd replays it (hand_over_options.cc) into the job's variables.
Env WithHandOver(Env env, const EnvList& vars) {
  Env options(vars.begin(), vars.end());
  AddHandOverFromOptions(options, &env);
  return env;
}

TEST(HetHandOver, SrunAsksOncePerComponentAndOnceForTheAddresses) {
  HetSlurm slurm;
  TwoComponents(&slurm);
  EnvList vars;
  // srun's local_user_init ran for component 6's launch (whichever thread came first).
  Status s = SrunHetHandOver({"5", "6"}, "6", 0, HostfileFormat::kDeepSpeed, slurm, &vars);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(slurm.asked, (std::vector<std::string>{"5.0", "6.0"}));
  EXPECT_EQ(slurm.address_calls, 1);
  EXPECT_EQ(slurm.gpu_calls, 0);  // components may hold different GPUs per node
  std::map<std::string, std::string> m(vars.begin(), vars.end());
  EXPECT_EQ(m[kHetComponentsVar], "5.0:5=1,6=2;n[1-3]");
  EXPECT_EQ(m[kMasterAddrVar], "5.0:addr-of-n1");
  EXPECT_EQ(m[kTaskMapVar], "5.0:cyclic");  // 0,1,2,1 over 1,2,1 tasks per node
  EXPECT_EQ(m[kNodeAddrsVar].rfind("5.0:", 0), 0u) << m[kNodeAddrsVar];
  for (const auto& [var, value] : vars) EXPECT_NE(HandOverOptionFor(var), nullptr) << var << " has no option";
}

TEST(HetHandOver, EverySlurmstepdPlacesItselfWithoutAskingAndAgreesWithTheQuestions) {
  HetSlurm slurm;
  TwoComponents(&slurm);
  EnvList vars;
  ASSERT_TRUE(SrunHetHandOver({"5", "6"}, "5", 0, HostfileFormat::kPlain, slurm, &vars).ok());
  // slurmstepd of component 0 on its node 0; of component 1 on its nodes 0 and 1;
  // a task of component 1 (the leader's job id, the step's node id).
  const std::vector<std::pair<std::string, std::string>> where = {{"5", "0"}, {"6", "0"}, {"6", "1"}, {"5", "2"}};
  for (const auto& [job, node] : where) {
    HetSlurm asked, alone;
    TwoComponents(&asked);
    TwoComponents(&alone);
    StepInfo handed, questioned;
    Status s = StepInfoFromEnvironment(WithHandOver(HetEnv(job, node), vars), asked, &handed);
    ASSERT_TRUE(s.ok()) << job << "/" << node << ": " << s;
    s = ResolveHostfileHosts(WithHandOver(HetEnv(job, node), vars), asked, &handed);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_TRUE(asked.asked.empty()) << job << "/" << node << " asked for a step layout";
    EXPECT_EQ(asked.address_calls, 0) << job << "/" << node << " asked for addresses";
    ASSERT_TRUE(StepInfoFromEnvironment(HetEnv(job, node), alone, &questioned).ok());
    ASSERT_TRUE(ResolveHostfileHosts(HetEnv(job, node), alone, &questioned).ok());
    EXPECT_EQ(handed.job_id, questioned.job_id);
    EXPECT_EQ(handed.layout.nodes, questioned.layout.nodes);
    EXPECT_EQ(handed.layout.task_node, questioned.layout.task_node);
    EXPECT_EQ(handed.node_index, questioned.node_index) << job << "/" << node;
    EXPECT_EQ(handed.component_first_rank, questioned.component_first_rank) << job << "/" << node;
    EXPECT_EQ(handed.master_addr, questioned.master_addr);
    EXPECT_EQ(handed.hosts, questioned.hosts);
    EXPECT_TRUE(handed.heterogeneous);
  }
}

TEST(HetHandOver, AStepOfOneComponentIsHandedOverAsThatComponentsOrdinaryStep) {
  // srun --het-group=1: job 5 holds no step 0 (Slurm answers "Invalid job id").
  HetSlurm slurm;
  slurm.steps["6"] = {{"n2", "n3"}, {{0, 2}, {1}}};
  EnvList vars;
  Status s = SrunHetHandOver({"5", "6"}, "6", 0, HostfileFormat::kPlain, slurm, &vars);
  ASSERT_TRUE(s.ok()) << s;
  std::map<std::string, std::string> m(vars.begin(), vars.end());
  EXPECT_EQ(m[kHetComponentsVar], "5.0:6=2;n[2-3]");
  EXPECT_EQ(m[kMasterAddrVar], "6.0:addr-of-n2");
  Env env = HetEnv("6", "1");
  env["SLURM_STEP_NODELIST"] = "n[2-3]";
  env["SLURM_STEP_NUM_NODES"] = "2";
  env["SLURM_STEP_TASKS_PER_NODE"] = "2,1";
  HetSlurm asked;
  StepInfo info;
  s = StepInfoFromEnvironment(WithHandOver(env, vars), asked, &info);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(asked.asked.empty());
  EXPECT_EQ(asked.address_calls, 0);
  EXPECT_FALSE(info.heterogeneous);
  EXPECT_EQ(info.job_id, "6");
  EXPECT_EQ(info.layout.task_node, (std::vector<int>{0, 1, 0}));
  EXPECT_EQ(*info.node_index, 1);
  EXPECT_EQ(info.master_addr, "addr-of-n2");
}

TEST(HetHandOver, SrunFailsOnAComponentItCouldNotAskAbout) {
  // Only "no such step" means "not in this step"; a controller that does
  // not answer fails srun, naming the component.
  class Failing : public HetSlurm {
    Status StepTasks(const std::string& job, long step, std::vector<std::string>* n,
                     std::vector<std::vector<int>>* t) override {
      if (job == "6") return Status::Unavailable("spank", "slurm_job_step_layout_get failed: timed out");
      return HetSlurm::StepTasks(job, step, n, t);
    }
  } slurm;
  TwoComponents(&slurm);
  EnvList vars;
  Status s = SrunHetHandOver({"5", "6"}, "5", 0, HostfileFormat::kPlain, slurm, &vars);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("component job 6"), std::string::npos) << s;
  HetSlurm missing;  // srun's own component without the step
  missing.steps["5"] = {{"n1"}, {{0}}};
  s = SrunHetHandOver({"5", "6"}, "6", 0, HostfileFormat::kPlain, missing, &vars);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("srun's job 6 has no step 0"), std::string::npos) << s;
}

TEST(HetHandOver, ComponentsOutOfSlurmsNodeOrderAreRefusedOnEveryNode) {
  // srun -w n3 A : -w n[1-2] B: Slurm sorts the step's node list (n[1-3]),
  // the components' order is n3,n1,n2; node ids would name other nodes.
  HetSlurm slurm;
  slurm.steps["5"] = {{"n3"}, {{0}}};
  slurm.steps["6"] = {{"n1", "n2"}, {{0}, {1}}};
  EnvList vars;
  ASSERT_TRUE(SrunHetHandOver({"5", "6"}, "5", 0, HostfileFormat::kPlain, slurm, &vars).ok());
  Env env = HetEnv("6", "0");
  env["SLURM_STEP_TASKS_PER_NODE"] = "1(x3)";
  StepInfo info;
  Status s = StepInfoFromEnvironment(WithHandOver(env, vars), slurm, &info);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("Slurm's node order"), std::string::npos) << s;
}

TEST(HetHandOver, AnUntrustworthyComponentListIsRefusedNamingIt) {
  HetSlurm slurm;
  StepInfo info;
  for (const char* bad : {"5.0:5=1,6=2", "5.0:5=1,6=x;n[1-3]", "5.0:5=1,6=1;n[1-3]", "5.0:5=1,7=2;n[1-3]"}) {
    Env env = HetEnv("5", "0");
    env[kHetComponentsVar] = bad;
    Status s = StepInfoFromEnvironment(env, slurm, &info);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.ToString().find(kHetComponentsVar), std::string::npos) << s;
  }
  // Another step's list is not this one's: the questions are asked.
  TwoComponents(&slurm);
  Env env = HetEnv("6", "1");
  env[kHetComponentsVar] = "5.1:5=1,6=2;n[1-3]";
  ASSERT_TRUE(StepInfoFromEnvironment(env, slurm, &info).ok());
  EXPECT_FALSE(slurm.asked.empty());
}

TEST(HetHandOver, PlaceComponentsFindsEachStartAndRefusesTasksOutOfOrder) {
  StepLayout layout;
  layout.nodes = {"n1", "n2", "n3"};
  layout.task_node = {0, 1, 2, 1};
  std::vector<int> first_node, first_task;
  ASSERT_TRUE(PlaceComponents(layout, {{"5", 1}, {"6", 2}}, &first_node, &first_task).ok());
  EXPECT_EQ(first_node, (std::vector<int>{0, 1}));
  EXPECT_EQ(first_task, (std::vector<int>{0, 1}));
  layout.task_node = {1, 0, 2, 1};  // task 1 (component 0) after task 0 (component 1)
  Status s = PlaceComponents(layout, {{"5", 1}, {"6", 2}}, &first_node, &first_task);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("not numbered in order"), std::string::npos) << s;
  layout.task_node = {1, 2, 1, 2};  // component 0 runs nothing
  EXPECT_FALSE(PlaceComponents(layout, {{"5", 1}, {"6", 2}}, &first_node, &first_task).ok());
  EXPECT_FALSE(PlaceComponents(layout, {{"5", 1}, {"6", 1}}, &first_node, &first_task).ok());
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
