#include "base/launch/options.h"

#include <algorithm>

#include "base/launch/component.h"
#include "base/launch/decimal.h"
#include "base/launch/quote.h"

namespace baton::launch {
namespace {

Status Bad(std::string_view what, std::string_view value, std::string_view expected) {
  return Status::InvalidArgument(kComponent, std::string(what) + ": invalid value " + Quoted(value) +
                                                 " (expected " + std::string(expected) + ")");
}

bool ParsePort(std::string_view text, int* port) {
  long long v = 0;
  if (!ParseDecimal(text, 1, 65535, &v)) return false;
  *port = static_cast<int>(v);
  return true;
}

// A path option must be absolute: the remote side runs in another working
// directory, and a relative path would silently mean something else there.
Status CheckPath(std::string_view what, std::string_view value) {
  if (value.empty() || value.front() != '/') return Bad(what, value, "an absolute path");
  if (HasControl(value)) return Bad(what, value, "a path without control characters");
  return Status::OK();
}

const OptionSpec* FindOption(std::string_view name);

Status SetFromText(const OptionSpec& given, std::string_view what, const char* value,
                   LaunchOptions* opts) {
  const OptionSpec& spec = given.alias_of ? *FindOption(given.alias_of) : given;
  const std::string_view name = spec.name;
  if (value == nullptr && spec.has_arg != 2) return Bad(what, "", spec.arginfo);
  const std::string_view v = value ? value : "";
  if (name == "baton") {
    if (value == nullptr || v == "on" || v == "yes" || v == "1") opts->enabled = true;
    else if (v == "off" || v == "no" || v == "0") opts->enabled = false;
    else return Bad(what, v, "on or off");
  } else if (name == "baton-hostfile-format") {
    if (v == "openmpi") opts->hostfile = HostfileFormat::kOpenMpi;
    else if (v == "mpich") opts->hostfile = HostfileFormat::kMpich;
    else if (v == "deepspeed") opts->hostfile = HostfileFormat::kDeepSpeed;
    else if (v == "horovod") opts->hostfile = HostfileFormat::kHorovod;
    else if (v == "plain") opts->hostfile = HostfileFormat::kPlain;
    else return Bad(what, v, spec.arginfo);
  } else if (name == "baton-master-port") {
    int port = 0;
    if (!ParsePort(v, &port)) return Bad(what, v, "a port number 1-65535");
    opts->master_port = port;
  } else if (name == "baton-gpu-bind") {
    if (v == "none") opts->gpu_bind = GpuBind::kNone;
    else if (v == "local-rank") opts->gpu_bind = GpuBind::kLocalRank;
    else return Bad(what, v, spec.arginfo);
  } else if (name == "baton-ckpt-dir") {
    BATON_RETURN_IF_ERROR(CheckPath(what, v));
    opts->ckpt_dir = std::string(v);
  } else if (name == "baton-local-dir") {
    BATON_RETURN_IF_ERROR(CheckPath(what, v));
    opts->local_dir = std::string(v);
  }
  return Status::OK();
}

const OptionSpec* FindOption(std::string_view name) {
  for (const OptionSpec& spec : UserOptions())
    if (name == spec.name) return &spec;
  return nullptr;
}

// The option a command-line word names as getopt_long reads it: the exact
// name, or a prefix of exactly one option's name ("--baton-host" is
// --baton-hostfile-format). srun and sbatch accept such abbreviations and call
// the option's callback with its full name. An old name that is a prefix
// of its new one ("baton-hostfile") makes the shorter words ambiguous, as
// getopt_long finds them too.
const OptionSpec* FindAbbreviated(std::string_view name) {
  if (const OptionSpec* exact = FindOption(name)) return exact;
  const OptionSpec* found = nullptr;
  for (const OptionSpec& spec : UserOptions()) {
    if (std::string_view(spec.name).substr(0, name.size()) != name) continue;
    if (found != nullptr) return nullptr;  // ambiguous: srun rejects it itself
    found = &spec;
  }
  return found;
}

}  // namespace

std::string_view FormatName(HostfileFormat f) {
  switch (f) {
    case HostfileFormat::kOpenMpi: return "openmpi";
    case HostfileFormat::kMpich: return "mpich";
    case HostfileFormat::kDeepSpeed: return "deepspeed";
    case HostfileFormat::kHorovod: return "horovod";
    case HostfileFormat::kPlain: return "plain";
  }
  return "?";
}

std::string_view GpuBindName(GpuBind g) { return g == GpuBind::kLocalRank ? "local-rank" : "none"; }

const std::vector<OptionSpec>& UserOptions() {
  static const std::vector<OptionSpec> kOptions = {
      {"baton", "BATON_ENABLE", "on|off",
       "Set up the launch environment (RANK, MASTER_ADDR, hostfile, ...) for every task", 2, nullptr},
      {"baton-hostfile-format", "BATON_HOSTFILE_FORMAT", "openmpi|mpich|deepspeed|horovod|plain",
       "Format of the hostfile whose path is BATON_HOSTFILE (default openmpi)", 1, nullptr},
      {"baton-master-port", "BATON_MASTER_PORT", "N",
       "MASTER_PORT for the step (default: derived from the job and step ids)", 1, nullptr},
      {"baton-gpu-bind", "BATON_GPU_BIND", "none|local-rank",
       "local-rank: each task sees only the GPU of its local rank", 1, nullptr},
      {"baton-ckpt-dir", "BATON_CKPT_DIR", "PATH", "Checkpoint directory (BATON_CKPT_DIR)", 1, nullptr},
      {"baton-local-dir", "BATON_LOCAL_DIR", "PATH",
       "Node-local directory for fast checkpoint levels (BATON_LOCAL_DIR)", 1, nullptr},
      // The old name: it set a format while BATON_HOSTFILE is a path.
      {"baton-hostfile", "BATON_HOSTFILE_FORMAT", "openmpi|mpich|deepspeed|horovod|plain",
       "Old name of --baton-hostfile-format", 1, "baton-hostfile-format"},
  };
  return kOptions;
}

std::string AliasWarning(const OptionSpec& spec) {
  if (!spec.alias_of) return "";
  return std::string("--") + spec.name + " is now --" + spec.alias_of + "; the old name still works but will go";
}

Status SetOption(std::string_view name, const char* value, LaunchOptions* opts) {
  const OptionSpec* spec = FindOption(name);
  if (spec == nullptr) return Status::InvalidArgument(kComponent, "unknown option --" + std::string(name));
  return SetFromText(*spec, "--" + std::string(name), value, opts);
}

Status OptionsFromEnvironment(const std::map<std::string, std::string>& env, LaunchOptions* opts) {
  for (const OptionSpec& spec : UserOptions()) {
    if (spec.alias_of) continue;  // its variable is the new name's
    auto it = env.find(spec.env);
    if (it == env.end()) continue;
    // An empty BATON_ENABLE means "not set", as an empty SBATCH_* does in Slurm.
    if (it->second.empty()) continue;
    BATON_RETURN_IF_ERROR(SetFromText(spec, spec.env, it->second.c_str(), opts));
  }
  return Status::OK();
}

std::vector<Occurrence> ScanCommandLine(const std::vector<std::string>& args) {
  std::vector<Occurrence> found;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].rfind("--", 0) != 0 || args[i].size() == 2) continue;
    std::string word = args[i].substr(2), value;
    bool has_value = false;
    if (auto eq = word.find('='); eq != std::string::npos) {
      value = word.substr(eq + 1);
      word.resize(eq);
      has_value = true;
    }
    const OptionSpec* spec = FindAbbreviated(word);
    if (spec == nullptr) continue;  // not a baton option; srun judges it
    Occurrence o;
    o.name = spec->name;
    o.value = std::move(value);
    o.has_value = has_value;
    // An optional value (--baton) only ever comes with "="; a required one
    // may be the next word, as getopt_long takes it.
    if (!o.has_value && spec->has_arg == 1 && i + 1 < args.size()) {
      o.value = args[++i];
      o.has_value = true;
    }
    found.push_back(std::move(o));
  }
  return found;
}

