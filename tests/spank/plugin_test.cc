// The plugin's callbacks as slurmstepd calls them, against a fake Slurm
// (tests/spank/fake_spank.h): what the tasks get, what happens when
// user_init fails, and Slurm's own failures, which must never turn into
// an empty value or a 0.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "spank/plugin.h"
#include "tests/spank/fake_spank.h"

extern "C" {
int slurm_spank_init(spank_t sp, int ac, char** av);
int slurm_spank_init_post_opt(spank_t sp, int ac, char** av);
int slurm_spank_user_init(spank_t sp, int ac, char** av);
int slurm_spank_task_init(spank_t sp, int ac, char** av);
int slurm_spank_exit(spank_t sp, int ac, char** av);
}

namespace baton::spank {
namespace {

class PluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Fake() = FakeSpank();
    State() = PluginState();
    std::string tmpl = "/tmp/baton-spank-test-XXXXXX";
    ASSERT_NE(mkdtemp(&tmpl[0]), nullptr);
    tmp_ = tmpl;
    FakeSpank& f = Fake();
    f.context = S_CTX_REMOTE;
    f.items = {{S_JOB_ID, 9},           {S_JOB_STEPID, 1},         {S_JOB_NODEID, 1},
               {S_JOB_UID, geteuid()},  {S_JOB_GID, getegid()},     {S_SLURM_RESTART_COUNT, 2},
               {S_TASK_GLOBAL_ID, 3},   {S_TASK_ID, 1}};
    f.job_env = {{"BATON_ENABLE", "on"},
                 {"SLURM_STEP_NODELIST", "n[1-2]"},
                 {"SLURM_STEP_NUM_NODES", "2"},
                 {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"},
                 {"BATON_STEP_TASK_MAP", "9.1:cyclic"},
                 {"BATON_STEP_NODE_ADDRS", "9.1:=names"},
                 {"BATON_STEP_MASTER_ADDR", "9.1:10.0.0.1"},
                 {"TMPDIR", tmp_}};
  }
  void TearDown() override { ASSERT_EQ(std::system(("rm -rf '" + tmp_ + "'").c_str()), 0); }

