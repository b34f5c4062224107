// The launch derivation shared by the SPANK plugin and `baton env`, from a
// StepInfo as either gathers it: ranks, MASTER_PORT, GPU binding.
#include "base/launch/launch_env.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

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

std::map<std::string, std::string> Derive(const StepInfo& info, const LaunchOptions& o = {},
                                          const PluginConfig& config = PluginConfig{}) {
  EnvList env;
  Status s = DeriveLaunchEnv(info, o, config, &env);
  EXPECT_TRUE(s.ok()) << s;
  return ToMap(env);
}

// --- ranks ---------------------------------------------------------------------

TEST(DeriveLaunchEnv, CyclicTaskGetsRanksFromTheTaskMap) {
  // -N2 -n4 cyclic: rank 3 is the second task on n2.
  auto m = Derive(Task(Layout({"n1", "n2"}, {{0, 2}, {1, 3}}), 1, 3));
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
  EXPECT_EQ(m.count("BATON_DEVICE"), 0u) << "no GPUs";
}

TEST(DeriveLaunchEnv, UnevenThreeNodesSevenTasks) {
  // srun -N3 -n7: 3,2,2 in block order.
  auto m = Derive(Task(Layout({"n1", "n2", "n3"}, {{0, 1, 2}, {3, 4}, {5, 6}}), 2, 6));
  EXPECT_EQ(m["LOCAL_RANK"], "1");
  EXPECT_EQ(m["LOCAL_WORLD_SIZE"], "2");
  EXPECT_EQ(m["WORLD_SIZE"], "7");
}

TEST(DeriveLaunchEnv, LocalRankIsSlurmsWhenGiven) {
  StepInfo info = Task(Layout({"n1", "n2"}, {{0, 2}, {1, 3}}), 1, 3);
  info.local_rank = 1;
  EXPECT_EQ(Derive(info)["LOCAL_RANK"], "1");
  info.local_rank = 2;  // only 2 tasks on n2
  EnvList env;
  Status s = DeriveLaunchEnv(info, {}, PluginConfig{}, &env);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("local rank 2 of rank 3 is outside the 2 tasks on n2"), std::string::npos) << s;
}

TEST(DeriveLaunchEnv, BatchScriptGetsMasterAndHostfileButNoRank) {
  StepInfo info = Task(Layout({"n1", "n2"}, {{0, 1}, {2, 3}}), 0, 0);
  info.rank.reset();
  info.step_id.reset();
  auto m = Derive(info);
  EXPECT_EQ(m.count("RANK"), 0u);
  EXPECT_EQ(m.count("LOCAL_RANK"), 0u);
  EXPECT_EQ(m["MASTER_PORT"], std::to_string(MasterPort("42", std::nullopt, 61000, 65535)));
  EXPECT_EQ(m["MASTER_ADDR"], "127.0.0.11");
  EXPECT_EQ(m["BATON_HOSTFILE"], "/tmp/hf");
}