std::vector<Occurrence> ConfirmedOccurrences(const std::vector<Occurrence>& scanned,
                                             const std::vector<Occurrence>& callbacks) {
  std::vector<Occurrence> unconfirmed = callbacks, own;
  for (const Occurrence& o : scanned) {
    for (auto it = unconfirmed.begin(); it != unconfirmed.end(); ++it) {
      if (it->name == o.name && it->has_value == o.has_value && it->value == o.value) {
        own.push_back(o);
        unconfirmed.erase(it);
        break;
      }
    }
  }
  return own;
}

Status ResolveSubmitOptions(const std::vector<std::string>& own_args, const std::vector<Occurrence>& callbacks,
                            const std::map<std::string, std::string>& env, const LaunchOptions& from_callbacks,
                            const PluginConfig& config, LaunchOptions* out) {
  LaunchOptions cmdline, from_env;
  BATON_RETURN_IF_ERROR(OptionsFromOccurrences(ConfirmedOccurrences(ScanCommandLine(own_args), callbacks), &cmdline));
  BATON_RETURN_IF_ERROR(OptionsFromEnvironment(env, &from_env));
  LaunchOptions resolved = Merge(cmdline, Merge(from_env, from_callbacks));
  if (!resolved.enabled) resolved.enabled = config.default_on;
  *out = resolved;
  return Status::OK();
}

Status OptionsFromOccurrences(const std::vector<Occurrence>& occurrences, LaunchOptions* opts) {
  std::map<std::string, const Occurrence*> seen;
  auto show = [](const Occurrence& o) { return o.has_value ? Quoted(o.value) : std::string("(no value)"); };
  for (const Occurrence& o : occurrences) {
    const OptionSpec* spec = FindOption(o.name);
    if (spec == nullptr) return Status::InvalidArgument(kComponent, "unknown option --" + o.name);
    // An old name and its new one are one option.
    auto [it, inserted] = seen.emplace(spec->alias_of ? spec->alias_of : spec->name, &o);
    if (!inserted && (it->second->has_value != o.has_value || it->second->value != o.value)) {
      const std::string names = it->second->name == o.name ? "--" + o.name : "--" + it->second->name + " and --" + o.name;
      return Status::InvalidArgument(kComponent, names + " given twice with different values: " +
                                                     show(*it->second) + " and " + show(o));
    }
    BATON_RETURN_IF_ERROR(SetFromText(*spec, "--" + o.name, o.has_value ? o.value.c_str() : nullptr, opts));
  }
  return Status::OK();
}

