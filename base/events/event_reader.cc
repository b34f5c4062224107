#include "base/events/event_reader.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

namespace baton::events {
namespace {

constexpr const char* kComponent = "events";
using json = nlohmann::json;

template <typename T>
bool Get(const json& j, const char* key, T* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return false;
  if constexpr (std::is_same_v<T, std::string>) {
    if (!it->is_string()) return false;
    *out = it->template get<std::string>();
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!it->is_boolean()) return false;
    *out = it->template get<bool>();
  } else {
    if (!it->is_number()) return false;
    *out = it->template get<T>();
  }
  return true;
}

// "<job>-r<rank>.jsonl" -> rank, else -1.
int RankOfFileName(const std::string& name) {
  const size_t r = name.rfind("-r");
  const size_t dot = name.rfind(".jsonl");
  if (r == std::string::npos || dot == std::string::npos || dot <= r + 2) return -1;
  int rank = 0;
  for (size_t i = r + 2; i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9' || rank > 100000000) return -1;
    rank = rank * 10 + (name[i] - '0');
  }
  return rank;
}

Status ReadWholeFile(const std::string& path, std::string* text) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return Status::IOError(kComponent, "open(" + path + "): " + std::strerror(errno));
  text->clear();
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      return Status::IOError(kComponent, "read(" + path + "): " + std::strerror(e));
    }
    if (n == 0) break;
    text->append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return Status::OK();
}

}  // namespace

Status ParseEventLine(std::string_view line, Event* out) {
  json j = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status::InvalidArgument(kComponent, "not a JSON object");
  Event e;
  if (!Get(j, "ev", &e.kind) || e.kind.empty()) return Status::InvalidArgument(kComponent, "no \"ev\"");
  if (!Get(j, "t", &e.t) || !(e.t > 0)) return Status::InvalidArgument(kComponent, "no \"t\" (Unix seconds)");
  Get(j, "step", &e.step);
  Get(j, "dur", &e.dur);
  double loss = 0;
  if (Get(j, "loss", &loss)) e.loss = loss;
  Get(j, "level", &e.level);
  Get(j, "async", &e.async);
  Get(j, "ok", &e.ok);
  Get(j, "what", &e.what);
  if (e.kind == "failure") Get(j, "kind", &e.failure_kind);
  Get(j, "rank", &e.rank);
  Get(j, "launch", &e.launch);
  Get(j, "world", &e.world);
  Get(j, "restart", &e.restart);
  Get(j, "job", &e.job);
  Get(j, "host", &e.host);
  auto hosts = j.find("hosts");
  if (hosts != j.end() && hosts->is_array())
    for (const json& h : *hosts)
      if (h.is_string()) e.hosts.push_back(h.get<std::string>());
  int exit = 0;
  if (Get(j, "exit", &exit)) e.exit = exit;
  Get(j, "said", &e.said);
  auto lost = j.find("lost");
  if (lost != j.end() && lost->is_array())
    for (const json& n : *lost) {
      std::string host, why;
      if (n.is_object() && Get(n, "host", &host)) {
        Get(n, "why", &why);
        e.lost.emplace_back(host, why);
      }
    }
  if (e.kind == "step" && e.step < 0) return Status::InvalidArgument(kComponent, "a step record without \"step\"");
  if (e.kind == "start" && e.launch.empty())
    return Status::InvalidArgument(kComponent, "a start record without \"launch\"");
  *out = std::move(e);
  return Status::OK();
}

void ParseEventText(std::string_view text, int file_rank, std::vector<Event>* out, ReadStats* stats) {
  int rank = file_rank;
  std::string launch;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    const bool complete = nl != std::string_view::npos;
    if (!complete) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.empty()) continue;
    Event e;
    // An unterminated last line is a record still being written: skipped
    // even when it happens to parse (its writer has not finished it).
    if (!complete || !ParseEventLine(line, &e).ok()) {
      ++stats->bad_lines;
      continue;
    }
    if (e.kind == "start") {
      if (e.rank >= 0) rank = e.rank;
      launch = e.launch;
    }
    e.rank = rank;
    e.launch = launch;
    ++stats->records;
    out->push_back(std::move(e));
  }
}

Status ReadEventDir(const std::string& dir, std::vector<Event>* out, ReadStats* stats) {
  std::string events = dir + "/events";
  struct stat st {};
  if (::stat(events.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    const size_t slash = dir.find_last_not_of('/');
    const std::string trimmed = dir.substr(0, slash == std::string::npos ? 0 : slash + 1);
    if (trimmed.size() >= 6 && trimmed.compare(trimmed.size() - 6, 6, "events") == 0) {
      events = trimmed;
    } else {
      return Status::NotFound(kComponent, "no event log in " + dir + " (" + events +
                                              " is missing: was the job run with BATON_EVENTS=0, or "
                                              "before baton wrote event logs?)");
    }
  }
  DIR* d = ::opendir(events.c_str());
  if (d == nullptr) return Status::IOError(kComponent, "opendir(" + events + "): " + std::strerror(errno));
  std::vector<std::string> names;
  while (dirent* ent = ::readdir(d)) {
    std::string name = ent->d_name;
    if (name.size() > 6 && name.compare(name.size() - 6, 6, ".jsonl") == 0) names.push_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  std::string text;
  for (const std::string& name : names) {
    BATON_RETURN_IF_ERROR(ReadWholeFile(events + "/" + name, &text));
    ++stats->files;
    ParseEventText(text, RankOfFileName(name), out, stats);
  }
  return Status::OK();
}

}  // namespace baton::events
