// slurmstepd (remote context): on each node of a step, init_post_opt (as
// root) makes the job's node-local directory when the site set local_root;
// user_init (running as the job's user) gathers the step's facts once and
// writes the node's hostfile; task_init (in each task, just before exec)
// sets the task's variables; exit removes the hostfile, again as the user.
#include <fcntl.h>
#include <pwd.h>
#include <unistd.h>
#include "spank/spank_api.h"

#include <chrono>
#include <cstring>
#include <optional>
#include <vector>

#include "base/launch/bounded_child.h"
#include "base/launch/component.h"
#include "base/launch/decimal.h"
#include "base/launch/hand_over.h"
#include "base/launch/het_step.h"
#include "base/launch/hostfile_view.h"
#include "base/launch/launcher_daemon.h"
#include "base/launch/local_dir.h"
#include "base/launch/port_claim.h"
#include "base/launch/quote.h"
#include "base/launch/slurm_facts.h"
#include "spank/plugin.h"

namespace baton::spank {
namespace {

using launch::kComponent;

// How long slurmstepd waits for the hostfile's directory to be made and
// written (user_init) and removed (exit): a hung NFS TMPDIR must hang
// neither the step's start nor its end.
constexpr std::chrono::seconds kFileSystemLimit(10);

// How long slurmstepd waits for each question to the controller (only
// asked when srun's hand-over lacks the answer): a controller failing over
// fails the step with a Timeout naming the question, where an unbounded
// call would hold the step's start until libslurm gives up (minutes).
constexpr std::chrono::seconds kControllerLimit(10);

// Largest job variable read (a task map is bounded far below it).
constexpr size_t kMaxJobEnvBytes = 1 << 20;

// The job's variable `name`: none when it is not set; any other failure is
// an error naming it, never an empty value.
Status JobEnv(spank_t sp, const char* name, std::optional<std::string>* value) {
  value->reset();
  std::vector<char> buf(4096);
  while (true) {
    spank_err_t rc = spank_getenv(sp, name, buf.data(), static_cast<int>(buf.size()));
    if (rc == ESPANK_SUCCESS) {
      *value = std::string(buf.data());
      return Status::OK();
    }
    if (rc == ESPANK_ENV_NOEXIST) return Status::OK();
    if (rc != ESPANK_NOSPACE)
      return Status::Internal(kComponent, std::string("spank_getenv(") + name + "): " + spank_strerror(rc));
    if (buf.size() >= kMaxJobEnvBytes)
      return Status::InvalidArgument(kComponent, std::string(name) + " is longer than " +
                                                     std::to_string(kMaxJobEnvBytes) + " bytes");
    buf.resize(buf.size() * 4);
  }
}

template <typename T>
Status Item(spank_t sp, spank_item_t item, const char* what, T* value) {
  spank_err_t rc = spank_get_item(sp, item, value);
  if (rc != ESPANK_SUCCESS)
    return Status::Internal(kComponent, std::string("spank_get_item(") + what + "): " + spank_strerror(rc));
  return Status::OK();
}

// The job variables the derivation reads (slurm_facts.h), as the job has them.
constexpr const char* kJobVariables[] = {
    "SLURM_STEP_NODELIST", "SLURM_STEP_NUM_NODES", "SLURM_STEP_TASKS_PER_NODE", "SLURM_STEP_RESV_PORTS",
    "SLURM_JOB_NODELIST",  "SLURM_JOB_NUM_NODES",  "SLURM_NNODES",              "SLURM_TASKS_PER_NODE",
    "SLURM_JOB_CPUS_PER_NODE", "SLURM_GPUS_PER_NODE", "SLURM_TRES_PER_NODE", launch::kTaskMapVar,
    launch::kMasterAddrVar, launch::kNodeAddrsVar, launch::kGpusPerNodeVar, launch::kHetComponentsVar, "SLURM_HET_SIZE",
    "SLURM_PACK_SIZE"};

// A heterogeneous step's component job ids (slurm_facts.h), as the job has them.
Status ReadHetComponentVariables(spank_t sp, launch::Env* env) {
  for (const char* size_var : {"SLURM_HET_SIZE", "SLURM_PACK_SIZE"}) {
    auto it = env->find(size_var);
    if (it == env->end()) continue;
    long long size = 0;
    if (!launch::ParseDecimal(it->second, 1, launch::kMaxHetComponents, &size)) return Status::OK();  // named by the derivation
    for (long long k = 0; k < size; ++k) {
      for (const char* base : {"SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURM_JOB_NUM_NODES", "SLURM_TASKS_PER_NODE",
                               "SLURM_JOB_CPUS_PER_NODE"})
      for (const char* group : {"_HET_GROUP_", "_PACK_GROUP_"}) {
        const std::string name = base + (group + std::to_string(k));
        std::optional<std::string> v;
        BATON_RETURN_IF_ERROR(JobEnv(sp, name.c_str(), &v));
        if (v) (*env)[name] = *v;
      }
    }
    return Status::OK();
  }
  return Status::OK();
}

// Where the hostfile's directory goes: a fresh one in the node's temporary
// directory by default, else the administrator's template. Decided here,
// from the job's variables; nothing touches the file system yet.
struct DirPlan {
  std::string tmpdir;        // parent of a fresh directory (template empty)
  std::string prefix;        // of the fresh directory's name
  std::string template_dir;  // the administrator's, expanded
};

Status PlanHostfileDir(spank_t sp, const PluginState& st, uint32_t job, uint32_t step, DirPlan* plan) {
  std::optional<std::string> tmpdir;
  BATON_RETURN_IF_ERROR(JobEnv(sp, "TMPDIR", &tmpdir));
  if (!tmpdir || tmpdir->empty() || (*tmpdir)[0] != '/') tmpdir = "/tmp";
  if (launch::HasControl(*tmpdir))
    return Status::InvalidArgument(kComponent, "TMPDIR=" + launch::Quoted(*tmpdir) + " holds a control character");
  const std::string job_id = std::to_string(job), step_name = launch::StepName(step);
  plan->tmpdir = *tmpdir;
  if (st.config.hostfile_dir.empty()) {
    plan->prefix = "baton." + job_id + "." + step_name + ".";
    return Status::OK();
  }
  const struct passwd* pw = getpwuid(st.uid);
  const std::string user = pw ? pw->pw_name : std::to_string(st.uid);
  const std::string& node = st.step.layout.nodes[static_cast<size_t>(st.step.node_index.value_or(0))];
  plan->template_dir = launch::ExpandHostfileDir(st.config.hostfile_dir, user, job_id, step_name, node, *tmpdir);
  return Status::OK();
}

// The file-system half, in MakeDirBounded's child: makes the directory and
// writes the hostfile in it.
Status MakeHostfileDir(const DirPlan& plan, const std::string& hostfile, launch::OpenDir* dir) {
  Status s;
  if (plan.template_dir.empty()) {
    s = launch::MakeFreshDir(plan.tmpdir, plan.prefix, dir);
    // A TMPDIR that fails the safety rule (say, the user's own, group-writable
    // under a umask of 002) is passed over for /tmp: the directory's place
    // does not matter to the job, BATON_HOSTFILE says where it is.
    if (s.code() == Code::kInvalidArgument && plan.tmpdir != "/tmp") s = launch::MakeFreshDir("/tmp", plan.prefix, dir);
  } else {
    s = launch::OpenSafeDir(plan.template_dir, /*create=*/true, dir);
  }
  if (!s.ok()) return s;
  s = launch::WriteFileIn(*dir, "hostfile", hostfile);
  if (!s.ok()) {
    if (dir->created) unlinkat(dir->parent_fd, dir->leaf.c_str(), AT_REMOVEDIR);
    launch::CloseDir(dir);
  }
  return s;
}

// The step's options: the submitting side resolved them into BATON_*
// variables; the replayed callbacks and the plugstack default only fill
// what is unset.
Status StepOptions(spank_t sp, launch::LaunchOptions* out) {
  launch::Env input;
  for (const auto& spec : launch::UserOptions()) {
    std::optional<std::string> v;
    BATON_RETURN_IF_ERROR(JobEnv(sp, spec.env, &v));
    if (v && !v->empty()) input[spec.env] = *v;
  }
  launch::LaunchOptions from_env;
  BATON_RETURN_IF_ERROR(launch::OptionsFromEnvironment(input, &from_env));
  *out = launch::Merge(from_env, State().from_callbacks);
  return Status::OK();
}

// init_post_opt runs as root, before slurmstepd drops to the user: the one
// callback where the job's directory can be made under a root-owned
// <local_root>/<uid>. The same path on every run of the job, so a requeued
// run that lands here again finds its level-2 checkpoints.
Status InitPostOpt(spank_t sp) {
  PluginState& st = State();
  uint32_t job = 0, step = 0;
  BATON_RETURN_IF_ERROR(Item(sp, S_JOB_ID, "S_JOB_ID", &job));
  BATON_RETURN_IF_ERROR(Item(sp, S_JOB_STEPID, "S_JOB_STEPID", &step));
  const launch::StepKind kind = launch::KindOfStep(step);
  if (kind == launch::StepKind::kNone) return Status::OK();
  launch::LaunchOptions options;
  BATON_RETURN_IF_ERROR(StepOptions(sp, &options));
  if (!options.enabled.value_or(st.config.default_on)) return Status::OK();
  // The batch script's MASTER_PORT, held for the step's life by this
  // slurmstepd (port_claim.h). Slurm reserves no port for it; the claim
  // starts at the job's hashed port, so an uncontended job keeps it.
  if (kind == launch::StepKind::kAllocation && !options.master_port) {
    int port = 0;
    const int start = launch::MasterPort(std::to_string(job), std::nullopt, st.config.port_lo, st.config.port_hi);
    BATON_RETURN_IF_ERROR(launch::ClaimPort(st.config.port_dir, st.config.port_lo, st.config.port_hi, start, &port,
                                            &st.port_fd));
    st.allocation_port = port;
  }
  if (st.config.local_root.empty()) return Status::OK();
  uid_t uid = 0;
  gid_t gid = 0;
  BATON_RETURN_IF_ERROR(Item(sp, S_JOB_UID, "S_JOB_UID", &uid));
  BATON_RETURN_IF_ERROR(Item(sp, S_JOB_GID, "S_JOB_GID", &gid));
  const std::string path = launch::JobLocalDirPath(st.config.local_root, uid, job);
  // The user's own directory is the user's business; the job's own path
  // (inherited by a step from its batch script's BATON_LOCAL_DIR) is made
  // on this node as on the batch script's.
  if (options.local_dir && *options.local_dir != path) return Status::OK();
  launch::OpenDir dir;
  BATON_RETURN_IF_ERROR(launch::MakeDirBounded(
      "making the node-local directory " + launch::Quoted(path), kFileSystemLimit,
      [&](launch::OpenDir* d) { return launch::OpenJobLocalDir(st.config.local_root, uid, gid, job, d); }, &dir));
  launch::CloseDir(&dir);
  st.job_local_dir = path;
  return Status::OK();
}

Status UserInit(spank_t sp) {
  PluginState& st = State();
  uint32_t job = 0, step = 0, node_id = 0, restarts = 0;
  BATON_RETURN_IF_ERROR(Item(sp, S_JOB_ID, "S_JOB_ID", &job));
  BATON_RETURN_IF_ERROR(Item(sp, S_JOB_STEPID, "S_JOB_STEPID", &step));
  const launch::StepKind kind = launch::KindOfStep(step);
  if (kind == launch::StepKind::kNone) return Status::OK();  // the extern step runs nothing of the user's

  BATON_RETURN_IF_ERROR(StepOptions(sp, &st.options));
  if (!st.options.enabled.value_or(st.config.default_on)) return Status::OK();
  int argc = 0;
  char** argv = nullptr;
  spank_err_t rc = spank_get_item(sp, S_JOB_ARGV, &argc, &argv);
  if (rc != ESPANK_SUCCESS) return Status::Internal(kComponent, std::string("spank_get_item(S_JOB_ARGV): ") + spank_strerror(rc));
  if (argc > 0 && argv && argv[0] && launch::IsLauncherDaemon(argv[0])) return Status::OK();  // launcher_daemon.h
  if (!st.job_local_dir.empty()) st.options.local_dir = st.job_local_dir;

  BATON_RETURN_IF_ERROR(Item(sp, S_JOB_NODEID, "S_JOB_NODEID", &node_id));
  BATON_RETURN_IF_ERROR(Item(sp, S_JOB_UID, "S_JOB_UID", &st.uid));
  BATON_RETURN_IF_ERROR(Item(sp, S_JOB_GID, "S_JOB_GID", &st.gid));
  // BATON_RESTART_COUNT tells a requeued job it is one: never guessed.
  BATON_RETURN_IF_ERROR(Item(sp, S_SLURM_RESTART_COUNT, "S_SLURM_RESTART_COUNT", &restarts));

  launch::Env env;
  env["SLURM_JOB_ID"] = std::to_string(job);
  if (kind == launch::StepKind::kTasks) env["SLURM_STEP_ID"] = std::to_string(step);
  env["SLURM_NODEID"] = std::to_string(node_id);
  env["SLURM_RESTART_COUNT"] = std::to_string(restarts);
  for (const char* name : kJobVariables) {
    std::optional<std::string> v;
    BATON_RETURN_IF_ERROR(JobEnv(sp, name, &v));
    if (v) env[name] = *v;
  }
  BATON_RETURN_IF_ERROR(ReadHetComponentVariables(sp, &env));
  // srun's hand-over in the launch request; the environment's (absent
  // under --export=NONE) only where the options carried none.
  launch::AddHandOverFromOptions(st.hand_over, &env);
  auto slurm = launch::WithDeadline(launch::Libslurm(), kControllerLimit,
                                    "srun's hand-over (the launch request's --baton-hand-over-* options, "
                                    "srun's BATON_STEP_* variables) did not carry it for this step");
  BATON_RETURN_IF_ERROR(launch::StepInfoFromEnvironment(env, *slurm, &st.step));
  BATON_RETURN_IF_ERROR(launch::ResolveHostfileHosts(env, *slurm, &st.step));
  const launch::HostfileFormat format = st.options.hostfile.value_or(launch::HostfileFormat::kOpenMpi);
  if (format == launch::HostfileFormat::kDeepSpeed)
    BATON_RETURN_IF_ERROR(launch::ResolveHostfileGpus(env, *slurm, &st.step));

  // user_init runs with the job user's privileges: the directory and file
  // belong to the user, and root never writes into a path a user controls.
  // The file system is touched only in a child waited for under a bound: a
  // hung NFS TMPDIR then fails the step with a Timeout instead of hanging
  // slurmstepd (and the node's every later step) for ever.
  DirPlan plan;
  BATON_RETURN_IF_ERROR(PlanHostfileDir(sp, st, job, step, &plan));
  const std::string hostfile = launch::FormatHostfile(format, st.step);
  launch::OpenDir dir;
  BATON_RETURN_IF_ERROR(launch::MakeDirBounded(
      "making the hostfile's directory in " + launch::Quoted(plan.template_dir.empty() ? plan.tmpdir : plan.template_dir),
      kFileSystemLimit, [&](launch::OpenDir* d) { return MakeHostfileDir(plan, hostfile, d); }, &dir));
  st.hostfile_dir = dir;
  st.hostfile_text = hostfile;
  st.step.hostfile_path = dir.path + "/hostfile";
  st.step.allocation_port = st.allocation_port;
  st.active = true;
  return Status::OK();
}

}  // namespace

Status RemoteInitPostOpt(spank_t sp) {
  // Kept for task_init, as user_init's failure is (RemoteUserInit).
  Status s = InitPostOpt(sp);
  if (!s.ok()) {
    State().init_error = s;
    LogError(s.Annotate("init_post_opt (the step's tasks will fail with this)"));
  }
  return Status::OK();
}

Status RemoteUserInit(spank_t sp) {
  // A failed user_init of a required plugin makes slurmstepd start no task
  // and srun exit 0, the message only in slurmd's log (spank_user in
  // slurmstepd's mgr.c). Kept for task_init instead, which fails every
  // task with it on the user's terminal.
  if (!State().init_error.ok()) return Status::OK();  // init_post_opt's, kept
  Status s = UserInit(sp);
  if (!s.ok()) {
    State().init_error = s;
    LogError(s.Annotate("user_init (the step's tasks will fail with this)"));
  }
  return Status::OK();
}

Status RemoteTaskInit(spank_t sp) {
  PluginState& st = State();
  if (!st.init_error.ok()) return st.init_error;
  if (!st.active) return Status::OK();
  launch::StepInfo info = st.step;
  if (info.step_id) {
    uint32_t rank = 0;
    int local = 0;
    BATON_RETURN_IF_ERROR(Item(sp, S_TASK_GLOBAL_ID, "S_TASK_GLOBAL_ID", &rank));
    BATON_RETURN_IF_ERROR(Item(sp, S_TASK_ID, "S_TASK_ID", &local));
    info.rank = info.component_first_rank + static_cast<int>(rank);
    info.local_rank = local;
    // Slurm's GPU plugin sets the step's devices per task (narrowed where
    // it binds GPUs to tasks) before task_init; read them here.
    std::optional<std::string> devices, on_node;
    BATON_RETURN_IF_ERROR(JobEnv(sp, "CUDA_VISIBLE_DEVICES", &devices));
    BATON_RETURN_IF_ERROR(JobEnv(sp, "SLURM_GPUS_ON_NODE", &on_node));
    BATON_RETURN_IF_ERROR(launch::TaskGpusFromVariables(devices, on_node, &info));
  }
  launch::EnvList env;
  BATON_RETURN_IF_ERROR(launch::DeriveLaunchEnv(info, st.options, st.config, &env));
  // Another mount namespace than user_init's (job_container/tmpfs without
  // contain_spank): the task would find nothing at BATON_HOSTFILE, so the
  // same path is made to hold the same text in the task's view.
  bool same = true;
  if (st.hostfile_dir.fd >= 0) BATON_RETURN_IF_ERROR(launch::SeenAtItsPath(st.hostfile_dir, &same));
  if (!same) BATON_RETURN_IF_ERROR(launch::PlaceInThisView(st.hostfile_dir.path, "hostfile", st.hostfile_text));
  for (const auto& [name, value] : env) {
    spank_err_t rc = spank_setenv(sp, name.c_str(), value.c_str(), 1);
    if (rc != ESPANK_SUCCESS)
      return Status::Internal(kComponent, "spank_setenv(" + name + "): " + spank_strerror(rc));
  }
  return Status::OK();
}

Status RemoteExit(spank_t) {
  PluginState& st = State();
  launch::ReleasePort(&st.port_fd);
  if (!st.active) return Status::OK();
  st.active = false;
  // exit runs as root: the user's files are removed as the user, in a
  // child, so that a link the user planted cannot point root's unlink
  // elsewhere, and with a bound on the wait.
  Status s = launch::RemoveAsUser(st.hostfile_dir, "hostfile", st.uid, st.gid, kFileSystemLimit);
  launch::CloseDir(&st.hostfile_dir);
  return s;
}

}  // namespace baton::spank