LaunchOptions Merge(const LaunchOptions& first, const LaunchOptions& second) {
  LaunchOptions out = first;
  if (!out.enabled) out.enabled = second.enabled;
  if (!out.hostfile) out.hostfile = second.hostfile;
  if (!out.master_port) out.master_port = second.master_port;
  if (!out.gpu_bind) out.gpu_bind = second.gpu_bind;
  if (!out.ckpt_dir) out.ckpt_dir = second.ckpt_dir;
  if (!out.local_dir) out.local_dir = second.local_dir;
  return out;
}

std::vector<std::pair<std::string, std::string>> OptionsAsEnvironment(const LaunchOptions& opts) {
  std::vector<std::pair<std::string, std::string>> env;
  if (opts.enabled) env.emplace_back("BATON_ENABLE", *opts.enabled ? "on" : "off");
  if (opts.hostfile) env.emplace_back("BATON_HOSTFILE_FORMAT", std::string(FormatName(*opts.hostfile)));
  if (opts.master_port) env.emplace_back("BATON_MASTER_PORT", std::to_string(*opts.master_port));
  if (opts.gpu_bind) env.emplace_back("BATON_GPU_BIND", std::string(GpuBindName(*opts.gpu_bind)));
  if (opts.ckpt_dir) env.emplace_back("BATON_CKPT_DIR", *opts.ckpt_dir);
  if (opts.local_dir) env.emplace_back("BATON_LOCAL_DIR", *opts.local_dir);
  return env;
}

Status ParsePluginConfig(const std::vector<std::string>& args, PluginConfig* config) {
  PluginConfig c;
  for (const std::string& arg : args) {
    auto eq = arg.find('=');
    if (eq == std::string::npos) {
      return Status::InvalidArgument(kComponent, "plugstack.conf argument '" + arg +
                                                     "' is not key=value (keys: default, "
                                                     "port_range, hostfile_dir, gpu_bind, local_root)");
    }
    const std::string key = arg.substr(0, eq), value = arg.substr(eq + 1);
    const std::string what = "plugstack.conf " + key;
    if (key == "default") {
      if (value == "on") c.default_on = true;
      else if (value == "off") c.default_on = false;
      else return Bad(what, value, "on or off");
    } else if (key == "port_range") {
      auto dash = value.find('-');
      int lo = 0, hi = 0;
      if (dash == std::string::npos || !ParsePort(std::string_view(value).substr(0, dash), &lo) ||
          !ParsePort(std::string_view(value).substr(dash + 1), &hi) || lo > hi) {
        return Bad(what, value, "LO-HI with 1 <= LO <= HI <= 65535");
      }
      c.port_lo = lo;
      c.port_hi = hi;
    } else if (key == "hostfile_dir") {
      // Every token must be known, and the path absolute once %t is expanded.
      for (size_t i = 0; i < value.size(); ++i) {
        if (value[i] != '%') continue;
        if (i + 1 == value.size() || std::string_view("ujsnt%").find(value[i + 1]) == std::string_view::npos)
          return Bad(what, value, "a template whose tokens are %u %j %s %n %t %%");
        ++i;
      }
      if (HasControl(value)) return Bad(what, value, "a template without control characters");
      if (value.empty() || (value[0] != '/' && value.rfind("%t", 0) != 0))
        return Bad(what, value, "an absolute path or one starting with %t");
      for (const char* token : {"%j", "%s", "%n"})
        if (value.find(token) == std::string::npos)
          return Bad(what, value, std::string("a template containing ") + token + " (one hostfile per job, step and node)");
      c.hostfile_dir = value;
    } else if (key == "gpu_bind") {
      if (value == "none") c.gpu_bind = GpuBind::kNone;
      else if (value == "local-rank") c.gpu_bind = GpuBind::kLocalRank;
      else return Bad(what, value, "none or local-rank");
    } else if (key == "local_root") {
      // The sweep removes what lies under it as root: a plain absolute
      // path, no '..', no control character, not "/" itself.
      const bool plain = value.size() > 1 && value[0] == '/' && value.find("/../") == std::string::npos &&
                         value.compare(value.size() - std::min<size_t>(3, value.size()), 3, "/..") != 0 &&
                         !HasControl(value);
      if (!plain) return Bad(what, value, "an absolute path other than /, without '..' or control characters");
      c.local_root = value;
    } else {
      return Status::InvalidArgument(kComponent, "plugstack.conf: unknown key '" + key +
                                                     "' in '" + arg +
                                                     "' (keys: default, port_range, hostfile_dir, gpu_bind, local_root)");
    }
  }
  *config = c;
  return Status::OK();
}

}  // namespace baton::launch
