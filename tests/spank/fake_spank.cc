#include "tests/spank/fake_spank.h"

#include <cctype>
#include <cstdarg>
#include <cstdlib>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

namespace baton::spank {

FakeSpank& Fake() {
  static FakeSpank fake;
  return fake;
}

std::string FakeSpank::Errors() const {
  std::string all;
  for (const std::string& e : errors) all += e + "\n";
  return all;
}

}  // namespace baton::spank

using baton::spank::Fake;

extern "C" {

spank_context_t spank_context(void) { return Fake().context; }

const char* spank_strerror(spank_err_t err) {
  // ESPANK_SUCCESS is a plain 0 in slurm_errno.h, outside the enum.
  if (static_cast<int>(err) == ESPANK_SUCCESS) return "Success";
  if (err == ESPANK_BAD_ARG) return "Bad argument";
  if (err == ESPANK_NOT_TASK) return "Not in task context";
  if (err == ESPANK_ENV_NOEXIST) return "Environment variable does not exist";
  if (err == ESPANK_NOSPACE) return "Buffer too small";
  if (err == ESPANK_NOT_REMOTE) return "Valid only in remote context";
  return "Generic error";
}

namespace {
const spank_err_t kSuccess = static_cast<spank_err_t>(ESPANK_SUCCESS);
}

spank_err_t spank_option_register(spank_t, struct spank_option* opt) {
  Fake().options.push_back(opt->name);
  Fake().option_specs.push_back(*opt);
  return kSuccess;
}

spank_err_t spank_option_getopt(spank_t, struct spank_option* opt, char** optarg) {
  *optarg = nullptr;
  const std::string name = opt->name;
  for (const std::string& registered : Fake().options)
    if (registered == name) return ESPANK_ERROR;
  auto cached = Fake().forwarded.find(name);
  if (cached == Fake().forwarded.end()) {
    std::string var = "_SLURM_SPANK_OPTION_baton_" + name;
    for (char& c : var)
      if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    const char* value = std::getenv(var.c_str());
    if (value == nullptr) return ESPANK_ERROR;
    cached = Fake().forwarded.emplace(name, value).first;
  }
  *optarg = cached->second.data();
  return kSuccess;
}

spank_err_t spank_get_item(spank_t, spank_item_t item, ...) {
  auto failing = Fake().failing_items.find(item);
  if (failing != Fake().failing_items.end()) return failing->second;
  va_list ap;
  va_start(ap, item);
  if (item == S_JOB_ARGV) {
    static std::vector<char*> argv;
    argv.clear();
    for (std::string& a : Fake().argv) argv.push_back(a.data());
    argv.push_back(nullptr);
    *va_arg(ap, int*) = static_cast<int>(Fake().argv.size());
    *va_arg(ap, char***) = argv.data();
    va_end(ap);
    return kSuccess;
  }
  auto it = Fake().items.find(item);
  if (it == Fake().items.end()) {
    va_end(ap);
    return ESPANK_BAD_ARG;
  }
  switch (item) {
    case S_JOB_UID: *va_arg(ap, uid_t*) = static_cast<uid_t>(it->second); break;
    case S_JOB_GID: *va_arg(ap, gid_t*) = static_cast<gid_t>(it->second); break;
    case S_TASK_ID: *va_arg(ap, int*) = static_cast<int>(it->second); break;
    default: *va_arg(ap, uint32_t*) = static_cast<uint32_t>(it->second); break;
  }
  va_end(ap);
  return kSuccess;
}

spank_err_t spank_getenv(spank_t, const char* var, char* buf, int len) {
  auto failing = Fake().failing_env.find(var);
  if (failing != Fake().failing_env.end()) return failing->second;
  auto it = Fake().job_env.find(var);
  if (it == Fake().job_env.end()) return ESPANK_ENV_NOEXIST;
  if (it->second.size() + 1 > static_cast<size_t>(len)) return ESPANK_NOSPACE;
  std::memcpy(buf, it->second.c_str(), it->second.size() + 1);
  return kSuccess;
}

spank_err_t spank_setenv(spank_t, const char* var, const char* val, int) {
  Fake().set_env[var] = val;
  return kSuccess;
}

void slurm_error(const char* format, ...) {
  char buf[8192];
  va_list ap;
  va_start(ap, format);
  std::vsnprintf(buf, sizeof buf, format, ap);
  va_end(ap);
  Fake().errors.push_back(buf);
}

void slurm_info(const char* format, ...) {
  char buf[8192];
  va_list ap;
  va_start(ap, format);
  std::vsnprintf(buf, sizeof buf, format, ap);
  va_end(ap);
  Fake().infos.push_back(buf);
}

}  // extern "C"
