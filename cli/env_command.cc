// baton env / baton hostfile: the plugin's derivation without the plugin,
// for a batch script or task on a cluster that does not load spank_baton.
#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <chrono>
#include <iostream>

#include "base/launch/component.h"
#include "base/launch/hand_over.h"
#include "base/launch/quote.h"
#include "base/launch/slurm_facts.h"
#include "baton/identity.h"
#include "cli/commands.h"
#include "cli/error_text.h"

namespace baton::cli {
namespace {

namespace po = boost::program_options;

// Parses args against `desc`; prints the error naming the option and value.
bool Parse(const std::vector<std::string>& args, const po::options_description& desc, po::variables_map* vm,
           const char* command) {
  try {
    po::store(po::command_line_parser(args).options(desc).run(), *vm);
    po::notify(*vm);
    return true;
  } catch (const po::error& e) {
    std::cerr << "baton " << command << ": " << e.what() << "\n" << desc;
    return false;
  }
}

bool Fail(const char* command, const Status& s) {
  std::cerr << "baton " << command << ": " << ErrorText(s) << "\n";
  return false;
}

// How long a question to the controller may take before baton env gives
// up: libslurm itself retries a missing slurm.conf for a minute.
constexpr std::chrono::seconds kSlurmLimit(15);

// What the questions to Slurm would have been spared by, and where the
// configuration they need is, for the message when Slurm does not answer.
std::string WhyAsked(const launch::Env& env) {
  std::string missing;
  for (const char* var : {launch::kTaskMapVar, launch::kMasterAddrVar, launch::kNodeAddrsVar})
    if (env.count(var) == 0) missing += std::string(missing.empty() ? "" : ", ") + var;
  auto conf = env.find("SLURM_CONF");
  std::string out = conf != env.end() ? "SLURM_CONF=" + launch::Quoted(conf->second)
                                      : "SLURM_CONF is not set (libslurm's default slurm.conf, or configless)";
  out += "; the controller must answer";
  if (!missing.empty()) out += " because the plugin's hand-over variables are not set (" + missing + ")";
  return out;
}

// Gathers the step's facts and the user's options as the plugin would.
// `hostfile`: also what only the hostfile needs (node addresses, and for
// `deepspeed` the GPUs per node).
bool Gather(const char* command, const std::string& port_range, std::optional<launch::HostfileFormat> hostfile,
            launch::StepInfo* info, launch::LaunchOptions* opts, launch::PluginConfig* config) {
  const launch::Env env = ProcessEnvironment();
  Status s = launch::ParsePluginConfig({"port_range=" + port_range}, config);
  if (!s.ok()) return Fail(command, s);
  s = launch::OptionsFromEnvironment(env, opts);
  if (!s.ok()) return Fail(command, s);
  // A SLURM_CONF that names no file makes libslurm retry for a minute.
  if (auto conf = env.find("SLURM_CONF"); conf != env.end()) {
    struct stat st;
    if (stat(conf->second.c_str(), &st) != 0)
      return Fail(command, Status::NotFound(launch::kComponent, "SLURM_CONF=" + launch::Quoted(conf->second) +
                                                                    " names no file; baton needs Slurm's configuration to ask the controller"));
  }
  std::unique_ptr<launch::SlurmQueries> slurm = launch::WithDeadline(launch::Libslurm(), kSlurmLimit, WhyAsked(env));
  s = launch::StepInfoFromEnvironment(env, *slurm, info);
  if (s.ok() && hostfile) s = launch::ResolveHostfileHosts(env, *slurm, info);
  if (s.ok() && hostfile == launch::HostfileFormat::kDeepSpeed) s = launch::ResolveHostfileGpus(env, *slurm, info);
  if (!s.ok()) return Fail(command, s);
  if (auto it = env.find("BATON_HOSTFILE"); it != env.end()) info->hostfile_path = it->second;
  return true;
}

std::string DefaultPortRange() {
  const launch::PluginConfig defaults;
  return std::to_string(defaults.port_lo) + "-" + std::to_string(defaults.port_hi);
}

// Single quotes survive any value in sh; a quote inside becomes '\''.
std::string ShellQuote(const std::string& v) {
  std::string out = "'";
  for (char c : v) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

int EnvCommand(const std::vector<std::string>& args) {
  po::options_description desc("baton env options");
  std::string format, port_range;
  desc.add_options()("format", po::value(&format)->default_value("sh"), "sh or json")(
      "port-range", po::value(&port_range)->default_value(DefaultPortRange()),
      "the plugin's port_range, if the administrator changed it");
  po::variables_map vm;
  if (!Parse(args, desc, &vm, "env")) return 2;
  if (format != "sh" && format != "json") {
    std::cerr << "baton env: --format: invalid value '" << format << "' (expected sh or json)\n";
    return 2;
  }
  launch::StepInfo info;
  launch::LaunchOptions opts;
  launch::PluginConfig config;
  if (!Gather("env", port_range, std::nullopt, &info, &opts, &config)) return 1;
  launch::EnvList env;
  if (Status s = launch::DeriveLaunchEnv(info, opts, config, &env); !s.ok()) return Fail("env", s), 1;
  if (format == "json") {
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    for (const auto& [k, v] : env) j[k] = v;
    std::cout << j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
  } else {
    for (const auto& [k, v] : env) std::cout << "export " << k << "=" << ShellQuote(v) << "\n";
  }
  return 0;
}

int HostfileCommand(const std::vector<std::string>& args) {
  po::options_description desc("baton hostfile options");
  std::string format;
  desc.add_options()("format", po::value(&format), "openmpi, mpich, deepspeed, horovod or plain");
  po::variables_map vm;
  if (!Parse(args, desc, &vm, "hostfile")) return 2;
  launch::StepInfo info;
  launch::LaunchOptions opts;
  launch::PluginConfig config;
  if (vm.count("format")) {
    if (Status s = launch::SetOption("baton-hostfile-format", format.c_str(), &opts); !s.ok())
      return Fail("hostfile", Status::InvalidArgument(launch::kComponent, "--format: invalid value " + launch::Quoted(format) +
                                                                             " (expected openmpi, mpich, deepspeed, horovod or plain)")),
             2;
  }
  launch::LaunchOptions from_env;
  if (Status s = launch::OptionsFromEnvironment(ProcessEnvironment(), &from_env); !s.ok()) return Fail("hostfile", s), 1;
  opts = launch::Merge(opts, from_env);
  const launch::HostfileFormat chosen = opts.hostfile.value_or(launch::HostfileFormat::kOpenMpi);
  if (!Gather("hostfile", DefaultPortRange(), chosen, &info, &from_env, &config)) return 1;
  std::cout << launch::FormatHostfile(chosen, info);
  return 0;
}

}  // namespace baton::cli