TEST(DeriveLaunchEnv, AllocationShellOnALoginNodeHasNoNode) {
  // salloc's shell on a login node: no SLURM_NODEID, no SLURMD_NODENAME.
  StepInfo info = Task(Layout({"n1", "n2"}, {{0, 1}, {2, 3}}), 0, 0);
  info.rank.reset();
  info.step_id.reset();
  info.node_index.reset();
  auto m = Derive(info);
  EXPECT_EQ(m["MASTER_ADDR"], "127.0.0.11");
  EXPECT_EQ(m.count("NODE_RANK"), 0u);
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

// --- master port -----------------------------------------------------------------

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

TEST(MasterPort, SlurmsReservedPortsKeepTwoJobsOnOneNodeApart) {
  // Two jobs whose hash draws the same port: found by search, as a busy
  // cluster finds them by chance.
  std::map<int, long> first_job_at;
  long a = 0, b = 0;
  for (long job = 1; b == 0; ++job) {
    auto [it, fresh] = first_job_at.emplace(MasterPort(std::to_string(job), 0, 61000, 65535), job);
    if (!fresh) a = it->second, b = job;
  }
  StepInfo ja = Task(Layout({"n1"}, {{0}}), 0, 0), jb = ja;
  ja.job_id = std::to_string(a);
  jb.job_id = std::to_string(b);
  ja.step_id = jb.step_id = 0;
  ASSERT_EQ(Derive(ja)["MASTER_PORT"], Derive(jb)["MASTER_PORT"]) << "jobs " << a << " and " << b << " collide by hash";
  // With --resv-ports (or MpiParams=ports=), Slurm hands each step ports no
  // other step on its nodes holds: SLURM_STEP_RESV_PORTS.
  ja.resv_ports = {12000, 12001};
  jb.resv_ports = {12002, 12003};
  EXPECT_EQ(Derive(ja)["MASTER_PORT"], "12000");
  EXPECT_EQ(Derive(jb)["MASTER_PORT"], "12002");
  LaunchOptions fixed;
  fixed.master_port = 29500;
  EXPECT_EQ(Derive(ja, fixed)["MASTER_PORT"], "29500") << "--baton-master-port wins over the reservation";
}

TEST(DeriveLaunchEnv, OptionsOverrideDefaults) {
  StepInfo info = Task(Layout({"n1"}, {{0, 1, 2}}), 0, 2);
  info.node_gpus = {"0", "1"};
  LaunchOptions o;
  o.master_port = 29500;
  o.ckpt_dir = "/ckpt";
  o.local_dir = "/local";
  auto m = Derive(info, o);
  EXPECT_EQ(m["MASTER_PORT"], "29500");
  EXPECT_EQ(m["BATON_CKPT_DIR"], "/ckpt");
  EXPECT_EQ(m["BATON_LOCAL_DIR"], "/local");
  EXPECT_EQ(m.count("CUDA_VISIBLE_DEVICES"), 0u) << "no gpu-bind asked";
  o.gpu_bind = GpuBind::kLocalRank;
  EnvList env;
  Status s = DeriveLaunchEnv(info, o, PluginConfig{}, &env);
  EXPECT_EQ(s.code(), Code::kUnavailable) << "3 local ranks, 2 GPUs";
  EXPECT_NE(s.message().find("3 tasks on n1 but Slurm gave the step 2 GPUs"), std::string::npos) << s;
  info.node_gpus = {"0", "1", "2"};
  EXPECT_EQ(Derive(info, o)["CUDA_VISIBLE_DEVICES"], "2") << "local rank 2 gets the third GPU";
}

// --- GPUs: the LOCAL_RANK / BATON_DEVICE contract ---------------------------------

TEST(GpuBind, EveryLocalRankFindsItsDeviceThroughBatonDevice) {
  // -N1 -n4 with 4 GPUs. A program calls set_device(BATON_DEVICE); with
  // local-rank binding each task sees one GPU, so set_device(LOCAL_RANK)
  // would fail on every local rank but 0: LOCAL_RANK keeps torchrun's
  // meaning, BATON_DEVICE is the index among the devices the task sees.
  StepLayout layout = Layout({"n1"}, {{0, 1, 2, 3}});
  LaunchOptions bound;
  bound.gpu_bind = GpuBind::kLocalRank;
  for (int rank = 0; rank < 4; ++rank) {
    StepInfo info = Task(layout, 0, rank);
    info.node_gpus = {"4", "5", "6", "7"};
    auto m = Derive(info, bound);
    const size_t visible = SplitDeviceList(m["CUDA_VISIBLE_DEVICES"]).size();
    EXPECT_EQ(visible, 1u);
    EXPECT_EQ(m["LOCAL_RANK"], std::to_string(rank));
    ASSERT_EQ(m.count("BATON_DEVICE"), 1u);
    EXPECT_LT(std::stoul(m["BATON_DEVICE"]), visible) << "rank " << rank << ": BATON_DEVICE names a visible device";
    EXPECT_EQ(m["CUDA_VISIBLE_DEVICES"], info.node_gpus[static_cast<size_t>(rank)]);

    auto unbound = Derive(info);
    EXPECT_EQ(unbound.count("CUDA_VISIBLE_DEVICES"), 0u) << "Slurm's own CUDA_VISIBLE_DEVICES stays";
    EXPECT_EQ(unbound["BATON_DEVICE"], std::to_string(rank)) << "all 4 visible: the local rank's";
  }
}

TEST(GpuBind, NoBatonDeviceWhenTasksWouldShareUnasked) {
  StepInfo info = Task(Layout({"n1"}, {{0, 1, 2}}), 0, 2);
  info.node_gpus = {"0", "1"};
  EXPECT_EQ(Derive(info).count("BATON_DEVICE"), 0u) << "3 tasks, 2 GPUs, no binding: no device is the task's own";
}

TEST(GpuBind, FromPluginDefaultAndItsErrors) {
  PluginConfig config;
  config.gpu_bind = GpuBind::kLocalRank;
  StepInfo info = Task(Layout({"n1"}, {{0, 1}}), 0, 1);
  info.node_gpus = {"GPU-a", "GPU-b"};
  EXPECT_EQ(Derive(info, {}, config)["CUDA_VISIBLE_DEVICES"], "GPU-b");
  LaunchOptions none;
  none.gpu_bind = GpuBind::kNone;
  EXPECT_EQ(Derive(info, none, config).count("CUDA_VISIBLE_DEVICES"), 0u) << "the user's none wins over the default";
  info.node_gpus.clear();
  EnvList env;
  Status s = DeriveLaunchEnv(info, {}, config, &env);
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_NE(s.message().find("no GPUs on n1"), std::string::npos) << s;
}

TEST(Hostfile, DirectoryTemplate) {
  EXPECT_EQ(ExpandHostfileDir("%t/baton-%u/%j.%s.%n", "alice", "17", "0", "n2", "/tmp"),
            "/tmp/baton-alice/17.0.n2");
  EXPECT_EQ(ExpandHostfileDir("/x/100%%/%j", "u", "5", "batch", "n", "/t"), "/x/100%/5");
}

}  // namespace
}  // namespace baton::launch
