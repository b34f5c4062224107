// The launch derivation shared by the SPANK plugin and `baton env`, tested
// without Slurm: hostlists go through a stand-in that knows a few fixed
// expansions, layouts are given as Slurm's step layout would give them.
#include "base/launch/launch_env.h"

#include <gtest/gtest.h>

#include <map>

#include "base/launch/slurm_facts.h"

namespace baton::launch {
namespace {

std::map<std::string, std::string> ToMap(const EnvList& env) {
  std::map<std::string, std::string> m;
  for (const auto& [k, v] : env) {
    EXPECT_EQ(m.count(k), 0u) << k << " set twice";
    m[k] = v;
  }
  return m;
}

StepLayout Layout(std::vector<std::string> nodes, std::vector<std::vector<int>> tids) {
  StepLayout l;
  Status s = LayoutFromNodeTasks(std::move(nodes), tids, &l);
  EXPECT_TRUE(s.ok()) << s;
  return l;
}

// --- tasks per node --------------------------------------------------------------

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
  for (const char* bad : {"", "2(x", "2(3)", "x", "2(x0)", "-1", "2,,1", "2(x3)junk", "99999999999"}) {
    Status s = ParseTasksPerNode(bad, &c);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << "'" << bad << "'";
    EXPECT_NE(s.message().find("'" + std::string(bad) + "'"), std::string::npos) << s;
  }
  EXPECT_FALSE(ParseTasksPerNode("1(x99999999)", &c).ok()) << "no allocation beyond reason";
  EXPECT_FALSE(ParseTasksPerNode("16777216(x1000)", &c).ok()) << "the tasks count, not only the nodes";
}

// --- layouts -------------------------------------------------------------------

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
  EXPECT_EQ(arbitrary.RanksOn(1), (std::vector<int>{0, 3}));
}

TEST(StepLayout, RejectsDuplicateMissingOrOutOfRangeTaskIds) {
  StepLayout l;
  EXPECT_EQ(LayoutFromNodeTasks({"n1", "n2"}, {{0, 1}, {1}}, &l).code(), Code::kInvalidArgument);
  EXPECT_EQ(LayoutFromNodeTasks({"n1", "n2"}, {{0, 5}, {1}}, &l).code(), Code::kInvalidArgument);
  EXPECT_EQ(LayoutFromNodeTasks({"n1"}, {{0}, {1}}, &l).code(), Code::kInvalidArgument);
  Status s = LayoutFromNodeTasks({"n1", "n2"}, {{0, 1}, {1}}, &l);
  EXPECT_NE(s.message().find("appears on both n1 and n2"), std::string::npos) << s;
}

TEST(TaskMap, EncodesRunsAndRoundTrips) {
  EXPECT_EQ(EncodeTaskMap({0, 0, 1, 1}), "0*2,1*2");
  EXPECT_EQ(EncodeTaskMap({0, 1, 0, 1}), "0,1,0,1");
  EXPECT_EQ(EncodeTaskMap({}), "");
  for (std::vector<int> m : {std::vector<int>{0, 0, 0, 2, 1, 1}, std::vector<int>{2, 1, 0}, std::vector<int>{}}) {
    std::vector<int> back;
    ASSERT_TRUE(DecodeTaskMap(EncodeTaskMap(m), 3, &back).ok());
    EXPECT_EQ(back, m);
  }
}

TEST(TaskMap, RejectsNodesOutsideTheStepAndGarbage) {
  std::vector<int> m;
  EXPECT_FALSE(DecodeTaskMap("0*2,3", 3, &m).ok());
  EXPECT_FALSE(DecodeTaskMap("0*0", 3, &m).ok());
  EXPECT_FALSE(DecodeTaskMap("a", 3, &m).ok());
  EXPECT_FALSE(DecodeTaskMap("0*99999999999", 3, &m).ok());
}

// --- hostfiles -----------------------------------------------------------------

