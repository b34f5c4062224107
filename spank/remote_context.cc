// slurmstepd (remote context): on each node of a step, user_init (running
// as the job's user) gathers the step's facts once and writes the node's
// hostfile; task_init (in each task, just before exec) sets the task's
// variables; exit removes the hostfile, again as the user.
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <slurm/slurm.h>
#include "spank/spank_api.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "base/launch/component.h"
#include "base/launch/slurm_facts.h"
#include "spank/plugin.h"

namespace baton::spank {
namespace {

using launch::kComponent;

std::string JobEnv(spank_t sp, const char* name) {
  std::vector<char> buf(4096);
  while (true) {
    spank_err_t rc = spank_getenv(sp, name, buf.data(), static_cast<int>(buf.size()));
    if (rc == ESPANK_SUCCESS) return buf.data();
    if (rc != ESPANK_NOSPACE || buf.size() > (1u << 20)) return "";
    buf.resize(buf.size() * 4);  // a task map of a large cyclic step
  }
}

template <typename T>
Status Item(spank_t sp, spank_item_t item, const char* what, T* value) {
  spank_err_t rc = spank_get_item(sp, item, value);
  if (rc != ESPANK_SUCCESS)
    return Status::Internal(kComponent, std::string("spank_get_item(") + what + "): " + spank_strerror(rc));
  return Status::OK();
}

Status Errno(const std::string& what, const std::string& path) {
  return Status::IOError(kComponent, what + " '" + path + "': " + std::strerror(errno));
}

// mkdir -p with 0700 for what it creates; runs as the job's user. A
// directory that already exists is used only if it cannot be turned against
// the user: a real directory (not a link), owned by the user and writable
// by nobody else, or owned by root and, if world-writable, sticky (/tmp).
// Otherwise another user could have made /tmp/baton-alice and swap the
// hostfile that alice's launcher reads.
Status MakeDirs(const std::string& path, bool* created_leaf) {
  *created_leaf = false;
  const uid_t me = geteuid();
  for (size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos != path.size() && path[pos] != '/') continue;
    const std::string prefix = path.substr(0, pos);
    if (mkdir(prefix.c_str(), 0700) == 0) {
      if (pos == path.size()) *created_leaf = true;
      continue;
    }
    if (errno != EEXIST) return Errno("cannot create hostfile directory", prefix);
    struct stat st;
    if (lstat(prefix.c_str(), &st) != 0) return Errno("cannot inspect hostfile directory", prefix);
    const bool dir = S_ISDIR(st.st_mode);
    const bool mine = st.st_uid == me && (st.st_mode & 022) == 0;
    const bool roots = st.st_uid == 0 && ((st.st_mode & 002) == 0 || (st.st_mode & S_ISVTX) != 0);
    if (!dir || !(mine || roots)) {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
      return Status::InvalidArgument(
          kComponent, "hostfile directory '" + prefix + "' is not safe to use: " +
                          (!dir ? std::string("not a directory (a link or a file)")
                                : "owned by uid " + std::to_string(st.st_uid) + " with mode " + mode +
                                      "; it must belong to uid " + std::to_string(me) +
                                      " and be writable by nobody else"));
    }
  }
  return Status::OK();
}

// Writes the hostfile under a temporary name, then renames it into place:
// a task never reads half a file. O_NOFOLLOW|O_EXCL: never through a link.
Status WriteHostfile(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp";
  unlink(tmp.c_str());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Errno("cannot create hostfile", tmp);
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Status s = Errno("cannot write hostfile", tmp);
      close(fd);
      unlink(tmp.c_str());
      return s;
    }
    done += static_cast<size_t>(n);
  }
  if (close(fd) != 0) {
    Status s = Errno("cannot close hostfile", tmp);
    unlink(tmp.c_str());
    return s;
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    Status s = Errno("cannot rename hostfile into", path);
    unlink(tmp.c_str());
    return s;
  }
  return Status::OK();
}

bool IsUserStep(uint32_t step) {
  // The extern and interactive steps run no task of the user's program.
  return step != SLURM_EXTERN_CONT && step != SLURM_INTERACTIVE_STEP && step != SLURM_PENDING_STEP;
}

