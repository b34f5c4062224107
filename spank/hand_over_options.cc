// srun's hand-over (base/launch/hand_over.h) as the values of hidden SPANK
// options: Slurm sends every option srun has a value for in the step's
// launch request, and slurmstepd replays them before init_post_opt, so
// the hand-over reaches every node whatever --export drops from srun's
// environment. Without it every slurmstepd of an `srun --export=NONE`
// step asked the controller for the step's layout and the nodes'
// addresses at the same moment (issue 30 item 3).
//
// SPANK has no call that gives an option a value; Slurm 22.05's
// plugstack.c gives one way: spank_option_getopt, for an option absent
// from srun's option cache, reads _SLURM_SPANK_OPTION_<plugin>_<option>
// from srun's environment and caches it as found, and
// spank_set_remote_options then forwards every found option. The options
// are therefore registered in slurmstepd only: one registered in srun
// would be cached as not given, and getopt would never look further.
#include "spank/spank_api.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "base/launch/component.h"
#include "base/launch/hand_over.h"
#include "spank/plugin.h"

namespace baton::spank {
namespace {

// slurmstepd replays each forwarded value here (remote=1).
int OnHandOver(int index, const char* optarg, int remote) {
  const auto& options = launch::HandOverOptions();
  if (remote == 0 || index < 0 || static_cast<size_t>(index) >= options.size() || optarg == nullptr) return 0;
  State().hand_over[options[static_cast<size_t>(index)].var] = optarg;
  return 0;
}

// The option table, one entry per hand-over option; Slurm keeps the
// pointers (in srun's cache as in slurmstepd's) for the plugin's life.
std::vector<struct spank_option>& Table() {
  static std::vector<struct spank_option> table = [] {
    std::vector<struct spank_option> t;
    const auto& options = launch::HandOverOptions();
    for (size_t i = 0; i < options.size(); ++i) {
      t.push_back({const_cast<char*>(options[i].option), const_cast<char*>("VALUE"),
                   const_cast<char*>("(set by srun for slurmstepd; not an option for users)"), 1,
                   static_cast<int>(i), OnHandOver});
    }
    return t;
  }();
  return table;
}

// The variable Slurm's getopt reads for option `name` of this plugin
// (plugstack.c's _opt_env_name: every character but a letter or a digit
// becomes '_').
std::string OptionEnvName(const std::string& name) {
  std::string var = std::string("_SLURM_SPANK_OPTION_baton_") + name;  // "baton": plugin_name (dispatch.cc)
  for (size_t i = sizeof("_SLURM_SPANK_OPTION_") - 1; i < var.size(); ++i) {
    const char c = var[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) var[i] = '_';
  }
  return var;
}

}  // namespace

Status RegisterHandOverOptions(spank_t sp) {
  for (struct spank_option& o : Table()) {
    spank_err_t rc = spank_option_register(sp, &o);
    if (rc != ESPANK_SUCCESS)
      return Status::Internal(launch::kComponent, std::string("spank_option_register(--") + o.name +
                                                      ") failed: " + spank_strerror(rc));
  }
  return Status::OK();
}

Status ForwardHandOver(spank_t sp, const launch::EnvList& vars) {
  for (const auto& [var, value] : vars) {
    const launch::HandOverOption* option = launch::HandOverOptionFor(var);
    if (option == nullptr) continue;
    struct spank_option& entry = Table()[static_cast<size_t>(option - launch::HandOverOptions().data())];
    const std::string env_name = OptionEnvName(option->option);
    BATON_RETURN_IF_ERROR(SetProcessEnv(env_name, value));
    char* got = nullptr;
    spank_err_t rc = spank_option_getopt(sp, &entry, &got);
    // Read once: the variable must reach neither the tasks nor a nested
    // srun, whose own getopt would take it for its step's.
    unsetenv(env_name.c_str());
    if (rc != ESPANK_SUCCESS)
      return Status::Internal(launch::kComponent, "handing " + std::string(var) + " over as --" + option->option +
                                                      ": spank_option_getopt: " + spank_strerror(rc));
    // A second hand-over in one srun would find the first one's value
    // cached: never forward a value that is not this step's.
    if (got == nullptr || value != got)
      return Status::Internal(launch::kComponent, "handing " + std::string(var) + " over as --" + option->option +
                                                      ": Slurm holds '" + (got ? got : "") + "', not '" + value + "'");
  }
  return Status::OK();
}

}  // namespace baton::spank