TEST(Hostfile, EveryFormat) {
  StepLayout l = Layout({"n1", "n2", "n3"}, {{0, 2}, {1, 3}, {4}});  // cyclic, uneven
  EXPECT_EQ(FormatHostfile(HostfileFormat::kOpenMpi, l), "n1 slots=2\nn2 slots=2\nn3 slots=1\n");
  EXPECT_EQ(FormatHostfile(HostfileFormat::kDeepSpeed, l), "n1 slots=2\nn2 slots=2\nn3 slots=1\n");
  EXPECT_EQ(FormatHostfile(HostfileFormat::kMpich, l), "n1:2\nn2:2\nn3:1\n");
  EXPECT_EQ(FormatHostfile(HostfileFormat::kHorovod, l), "n1:2,n2:2,n3:1\n");
  EXPECT_EQ(FormatHostfile(HostfileFormat::kPlain, l), "n1\nn2\nn1\nn2\nn3\n");
}

TEST(Hostfile, DirectoryTemplate) {
  EXPECT_EQ(ExpandHostfileDir("%t/baton-%u/%j.%s.%n", "alice", "17", "0", "n2", "/tmp"),
            "/tmp/baton-alice/17.0.n2");
  EXPECT_EQ(ExpandHostfileDir("/x/100%%/%j", "u", "5", "batch", "n", "/t"), "/x/100%/5");
}

// --- master port ---------------------------------------------------------------

TEST(MasterPort, InRangeStablePerStepAndDistinctForConcurrentSteps) {
  const int p0 = MasterPort("1234", 0, 61000, 65535);
  EXPECT_EQ(p0, MasterPort("1234", 0, 61000, 65535)) << "every task of a step agrees";
  std::set<int> ports{MasterPort("1234", std::nullopt, 61000, 65535)};
  for (long step = 0; step < 50; ++step) {
    int p = MasterPort("1234", step, 61000, 65535);
    EXPECT_GE(p, 61000);
    EXPECT_LE(p, 65535);
    ports.insert(p);
  }
  EXPECT_EQ(ports.size(), 51u) << "batch script and 50 steps of one job: all different";
  EXPECT_EQ(MasterPort("7", 3, 5000, 5000), 5000);
}

// --- the derivation ------------------------------------------------------------

StepInfo Task(StepLayout layout, int node, int rank) {
  StepInfo info;
  info.job_id = "42";
  info.step_id = 3;
  info.restart_count = 2;
  info.layout = std::move(layout);
  info.node_index = node;
  info.master_addr = "127.0.0.11";
  info.rank = rank;
  info.hostfile_path = "/tmp/hf";
  return info;
}

TEST(DeriveLaunchEnv, CyclicTaskGetsRanksFromTheTaskMap) {
  // -N2 -n4 cyclic: rank 3 is the second task on n2.
  StepInfo info = Task(Layout({"n1", "n2"}, {{0, 2}, {1, 3}}), 1, 3);
  EnvList env;
  ASSERT_TRUE(DeriveLaunchEnv(info, {}, PluginConfig{}, &env).ok());
  auto m = ToMap(env);
  EXPECT_EQ(m["RANK"], "3");
  EXPECT_EQ(m["WORLD_SIZE"], "4");
  EXPECT_EQ(m["LOCAL_RANK"], "1");
  EXPECT_EQ(m["LOCAL_WORLD_SIZE"], "2");
  EXPECT_EQ(m["NODE_RANK"], "1");
  EXPECT_EQ(m["GROUP_RANK"], "1");
  EXPECT_EQ(m["GROUP_WORLD_SIZE"], "2");
  EXPECT_EQ(m["MASTER_ADDR"], "127.0.0.11");
  EXPECT_EQ(m["MASTER_PORT"], std::to_string(MasterPort("42", 3, 61000, 65535)));
  EXPECT_EQ(m["BATON_HOSTFILE"], "/tmp/hf");
  EXPECT_EQ(m["BATON_RESTART_COUNT"], "2");
  EXPECT_EQ(m["BATON_JOB_ID"], "42");
  EXPECT_EQ(m["BATON_NNODES"], "2");
  EXPECT_EQ(m.count("BATON_CKPT_DIR"), 0u);
  EXPECT_EQ(m.count("CUDA_VISIBLE_DEVICES"), 0u);
}

