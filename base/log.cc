#include "baton/log.h"

#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <string>

#include <boost/date_time/posix_time/posix_time.hpp>
#include <boost/log/attributes/clock.hpp>
#include <boost/log/attributes/function.hpp>
#include <boost/log/core.hpp>
#include <boost/log/sinks/basic_sink_backend.hpp>
#include <boost/log/sinks/sync_frontend.hpp>
#include <boost/log/utility/formatting_ostream.hpp>

#include "baton/identity.h"

namespace baton::log {
namespace {

namespace blog = boost::log;

std::atomic<int> g_level{static_cast<int>(Level::info)};
std::once_flag g_init_once;
Status g_init_status;

// The two below never call Init(): SetUp() uses them while call_once holds.
Logger& LoggerInstance() {
  static Logger logger;
  return logger;
}

bool LevelAllows(Level level) {
  return level != Level::off && static_cast<int>(level) >= g_level.load(std::memory_order_relaxed);
}

void Format(const blog::record_view& rec, blog::formatting_ostream& out) {
  if (auto ts = blog::extract<boost::posix_time::ptime>("TimeStamp", rec)) {
    std::string t = boost::posix_time::to_iso_extended_string(*ts);
    // Milliseconds are enough to order the lines of one rank.
    if (t.size() > 23) t.resize(23);
    t[10] = ' ';
    out << t << ' ';
  }
  out << "baton.";
  if (auto ch = blog::extract<std::string>("Channel", rec)) out << *ch;
  if (auto sev = blog::extract<Level>("Severity", rec)) out << ' ' << *sev;
  Identity id = CurrentIdentity();
  out << " rank=";
  if (id.rank >= 0) out << id.rank; else out << '-';
  out << " host=" << id.host;
  out << " job=" << (id.job.empty() ? std::string("-") : id.job);
  out << ": " << rec[blog::expressions::smessage];
}

// Writes each record and its newline to standard error in one write(2).
// Boost's text_ostream_backend through std::clog wrote the text, then
// "\n", as two writes: records of ranks sharing a stream (mpirun's pipe,
// srun's --output file) merged on one line. One write of up to PIPE_BUF
// bytes into a pipe is never interleaved with another's; into a file
// opened O_APPEND neither. Unbuffered, so a record is out before a crash.
class StderrBackend
    : public blog::sinks::basic_formatted_sink_backend<char, blog::sinks::concurrent_feeding> {
 public:
  void consume(const blog::record_view&, const string_type& text) {
    std::string line;
    line.reserve(text.size() + 1);
    line.append(text).push_back('\n');
    const char* p = line.data();
    size_t left = line.size();
    while (left > 0) {
      const ssize_t n = ::write(STDERR_FILENO, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // nowhere to log to: the record is lost, not the program
      p += n;
      left -= static_cast<size_t>(n);
    }
  }
};

void SetUp() {
  auto core = blog::core::get();
  core->add_global_attribute("TimeStamp", blog::attributes::local_clock());

  using Backend = StderrBackend;
  auto backend = boost::make_shared<Backend>();
  auto sink = boost::make_shared<blog::sinks::synchronous_sink<Backend>>(backend);
  sink->set_formatter(&Format);
  core->add_sink(sink);
  core->set_filter([](const blog::attribute_value_set& attrs) {
    auto sev = attrs["Severity"].extract<Level>();
    return !sev || LevelAllows(*sev);
  });

  if (const char* env = std::getenv("BATON_LOG_LEVEL"); env != nullptr && *env != '\0') {
    Level level;
    Status s = ParseLevel(env, &level);
    if (s.ok()) {
      SetLevel(level);
    } else {
      g_init_status = s;
      BOOST_LOG_CHANNEL_SEV(LoggerInstance(), kBase, Level::warning)
          << "BATON_LOG_LEVEL: " << s.message() << "; using info";
    }
  }
}

}  // namespace

std::string_view LevelName(Level level) {
  switch (level) {
    case Level::trace: return "TRACE";
    case Level::debug: return "DEBUG";
    case Level::info: return "INFO";
    case Level::warning: return "WARNING";
    case Level::error: return "ERROR";
    case Level::off: return "OFF";
  }
  return "?";
}

std::ostream& operator<<(std::ostream& os, Level level) { return os << LevelName(level); }

Status ParseLevel(std::string_view text, Level* level) {
  std::string lower;
  for (char c : text) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  static const std::pair<const char*, Level> kNames[] = {
      {"trace", Level::trace},     {"debug", Level::debug}, {"info", Level::info},
      {"warning", Level::warning}, {"warn", Level::warning}, {"error", Level::error},
      {"off", Level::off}};
  for (const auto& [name, value] : kNames) {
    if (lower == name) {
      *level = value;
      return Status::OK();
    }
  }
  return Status::InvalidArgument(
      kBase, "log level '" + std::string(text) +
                 "' is not one of trace, debug, info, warning, error, off");
}

Status Init() {
  std::call_once(g_init_once, SetUp);
  return g_init_status;
}

void SetLevel(Level level) { g_level.store(static_cast<int>(level), std::memory_order_relaxed); }

Level GetLevel() { return static_cast<Level>(g_level.load(std::memory_order_relaxed)); }

bool Enabled(Level level) {
  Init().IgnoreError();  // a bad BATON_LOG_LEVEL is logged as a warning by SetUp itself
  return LevelAllows(level);
}

Logger& GetLogger() {
  Init().IgnoreError();  // as in Enabled
  return LoggerInstance();
}

}  // namespace baton::log
