// The user's baton options (--baton..., BATON_* variables) and the
// administrator's plugstack.conf arguments, parsed strictly: an unknown key
// or a bad value is an error that names both.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "baton/status.h"

namespace baton::launch {

enum class HostfileFormat { kOpenMpi, kMpich, kDeepSpeed, kHorovod, kPlain };
enum class GpuBind { kNone, kLocalRank };

std::string_view FormatName(HostfileFormat f);
std::string_view GpuBindName(GpuBind g);

// What the user asked for; unset fields fall back to the next source.
struct LaunchOptions {
  std::optional<bool> enabled;
  std::optional<HostfileFormat> hostfile;
  std::optional<int> master_port;
  std::optional<GpuBind> gpu_bind;
  std::optional<std::string> ckpt_dir;
  std::optional<std::string> local_dir;
};

// One user option: its srun/sbatch name and its input variable.
struct OptionSpec {
  const char* name;     // "baton-hostfile-format" (given as --baton-hostfile-format=...)
  const char* env;      // "BATON_HOSTFILE_FORMAT"
  const char* arginfo;  // "openmpi|mpich|deepspeed|horovod|plain"
  const char* usage;
  int has_arg;          // as SPANK: 1 required, 2 optional
  // Non-null for an old name kept working: the option it now is. Its
  // variable is that option's, read once.
  const char* alias_of;
};
const std::vector<OptionSpec>& UserOptions();

// The warning an old option name gets where the user typed it (srun,
// sbatch, salloc); empty for a current name.
std::string AliasWarning(const OptionSpec& spec);

// Sets one option from its text; `name` is an OptionSpec name, `value` is
// null when an optional argument was left out (--baton alone). Bad values
// are InvalidArgument naming the option and the value.
Status SetOption(std::string_view name, const char* value, LaunchOptions* opts);

// Reads the BATON_* input variables. A bad value names the variable.
Status OptionsFromEnvironment(const std::map<std::string, std::string>& env, LaunchOptions* opts);

// One --baton option as written on a command line; value empty and
// has_value false for a bare "--baton".
struct Occurrence {
  std::string name;  // "baton-hostfile-format"
  std::string value;
  bool has_value = false;
};

// Every --baton... word of a command line in each form getopt_long takes
// ("--x=v", "--x v" for a required value, and any abbreviation that names
// one option alone: "--baton-host=mpich"), with its full option name and
// value. The caller keeps only srun's or sbatch's own options: a word after
// the program is the program's (ConfirmedOccurrences).
std::vector<Occurrence> ScanCommandLine(const std::vector<std::string>& args);

// The scanned occurrences that srun's (or sbatch's) own option parser also
// reported through an option callback: Slurm stops parsing at the program,
// so "srun ./train --baton-ckpt-dir=x" never calls back for the program's
// word, and a word the callbacks did not see is not an option of srun's.
std::vector<Occurrence> ConfirmedOccurrences(const std::vector<Occurrence>& scanned,
                                             const std::vector<Occurrence>& callbacks);

// Sets options from command-line occurrences. The same option twice with
// different values is an error naming both; twice with the same value is
// harmless.
Status OptionsFromOccurrences(const std::vector<Occurrence>& occurrences, LaunchOptions* opts);

// Fills each field of `out` from the first source that sets it.
LaunchOptions Merge(const LaunchOptions& first, const LaunchOptions& second);

// The resolved options as BATON_* input variables, so that the remote side
// (slurmstepd) and child steps see exactly what the submitting side chose.
std::vector<std::pair<std::string, std::string>> OptionsAsEnvironment(const LaunchOptions& opts);

struct PluginConfig;

// The submitting side's choice (srun, sbatch, salloc): the options on its
// own command line (`own_args`, confirmed by `callbacks`), then the BATON_*
// variables of `env`, then the other callback values (#SBATCH lines,
// options a step inherits from its batch job), then the plugstack default.
Status ResolveSubmitOptions(const std::vector<std::string>& own_args, const std::vector<Occurrence>& callbacks,
                            const std::map<std::string, std::string>& env, const LaunchOptions& from_callbacks,
                            const PluginConfig& config, LaunchOptions* out);

// plugstack.conf arguments.
struct PluginConfig {
  bool default_on = false;
  int port_lo = 61000;  // above Linux's ephemeral range (32768-60999)
  int port_hi = 65535;
  // Empty (the default): a fresh directory with an unpredictable name,
  // made by the user in the node's temporary directory (the job's TMPDIR,
  // else /tmp), so that no other user can take its place beforehand.
  // Else a template. Tokens: %u user, %j job, %s step ("batch" for the
  // batch script, "interactive" for salloc's interactive step), %n node, %t
  // the node's temporary directory. %j, %s and %n are required: two steps,
  // or two nodes on a shared file system, must never share (and then
  // delete) one hostfile.
  std::string hostfile_dir;
  GpuBind gpu_bind = GpuBind::kNone;
  // Empty (the default): the plugin makes no node-local directory and
  // sweeps none. Else an absolute path on each node's local disk: a job
  // whose user gave no --baton-local-dir gets <local_root>/<uid>/<jobid>
  // (local_dir.h), and the job epilog removes those of ended jobs
  // (local_sweep.h).
  std::string local_root;
};

// Parses "key=value" arguments: default=off|on, port_range=LO-HI,
// hostfile_dir=TEMPLATE, gpu_bind=none|local-rank, local_root=PATH.
Status ParsePluginConfig(const std::vector<std::string>& args, PluginConfig* config);

}  // namespace baton::launch
