// Gathering a StepInfo from Slurm's variables and the plugin's hand-over,
// asking the (fake) controller only for what neither gives; the hand-over
// at 4,096 nodes; hostile values; a controller that never answers.
#include "base/launch/slurm_facts.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <numeric>
#include <random>

#include "base/launch/hand_over.h"
#include "tests/unit/fake_slurm.h"

namespace baton::launch {
namespace {

Env TaskEnv() {
  return {{"SLURM_JOB_ID", "9"},         {"SLURM_STEP_ID", "1"},     {"SLURM_STEP_NODELIST", "n[1-2]"},
          {"SLURM_STEP_NUM_NODES", "2"}, {"SLURM_NODEID", "1"},      {"SLURM_PROCID", "3"},
          {"SLURM_LOCALID", "1"},        {"SLURM_RESTART_COUNT", "1"}, {"CUDA_VISIBLE_DEVICES", "2,3"},
          {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"}};
}

void AddHandOver(const EnvList& vars, Env* env) {
  for (const auto& [k, v] : vars) (*env)[k] = v;
}

std::map<std::string, std::string> Derived(const StepInfo& info) {
  EnvList env;
  Status s = DeriveLaunchEnv(info, {}, PluginConfig{}, &env);
  EXPECT_TRUE(s.ok()) << s;
  return {env.begin(), env.end()};
}

TEST(StepInfoFromEnvironment, TaskAsksSlurmForTheLayoutWithoutHandOver) {
  FakeSlurm slurm;
  StepInfo info;
  ASSERT_TRUE(StepInfoFromEnvironment(TaskEnv(), slurm, &info).ok());
  EXPECT_EQ(JobStepName(info), "9.1");
  EXPECT_EQ(info.layout.task_node, (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(*info.rank, 3);
  EXPECT_EQ(*info.local_rank, 1);
  EXPECT_EQ(*info.node_index, 1);
  EXPECT_EQ(info.master_addr, "addr-of-n1");
  EXPECT_EQ(info.restart_count, 1);
  EXPECT_EQ(info.node_gpus, (std::vector<std::string>{"2", "3"}));
  EXPECT_EQ(slurm.layout_calls, 1);
}

// --- item 1: MASTER_ADDR is rank 0's node -----------------------------------------

TEST(MasterAddr, IsRankZerosNodeUnderArbitraryLayouts) {
  // srun -n4 -m arbitrary with SLURM_HOSTFILE "n2 n1 n2 n2": rank 0 on n2,
  // the second node of the step.
  FakeSlurm slurm;
  slurm.tids = {{1}, {0, 2, 3}};
  StepInfo info;
  Env env = TaskEnv();
  env["SLURM_PROCID"] = "1";
  env["SLURM_NODEID"] = "0";
  env["SLURM_LOCALID"] = "0";
  env["SLURM_STEP_TASKS_PER_NODE"] = "1,3";
  ASSERT_TRUE(StepInfoFromEnvironment(env, slurm, &info).ok());
  EXPECT_EQ(info.master_addr, "addr-of-n2") << "baton env without the hand-over";

  EnvList vars;
  ASSERT_TRUE(SrunHandOver("9", 1, HostfileFormat::kOpenMpi, slurm, &vars).ok());
  std::map<std::string, std::string> handed(vars.begin(), vars.end());
  EXPECT_EQ(handed[kMasterAddrVar], "9.1:addr-of-n2") << "the plugin's srun side";
  AddHandOver(vars, &env);
  FakeSlurm silent;
  ASSERT_TRUE(StepInfoFromEnvironment(env, silent, &info).ok());
  EXPECT_EQ(Derived(info)["MASTER_ADDR"], "addr-of-n2");
  EXPECT_EQ(info.layout.task_node, (std::vector<int>{1, 0, 1, 1}));
  EXPECT_EQ(silent.layout_calls + silent.address_calls, 0);
}

TEST(MasterAddr, BatchScriptsIsTheFirstHostOfItsHostfile) {
  FakeSlurm slurm;
  Env env = {{"SLURM_JOB_ID", "9"}, {"SLURM_JOB_NODELIST", "n[1-2]"}, {"SLURM_TASKS_PER_NODE", "2(x2)"},
             {"SLURM_NODEID", "0"}};
  StepInfo info;
  ASSERT_TRUE(StepInfoFromEnvironment(env, slurm, &info).ok());
  // A launcher started from the batch script with its hostfile puts rank 0
  // on the file's first host.
  EXPECT_EQ(info.master_addr, "addr-of-" + FormatHostfile(HostfileFormat::kPlain, info).substr(0, 2));
}

// --- the hand-over ------------------------------------------------------------------

TEST(HandOver, FromSrunAvoidsQueriesButOnlyForItsOwnStep) {
  FakeSlurm slurm;
  slurm.tids = {{0, 1}, {2, 3}};
  EnvList vars;
  ASSERT_TRUE(SrunHandOver("9", 1, HostfileFormat::kOpenMpi, slurm, &vars).ok());
  Env env = TaskEnv();
  AddHandOver(vars, &env);
  FakeSlurm silent;
  StepInfo info;
  ASSERT_TRUE(StepInfoFromEnvironment(env, silent, &info).ok());
  EXPECT_EQ(info.layout.task_node, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(info.master_addr, "addr-of-n1");
  EXPECT_EQ(silent.layout_calls + silent.address_calls, 0);

  // A nested srun inherits its parent's hand-over: tagged 9.1, it is ignored in 9.2.
  env["SLURM_STEP_ID"] = "2";
  ASSERT_TRUE(StepInfoFromEnvironment(env, silent, &info).ok());
  EXPECT_EQ(info.layout.task_node, (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(silent.layout_calls, 1);
}

// Issue 30 item 3: srun --export=NONE drops srun's environment, and with
// it BATON_STEP_*; the launch request's options carry the same values, so
// no slurmstepd asks the controller. An option's value (this step's, from
// the launch request) wins over an inherited variable of another step.
TEST(HandOver, TheLaunchRequestsOptionsCarryItWhenTheEnvironmentDoesNot) {
  FakeSlurm slurm;  // cyclic: tasks 0, 2 on n1
  slurm.addr = {{"n1", "10.1.0.11"}, {"n2", "10.1.0.12"}};
  EnvList vars;
  ASSERT_TRUE(SrunHandOver("9", 1, HostfileFormat::kDeepSpeed, slurm, &vars).ok());
  Env from_options;
  for (const auto& [var, value] : vars) {
    const HandOverOption* o = HandOverOptionFor(var);
    ASSERT_NE(o, nullptr) << var << " has no option to travel in";
    EXPECT_LE(std::string(o->option).size(), 75u) << "SPANK_OPTION_MAXLEN";
    from_options[var] = value;
  }
  EXPECT_EQ(HandOverOptionFor("BATON_ENABLE"), nullptr);
  Env env = TaskEnv();  // what slurmstepd reads under --export=NONE: Slurm's own variables
  env[kTaskMapVar] = "9.0:block";  // an enclosing step's, had it come through
  AddHandOverFromOptions(from_options, &env);
  EXPECT_EQ(env[kTaskMapVar], "9.1:cyclic");
  FakeSlurm silent;
  StepInfo info;
  ASSERT_TRUE(StepInfoFromEnvironment(env, silent, &info).ok());
  ASSERT_TRUE(ResolveHostfileHosts(env, silent, &info).ok());
  ASSERT_TRUE(ResolveHostfileGpus(env, silent, &info).ok());
  EXPECT_EQ(info.layout.task_node, (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(info.master_addr, "10.1.0.11");
  EXPECT_EQ(info.hosts, (std::vector<std::string>{"10.1.0.11", "10.1.0.12"}));
  EXPECT_EQ(silent.layout_calls + silent.address_calls + silent.gpu_calls, 0);
}

TEST(HandOver, NodeAddressesReachTheHostfileWithoutAQuestion) {
  FakeSlurm slurm;
  slurm.addr = {{"n1", "10.1.0.11"}, {"n2", "10.1.0.12"}};
  EnvList vars;
  ASSERT_TRUE(SrunHandOver("9", 1, HostfileFormat::kOpenMpi, slurm, &vars).ok());
  std::map<std::string, std::string> m(vars.begin(), vars.end());
  EXPECT_EQ(m[kNodeAddrsVar], "9.1:10.1.0.[11-12]");
  Env env = TaskEnv();
  AddHandOver(vars, &env);
  FakeSlurm silent;
  StepInfo info;
  ASSERT_TRUE(StepInfoFromEnvironment(env, silent, &info).ok());
  ASSERT_TRUE(ResolveHostfileHosts(env, silent, &info).ok());
  EXPECT_EQ(info.hosts, (std::vector<std::string>{"10.1.0.11", "10.1.0.12"}));
  EXPECT_EQ(silent.address_calls, 0);

  // Where NodeAddr is the node name (no NodeAddr in slurm.conf), one word says so.
  FakeSlurm plain;
  plain.addr = {{"n1", "n1"}, {"n2", "n2"}};
  ASSERT_TRUE(SrunHandOver("9", 1, HostfileFormat::kOpenMpi, plain, &vars).ok());
  m = std::map<std::string, std::string>(vars.begin(), vars.end());
  EXPECT_EQ(m[kNodeAddrsVar], "9.1:=names");

  // Without any hand-over (the CLI on a cluster without the plugin): one question.
  env = TaskEnv();
  ASSERT_TRUE(StepInfoFromEnvironment(env, slurm, &info).ok());
  const int before = slurm.address_calls;
  ASSERT_TRUE(ResolveHostfileHosts(env, slurm, &info).ok());
  EXPECT_EQ(slurm.address_calls, before + 1);
  EXPECT_EQ(info.hosts, (std::vector<std::string>{"10.1.0.11", "10.1.0.12"}));
}

TEST(HandOver, DeepSpeedsSlotsAreTheStepsGpusPerNode) {
  // srun --gres=gpu:4 sets no variable that says 4 per node on every node
  // (SLURM_GPUS_ON_NODE is this node's): srun's side asks once.
  FakeSlurm slurm;
  slurm.gpus_per_node = 4;
  EnvList vars;
  ASSERT_TRUE(SrunHandOver("9", 1, HostfileFormat::kDeepSpeed, slurm, &vars).ok());
  std::map<std::string, std::string> m(vars.begin(), vars.end());
  EXPECT_EQ(m[kGpusPerNodeVar], "9.1:4");
  Env env = TaskEnv();
  AddHandOver(vars, &env);
  FakeSlurm silent;
  StepInfo info;
  ASSERT_TRUE(StepInfoFromEnvironment(env, silent, &info).ok());
  ASSERT_TRUE(ResolveHostfileGpus(env, silent, &info).ok());
  EXPECT_EQ(info.gpus_per_node, 4);
  EXPECT_EQ(silent.gpu_calls, 0);
  EXPECT_EQ(FormatHostfile(HostfileFormat::kDeepSpeed, info), "n1 slots=4\nn2 slots=4\n");
  // --gpus=N over the step: not per node, the slots stay the tasks.
  slurm.gpus_per_node.reset();
  ASSERT_TRUE(SrunHandOver("9", 1, HostfileFormat::kDeepSpeed, slurm, &vars).ok());
  m = std::map<std::string, std::string>(vars.begin(), vars.end());
  EXPECT_EQ(m[kGpusPerNodeVar], "9.1:=none");
  // Other formats do not ask.
  const int before = slurm.gpu_calls;
  ASSERT_TRUE(SrunHandOver("9", 1, HostfileFormat::kOpenMpi, slurm, &vars).ok());
  EXPECT_EQ(slurm.gpu_calls, before);
  // The batch script (no hand-over) asks itself; SLURM_GPUS_PER_NODE spares the question.
  Env batch = {{"SLURM_JOB_ID", "9"}, {"SLURM_JOB_NODELIST", "n[1-2]"}, {"SLURM_TASKS_PER_NODE", "1(x2)"}};
  slurm.gpus_per_node = 8;
  ASSERT_TRUE(StepInfoFromEnvironment(batch, slurm, &info).ok());
  ASSERT_TRUE(ResolveHostfileGpus(batch, slurm, &info).ok());
  EXPECT_EQ(info.gpus_per_node, 8);
  batch["SLURM_GPUS_PER_NODE"] = "2";
  const int asked = slurm.gpu_calls;
  ASSERT_TRUE(StepInfoFromEnvironment(batch, slurm, &info).ok());
  ASSERT_TRUE(ResolveHostfileGpus(batch, slurm, &info).ok());
  EXPECT_EQ(info.gpus_per_node, 2);
  EXPECT_EQ(slurm.gpu_calls, asked);
}

// --- item 4: no E2BIG at scale ------------------------------------------------------

// A step's Slurm layout: `nodes` nodes with `per_node` tasks each, cyclic.
void CyclicStep(FakeSlurm* slurm, int nodes, int per_node) {
  slurm->nodes.clear();
  slurm->tids.assign(static_cast<size_t>(nodes), {});
  for (int n = 0; n < nodes; ++n) slurm->nodes.push_back("n" + std::to_string(n + 1));
  for (int r = 0; r < nodes * per_node; ++r) slurm->tids[static_cast<size_t>(r % nodes)].push_back(r);
}

size_t Bytes(const EnvList& vars) {
  size_t total = 0;
  for (const auto& [k, v] : vars) total += k.size() + 1 + v.size() + 1;
  return total;
}

TEST(HandOverAtScale, CyclicLayoutOf4096NodesStaysSmallAndRebuildsExactly) {
  // 4,096 nodes x 8 tasks, cyclic: the old hand-over was the task map
  // itself, 32,768 items ("0,1,2,...", about 150 KB), over Linux's 128 KiB
  // for one variable (MAX_ARG_STRLEN): every execve of the step failed.
  constexpr int kNodes = 4096, kPerNode = 8;
  FakeSlurm slurm;
  CyclicStep(&slurm, kNodes, kPerNode);
  slurm.addr.clear();
  for (int n = 1; n <= kNodes; ++n)
    slurm.addr["n" + std::to_string(n)] = "10.1." + std::to_string(n / 256) + "." + std::to_string(n % 256);
  slurm.gpus_per_node = 8;
  EnvList vars;
  ASSERT_TRUE(SrunHandOver("77", 0, HostfileFormat::kDeepSpeed, slurm, &vars).ok());
  for (const auto& [k, v] : vars) {
    EXPECT_LT(k.size() + 1 + v.size(), kMaxHandOverBytes) << k;
    EXPECT_NE(v, "77.0:=ask") << k << " fell back to asking at every node";
  }
  std::cout << "hand-over at 4096 nodes x 8 cyclic: " << Bytes(vars) << " bytes in " << vars.size()
            << " variables\n";
  EXPECT_LT(Bytes(vars), 1024u);

  // Every task rebuilds the layout from what Slurm gives it (the node list,
  // SLURM_STEP_TASKS_PER_NODE, its ids) and the hand-over, asking nothing.
  StepLayout truth;
  ASSERT_TRUE(LayoutFromNodeTasks(slurm.nodes, slurm.tids, &truth).ok());
  FakeSlurm silent;
  for (int rank : {0, 1, 4095, 4096, 9999, 32767}) {
    const int node = rank % kNodes;
    Env env = {{"SLURM_JOB_ID", "77"},
               {"SLURM_STEP_ID", "0"},
               {"SLURM_STEP_NODELIST", "n[1-4096]"},
               {"SLURM_STEP_NUM_NODES", "4096"},
               {"SLURM_STEP_TASKS_PER_NODE", "8(x4096)"},
               {"SLURM_NODEID", std::to_string(node)},
               {"SLURM_PROCID", std::to_string(rank)},
               {"SLURM_LOCALID", std::to_string(rank / kNodes)}};
    AddHandOver(vars, &env);
    StepInfo info;
    Status s = StepInfoFromEnvironment(env, silent, &info);
    ASSERT_TRUE(s.ok()) << s;
    ASSERT_TRUE(ResolveHostfileHosts(env, silent, &info).ok());
    EXPECT_EQ(info.layout.task_node, truth.task_node);
    EnvList derived;
    ASSERT_TRUE(DeriveLaunchEnv(info, {}, PluginConfig{}, &derived).ok());
    std::map<std::string, std::string> m(derived.begin(), derived.end());
    EXPECT_EQ(m["RANK"], std::to_string(rank));
    EXPECT_EQ(m["LOCAL_RANK"], std::to_string(rank / kNodes));
    EXPECT_EQ(m["WORLD_SIZE"], "32768");
    EXPECT_EQ(m["MASTER_ADDR"], "10.1.0.1");
    EXPECT_LT(Bytes(derived), 1024u);
    EXPECT_EQ(info.hosts[4095], "10.1.16.0");
  }
  EXPECT_EQ(silent.layout_calls + silent.address_calls, 0);
}

TEST(HandOverAtScale, AnIrregularLayoutTooLargeToHandOverIsAskedFor) {
  // -m arbitrary over 4,096 nodes: no distribution rebuilds it and its map
  // passes the bound, so the tasks ask Slurm rather than fail to start.
  FakeSlurm slurm;
  CyclicStep(&slurm, 4096, 8);
  std::vector<int> ranks(32768);
  std::iota(ranks.begin(), ranks.end(), 0);
  std::shuffle(ranks.begin(), ranks.end(), std::mt19937(7));
  for (size_t i = 0; i < ranks.size(); ++i) slurm.tids[i % 4096][i / 4096] = ranks[i];
  for (auto& t : slurm.tids) std::sort(t.begin(), t.end());
  EnvList vars;
  ASSERT_TRUE(SrunHandOver("77", 0, HostfileFormat::kOpenMpi, slurm, &vars).ok());
  std::map<std::string, std::string> m(vars.begin(), vars.end());
  EXPECT_EQ(m[kTaskMapVar], "77.0:=ask");
  EXPECT_LT(Bytes(vars), 1024u);
  Env env = {{"SLURM_JOB_ID", "77"},   {"SLURM_STEP_ID", "0"},   {"SLURM_STEP_NODELIST", "n[1-4096]"},
             {"SLURM_NODEID", "5"},    {"SLURM_PROCID", std::to_string(slurm.tids[5][0])}};
  AddHandOver(vars, &env);
  StepInfo info;
  const int before = slurm.layout_calls;
  ASSERT_TRUE(StepInfoFromEnvironment(env, slurm, &info).ok());
  EXPECT_EQ(slurm.layout_calls, before + 1);
  EXPECT_EQ(info.layout.task_node[static_cast<size_t>(slurm.tids[5][0])], 5);
}

TEST(HandOverAtScale, ASmallIrregularLayoutIsHandedOverAsItsMap) {
  FakeSlurm slurm;
  slurm.nodes = {"n1", "n2", "n3"};
  slurm.tids = {{1, 2}, {3}, {0, 4}};
  EnvList vars;
  ASSERT_TRUE(SrunHandOver("9", 1, HostfileFormat::kOpenMpi, slurm, &vars).ok());
  std::map<std::string, std::string> m(vars.begin(), vars.end());
  EXPECT_EQ(m[kTaskMapVar], "9.1:2,0*2,1,2");
}

// --- item 9: salloc ----------------------------------------------------------------

TEST(Allocation, SallocShellOnALoginNodeNeedsNoNodeName) {
  // salloc -N2 -n4 on a login node: no SLURM_NODEID, no SLURMD_NODENAME.
  FakeSlurm slurm;
  Env env = {{"SLURM_JOB_ID", "9"}, {"SLURM_JOB_NODELIST", "n[1-2]"}, {"SLURM_NNODES", "2"},
             {"SLURM_TASKS_PER_NODE", "2(x2)"}, {"SLURM_JOB_CPUS_PER_NODE", "2(x2)"}};
  StepInfo info;
  Status s = StepInfoFromEnvironment(env, slurm, &info);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_FALSE(info.node_index.has_value());
  EXPECT_EQ(Derived(info)["MASTER_ADDR"], "addr-of-n1");
  EXPECT_EQ(FormatHostfile(HostfileFormat::kMpich, info), "n1:2\nn2:2\n");
}

TEST(Allocation, TheInteractiveStepIsTheAllocationAsForThePlugin) {
  // LaunchParameters=use_interactive_step: salloc's shell runs in step
  // 0xfffffffa on the first node; like the batch script, it is the
  // allocation, not a step with ranks.
  EXPECT_EQ(KindOfStep(0xfffffffau), StepKind::kAllocation);
  EXPECT_EQ(KindOfStep(0xfffffffbu), StepKind::kAllocation);
  EXPECT_EQ(KindOfStep(0xfffffffcu), StepKind::kNone) << "extern";
  EXPECT_EQ(KindOfStep(0), StepKind::kTasks);
  EXPECT_EQ(StepName(0xfffffffau), "interactive");
  FakeSlurm slurm;
  Env env = {{"SLURM_JOB_ID", "9"},        {"SLURM_STEP_ID", "4294967290"}, {"SLURM_JOB_NODELIST", "n[1-2]"},
             {"SLURM_TASKS_PER_NODE", "2(x2)"}, {"SLURMD_NODENAME", "n1"}, {"SLURM_STEP_NODELIST", "n1"}};
  StepInfo info;
  Status s = StepInfoFromEnvironment(env, slurm, &info);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_FALSE(info.step_id.has_value());
  EXPECT_EQ(info.layout.num_nodes(), 2);
  EXPECT_EQ(slurm.layout_calls, 0) << "no step layout asked for the interactive step";
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
  EXPECT_EQ(FormatHostfile(HostfileFormat::kMpich, info).substr(0, 15), "n1:2\nn2:2\nn3:2\n");
  EXPECT_EQ(info.master_addr, "addr-of-n1");

  env.erase("SLURM_TASKS_PER_NODE");
  env["SLURM_JOB_CPUS_PER_NODE"] = "4(x8)";
  ASSERT_TRUE(StepInfoFromEnvironment(env, slurm, &info).ok());
  EXPECT_EQ(info.layout.num_tasks(), 32);
}

TEST(StepInfoFromEnvironment, ReservedPortsAreRead) {
  FakeSlurm slurm;
  Env env = TaskEnv();
  env["SLURM_STEP_RESV_PORTS"] = "12010-12013";
  StepInfo info;
  ASSERT_TRUE(StepInfoFromEnvironment(env, slurm, &info).ok());
  EXPECT_EQ(info.resv_ports, (std::vector<int>{12010, 12011, 12012, 12013}));
  EXPECT_EQ(Derived(info)["MASTER_PORT"], "12010");
  std::vector<int> ports;
  ASSERT_TRUE(ParsePortList("X", "12000,12005-12006", &ports).ok());
  EXPECT_EQ(ports, (std::vector<int>{12000, 12005, 12006}));
  for (const char* bad : {"", "0", "70000", "12-", "12-10", "a-b", "1,,2", "1-65535,1"})
    EXPECT_FALSE(ParsePortList("SLURM_STEP_RESV_PORTS", bad, &ports).ok()) << bad;
}

// --- item 10: hostile values --------------------------------------------------------

void ExpectRefused(const Env& env, const std::string& needle, FakeSlurm* slurm = nullptr) {
  FakeSlurm local;
  StepInfo info;
  Status s = StepInfoFromEnvironment(env, slurm ? *slurm : local, &info);
  if (s.ok()) s = ResolveHostfileHosts(env, slurm ? *slurm : local, &info);
  EXPECT_FALSE(s.ok()) << "accepted; expected an error naming " << needle;
  EXPECT_NE(s.ToString().find(needle), std::string::npos) << s;
  EXPECT_EQ(s.ToString().find('\n'), std::string::npos) << "a control character reached the message: " << s;
}

TEST(HostileValues, ANewlineInAHostNameNeverReachesAFile) {
  Env env = TaskEnv();
  env["SLURM_STEP_NODELIST"] = "n1,evil\nn9 slots=99";
  env["SLURM_STEP_NUM_NODES"] = "2";
  ExpectRefused(env, "SLURM_STEP_NODELIST='n1,evil\\nn9 slots=99'");
  env = TaskEnv();
  env.erase("SLURM_STEP_ID");
  env["SLURM_JOB_NODELIST"] = "n1,n2\tx";
  env["SLURM_TASKS_PER_NODE"] = "1(x2)";
  ExpectRefused(env, "SLURM_JOB_NODELIST=");
  // An address from Slurm or the hand-over is held to the same rule.
  FakeSlurm slurm;
  slurm.addr = {{"n1", "10.0.0.1\nn7 slots=8"}};
  env = TaskEnv();
  ExpectRefused(env, "is not a host name", &slurm);
  env = TaskEnv();
  env[kMasterAddrVar] = "9.1:10.0.0.1\nEVIL=1";
  ExpectRefused(env, kMasterAddrVar);
}

// Found by tests/fuzz/fuzz_layout: libslurm reads this malformed list as
// one host named "gpu-[1-2]-]"; the name never reaches a hostfile.
// Found by fuzz_layout (scripts/check --full, 2026-12-02): libslurm reads a
// form feed as a separator, so "gpu-,\f2,1,0" would have named a host "2"
// that the list never held. The list is refused before libslurm sees it.
TEST(HostileValues, AFormFeedInANodeListIsRefusedBeforeLibslurmReadsItAsABlank) {
  for (const char* list : {"gpu-,\f2,1,0", "n1,\vn2", "n1\x7f,n2"}) {
    Env env = TaskEnv();
    env["SLURM_STEP_NODELIST"] = list;
    env["SLURM_STEP_NUM_NODES"] = "2";
    ExpectRefused(env, "holds a blank or a control character");
  }
}

// libslurm reads this list as one host named "gpu-[1-2]-]" (found by
// fuzz_layout); the host check refused that name, and now the list is
// refused from its text before libslurm reads it (hostlist_bound.h).
TEST(HostileValues, AListLibslurmReadsAsOneBracketedHostIsRefused) {
  Env env = TaskEnv();
  env.erase("SLURM_STEP_ID");
  env["SLURM_JOB_NODELIST"] = "gpu-[1-2]-[01x6)";
  env["SLURM_TASKS_PER_NODE"] = "1";
  ExpectRefused(env, "SLURM_JOB_NODELIST='gpu-[1-2]-[01x6)' (at most 131072 nodes): host list 'gpu-[1-2]-[01x6)' "
                     "is malformed: a '[' never closed");
}

TEST(HostileValues, AHostListIsExpandedOnlyAsFarAsTheStepCanHold) {
  // 4 KB of ranges naming 18 million hosts took 1.1 GB: counted first now.
  std::string list;
  while (list.size() < 4000) list += (list.empty() ? "" : ",") + std::string("n") + std::to_string(list.size()) + "x[1-65535]";
  Env env = TaskEnv();
  env["SLURM_STEP_NODELIST"] = list;
  const auto start = std::chrono::steady_clock::now();
  ExpectRefused(env, "more than the 2 it can hold");
  env.erase("SLURM_STEP_NUM_NODES");
  ExpectRefused(env, "more than the 131072 it can hold");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  env = TaskEnv();
  env["SLURM_STEP_NUM_NODES"] = "3";
  ExpectRefused(env, "names 2 hosts but SLURM_STEP_NUM_NODES=3");
}

TEST(HostileValues, AMalformedHostListBlamesTheHostList) {
  for (const char* bad : {"n[", "n[1-2", "n]", "n1,n1"}) {
    Env env = TaskEnv();
    env["SLURM_STEP_NODELIST"] = bad;
    env.erase("SLURM_STEP_NUM_NODES");
    ExpectRefused(env, "SLURM_STEP_NODELIST='" + std::string(bad) + "'");
  }
}

TEST(HostileValues, AnEmptyOrBrokenTaskMapIsNamedWithItsValue) {
  Env env = TaskEnv();
  env[kTaskMapVar] = "9.1:";
  ExpectRefused(env, std::string(kTaskMapVar) + "='9.1:'");
  env[kTaskMapVar] = "9.1:0*2,7";
  ExpectRefused(env, std::string(kTaskMapVar) + "='9.1:0*2,7'");
  env[kTaskMapVar] = "9.1:spiral";
  ExpectRefused(env, "'spiral' is not block, cyclic or plane=P");
  env[kTaskMapVar] = "9.1:cyclic";
  env.erase("SLURM_STEP_TASKS_PER_NODE");
  ExpectRefused(env, "SLURM_STEP_TASKS_PER_NODE is not set");
}

TEST(HostileValues, ATaskMapIsCheckedAgainstTheStepsTaskCounts) {
  // A map of 50,000 ranks beside a step of 2 tasks on each of 2 nodes
  // gave WORLD_SIZE=50000.
  Env env = TaskEnv();
  env[kTaskMapVar] = "9.1:0*25000,1*25000";
  ExpectRefused(env, std::string(kTaskMapVar) + "='9.1:0*25000,1*25000' disagrees with "
                     "SLURM_STEP_TASKS_PER_NODE='2(x2)' (n1: 25000 tasks against 2, 50000 tasks in all)");
  env[kTaskMapVar] = "9.1:1,0,0,1";
  env["SLURM_STEP_TASKS_PER_NODE"] = "3,1";
  ExpectRefused(env, "n1: 2 tasks against 3");
  // The same map with Slurm's counts is taken.
  env["SLURM_STEP_TASKS_PER_NODE"] = "2(x2)";
  StepInfo info;
  FakeSlurm slurm;
  ASSERT_TRUE(StepInfoFromEnvironment(env, slurm, &info).ok());
  EXPECT_EQ(info.layout.num_tasks(), 4);
}

TEST(HostileValues, ANodeNameWithAColonIsRefusedBeforeTheMpichFormatMisreadsIt) {
  // Hydra cuts "a:99:2" at the first ':': 99 processes on host "a".
  Env env = TaskEnv();
  env["SLURM_STEP_NODELIST"] = "a:99,n2";
  ExpectRefused(env, "'a:99' is not a node name (it holds a ':')");
}

TEST(HostileValues, EveryVariableIsNamedWhenItsValueIsWrong) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"SLURM_JOB_ID", "x"},          {"SLURM_JOB_ID", "-1"},          {"SLURM_STEP_ID", "1e3"},
      {"SLURM_NODEID", "2"},          {"SLURM_PROCID", "4"},           {"SLURM_PROCID", " 1"},
      {"SLURM_LOCALID", "+1"},        {"SLURM_RESTART_COUNT", "0x1"},  {"SLURM_STEP_NUM_NODES", "0"},
      {"SLURM_STEP_RESV_PORTS", "1-99999"}, {"SLURM_GPUS_PER_NODE", "gpu:"}, {"SLURM_STEP_TASKS_PER_NODE", "2(x2"},
      {"SLURM_STEP_ID", "4294967292"},
  };
  for (const auto& [name, value] : cases) {
    Env env = TaskEnv();
    env[kTaskMapVar] = "9.1:cyclic";
    env[name] = value;
    ExpectRefused(env, name);
  }
}

// --- the CLI's bound on libslurm's wait ----------------------------------------------

TEST(Deadline, AControllerThatNeverAnswersCostsTheBoundAndNamesWhatIsMissing) {
  static FakeSlurm* hung = new FakeSlurm;  // outlives the abandoned question
  hung->HangQuestions();
  auto slurm = WithDeadline(*hung, std::chrono::milliseconds(200), "no hand-over variables (BATON_STEP_TASK_MAP)");
  StepInfo info;
  const auto start = std::chrono::steady_clock::now();
  Status s = StepInfoFromEnvironment(TaskEnv(), *slurm, &info);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(s.code(), Code::kTimeout) << s;
  EXPECT_NE(s.message().find("the step layout of 9.1"), std::string::npos) << s;
  EXPECT_NE(s.message().find("BATON_STEP_TASK_MAP"), std::string::npos) << s;
  hung->Release();
  FakeSlurm answering;
  auto bounded = WithDeadline(answering, std::chrono::seconds(10), "");
  ASSERT_TRUE(StepInfoFromEnvironment(TaskEnv(), *bounded, &info).ok());
  EXPECT_EQ(info.master_addr, "addr-of-n1");
}

}  // namespace
}  // namespace baton::launch
