// tests/mpi/write_fault.h: the interposed write calls. Each resolves the C
// library's own with dlsym(RTLD_NEXT) on first use.
#include "tests/mpi/write_fault.h"

#include <dlfcn.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <mutex>
#include <string>

namespace baton::ckpt_testing {
namespace {

std::mutex g_mu;
std::string g_part;  // empty: disarmed
int g_err = 0;
int g_left = -1;  // writes still to fail; < 0: all
std::atomic<bool> g_armed{false};
std::atomic<int> g_failed{0};
WriteCalls g_calls = WriteCalls::kAny;

// Whether a write to fd is to fail now (errno set when it is).
bool Fails(int fd, bool plain = false) {
  if (!g_armed.load()) return false;
  char link[64], path[PATH_MAX];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, path, sizeof path - 1);
  if (n <= 0) return false;
  path[n] = '\0';
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_part.empty() || std::string(path).find(g_part) == std::string::npos || g_left == 0) return false;
  if (g_calls == WriteCalls::kPlainOnly && !plain) return false;
  if (g_calls == WriteCalls::kPositionedOnly && plain) return false;
  if (g_left > 0) --g_left;
  ++g_failed;
  errno = g_err;
  return true;
}

template <typename Fn>
Fn Next(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

}  // namespace

void ArmWriteFault(const std::string& path_part, int err, int count, WriteCalls calls) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_calls = calls;
  g_part = path_part;
  g_err = err;
  g_left = count;
  g_failed = 0;
  g_armed = true;
}

void DisarmWriteFault() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_armed = false;
  g_part.clear();
}

int FailedWrites() { return g_failed.load(); }

}  // namespace baton::ckpt_testing

using baton::ckpt_testing::Fails;

extern "C" {

ssize_t write(int fd, const void* buf, size_t n) {
  static auto real = baton::ckpt_testing::Next<ssize_t (*)(int, const void*, size_t)>("write");
  return Fails(fd, /*plain=*/true) ? -1 : real(fd, buf, n);
}
ssize_t pwrite(int fd, const void* buf, size_t n, off_t off) {
  static auto real = baton::ckpt_testing::Next<ssize_t (*)(int, const void*, size_t, off_t)>("pwrite");
  return Fails(fd) ? -1 : real(fd, buf, n, off);
}
ssize_t pwrite64(int fd, const void* buf, size_t n, off64_t off) {
  static auto real = baton::ckpt_testing::Next<ssize_t (*)(int, const void*, size_t, off64_t)>("pwrite64");
  return Fails(fd) ? -1 : real(fd, buf, n, off);
}
ssize_t pwritev(int fd, const struct iovec* iov, int cnt, off_t off) {
  static auto real = baton::ckpt_testing::Next<ssize_t (*)(int, const struct iovec*, int, off_t)>("pwritev");
  return Fails(fd) ? -1 : real(fd, iov, cnt, off);
}
ssize_t pwritev64(int fd, const struct iovec* iov, int cnt, off64_t off) {
  static auto real = baton::ckpt_testing::Next<ssize_t (*)(int, const struct iovec*, int, off64_t)>("pwritev64");
  return Fails(fd) ? -1 : real(fd, iov, cnt, off);
}

}  // extern "C"
