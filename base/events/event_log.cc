#include "base/events/event_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cctype>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/launch/decimal.h"

namespace baton::events {
namespace {

constexpr const char* kComponent = "events";
constexpr size_t kFlushBytes = 64 * 1024;
constexpr double kFlushSeconds = 5;
constexpr size_t kUnopenedLimit = 1 << 20;
constexpr uint64_t kDefaultMaxBytes = uint64_t{64} << 20;

struct Log {
  std::timed_mutex mu;
  std::string buffer;
  std::string path;
  int fd = -1;
  uint64_t file_bytes = 0;  // the file's size when opened, plus what we wrote
  uint64_t max_bytes = 0;
  uint64_t dropped = 0;
  bool steps_at_once = false;
  double buffered_since = 0;  // when the oldest buffered record came
};

Log& TheLog() {
  static Log* log = new Log();  // never destroyed: a watchdog may flush during exit
  return *log;
}

uint64_t MaxBytes() {
  const char* v = std::getenv("BATON_EVENTS_MAX_BYTES");
  long long n = 0;
  if (v != nullptr && launch::ParseDecimal(v, 4096, INT64_MAX, &n)) return static_cast<uint64_t>(n);
  return kDefaultMaxBytes;
}

// One write of whole records; a short write is continued (regular files
// write whole on Linux, except at ENOSPC). Caller holds the lock.
bool WriteBuffer(Log& log) {
  if (log.fd < 0 || log.buffer.empty()) return log.fd >= 0;
  const char* p = log.buffer.data();
  size_t left = log.buffer.size();
  while (left > 0) {
    const ssize_t n = ::write(log.fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      log.buffer.clear();  // a full disk must not grow the buffer for ever
      return false;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  log.file_bytes += log.buffer.size();
  log.buffer.clear();
  return true;
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string(v) : std::string();
}

}  // namespace

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

Record::Record(const char* kind) : Record(kind, UnixNow()) {}

Record::Record(const char* kind, double unix_seconds) {
  char t[64];
  std::snprintf(t, sizeof t, "%.6f", unix_seconds);
  body_ = std::string("{\"ev\":\"") + kind + "\",\"t\":" + t;
  step_ = std::strcmp(kind, "step") == 0;
}

Record& Record::Int(const char* key, int64_t v) {
  body_ += std::string(",\"") + key + "\":" + std::to_string(v);
  return *this;
}

Record& Record::Num(const char* key, double v) {
  body_ += std::string(",\"") + key + "\":";
  if (!std::isfinite(v)) {
    body_ += "null";
  } else {
    char b[64];
    std::snprintf(b, sizeof b, "%.9g", v);
    body_ += b;
  }
  return *this;
}

// nlohmann's dump: JSON escapes, and bytes that are not UTF-8 replaced (a
// host name or an error message is not ours to trust).
std::string JsonString(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Record& Record::Str(const char* key, const std::string& v) { return Raw(key, JsonString(v)); }

Record& Record::Raw(const char* key, const std::string& json) {
  body_ += std::string(",\"") + key + "\":" + json;
  return *this;
}

Record& Record::Bool(const char* key, bool v) {
  body_ += std::string(",\"") + key + "\":" + (v ? "true" : "false");
  return *this;
}

bool Enabled() {
  static const bool on = Env("BATON_EVENTS") != "0";
  return on;
}

std::string JobName() {
  std::string job = Env("SLURM_JOB_ID");
  if (job.empty()) job = Env("SLURM_JOBID");
  // Only what is safe in a file name.
  for (char c : job)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-')) return "local";
  return job.empty() ? "local" : job;
}

std::string LaunchKey() {
  const std::string restart = Env("SLURM_RESTART_COUNT");
  const std::string job = Env("SLURM_JOB_ID");
  const std::string step = Env("SLURM_STEP_ID");
  if (!job.empty() && !step.empty()) return "slurm:" + job + "." + step + "/" + (restart.empty() ? "0" : restart);
  for (const char* name : {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid"}) {
    std::string ns = Env(name);
    if (!ns.empty()) return std::string("mpi:") + ns + (restart.empty() ? "" : "/" + restart);
  }
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  return "proc:" + std::string(host) + ":" + std::to_string(::getpid());
}

std::string FileName(const std::string& job, int rank) { return job + "-r" + std::to_string(rank) + ".jsonl"; }

void Emit(const Record& record, Flush flush) {
  if (!Enabled()) return;
  Log& log = TheLog();
  std::unique_lock<std::timed_mutex> lock(log.mu, std::defer_lock);
  if (!lock.try_lock_for(std::chrono::milliseconds(flush == Flush::kNow ? 200 : 1000))) return;
  const std::string line = record.Line();
  const uint64_t would = log.file_bytes + log.buffer.size() + line.size();
  const bool unopened_full = log.fd < 0 && log.buffer.size() + line.size() > kUnopenedLimit;
  if (unopened_full || (log.max_bytes > 0 && would > (record.is_step() ? log.max_bytes : 2 * log.max_bytes))) {
    ++log.dropped;
  } else {
    if (log.buffer.empty()) log.buffered_since = UnixNow();
    log.buffer += line;
  }
  if (log.fd < 0) return;
  if (flush == Flush::kNow || (record.is_step() && log.steps_at_once) || log.buffer.size() >= kFlushBytes ||
      UnixNow() - log.buffered_since >= kFlushSeconds)
    WriteBuffer(log);
}

void WriteStepsAtOnce(bool on) {
  Log& log = TheLog();
  std::lock_guard<std::timed_mutex> lock(log.mu);
  log.steps_at_once = on;
}

Status Open(const std::string& ckpt_dir, int rank, unsigned dir_mode, unsigned file_mode) {
  if (!Enabled()) return Status::OK();
  const std::string dir = ckpt_dir + "/events";
  const std::string path = dir + "/" + FileName(JobName(), rank);
  Log& log = TheLog();
  std::unique_lock<std::timed_mutex> lock(log.mu);
  if (log.fd >= 0 && log.path == path) return Status::OK();
  if (::mkdir(dir.c_str(), static_cast<mode_t>(dir_mode)) != 0 && errno != EEXIST)
    return Status::IOError(kComponent, "mkdir(" + dir + "): " + std::strerror(errno));
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW,
                        static_cast<mode_t>(file_mode));
  if (fd < 0) return Status::IOError(kComponent, "open(" + path + "): " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::IOError(kComponent, path + " is not a regular file");
  }
  if (log.fd >= 0) {
    WriteBuffer(log);
    ::close(log.fd);
  }
  log.fd = fd;
  log.path = path;
  log.file_bytes = static_cast<uint64_t>(st.st_size);
  log.max_bytes = MaxBytes();
  WriteBuffer(log);
  return Status::OK();
}

bool FlushNow(int wait_ms) {
  if (!Enabled()) return true;
  Log& log = TheLog();
  std::unique_lock<std::timed_mutex> lock(log.mu, std::defer_lock);
  if (!lock.try_lock_for(std::chrono::milliseconds(wait_ms))) return false;
  return WriteBuffer(log);
}

uint64_t DroppedRecords() {
  Log& log = TheLog();
  std::lock_guard<std::timed_mutex> lock(log.mu);
  return log.dropped;
}

void ResetForTest() {
  Log& log = TheLog();
  std::lock_guard<std::timed_mutex> lock(log.mu);
  if (log.fd >= 0) ::close(log.fd);
  log.fd = -1;
  log.path.clear();
  log.buffer.clear();
  log.file_bytes = 0;
  log.max_bytes = 0;
  log.dropped = 0;
  log.steps_at_once = false;
}

}  // namespace baton::events
