#include "cli/batch_event_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace baton::cli {

namespace {

// mkdir -p with the Checkpointer's default mode (CheckpointOptions::dir_mode,
// 0700): the first launch's record comes before the program has made the
// checkpoint directory, and the program then finds it as it would have made it.
Status MakeDirs(const std::string& path) {
  for (size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    const std::string part = path.substr(0, slash);
    if (!part.empty() && ::mkdir(part.c_str(), 0700) != 0 && errno != EEXIST)
      return Status::IOError("events", "mkdir(" + part + "): " + std::strerror(errno));
    if (slash == std::string::npos) return Status::OK();
  }
}

}  // namespace

Status AppendBatchRecord(const std::string& dir, const std::string& job, const std::string& line) {
  const std::string events = dir + "/events", path = events + "/" + job + "-batch.jsonl";
  BATON_RETURN_IF_ERROR(MakeDirs(events));
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
