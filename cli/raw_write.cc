#include "cli/raw_write.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace baton::cli {
namespace {

constexpr size_t kBlock = 8u << 20;

}  // namespace

std::string Errno(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

std::string RawWrite(const std::string& dir, const std::string& path, const std::vector<std::vector<float>>& arrays) {
  const std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Errno("open", tmp);
  for (const auto& a : arrays) {
    const char* p = reinterpret_cast<const char*>(a.data());
    size_t left = a.size() * sizeof(float);
    while (left > 0) {
      ssize_t n = write(fd, p, std::min(left, kBlock));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        std::string e = Errno("write", tmp);
        close(fd);
        return e;
      }
      p += n;
      left -= static_cast<size_t>(n);
    }
  }
  if (fsync(fd) != 0) {
    std::string e = Errno("fsync", tmp);
    close(fd);
    return e;
  }
  if (close(fd) != 0) return Errno("close", tmp);
  if (rename(tmp.c_str(), path.c_str()) != 0) return Errno("rename", tmp);
  int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return Errno("open", dir);
  const bool synced = fsync(dfd) == 0;
  std::string e = synced ? "" : Errno("fsync", dir);
  close(dfd);
  return e;
}

}  // namespace baton::cli
