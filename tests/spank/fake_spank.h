// Slurm's side of the SPANK interface for tests/spank/plugin_test.cc: the
// spank_* functions and slurm_error, answered from a FakeSpank the test
// fills, so that the plugin's callbacks run in one process exactly as
// slurmstepd would call them, including Slurm's failures.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "spank/spank_api.h"

namespace baton::spank {

struct FakeSpank {
  spank_context_t context = S_CTX_REMOTE;
  std::map<spank_item_t, long long> items;           // every integer item
  std::vector<std::string> argv = {"train"};         // S_JOB_ARGV: the step's command
  std::map<spank_item_t, spank_err_t> failing_items;  // spank_get_item answers this instead
  std::map<std::string, std::string> job_env;        // spank_getenv reads it
  std::map<std::string, spank_err_t> failing_env;    // spank_getenv answers this instead
  std::map<std::string, std::string> set_env;        // what spank_setenv set
  std::vector<std::string> errors;                   // slurm_error's messages
  std::vector<std::string> infos;                    // slurm_info's messages
  std::vector<std::string> options;                  // registered --names
  std::vector<struct spank_option> option_specs;     // as registered (callbacks, values)
  // spank_option_getopt as Slurm 22.05's srun answers it (plugstack.c): a
  // registered option is cached as not given (an error); another is read
  // from _SLURM_SPANK_OPTION_baton_<name> in the process's environment and,
  // when set, cached as given: what spank_set_remote_options then sends in
  // the launch request. Option name -> value.
  std::map<std::string, std::string> forwarded;

  std::string Errors() const;
};

// The one the spank_* functions answer from.
FakeSpank& Fake();

}  // namespace baton::spank
