#include "base/launch/bounded_child.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "base/launch/component.h"
#include "base/launch/quote.h"

namespace baton::launch {
namespace {

// The Timeout of a child given up on. Left behind: a process stuck in the
// kernel (D state) ignores even SIGKILL, and waiting for it is what must
// not happen.
Status GiveUp(pid_t pid, const std::string& what, std::chrono::milliseconds limit, const char* done) {
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, WNOHANG);
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.1f", static_cast<double>(limit.count()) / 1000.0);
  return Status::Timeout(kComponent, what + " did not finish within " + seconds + " s (a hung file system?); " + done);
}

// Waits until `fd` is readable (or at its end) or `deadline` passed; false
// on the deadline or a poll error.
bool WaitReadable(int fd, std::chrono::steady_clock::time_point deadline) {
  while (true) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    struct pollfd p = {fd, POLLIN, 0};
    const int n = poll(&p, 1, static_cast<int>(left.count()));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

// The child's answer in MakeDirBounded: this header, then the path, the
// leaf and the message, with the two descriptors on success.
struct DirReport {
  int32_t code;
  int32_t created;
  uint32_t path_len, leaf_len, component_len, message_len;
};

Status StatusOf(Code code, const std::string& component, const std::string& message) {
  switch (code) {
    case Code::kOk: return Status::OK();
    case Code::kInvalidArgument: return Status::InvalidArgument(component, message);
    case Code::kNotFound: return Status::NotFound(component, message);
    case Code::kCorruption: return Status::Corruption(component, message);
    case Code::kIOError: return Status::IOError(component, message);
    case Code::kTimeout: return Status::Timeout(component, message);
    case Code::kUnavailable: return Status::Unavailable(component, message);
    case Code::kAborted: return Status::Aborted(component, message);
    case Code::kInternal: break;
  }
  return Status::Internal(component, message);
}

// In the child: sends `s` (and, when it is OK, `d` with its descriptors).
void SendDirReport(int sock, const Status& s, const OpenDir& d) {
  const std::string path = s.ok() ? d.path : "", leaf = s.ok() ? d.leaf : "";
  const std::string component = s.ok() ? "" : s.component(), message = s.ok() ? "" : s.message();
  DirReport h = {static_cast<int32_t>(s.code()), d.created ? 1 : 0, static_cast<uint32_t>(path.size()),
                 static_cast<uint32_t>(leaf.size()), static_cast<uint32_t>(component.size()),
                 static_cast<uint32_t>(message.size())};
  std::string buf(reinterpret_cast<const char*>(&h), sizeof h);
  buf += path + leaf + component + message;
  struct iovec iov = {&buf[0], buf.size()};
  struct msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(struct cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))] = {};
  if (s.ok()) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(2 * sizeof(int));
    const int fds[2] = {d.parent_fd, d.fd};
    std::memcpy(CMSG_DATA(c), fds, sizeof fds);
  }
  while (sendmsg(sock, &msg, MSG_NOSIGNAL) < 0 && errno == EINTR) {
  }
}

// In the parent: reads the child's report.
Status ReceiveDirReport(int sock, const std::string& what, OpenDir* out) {
  std::vector<char> buf(64 * 1024);
  struct iovec iov = {buf.data(), buf.size()};
  struct msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(struct cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  while ((n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
  }
  int fds[2] = {-1, -1};
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof fds))
      std::memcpy(fds, CMSG_DATA(c), sizeof fds);
  DirReport h;
  const size_t got = n > 0 ? static_cast<size_t>(n) : 0;
  bool whole = got >= sizeof h && (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) == 0;
  if (whole) {
    std::memcpy(&h, buf.data(), sizeof h);
    whole = got == sizeof h + size_t{h.path_len} + h.leaf_len + h.component_len + h.message_len;
  }
  const bool ok = whole && h.code == static_cast<int32_t>(Code::kOk);
  if (!ok || fds[0] < 0 || fds[1] < 0) {
    for (int fd : fds)
      if (fd >= 0) close(fd);
    if (!whole) return Status::Internal(kComponent, what + ": the child ended without a whole report");
    if (ok) return Status::Internal(kComponent, what + ": the child sent no descriptors");
  }
  const char* p = buf.data() + sizeof h;
  std::string path(p, h.path_len), leaf(p + h.path_len, h.leaf_len);
  std::string component(p + h.path_len + h.leaf_len, h.component_len);
  std::string message(p + h.path_len + h.leaf_len + h.component_len, h.message_len);
  if (!ok) return StatusOf(static_cast<Code>(h.code), component, message);
  out->parent_fd = fds[0];
  out->fd = fds[1];
  out->path = path;
  out->leaf = leaf;
  out->created = h.created != 0;
  return Status::OK();
}

}  // namespace

