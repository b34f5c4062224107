// The launch derivation shared by the SPANK plugin and `baton env`, from a
// StepInfo as either gathers it: ranks, MASTER_PORT, GPU binding.
#include "base/launch/launch_env.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

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

// --- GPUs: Slurm's binding (--gres, --gpus-per-task, --gpu-bind) and baton's --------

// What a task of `-N1 -n<local_size>` sees after Slurm: `step` are the
// step's GPUs on the node; `per_task` the ones Slurm bound to this task
// (empty: no binding, the task sees them all).
StepInfo GpuTask(int local_size, int local_rank, std::vector<std::string> step, std::vector<std::string> per_task) {
  std::vector<int> tids;
  for (int i = 0; i < local_size; ++i) tids.push_back(i);
  StepInfo info = Task(Layout({"n1"}, {tids}), 0, local_rank);
  info.local_rank = local_rank;
  info.gpus_on_node = static_cast<int>(step.size());
  info.node_gpus = per_task.empty() ? step : per_task;
  return info;
}

TEST(GpuBind, SlurmsPerTaskBindingIsKeptAndTheTaskUsesItsFirstGpu) {
  // --gpus-per-task=1 -n2 (Slurm implies --gpu-bind=per_task:1): task 1
  // sees GPU 1 alone, SLURM_GPUS_ON_NODE=2. Before, local-rank refused
  // ("2 tasks on n1 but Slurm gave the step 1 GPUs there") and failed the
  // step, and without it BATON_DEVICE was not set.
  StepInfo info = GpuTask(2, 1, {"0", "1"}, {"1"});
  auto none = Derive(info);
  EXPECT_EQ(none["BATON_DEVICE"], "0");
  EXPECT_EQ(none.count("CUDA_VISIBLE_DEVICES"), 0u) << "Slurm's binding stays";
  LaunchOptions bound;
  bound.gpu_bind = GpuBind::kLocalRank;
  auto m = Derive(info, bound);
  EXPECT_EQ(m["CUDA_VISIBLE_DEVICES"], "1");
  EXPECT_EQ(m["BATON_DEVICE"], "0");
  // --gpus-per-task=2 on a 4-GPU node with -n2: local-rank leaves one GPU, the task's own first.
  m = Derive(GpuTask(2, 1, {"0", "1", "2", "3"}, {"2", "3"}), bound);
  EXPECT_EQ(m["CUDA_VISIBLE_DEVICES"], "2");
  EXPECT_EQ(Derive(GpuTask(2, 1, {"0", "1", "2", "3"}, {"2", "3"}))["BATON_DEVICE"], "0");
}

TEST(GpuBind, BatonEnvInsideALocalRankTaskAgreesWithThePlugin) {
  // --gres=gpu:2 -n2 --baton-gpu-bind=local-rank: the plugin narrowed task
  // 1 to GPU 1; `baton env` there reads CUDA_VISIBLE_DEVICES=1 and
  // SLURM_GPUS_ON_NODE=2. Before, it exited 1 ("2 tasks on n1 but Slurm
  // gave the step 1 GPUs there").
  LaunchOptions bound;
  bound.gpu_bind = GpuBind::kLocalRank;
  for (int lr = 0; lr < 2; ++lr) {
    auto plugin = Derive(GpuTask(2, lr, {"0", "1"}, {}), bound);
    StepInfo inside = GpuTask(2, lr, {"0", "1"}, {plugin["CUDA_VISIBLE_DEVICES"]});
    EXPECT_EQ(Derive(inside, bound), plugin) << "local rank " << lr;
  }
}