TEST(DeriveLaunchEnv, UnevenThreeNodesSevenTasks) {
  // srun -N3 -n7: 3,2,2 in block order.
  StepInfo info = Task(Layout({"n1", "n2", "n3"}, {{0, 1, 2}, {3, 4}, {5, 6}}), 2, 6);
  EnvList env;
  ASSERT_TRUE(DeriveLaunchEnv(info, {}, PluginConfig{}, &env).ok());
  auto m = ToMap(env);
  EXPECT_EQ(m["LOCAL_RANK"], "1");
  EXPECT_EQ(m["LOCAL_WORLD_SIZE"], "2");
  EXPECT_EQ(m["WORLD_SIZE"], "7");
}

TEST(DeriveLaunchEnv, BatchScriptGetsMasterAndHostfileButNoRank) {
  StepInfo info = Task(Layout({"n1", "n2"}, {{0, 1}, {2, 3}}), 0, 0);
  info.rank.reset();
  info.step_id.reset();
  EnvList env;
  ASSERT_TRUE(DeriveLaunchEnv(info, {}, PluginConfig{}, &env).ok());
  auto m = ToMap(env);
  EXPECT_EQ(m.count("RANK"), 0u);
  EXPECT_EQ(m.count("LOCAL_RANK"), 0u);
  EXPECT_EQ(m["MASTER_PORT"], std::to_string(MasterPort("42", std::nullopt, 61000, 65535)));
  EXPECT_EQ(m["MASTER_ADDR"], "127.0.0.11");
  EXPECT_EQ(m["BATON_HOSTFILE"], "/tmp/hf");
}

TEST(DeriveLaunchEnv, OptionsOverrideDefaults) {
  StepInfo info = Task(Layout({"n1"}, {{0, 1, 2}}), 0, 2);
  info.node_gpus = {"0", "1"};
  LaunchOptions o;
  o.master_port = 29500;
  o.ckpt_dir = "/ckpt";
  o.local_dir = "/local";
  EnvList env;
  ASSERT_TRUE(DeriveLaunchEnv(info, o, PluginConfig{}, &env).ok());
  auto m = ToMap(env);
  EXPECT_EQ(m["MASTER_PORT"], "29500");
  EXPECT_EQ(m["BATON_CKPT_DIR"], "/ckpt");
  EXPECT_EQ(m["BATON_LOCAL_DIR"], "/local");
  EXPECT_EQ(m.count("CUDA_VISIBLE_DEVICES"), 0u) << "no gpu-bind asked";
  o.gpu_bind = GpuBind::kLocalRank;
  Status s = DeriveLaunchEnv(info, o, PluginConfig{}, &env);
  EXPECT_EQ(s.code(), Code::kUnavailable) << "3 local ranks, 2 GPUs";
  EXPECT_NE(s.message().find("3 tasks on n1 but Slurm gave the step 2 GPUs"), std::string::npos) << s;
  info.node_gpus = {"0", "1", "2"};
  ASSERT_TRUE(DeriveLaunchEnv(info, o, PluginConfig{}, &env).ok());
  EXPECT_EQ(ToMap(env)["CUDA_VISIBLE_DEVICES"], "2") << "local rank 2 gets the third GPU";
}