  // slurm_spank_init with plugstack.conf arguments `args`.
  int Init(std::vector<std::string> args = {}) {
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    return slurm_spank_init(nullptr, static_cast<int>(argv.size()), argv.data());
  }
  std::string tmp_;
};

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST_F(PluginTest, EachTaskGetsItsVariablesAndTheHostfileGoesAtExit) {
  ASSERT_EQ(Init(), 0);
  ASSERT_EQ(slurm_spank_user_init(nullptr, 0, nullptr), 0) << Fake().Errors();
  ASSERT_EQ(slurm_spank_task_init(nullptr, 0, nullptr), 0) << Fake().Errors();
  auto& env = Fake().set_env;
  EXPECT_EQ(env["RANK"], "3");
  EXPECT_EQ(env["LOCAL_RANK"], "1");
  EXPECT_EQ(env["WORLD_SIZE"], "4");
  EXPECT_EQ(env["MASTER_ADDR"], "10.0.0.1");
  EXPECT_EQ(env["BATON_RESTART_COUNT"], "2");
  const std::string hostfile = env["BATON_HOSTFILE"];
  EXPECT_EQ(hostfile.rfind(tmp_ + "/baton.9.1.", 0), 0u) << hostfile;
  EXPECT_EQ(Read(hostfile), "n1 slots=2\nn2 slots=2\n");
  ASSERT_EQ(slurm_spank_exit(nullptr, 0, nullptr), 0) << Fake().Errors();
  EXPECT_NE(access(hostfile.c_str(), F_OK), 0);
  EXPECT_NE(access(hostfile.substr(0, hostfile.rfind('/')).c_str(), F_OK), 0);
}

TEST_F(PluginTest, SlurmsPerTaskGpuWithLocalRankBindingStartsTheTask) {
  // srun --gpus-per-task=1 -n2 --baton-gpu-bind=local-rank: Slurm gave
  // local rank 1 GPU 1 alone. Before, task_init failed ("2 tasks on n2 but
  // Slurm gave the step 1 GPUs there"): "Failed to invoke spank plugin stack".
  Fake().job_env["CUDA_VISIBLE_DEVICES"] = "1";
  Fake().job_env["SLURM_GPUS_ON_NODE"] = "2";
  Fake().job_env["BATON_GPU_BIND"] = "local-rank";
  ASSERT_EQ(Init(), 0);
  ASSERT_EQ(slurm_spank_user_init(nullptr, 0, nullptr), 0) << Fake().Errors();
  ASSERT_EQ(slurm_spank_task_init(nullptr, 0, nullptr), 0) << Fake().Errors();
  EXPECT_EQ(Fake().set_env["CUDA_VISIBLE_DEVICES"], "1");
  EXPECT_EQ(Fake().set_env["BATON_DEVICE"], "0");
  ASSERT_EQ(slurm_spank_exit(nullptr, 0, nullptr), 0) << Fake().Errors();
}

TEST_F(PluginTest, ATaskThatDoesNotSeeUserInitsHostfileGetsItAtTheSamePath) {
  // job_container/tmpfs without contain_spank: the task's /tmp is not the
  // one user_init wrote in. Here the directory moves away between the two
  // callbacks, so the path names nothing, as in the task's namespace.
  ASSERT_EQ(Init(), 0);
  ASSERT_EQ(slurm_spank_user_init(nullptr, 0, nullptr), 0) << Fake().Errors();
  const std::string dir = State().hostfile_dir.path;
  ASSERT_EQ(rename(dir.c_str(), (dir + ".elsewhere").c_str()), 0);
  ASSERT_EQ(slurm_spank_task_init(nullptr, 0, nullptr), 0) << Fake().Errors();
  const std::string hostfile = Fake().set_env["BATON_HOSTFILE"];
  EXPECT_EQ(hostfile, dir + "/hostfile");
  EXPECT_EQ(Read(hostfile), "n1 slots=2\nn2 slots=2\n") << "the task finds the same text at BATON_HOSTFILE";
  struct stat st;
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  // exit runs in slurmstepd's view, where the path is user_init's own
  // again; the task's copy goes with the job's /tmp.
  ASSERT_EQ(std::system(("rm -r '" + dir + "'").c_str()), 0);
  ASSERT_EQ(rename((dir + ".elsewhere").c_str(), dir.c_str()), 0);
  ASSERT_EQ(slurm_spank_exit(nullptr, 0, nullptr), 0) << Fake().Errors();
  EXPECT_NE(access(dir.c_str(), F_OK), 0) << "exit removes user_init's own";
}

TEST_F(PluginTest, ALaunchersDaemonStepGetsNoBatonVariables) {
  // mpirun inside an allocation runs `srun ... orted` (prted in Open MPI
  // 5), which inherits BATON_ENABLE=on: its tasks are daemons, one per
  // node, and their RANK would be the node's index.
  for (const char* daemon : {"orted", "/usr/bin/prted", "hydra_pmi_proxy", "hydra_bstrap_proxy"}) {
    TearDown();
    SetUp();
    Fake().argv = {daemon, "-mca", "ess", "slurm"};
    ASSERT_EQ(Init(), 0);
    ASSERT_EQ(slurm_spank_user_init(nullptr, 0, nullptr), 0) << Fake().Errors();
    ASSERT_EQ(slurm_spank_task_init(nullptr, 0, nullptr), 0) << Fake().Errors();
    EXPECT_TRUE(Fake().set_env.empty()) << daemon << ": set " << Fake().set_env.begin()->first;
    ASSERT_EQ(slurm_spank_exit(nullptr, 0, nullptr), 0) << Fake().Errors();
  }
  TearDown();
  SetUp();
  Fake().argv = {"./orted-like-trainer"};
  ASSERT_EQ(Init(), 0);
  ASSERT_EQ(slurm_spank_user_init(nullptr, 0, nullptr), 0) << Fake().Errors();
  ASSERT_EQ(slurm_spank_task_init(nullptr, 0, nullptr), 0) << Fake().Errors();
  EXPECT_EQ(Fake().set_env["RANK"], "3") << "only the daemons' own names";
  ASSERT_EQ(slurm_spank_exit(nullptr, 0, nullptr), 0) << Fake().Errors();
}

TEST_F(PluginTest, TheJobsNodeLocalDirectoryIsMadeAsRootAndHandedToEveryTask) {
  const std::string root = tmp_ + "/local";
  ASSERT_EQ(Init({"local_root=" + root}), 0);
  ASSERT_EQ(slurm_spank_init_post_opt(nullptr, 0, nullptr), 0) << Fake().Errors();
  ASSERT_EQ(slurm_spank_user_init(nullptr, 0, nullptr), 0) << Fake().Errors();
  ASSERT_EQ(slurm_spank_task_init(nullptr, 0, nullptr), 0) << Fake().Errors();
  const std::string dir = root + "/" + std::to_string(geteuid()) + "/9";
  EXPECT_EQ(Fake().set_env["BATON_LOCAL_DIR"], dir);
  struct stat st;
  ASSERT_EQ(lstat(dir.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  ASSERT_EQ(slurm_spank_exit(nullptr, 0, nullptr), 0) << Fake().Errors();
  EXPECT_EQ(access(dir.c_str(), F_OK), 0) << "the step's end keeps it: a requeued run may need it";
}

TEST_F(PluginTest, TheUsersOwnLocalDirectoryIsLeftAsItIs) {
  const std::string root = tmp_ + "/local";
  Fake().job_env["BATON_LOCAL_DIR"] = "/scratch/mine";
  ASSERT_EQ(Init({"local_root=" + root}), 0);
  ASSERT_EQ(slurm_spank_init_post_opt(nullptr, 0, nullptr), 0) << Fake().Errors();
  ASSERT_EQ(slurm_spank_user_init(nullptr, 0, nullptr), 0) << Fake().Errors();
  ASSERT_EQ(slurm_spank_task_init(nullptr, 0, nullptr), 0) << Fake().Errors();
  EXPECT_EQ(Fake().set_env["BATON_LOCAL_DIR"], "/scratch/mine");
  EXPECT_NE(access(root.c_str(), F_OK), 0) << "nothing made under local_root";
  ASSERT_EQ(slurm_spank_exit(nullptr, 0, nullptr), 0);
}

TEST_F(PluginTest, AnUnsafeLocalRootFailsEveryTaskNamingIt) {
  const std::string root = tmp_ + "/local";
  ASSERT_EQ(mkdir(root.c_str(), 0777), 0);
  ASSERT_EQ(chmod(root.c_str(), 0777), 0);
  ASSERT_EQ(Init({"local_root=" + root}), 0);
  EXPECT_EQ(slurm_spank_init_post_opt(nullptr, 0, nullptr), 0) << "kept for task_init, as user_init's failure";
  EXPECT_EQ(slurm_spank_user_init(nullptr, 0, nullptr), 0);
  Fake().errors.clear();
  EXPECT_EQ(slurm_spank_task_init(nullptr, 0, nullptr), -1);
  EXPECT_NE(Fake().Errors().find("node-local directory '" + root + "' is not safe to use"), std::string::npos)
      << Fake().Errors();
  EXPECT_EQ(Fake().set_env.count("RANK"), 0u);
  EXPECT_EQ(slurm_spank_exit(nullptr, 0, nullptr), 0);
}

TEST_F(PluginTest, AnUnsafeTmpdirIsPassedOverForTmp) {
  // The user's own TMPDIR, group-writable (umask 002): not safe, and not
  // worth failing the step for; the fresh directory goes to /tmp instead.
  const std::string mine = tmp_ + "/mine";
  ASSERT_EQ(mkdir(mine.c_str(), 0775), 0);
  ASSERT_EQ(chmod(mine.c_str(), 0775), 0);
  Fake().job_env["TMPDIR"] = mine;
  ASSERT_EQ(Init(), 0);
  ASSERT_EQ(slurm_spank_user_init(nullptr, 0, nullptr), 0);
  ASSERT_EQ(slurm_spank_task_init(nullptr, 0, nullptr), 0) << Fake().Errors();
  EXPECT_EQ(Fake().set_env["BATON_HOSTFILE"].rfind("/tmp/baton.9.1.", 0), 0u) << Fake().set_env["BATON_HOSTFILE"];
  ASSERT_EQ(slurm_spank_exit(nullptr, 0, nullptr), 0) << Fake().Errors();
}

TEST_F(PluginTest, AUserInitFailureFailsEveryTaskVisibly) {
  // The hostfile directory is refused (world-writable, not sticky). A
  // failed user_init makes slurmstepd start no task and srun exit 0; the
  // failure must instead reach every task, which then exits 1 with the
  // message on the user's terminal.
  const std::string open_dir = tmp_ + "/open";
  ASSERT_EQ(mkdir(open_dir.c_str(), 0777), 0);
  ASSERT_EQ(chmod(open_dir.c_str(), 0777), 0);
  ASSERT_EQ(Init({"hostfile_dir=" + open_dir + "/%j.%s.%n"}), 0);
  EXPECT_EQ(slurm_spank_user_init(nullptr, 0, nullptr), 0) << "user_init must let Slurm start the tasks";
  Fake().errors.clear();
  EXPECT_EQ(slurm_spank_task_init(nullptr, 0, nullptr), -1) << "the task must fail";
  EXPECT_NE(Fake().Errors().find("hostfile directory '" + open_dir + "' is not safe to use"), std::string::npos)
      << Fake().Errors();
  EXPECT_EQ(Fake().set_env.count("RANK"), 0u);
  EXPECT_EQ(slurm_spank_exit(nullptr, 0, nullptr), 0);
}

TEST_F(PluginTest, AHostfileDirectoryWritableByItsGroupIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "a root-owned directory of another group needs root";
  // root:4242 0775: every member of group 4242 could swap the directory.
  const std::string shared = tmp_ + "/shared";
  ASSERT_EQ(mkdir(shared.c_str(), 0775), 0);
  ASSERT_EQ(chmod(shared.c_str(), 0775), 0);
  ASSERT_EQ(chown(shared.c_str(), 0, 4242), 0);
  ASSERT_EQ(Init({"hostfile_dir=" + shared + "/%j.%s.%n"}), 0);
  EXPECT_EQ(slurm_spank_user_init(nullptr, 0, nullptr), 0);
  EXPECT_EQ(slurm_spank_task_init(nullptr, 0, nullptr), -1);
  EXPECT_NE(Fake().Errors().find("'" + shared + "' is not safe to use: owned by uid 0 with mode 0775"), std::string::npos)
      << Fake().Errors();
}

TEST_F(PluginTest, AFailedRestartCountLookupIsAnErrorNotZero) {
  Fake().failing_items[S_SLURM_RESTART_COUNT] = ESPANK_BAD_ARG;
  ASSERT_EQ(Init(), 0);
  EXPECT_EQ(slurm_spank_user_init(nullptr, 0, nullptr), 0);
  EXPECT_EQ(slurm_spank_task_init(nullptr, 0, nullptr), -1);
  EXPECT_NE(Fake().Errors().find("spank_get_item(S_SLURM_RESTART_COUNT)"), std::string::npos) << Fake().Errors();
  EXPECT_EQ(Fake().set_env.count("BATON_RESTART_COUNT"), 0u);
}

TEST_F(PluginTest, AJobVariableSlurmCannotReadIsAnErrorNamingIt) {
  // Not "unset", not "": Slurm failed to answer.
  Fake().failing_env["SLURM_STEP_NODELIST"] = ESPANK_BAD_ARG;
  ASSERT_EQ(Init(), 0);
  EXPECT_EQ(slurm_spank_user_init(nullptr, 0, nullptr), 0);
  EXPECT_EQ(slurm_spank_task_init(nullptr, 0, nullptr), -1);
  EXPECT_NE(Fake().Errors().find("spank_getenv(SLURM_STEP_NODELIST): Bad argument"), std::string::npos)
      << Fake().Errors();
}

TEST_F(PluginTest, AFailedLocalRankLookupIsAnError) {
  Fake().failing_items[S_TASK_ID] = ESPANK_NOT_TASK;
  ASSERT_EQ(Init(), 0);
  ASSERT_EQ(slurm_spank_user_init(nullptr, 0, nullptr), 0);
  EXPECT_EQ(slurm_spank_task_init(nullptr, 0, nullptr), -1);
  EXPECT_NE(Fake().Errors().find("spank_get_item(S_TASK_ID)"), std::string::npos) << Fake().Errors();
  EXPECT_EQ(slurm_spank_exit(nullptr, 0, nullptr), 0);
}

TEST_F(PluginTest, TheExternStepIsLeftAlone) {
  Fake().items[S_JOB_STEPID] = 0xfffffffc;
  ASSERT_EQ(Init(), 0);
  EXPECT_EQ(slurm_spank_user_init(nullptr, 0, nullptr), 0);
  EXPECT_EQ(slurm_spank_task_init(nullptr, 0, nullptr), 0);
  EXPECT_TRUE(Fake().set_env.empty());
  EXPECT_TRUE(Fake().errors.empty()) << Fake().Errors();
}

TEST_F(PluginTest, WithoutBatonNothingIsTouched) {
  Fake().job_env.erase("BATON_ENABLE");
  ASSERT_EQ(Init(), 0);
  EXPECT_EQ(slurm_spank_user_init(nullptr, 0, nullptr), 0);
  EXPECT_EQ(slurm_spank_task_init(nullptr, 0, nullptr), 0);
  EXPECT_TRUE(Fake().set_env.empty());
}

// slurmstepd replays `srun --baton` (no value) as the empty text: no value,
// no error. On the submitting side an empty value is the user's, refused
// naming it.
TEST_F(PluginTest, AnEmptyValueReplayedBySlurmstepdMeansNoValue) {
  ASSERT_EQ(Init(), 0);
  const struct spank_option* baton = nullptr;
  for (const struct spank_option& o : Fake().option_specs) {
    if (std::string(o.name) == "baton") baton = &o;
  }
  ASSERT_NE(baton, nullptr) << "--baton was not registered";
  ASSERT_EQ(baton->has_arg, 2);
  EXPECT_EQ(baton->cb(baton->val, "", /*remote=*/1), 0);
  EXPECT_TRUE(Fake().errors.empty()) << Fake().Errors();
  EXPECT_EQ(baton->cb(baton->val, "", /*remote=*/0), -1);
  EXPECT_NE(Fake().Errors().find("''"), std::string::npos) << Fake().Errors();
}

// Issue 30 item 3: srun hands the step over as values of hidden options,
// which Slurm sends in the launch request whatever --export drops. srun's
// side: the options are not registered there (a registered option srun
// has not seen is cached as not given, and no value could be set later),
// each value goes through spank_option_getopt, and the variable getopt
// reads is gone afterwards.
TEST_F(PluginTest, SrunForwardsTheHandOverAsOptionValues) {
  Fake().context = S_CTX_LOCAL;
  ASSERT_EQ(Init(), 0);
  for (const std::string& name : Fake().options) EXPECT_EQ(name.rfind("baton-hand-over-", 0), std::string::npos) << name;
  const launch::EnvList vars = {{"BATON_STEP_TASK_MAP", "9.1:cyclic"},
                                {"BATON_STEP_NODE_ADDRS", "9.1:10.0.0.[1-2]"},
                                {"BATON_STEP_MASTER_ADDR", "9.1:10.0.0.1"}};
  Status s = ForwardHandOver(nullptr, vars);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(Fake().forwarded, (std::map<std::string, std::string>{{"baton-hand-over-task-map", "9.1:cyclic"},
                                                                  {"baton-hand-over-node-addrs", "9.1:10.0.0.[1-2]"},
                                                                  {"baton-hand-over-master-addr", "9.1:10.0.0.1"}}));
  EXPECT_EQ(std::getenv("_SLURM_SPANK_OPTION_baton_baton_hand_over_task_map"), nullptr);
  // A second hand-over in the same srun would send the first one's values: refused.
  s = ForwardHandOver(nullptr, {{"BATON_STEP_TASK_MAP", "9.2:block"}});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("9.2:block"), std::string::npos) << s.ToString();
}

// slurmstepd's side: the options are registered, Slurm replays their
// values (remote=1) before init_post_opt, and user_init takes the step
// from them with no BATON_STEP_* in the job's environment (--export=NONE)
// and without asking the controller (which this test has none of).
TEST_F(PluginTest, SlurmstepdTakesTheHandOverFromTheLaunchRequestsOptions) {
  for (const char* var : {"BATON_STEP_TASK_MAP", "BATON_STEP_NODE_ADDRS", "BATON_STEP_MASTER_ADDR"})
    Fake().job_env.erase(var);
  ASSERT_EQ(Init(), 0);
  const std::map<std::string, std::string> sent = {{"baton-hand-over-task-map", "9.1:cyclic"},
                                                   {"baton-hand-over-node-addrs", "9.1:=names"},
                                                   {"baton-hand-over-master-addr", "9.1:10.0.0.7"}};
  size_t replayed = 0;
  for (const struct spank_option& o : Fake().option_specs) {
    auto it = sent.find(o.name);
    if (it == sent.end()) continue;
    ASSERT_EQ(o.has_arg, 1) << o.name;
    EXPECT_EQ(o.cb(o.val, it->second.c_str(), /*remote=*/1), 0);
    ++replayed;
  }
  ASSERT_EQ(replayed, sent.size()) << "hand-over options not registered in slurmstepd";
  ASSERT_EQ(slurm_spank_user_init(nullptr, 0, nullptr), 0) << Fake().Errors();
  ASSERT_EQ(slurm_spank_task_init(nullptr, 0, nullptr), 0) << Fake().Errors();
  EXPECT_EQ(Fake().set_env["MASTER_ADDR"], "10.0.0.7");
  EXPECT_EQ(Fake().set_env["RANK"], "3");
  EXPECT_EQ(Fake().set_env["WORLD_SIZE"], "4");
  EXPECT_EQ(Read(Fake().set_env["BATON_HOSTFILE"]), "n1 slots=2\nn2 slots=2\n");
  ASSERT_EQ(slurm_spank_exit(nullptr, 0, nullptr), 0) << Fake().Errors();
}

}  // namespace
}  // namespace baton::spank
