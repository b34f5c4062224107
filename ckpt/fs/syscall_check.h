// The one check helper for the system calls of ckpt/fs: retries EINTR and
// turns a failure into a Status naming the call, the path, errno's text and
// the file:line of the call (NCCL's SYSCHECK, as a Status).
//
//   int fd = -1;
//   BATON_RETURN_IF_ERROR(BATON_SYSCALL("open", path, fd = ::open(path.c_str(), O_RDONLY)));
#pragma once

#include <cerrno>
#include <string>
#include <string_view>

#include "baton/status.h"

namespace baton::ckpt::fs {

// A Status for a system call that failed with `err`: NotFound for ENOENT and
// ENOTDIR (callers tell "absent" from "broken" by the code), IOError
// otherwise. "open(/ckpt/v00000001-s4/manifest.json): No such file or
// directory (errno 2) [posix_env.cc:80]".
Status SyscallError(std::string_view call, std::string_view path, int err, const char* file, int line);

// Runs `fn` (a system call returning -1 and setting errno on failure) again
// while it fails with EINTR.
template <typename Fn>
Status CheckSyscall(std::string_view call, std::string_view path, const char* file, int line, Fn&& fn) {
  for (;;) {
    if (fn() != -1) return Status::OK();
    const int err = errno;
    if (err != EINTR) return SyscallError(call, path, err, file, line);
  }
}

}  // namespace baton::ckpt::fs

// `expr` is evaluated (again after EINTR) inside a lambda capturing by
// reference, so it may assign its result: BATON_SYSCALL("open", p, fd = ::open(...)).
#define BATON_SYSCALL(call, path, expr) \
  ::baton::ckpt::fs::CheckSyscall((call), (path), __FILE__, __LINE__, [&] { return (expr); })