TEST(DeriveLaunchEnv, GpuBindFromPluginDefaultAndItsErrors) {
  PluginConfig config;
  config.gpu_bind = GpuBind::kLocalRank;
  StepInfo info = Task(Layout({"n1"}, {{0, 1}}), 0, 1);
  info.node_gpus = {"GPU-a", "GPU-b"};
  EnvList env;
  ASSERT_TRUE(DeriveLaunchEnv(info, {}, config, &env).ok());
  EXPECT_EQ(ToMap(env)["CUDA_VISIBLE_DEVICES"], "GPU-b");
  LaunchOptions none;
  none.gpu_bind = GpuBind::kNone;
  ASSERT_TRUE(DeriveLaunchEnv(info, none, config, &env).ok());
  EXPECT_EQ(ToMap(env).count("CUDA_VISIBLE_DEVICES"), 0u) << "the user's none wins over the default";
  info.node_gpus.clear();
  Status s = DeriveLaunchEnv(info, {}, config, &env);
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_NE(s.message().find("no GPUs on n1"), std::string::npos) << s;
}

TEST(DeriveLaunchEnv, RejectsInconsistentFacts) {
  EnvList env;
  StepInfo info = Task(Layout({"n1", "n2"}, {{0, 1}, {2, 3}}), 0, 3);  // rank 3 is on n2, not n1
  Status s = DeriveLaunchEnv(info, {}, PluginConfig{}, &env);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("rank 3 runs on node n1 but the task map places it on n2"), std::string::npos) << s;
  info = Task(Layout({"n1"}, {{0}}), 0, 5);
  EXPECT_FALSE(DeriveLaunchEnv(info, {}, PluginConfig{}, &env).ok());
  info = Task(Layout({"n1"}, {{0}}), 0, 0);
  info.master_addr.clear();
  EXPECT_FALSE(DeriveLaunchEnv(info, {}, PluginConfig{}, &env).ok());
}

// --- gathering facts from the environment ----------------------------------------

class FakeSlurm : public SlurmQueries {
 public:
  std::map<std::string, std::vector<std::string>> hostlists = {
      {"n[1-3,7],gpu-[01-04]", {"n1", "n2", "n3", "n7", "gpu-01", "gpu-02", "gpu-03", "gpu-04"}},
      {"n[1-2]", {"n1", "n2"}},
  };
  std::vector<std::vector<int>> tids = {{0, 2}, {1, 3}};
  int layout_calls = 0, address_calls = 0;

  Status ExpandHostlist(const std::string& h, std::vector<std::string>* hosts) override {
    auto it = hostlists.find(h);
    if (it == hostlists.end()) return Status::InvalidArgument("test", "unknown hostlist " + h);
    *hosts = it->second;
    return Status::OK();
  }
  Status StepTasks(const std::string&, long, std::vector<std::string>* nodes,
                   std::vector<std::vector<int>>* t) override {
    ++layout_calls;
    *nodes = {"n1", "n2"};
    *t = tids;
    return Status::OK();
  }
  Status NodeAddress(const std::string& node, std::string* addr) override {
    ++address_calls;
    *addr = "addr-of-" + node;
    return Status::OK();
  }
};

Env TaskEnv() {
  return {{"SLURM_JOB_ID", "9"},          {"SLURM_STEP_ID", "1"},  {"SLURM_STEP_NODELIST", "n[1-2]"},
          {"SLURM_NODEID", "1"},          {"SLURM_PROCID", "3"},   {"SLURM_RESTART_COUNT", "1"},
          {"CUDA_VISIBLE_DEVICES", "2,3"}};
}

