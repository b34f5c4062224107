// libFuzzer target: what a user or an administrator writes for the SPANK
// plugin (base/launch/options.h): plugstack.conf arguments, each --baton-*
// option's value, the BATON_* variables, and the command-line scan. Fields
// of the input are separated by newlines. Any bytes give OK or an
// InvalidArgument that names the key or option; never a crash or a hang.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "base/launch/options.h"
#include "tests/fuzz/fuzz_input.h"

using namespace baton::launch;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> fields = baton::fuzz::Fields(data, size, '\n');

  // plugstack.conf: every field one argument ("key=value").
  PluginConfig config;
  baton::Status s = ParsePluginConfig(fields, &config);
  if (s.ok() && (config.port_lo > config.port_hi || config.port_lo < 1 || config.port_hi > 65535)) std::abort();
  if (!s.ok() && s.message().empty()) std::abort();

  // Each option's value, and each input variable, from the first field;
  // a bare option (no value) too.
  LaunchOptions opts;
  for (const OptionSpec& o : UserOptions()) {
    LaunchOptions one;
    s = SetOption(o.name, fields[0].c_str(), &one);
    if (!s.ok() && s.message().find(o.name) == std::string::npos) std::abort();  // names the option
    (void)SetOption(o.name, nullptr, &one);
    std::map<std::string, std::string> env{{o.env, fields[0]}};
    s = OptionsFromEnvironment(env, &one);
    if (!s.ok() && s.message().find(o.env) == std::string::npos) std::abort();  // names the variable
    opts = Merge(opts, one);
  }
  (void)OptionsAsEnvironment(opts);

  // The fields as a command line: scanned, confirmed, set.
  const std::vector<Occurrence> scanned = ScanCommandLine(fields);
  LaunchOptions from_line;
  (void)OptionsFromOccurrences(ConfirmedOccurrences(scanned, scanned), &from_line);
  LaunchOptions resolved;
  (void)ResolveSubmitOptions(fields, scanned, {}, from_line, config, &resolved);
  return 0;
}
