#include "cli/batch_event_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace baton::cli {

Status AppendBatchRecord(const std::string& dir, const std::string& job, const std::string& line) {
  const std::string events = dir + "/events", path = events + "/" + job + "-batch.jsonl";
  if (::mkdir(events.c_str(), 0777) != 0 && errno != EEXIST)
    return Status::IOError("events", "mkdir(" + events + "): " + std::strerror(errno));
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0666);
  if (fd < 0) return Status::IOError("events", "open(" + path + "): " + std::strerror(errno));
  ssize_t n;
  do n = ::write(fd, line.data(), line.size());
  while (n < 0 && errno == EINTR);
  const int e = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(line.size()))
    return Status::IOError("events", "write(" + path + "): " + (n < 0 ? std::strerror(e) : "short write"));
  return Status::OK();
}

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace baton::cli
