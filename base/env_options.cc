#include "base/env_options.h"

#include <signal.h>
#include <strings.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include "base/launch/decimal.h"

namespace baton {
namespace {

constexpr const char* kComponent = "runtime";

const char* EnvValue(const char* env) {
  if (env == nullptr) return nullptr;
  const char* v = std::getenv(env);
  return (v == nullptr || *v == '\0') ? nullptr : v;
}

struct SignalName {
  const char* name;
  int number;
};
// The signals a job may sensibly be asked to stop with.
constexpr SignalName kSignals[] = {{"HUP", SIGHUP},   {"INT", SIGINT},     {"QUIT", SIGQUIT}, {"USR1", SIGUSR1},
                                   {"USR2", SIGUSR2}, {"TERM", SIGTERM},   {"ALRM", SIGALRM}, {"CONT", SIGCONT},
                                   {"XCPU", SIGXCPU}, {"URG", SIGURG},     {"PWR", SIGPWR}};

}  // namespace

Status PositiveNumberOption(std::string_view option_name, double option, const char* env, double fallback,
                            double* out) {
  if (option < 0 || std::isnan(option))
    return Status::InvalidArgument(kComponent, std::string(option_name) + " " + std::to_string(option) +
                                                   " is not a positive number (0 = from " +
                                                   (env ? env : "the default") + ")");
  if (option > 0) return *out = option, Status::OK();
  const char* v = EnvValue(env);
  if (v == nullptr) return *out = fallback, Status::OK();
  char* end = nullptr;
  errno = 0;
  const double x = std::strtod(v, &end);
  if (end == v || *end != '\0' || errno != 0 || !std::isfinite(x) || x <= 0)
    return Status::InvalidArgument(kComponent, std::string(env) + "='" + v + "' is not a positive number");
  *out = x;
  return Status::OK();
}

Status PositiveCountOption(std::string_view option_name, long option, const char* env, long fallback, long* out) {
  if (option < 0)
    return Status::InvalidArgument(kComponent, std::string(option_name) + " " + std::to_string(option) +
                                                   " is not a positive count (0 = from " +
                                                   (env ? env : "the default") + ")");
  if (option > 0) return *out = option, Status::OK();
  const char* v = EnvValue(env);
  if (v == nullptr) return *out = fallback, Status::OK();
  long long x = 0;
  if (!launch::ParseDecimal(v, 1, std::numeric_limits<long>::max(), &x))
    return Status::InvalidArgument(kComponent, std::string(env) + "='" + v + "' is not a positive integer");
  *out = static_cast<long>(x);
  return Status::OK();
}

Status ParseSignal(std::string_view text, int* sig) {
  std::string t(text);
  const std::string bad = "signal '" + t + "' is not one of HUP, INT, QUIT, USR1, USR2, TERM, ALRM, CONT, XCPU, "
                          "URG, PWR or their numbers";
  if (!t.empty() && t.find_first_not_of("0123456789") == std::string::npos) {
    long long n = 0;
    if (!launch::ParseDecimal(t, 0, 1 << 16, &n)) return Status::InvalidArgument(kComponent, bad);
    for (const SignalName& s : kSignals)
      if (s.number == n) return *sig = s.number, Status::OK();
    return Status::InvalidArgument(kComponent, bad);
  }
  std::string_view name = text;
  if (name.size() > 3 && strncasecmp(name.data(), "SIG", 3) == 0) name.remove_prefix(3);
  for (const SignalName& s : kSignals)
    if (name.size() == std::string_view(s.name).size() && strncasecmp(name.data(), s.name, name.size()) == 0)
      return *sig = s.number, Status::OK();
  return Status::InvalidArgument(kComponent, bad);
}

Status SignalOption(std::string_view option_name, int option, const char* env, int fallback, int* out) {
  if (option != 0) {
    Status s = ParseSignal(std::to_string(option), out);
    return s.ok() ? s : Status::InvalidArgument(kComponent, std::string(option_name) + ": " + s.message());
  }
  const char* v = EnvValue(env);
  if (v == nullptr) return *out = fallback, Status::OK();
  Status s = ParseSignal(v, out);
  return s.ok() ? s : Status::InvalidArgument(kComponent, std::string(env) + "='" + v + "': " + s.message());
}

}  // namespace baton