Status UserInit(spank_t sp) {
  PluginState& st = State();
  uint32_t job = 0, step = 0, node_id = 0, restarts = 0;
  BATON_RETURN_IF_ERROR(Item(sp, S_JOB_ID, "S_JOB_ID", &job));
  BATON_RETURN_IF_ERROR(Item(sp, S_JOB_STEPID, "S_JOB_STEPID", &step));
  if (!IsUserStep(step)) return Status::OK();

  // The submitting side resolved the options into BATON_* variables; the
  // replayed callbacks and the plugstack default only fill what is unset.
  launch::Env input;
  for (const auto& spec : launch::UserOptions())
    if (std::string v = JobEnv(sp, spec.env); !v.empty()) input[spec.env] = v;
  launch::LaunchOptions from_env;
  BATON_RETURN_IF_ERROR(launch::OptionsFromEnvironment(input, &from_env));
  st.options = launch::Merge(from_env, st.from_callbacks);
  if (!st.options.enabled.value_or(st.config.default_on)) return Status::OK();

  BATON_RETURN_IF_ERROR(Item(sp, S_JOB_NODEID, "S_JOB_NODEID", &node_id));
  BATON_RETURN_IF_ERROR(Item(sp, S_JOB_UID, "S_JOB_UID", &st.uid));
  BATON_RETURN_IF_ERROR(Item(sp, S_JOB_GID, "S_JOB_GID", &st.gid));
  if (spank_get_item(sp, S_SLURM_RESTART_COUNT, &restarts) != ESPANK_SUCCESS) restarts = 0;

  launch::Env env;
  env["SLURM_JOB_ID"] = std::to_string(job);
  if (step != SLURM_BATCH_SCRIPT) env["SLURM_STEP_ID"] = std::to_string(step);
  env["SLURM_NODEID"] = std::to_string(node_id);
  env["SLURM_RESTART_COUNT"] = std::to_string(restarts);
  for (const char* name : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_TASKS_PER_NODE",
                           "SLURM_JOB_CPUS_PER_NODE", launch::kTaskMapVar,
                           launch::kMasterAddrVar}) {
    if (std::string v = JobEnv(sp, name); !v.empty()) env[name] = v;
  }
  BATON_RETURN_IF_ERROR(launch::StepInfoFromEnvironment(env, launch::Libslurm(), &st.step));

  const struct passwd* pw = getpwuid(st.uid);
  const std::string user = pw ? pw->pw_name : std::to_string(st.uid);
  std::string tmpdir = JobEnv(sp, "TMPDIR");
  if (tmpdir.empty() || tmpdir[0] != '/') tmpdir = "/tmp";
  st.hostfile_dir = launch::ExpandHostfileDir(st.config.hostfile_dir, user, std::to_string(job),
                                              step == SLURM_BATCH_SCRIPT ? "batch" : std::to_string(step),
                                              st.step.layout.nodes[st.step.node_index], tmpdir);
  st.step.hostfile_path = st.hostfile_dir + "/hostfile";
  // user_init runs with the job user's privileges: the directory and file
  // belong to the user, and root never writes into a path a user controls.
  BATON_RETURN_IF_ERROR(MakeDirs(st.hostfile_dir, &st.created_dir));
  Status written = WriteHostfile(
      st.step.hostfile_path,
      launch::FormatHostfile(st.options.hostfile.value_or(launch::HostfileFormat::kOpenMpi), st.step.layout));
  if (!written.ok()) {
    if (st.created_dir) rmdir(st.hostfile_dir.c_str());
    return written;
  }
  st.active = true;
  return Status::OK();
}

}  // namespace

Status RemoteUserInit(spank_t sp) {
  // Slurm logs a failed user_init but still runs the tasks (spank(7)); the
  // failure is kept so that every task_init fails with it, which ends the
  // step with the message on the user's terminal.
  Status s = UserInit(sp);
  if (!s.ok()) State().init_error = s;
  return s;
}

Status RemoteTaskInit(spank_t sp) {
  PluginState& st = State();
  if (!st.init_error.ok()) return st.init_error;
  if (!st.active) return Status::OK();
  launch::StepInfo info = st.step;
  if (info.step_id) {
    uint32_t rank = 0;
    BATON_RETURN_IF_ERROR(Item(sp, S_TASK_GLOBAL_ID, "S_TASK_GLOBAL_ID", &rank));
    info.rank = static_cast<int>(rank);
    // Slurm's GPU plugin sets the step's devices per task; read them here.
    info.node_gpus = launch::SplitDeviceList(JobEnv(sp, "CUDA_VISIBLE_DEVICES"));
  }
  launch::EnvList env;
  BATON_RETURN_IF_ERROR(launch::DeriveLaunchEnv(info, st.options, st.config, &env));
  for (const auto& [name, value] : env) {
    spank_err_t rc = spank_setenv(sp, name.c_str(), value.c_str(), 1);
    if (rc != ESPANK_SUCCESS)
      return Status::Internal(kComponent, "spank_setenv(" + name + "): " + spank_strerror(rc));
  }
  return Status::OK();
}

Status RemoteExit(spank_t) {
  PluginState& st = State();
  if (!st.active) return Status::OK();
  st.active = false;
  // exit runs as root: remove the user's files as the user, in a child, so
  // that a link the user planted cannot point root's unlink elsewhere.
  pid_t pid = fork();
  if (pid < 0) return Status::IOError(kComponent, std::string("fork to remove the hostfile: ") + std::strerror(errno));
  if (pid == 0) {
    // Only async-signal-safe calls between fork and _exit (slurmstepd has
    // threads). The exit code carries errno for the parent's message.
    if (setgroups(0, nullptr) != 0 || setgid(st.gid) != 0 || setuid(st.uid) != 0) _exit(100 + (errno & 0x3f));
    if (unlink(st.step.hostfile_path.c_str()) != 0 && errno != ENOENT) _exit(errno & 0x3f);
    if (st.created_dir) rmdir(st.hostfile_dir.c_str());
    _exit(0);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status)) {
    return Status::IOError(kComponent, "removing hostfile '" + st.step.hostfile_path + "': the child ended with status " +
                                           std::to_string(status));
  }
  const int code = WEXITSTATUS(status);
  if (code >= 100) {
    return Status::IOError(kComponent, "removing hostfile '" + st.step.hostfile_path + "': cannot become uid " +
                                           std::to_string(st.uid) + ": " + std::strerror(code - 100));
  }
  if (code != 0)
    return Status::IOError(kComponent, "cannot remove hostfile '" + st.step.hostfile_path + "': " + std::strerror(code));
  return Status::OK();
}

}  // namespace baton::spank
