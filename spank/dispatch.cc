// The only exported symbols of spank_baton.so: Slurm's entry points. Each
// dispatches on spank_context() to the file of that context, and no
// exception or failed Status crosses into Slurm unlogged (pyxis style).
#include "spank/spank_api.h"

#include <exception>
#include <string>

#include "base/launch/component.h"
#include "spank/plugin.h"

// SPANK_PLUGIN(baton, 1) spelled out: in C++ a namespace-scope const has
// internal linkage, so the macro's symbols would not be visible to Slurm.
extern "C" {
extern const char plugin_name[] = "baton";
extern const char plugin_type[] = "spank";
extern const unsigned int plugin_version = SLURM_VERSION_NUMBER;
}

namespace baton::spank {
namespace {

// Runs one callback: a failure is logged with its context and becomes -1,
// which makes Slurm fail the srun/sbatch or the step (the plugin is
// "required" in plugstack.conf) before the user's program runs.
template <typename Fn>
int Guard(const char* callback, Fn&& fn) {
  try {
    Status s = fn();
    if (s.ok()) return 0;
    LogError(s.Annotate(callback));
  } catch (const std::exception& e) {
    LogError(Status::Internal(launch::kComponent, std::string(callback) + ": " + e.what()));
  } catch (...) {
    LogError(Status::Internal(launch::kComponent, std::string(callback) + ": unknown exception"));
  }
  return -1;
}

}  // namespace
}  // namespace baton::spank

using baton::spank::Guard;

extern "C" int slurm_spank_init(spank_t sp, int ac, char** av) {
  return Guard("init", [&]() -> baton::Status {
    switch (spank_context()) {
      case S_CTX_LOCAL:
      case S_CTX_ALLOCATOR:
        BATON_RETURN_IF_ERROR(baton::spank::ParseArguments(ac, av));
        return baton::spank::RegisterOptions(sp);
      case S_CTX_REMOTE:
        BATON_RETURN_IF_ERROR(baton::spank::ParseArguments(ac, av));
        BATON_RETURN_IF_ERROR(baton::spank::RegisterOptions(sp));
        return baton::spank::RegisterHandOverOptions(sp);
      case S_CTX_SLURMD:
        return baton::spank::SlurmdInit(ac, av);
      default:
        return baton::Status::OK();  // the job prolog/epilog have their own callbacks
    }
  });
}

extern "C" int slurm_spank_init_post_opt(spank_t sp, int, char**) {
  return Guard("init_post_opt", [&]() -> baton::Status {
    switch (spank_context()) {
      case S_CTX_LOCAL: return baton::spank::LocalInitPostOpt(sp);
      case S_CTX_ALLOCATOR: return baton::spank::AllocatorInitPostOpt(sp);
      case S_CTX_REMOTE: return baton::spank::RemoteInitPostOpt(sp);
      default: return baton::Status::OK();
    }
  });
}

extern "C" int slurm_spank_local_user_init(spank_t sp, int, char**) {
  return Guard("local_user_init", [&] { return baton::spank::LocalUserInit(sp); });
}

extern "C" int slurm_spank_user_init(spank_t sp, int, char**) {
  return Guard("user_init", [&] { return baton::spank::RemoteUserInit(sp); });
}

extern "C" int slurm_spank_task_init(spank_t sp, int, char**) {
  return Guard("task_init", [&] { return baton::spank::RemoteTaskInit(sp); });
}

extern "C" int slurm_spank_job_epilog(spank_t sp, int ac, char** av) {
  return Guard("job_epilog", [&] { return baton::spank::JobEpilog(sp, ac, av); });
}

extern "C" int slurm_spank_exit(spank_t sp, int, char**) {
  return Guard("exit", [&]() -> baton::Status {
    if (spank_context() != S_CTX_REMOTE) return baton::Status::OK();
    return baton::spank::RemoteExit(sp);
  });
}
