#include "spank/plugin.h"

#include "spank/spank_api.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

#include "base/launch/component.h"
#include "baton/identity.h"

namespace baton::spank {
namespace {

// Slurm calls this for every --baton... it sees: on the submitting side with
// remote=0 (from the command line, #SBATCH lines or inherited variables),
// and in slurmstepd with remote=1 as srun sent it. A bad value fails the
// srun/sbatch at once, naming the option and the value.
int OnOption(int index, const char* optarg, int remote) {
  const auto& spec = launch::UserOptions().at(static_cast<size_t>(index));
  // sbatch passes an option given without its optional value (#SBATCH
  // --baton) on to the job's steps as the text "(null)" (Slurm 22.05,
  // SLURM_SPANK__SLURM_SPANK_OPTION_baton_baton): it means "no value". And
  // slurmstepd replays an option srun got without its optional value as
  // the empty text (before, every --baton step logged "invalid value ''"
  // in slurmd's log); srun itself refused an empty value from the user.
  if (spec.has_arg == 2 && optarg != nullptr &&
      (std::string(optarg) == "(null)" || (remote != 0 && optarg[0] == '\0'))) {
    optarg = nullptr;
  }
  Status s = launch::SetOption(spec.name, optarg, &State().from_callbacks);
  if (!s.ok()) {
    LogError(s);
    return -1;
  }
  // An old name warns where the user typed it, not again in slurmstepd.
  if (remote == 0) {
    if (const std::string warning = launch::AliasWarning(spec); !warning.empty())
      slurm_info("baton: warning: %s", warning.c_str());
  }
  launch::Occurrence seen;
  seen.name = spec.name;
  seen.has_value = optarg != nullptr;
  seen.value = optarg ? optarg : "";
  State().callback_log.push_back(std::move(seen));
  return 0;
}

// The words of this process's command line, without the program itself.
Status OwnCommandLine(std::vector<std::string>* args) {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  if (!in) return Status::IOError(launch::kComponent, std::string("cannot read /proc/self/cmdline: ") + std::strerror(errno));
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  args->clear();
  size_t start = 0;
  while (start < all.size()) {
    size_t end = all.find('\0', start);
    if (end == std::string::npos) end = all.size();
    args->push_back(all.substr(start, end - start));
    start = end + 1;
  }
  if (!args->empty()) args->erase(args->begin());
  return Status::OK();
}

}  // namespace

PluginState& State() {
  static PluginState state;
  return state;
}

Status RegisterOptions(spank_t sp) {
  const auto& specs = launch::UserOptions();
  // Slurm keeps the pointers: the table lives as long as the plugin.
  static std::vector<struct spank_option> table(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    table[i] = {const_cast<char*>(specs[i].name), const_cast<char*>(specs[i].arginfo),
                const_cast<char*>(specs[i].usage), specs[i].has_arg, static_cast<int>(i), OnOption};
    spank_err_t rc = spank_option_register(sp, &table[i]);
    if (rc != ESPANK_SUCCESS) {
      return Status::Internal(launch::kComponent, std::string("spank_option_register(--") + specs[i].name +
                                                      ") failed: " + spank_strerror(rc));
    }
  }
  return Status::OK();
}

Status ParseArguments(int ac, char** av) {
  std::vector<std::string> args(av, av + ac);
  return launch::ParsePluginConfig(args, &State().config);
}

Status ExportResolvedOptions() {
  std::vector<std::string> args;
  BATON_RETURN_IF_ERROR(OwnCommandLine(&args));
  launch::LaunchOptions resolved;
  BATON_RETURN_IF_ERROR(launch::ResolveSubmitOptions(args, State().callback_log, ProcessEnvironment(),
                                                     State().from_callbacks, State().config, &resolved));
  for (const auto& [name, value] : launch::OptionsAsEnvironment(resolved))
    BATON_RETURN_IF_ERROR(SetProcessEnv(name, value));
  return Status::OK();
}

Status SetProcessEnv(const std::string& name, const std::string& value) {
  if (setenv(name.c_str(), value.c_str(), 1) != 0)
    return Status::IOError(launch::kComponent, "setenv(" + name + "): " + std::strerror(errno));
  return Status::OK();
}

void LogError(const Status& s) {
  // Status::ToString starts with "baton[spank]" and carries the
  // component, where it happened and the bad value.
  slurm_error("%s", s.ToString().c_str());
}

}  // namespace baton::spank