TEST(StepInfoFromEnvironment, TaskAsksSlurmForTheLayoutWithoutHandOver) {
  FakeSlurm slurm;
  StepInfo info;
  ASSERT_TRUE(StepInfoFromEnvironment(TaskEnv(), slurm, &info).ok());
  EXPECT_EQ(JobStepName(info), "9.1");
  EXPECT_EQ(info.layout.task_node, (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(*info.rank, 3);
  EXPECT_EQ(info.node_index, 1);
  EXPECT_EQ(info.master_addr, "addr-of-n1");
  EXPECT_EQ(info.restart_count, 1);
  EXPECT_EQ(info.node_gpus, (std::vector<std::string>{"2", "3"}));
  EXPECT_EQ(slurm.layout_calls, 1);
}

TEST(StepInfoFromEnvironment, HandOverFromSrunAvoidsQueriesButOnlyForItsOwnStep) {
  FakeSlurm slurm;
  Env env = TaskEnv();
  env[kTaskMapVar] = Tag("9.1", "0*2,1*2");
  env[kMasterAddrVar] = Tag("9.1", "10.0.0.1");
  StepInfo info;
  ASSERT_TRUE(StepInfoFromEnvironment(env, slurm, &info).ok());
  EXPECT_EQ(info.layout.task_node, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(info.master_addr, "10.0.0.1");
  EXPECT_EQ(slurm.layout_calls + slurm.address_calls, 0);

  // A nested srun inherits its parent's hand-over: tagged 9.1, it is ignored in 9.2.
  env["SLURM_STEP_ID"] = "2";
  ASSERT_TRUE(StepInfoFromEnvironment(env, slurm, &info).ok());
  EXPECT_EQ(info.layout.task_node, (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(info.master_addr, "addr-of-n1");
}

TEST(StepInfoFromEnvironment, BatchScriptUsesTheAllocation) {
  FakeSlurm slurm;
  Env env = {{"SLURM_JOB_ID", "9"},
             {"SLURM_JOB_NODELIST", "n[1-3,7],gpu-[01-04]"},
             {"SLURM_TASKS_PER_NODE", "2(x3),1(x5)"},
             {"SLURMD_NODENAME", "n1"}};
  StepInfo info;
  ASSERT_TRUE(StepInfoFromEnvironment(env, slurm, &info).ok());
  EXPECT_FALSE(info.step_id.has_value());
  EXPECT_FALSE(info.rank.has_value());
  EXPECT_EQ(info.layout.num_nodes(), 8);
  EXPECT_EQ(info.layout.num_tasks(), 11);
  EXPECT_EQ(FormatHostfile(HostfileFormat::kMpich, info.layout).substr(0, 15), "n1:2\nn2:2\nn3:2\n");
  EXPECT_EQ(info.master_addr, "addr-of-n1");

  env.erase("SLURM_TASKS_PER_NODE");
  env["SLURM_JOB_CPUS_PER_NODE"] = "4(x8)";
  ASSERT_TRUE(StepInfoFromEnvironment(env, slurm, &info).ok());
  EXPECT_EQ(info.layout.num_tasks(), 32);
}

TEST(StepInfoFromEnvironment, MissingOrBadVariablesAreNamed) {
  FakeSlurm slurm;
  StepInfo info;
  Status s = StepInfoFromEnvironment({}, slurm, &info);
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_NE(s.message().find("SLURM_JOB_ID"), std::string::npos);
  Env env = TaskEnv();
  env["SLURM_PROCID"] = "7";
  s = StepInfoFromEnvironment(env, slurm, &info);
  EXPECT_NE(s.message().find("SLURM_PROCID='7'"), std::string::npos) << s;
  env = TaskEnv();
  env["SLURM_NODEID"] = "x";
  s = StepInfoFromEnvironment(env, slurm, &info);
  EXPECT_NE(s.message().find("SLURM_NODEID='x'"), std::string::npos) << s;
  env = {{"SLURM_JOB_ID", "9"}, {"SLURM_JOB_NODELIST", "n[1-2]"}, {"SLURM_TASKS_PER_NODE", "2(x3)"},
         {"SLURMD_NODENAME", "n1"}};
  s = StepInfoFromEnvironment(env, slurm, &info);
  EXPECT_NE(s.message().find("2 nodes but 3 task counts"), std::string::npos) << s;
  env["SLURM_TASKS_PER_NODE"] = "2(x2)";
  env["SLURMD_NODENAME"] = "n9";
  s = StepInfoFromEnvironment(env, slurm, &info);
  EXPECT_NE(s.message().find("SLURMD_NODENAME='n9'"), std::string::npos) << s;
}

}  // namespace
}  // namespace baton::launch