TEST(GpuBind, EveryCombinationGivesAUsableDeviceAndBatonEnvAgrees) {
  // Slurm's bindings on a 2-GPU node with 2 tasks, as the local cluster
  // shows them (tests/cluster/test_spank.sh runs each): the GPUs of each
  // task per binding; {} = the step's GPUs, unbound.
  const std::vector<std::string> step = {"0", "1"};
  const std::vector<std::pair<const char*, std::vector<std::vector<std::string>>>> slurm = {
      {"--gres=gpu:2", {{}, {}}},
      {"--gpus-per-task=1", {{"0"}, {"1"}}},
      {"--gres=gpu:2 --gpu-bind=single:1", {{"0"}, {"1"}}},
      {"--gres=gpu:2 --gpu-bind=map_gpu:1,0", {{"1"}, {"0"}}},
      {"--gres=gpu:2 --gpu-bind=closest", {{}, {}}},
      {"--gpus-per-task=1 --gpu-bind=none (no CUDA_VISIBLE_DEVICES)", {{}, {}}},
  };
  for (const auto& [what, per_task] : slurm) {
    for (GpuBind bind : {GpuBind::kNone, GpuBind::kLocalRank}) {
      LaunchOptions o;
      o.gpu_bind = bind;
      std::set<std::string> devices;
      for (int lr = 0; lr < 2; ++lr) {
        const std::string label = std::string(what) + " --baton-gpu-bind=" + std::string(GpuBindName(bind)) +
                                  ", local rank " + std::to_string(lr);
        StepInfo info = GpuTask(2, lr, step, per_task[static_cast<size_t>(lr)]);
        auto m = Derive(info, o);
        const std::vector<std::string> seen =
            m.count("CUDA_VISIBLE_DEVICES") ? SplitDeviceList(m["CUDA_VISIBLE_DEVICES"]) : info.node_gpus;
        ASSERT_EQ(m.count("BATON_DEVICE"), 1u) << label;
        const size_t device = std::stoul(m["BATON_DEVICE"]);
        ASSERT_LT(device, seen.size()) << label;
        devices.insert(seen[device]);
        // `baton env` in the task: what the plugin left it.
        StepInfo inside = info;
        inside.node_gpus = seen;
        auto again = Derive(inside, o);
        again.erase("CUDA_VISIBLE_DEVICES");
        m.erase("CUDA_VISIBLE_DEVICES");
        EXPECT_EQ(again, m) << label;
      }
      EXPECT_EQ(devices.size(), 2u) << what << ": each task its own GPU";
    }
  }
}

TEST(GpuBind, TasksThatWouldShareAStepsGpuGetNoneOrARefusal) {
  // --gres=gpu:1 -n2: both tasks see GPU 0, which is the step's only one.
  StepInfo info = GpuTask(2, 1, {"0"}, {});
  EXPECT_EQ(Derive(info).count("BATON_DEVICE"), 0u);
  LaunchOptions bound;
  bound.gpu_bind = GpuBind::kLocalRank;
  EnvList env;
  Status s = DeriveLaunchEnv(info, bound, PluginConfig{}, &env);
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_NE(s.message().find("2 tasks on n1 but Slurm gave the step 1 GPUs there"), std::string::npos) << s;
}

TEST(GpuBind, TaskGpusFromSlurmsVariables) {
  StepInfo info;
  ASSERT_TRUE(TaskGpusFromVariables(std::string("3"), std::string("2"), &info).ok());
  EXPECT_EQ(info.node_gpus, (std::vector<std::string>{"3"}));
  EXPECT_EQ(info.gpus_on_node, 2);
  // --gpu-bind=none: no CUDA_VISIBLE_DEVICES, the step's GPUs counted from 0.
  ASSERT_TRUE(TaskGpusFromVariables(std::nullopt, std::string("2"), &info).ok());
  EXPECT_EQ(info.node_gpus, (std::vector<std::string>{"0", "1"}));
  ASSERT_TRUE(TaskGpusFromVariables(std::string(""), std::string("2"), &info).ok());
  EXPECT_TRUE(info.node_gpus.empty()) << "set and empty: CUDA shows no device";
  ASSERT_TRUE(TaskGpusFromVariables(std::nullopt, std::nullopt, &info).ok());
  EXPECT_TRUE(info.node_gpus.empty());
  EXPECT_FALSE(info.gpus_on_node);
  Status s = TaskGpusFromVariables(std::nullopt, std::string("two"), &info);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("SLURM_GPUS_ON_NODE='two'"), std::string::npos) << s;
}

TEST(Hostfile, DirectoryTemplate) {
  EXPECT_EQ(ExpandHostfileDir("%t/baton-%u/%j.%s.%n", "alice", "17", "0", "n2", "/tmp"),
            "/tmp/baton-alice/17.0.n2");
  EXPECT_EQ(ExpandHostfileDir("/x/100%%/%j", "u", "5", "batch", "n", "/t"), "/x/100%/5");
}

}  // namespace
}  // namespace baton::launch