Status RunAsUser(const std::string& what, uid_t uid, gid_t gid, std::chrono::milliseconds limit,
                 const std::function<int()>& work) {
  // The child reports {stage, errno} through the pipe; its exit closes the
  // pipe, which is the event waited for (with the deadline).
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Status::IOError(kComponent, what + ": pipe: " + std::strerror(errno));
  const bool switch_user = getuid() != uid || geteuid() != uid || getgid() != gid || getegid() != gid;
  pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    close(fds[0]);
    close(fds[1]);
    return Status::IOError(kComponent, what + ": fork: " + std::strerror(err));
  }
  if (pid == 0) {
    // Only async-signal-safe calls between fork and _exit (slurmstepd has threads).
    close(fds[0]);
    int report[2] = {0, 0};
    if (switch_user && (setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(uid) != 0)) {
      report[0] = 1;
      report[1] = errno;
    } else {
      report[0] = 2;
      report[1] = work();
    }
    ssize_t ignored = write(fds[1], report, sizeof report);
    (void)ignored;
    _exit(0);
  }
  close(fds[1]);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int report[2] = {0, 0};
  size_t got = 0;
  bool ended = false;
  while (!ended && WaitReadable(fds[0], deadline)) {
    const ssize_t r = read(fds[0], reinterpret_cast<char*>(report) + got, sizeof report - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) ended = true;  // EOF: the child is gone
    else got += static_cast<size_t>(r);
  }
  close(fds[0]);
  if (!ended) return GiveUp(pid, what, limit, "given up, left in place");
  while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
  if (got != sizeof report) return Status::Internal(kComponent, what + ": the child ended without a report");
  if (report[0] == 1)
    return Status::IOError(kComponent, what + ": cannot become uid " + std::to_string(uid) + " gid " +
                                           std::to_string(gid) + ": " + std::strerror(report[1]));
  if (report[1] != 0) return Status::IOError(kComponent, what + ": " + std::strerror(report[1]));
  return Status::OK();
}

Status MakeDirBounded(const std::string& what, std::chrono::milliseconds limit,
                      const std::function<Status(OpenDir*)>& make, OpenDir* out) {
  *out = OpenDir();
  // SEQPACKET: the report is one message, read whole or not at all.
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
    return Status::IOError(kComponent, what + ": socketpair: " + std::strerror(errno));
  pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    close(sv[0]);
    close(sv[1]);
    return Status::IOError(kComponent, what + ": fork: " + std::strerror(err));
  }
  if (pid == 0) {
    close(sv[0]);
    OpenDir d;
    Status s = make(&d);
    SendDirReport(sv[1], s, d);
    _exit(0);
  }
  close(sv[1]);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  if (!WaitReadable(sv[0], deadline)) {
    close(sv[0]);
    return GiveUp(pid, what, limit, "given up; what it made, if anything, is left in place");
  }
  Status s = ReceiveDirReport(sv[0], what, out);
  // The report is the child's last act; its exit (the socket's end) follows,
  // and is waited for under the same deadline.
  char eof;
  const bool ended = WaitReadable(sv[0], deadline) && recv(sv[0], &eof, 1, MSG_DONTWAIT) == 0;
  close(sv[0]);
  if (ended) {
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  } else {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, WNOHANG);
  }
  return s;
}

Status RemoveAsUser(const OpenDir& dir, const std::string& name, uid_t uid, gid_t gid,
                    std::chrono::milliseconds limit) {
  const int fd = dir.fd, parent = dir.parent_fd;
  const bool created = dir.created;
  const char* file = name.c_str();
  const char* leaf = dir.leaf.c_str();
  return RunAsUser("removing hostfile " + Quoted(dir.path + "/" + name), uid, gid, limit, [=]() -> int {
    if (unlinkat(fd, file, 0) != 0 && errno != ENOENT) return errno;
    if (created && unlinkat(parent, leaf, AT_REMOVEDIR) != 0 && errno != ENOENT) return errno;
    return 0;
  });
}

}  // namespace baton::launch
