// An LD_PRELOAD interposer for the fault campaign (tests/fault/campaign.sh):
// it lets one rank's unsynced writes be dropped after the rank is killed, the
// way a node's page cache is lost at a power failure (leveldb's
// FaultInjectionTestEnv drops unsynced data the same way). The writes go
// through to the file as usual; before each one, the bytes it overwrites and
// the file's size are appended to a journal, and an fsync or fdatasync of the
// file marks everything journaled for it so far as synced. After the kill,
// tests/fault/revert-unsynced undoes, file by file, every write journaled
// after the file's last sync. A missing fsync before a commit then shows as a
// committed version whose shard or manifest is not what was committed.
//
// Interposed: write, pwrite, pwrite64, pwritev, pwritev64 (what baton's file
// layer, HDF5's sec2 driver and Open MPI's fbtl call), fsync, fdatasync. Only
// files whose path begins with $BATON_DROP_UNSYNCED_DIR are journaled, into
// $BATON_DROP_UNSYNCED_JOURNAL; with either unset, nothing is.
// Not modelled: directory entries (a rename or a create is kept even when the
// directory was not synced), ftruncate, mmap writes.
//
// Journal records (native byte order, one writer process):
//   'W' u32 path_len, path, u64 offset, u64 len, i64 old_size, u64 old_len, old bytes
//   'S' u32 path_len, path
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace {

using WriteFn = ssize_t (*)(int, const void*, size_t);
using PwriteFn = ssize_t (*)(int, const void*, size_t, off_t);
using Pwrite64Fn = ssize_t (*)(int, const void*, size_t, off64_t);
using PwritevFn = ssize_t (*)(int, const struct iovec*, int, off_t);
using Pwritev64Fn = ssize_t (*)(int, const struct iovec*, int, off64_t);
using SyncFn = int (*)(int);

template <typename Fn>
Fn Next(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

std::recursive_mutex g_mu;
thread_local bool t_inside = false;  // the journal's own writes are not journaled

// The journal's descriptor, or -1 when nothing is journaled.
int JournalFd() {
  static int fd = [] {
    const char* j = std::getenv("BATON_DROP_UNSYNCED_JOURNAL");
    const char* d = std::getenv("BATON_DROP_UNSYNCED_DIR");
    if (j == nullptr || *j == '\0' || d == nullptr || *d == '\0') return -1;
    const int f = ::open(j, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (f < 0) std::fprintf(stderr, "drop_unsynced: cannot open the journal %s: %s\n", j, std::strerror(errno));
    return f;
  }();
  return fd;
}

// The path of fd when it lies under the journaled directory, else "".
std::string JournaledPath(int fd) {
  const char* d = std::getenv("BATON_DROP_UNSYNCED_DIR");
  if (d == nullptr) return "";
  char link[64], path[PATH_MAX];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, path, sizeof path - 1);
  if (n <= 0) return "";
  path[n] = '\0';
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return "";
  return std::strncmp(path, d, std::strlen(d)) == 0 ? std::string(path) : std::string();
}

void Append(std::string* rec, const void* p, size_t n) { rec->append(static_cast<const char*>(p), n); }

void WriteRecord(const std::string& rec) {
  static WriteFn real = Next<WriteFn>("write");
  const int j = JournalFd();
  size_t done = 0;
  while (done < rec.size()) {
    const ssize_t w = real(j, rec.data() + done, rec.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      std::fprintf(stderr, "drop_unsynced: journal write failed: %s\n", std::strerror(errno));
      return;
    }
    done += static_cast<size_t>(w);
  }
}

// Journals what a write of len bytes at offset of fd will overwrite.
void BeforeWrite(int fd, off64_t offset, size_t len) {
  if (t_inside || JournalFd() < 0 || len == 0) return;
  const int saved = errno;
  t_inside = true;
  const std::string path = JournaledPath(fd);
  if (!path.empty()) {
    struct stat st;
    const int64_t old_size = fstat(fd, &st) == 0 ? st.st_size : 0;
    std::vector<char> old;
    if (offset < old_size) {
      old.resize(static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(len), old_size - offset)));
      const int r = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      const ssize_t got = r >= 0 ? ::pread(r, old.data(), old.size(), offset) : -1;
      if (r >= 0) ::close(r);
      old.resize(got > 0 ? static_cast<size_t>(got) : 0);
    }
    std::string rec = "W";
    const uint32_t pl = static_cast<uint32_t>(path.size());
    const uint64_t off = static_cast<uint64_t>(offset), n = len, ol = old.size();
    Append(&rec, &pl, sizeof pl);
    rec += path;
    Append(&rec, &off, sizeof off);
    Append(&rec, &n, sizeof n);
    Append(&rec, &old_size, sizeof old_size);
    Append(&rec, &ol, sizeof ol);
    rec.append(old.data(), old.size());
    std::lock_guard<std::recursive_mutex> lock(g_mu);
    WriteRecord(rec);
  }
  t_inside = false;
  errno = saved;
}

void AfterSync(int fd, int rc) {
  if (rc != 0 || t_inside || JournalFd() < 0) return;
  const int saved = errno;
  t_inside = true;
  const std::string path = JournaledPath(fd);
  if (!path.empty()) {
    std::string rec = "S";
    const uint32_t pl = static_cast<uint32_t>(path.size());
    Append(&rec, &pl, sizeof pl);
    rec += path;
    std::lock_guard<std::recursive_mutex> lock(g_mu);
    WriteRecord(rec);
  }
  t_inside = false;
  errno = saved;
}

size_t IovLen(const struct iovec* iov, int n) {
  size_t t = 0;
  for (int i = 0; i < n; ++i) t += iov[i].iov_len;
  return t;
}

}  // namespace

extern "C" {

ssize_t write(int fd, const void* buf, size_t n) {
  static WriteFn real = Next<WriteFn>("write");
  if (!t_inside && JournalFd() >= 0 && !(fcntl(fd, F_GETFL) & O_APPEND)) {
    const off64_t pos = lseek64(fd, 0, SEEK_CUR);
    if (pos >= 0) BeforeWrite(fd, pos, n);
  }
  return real(fd, buf, n);
}

ssize_t pwrite(int fd, const void* buf, size_t n, off_t off) {
  static PwriteFn real = Next<PwriteFn>("pwrite");
  BeforeWrite(fd, off, n);
  return real(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void* buf, size_t n, off64_t off) {
  static Pwrite64Fn real = Next<Pwrite64Fn>("pwrite64");
  BeforeWrite(fd, off, n);
  return real(fd, buf, n, off);
}

ssize_t pwritev(int fd, const struct iovec* iov, int cnt, off_t off) {
  static PwritevFn real = Next<PwritevFn>("pwritev");
  BeforeWrite(fd, off, IovLen(iov, cnt));
  return real(fd, iov, cnt, off);
}

ssize_t pwritev64(int fd, const struct iovec* iov, int cnt, off64_t off) {
  static Pwritev64Fn real = Next<Pwritev64Fn>("pwritev64");
  BeforeWrite(fd, off, IovLen(iov, cnt));
  return real(fd, iov, cnt, off);
}

int fsync(int fd) {
  static SyncFn real = Next<SyncFn>("fsync");
  const int rc = real(fd);
  AfterSync(fd, rc);
  return rc;
}

int fdatasync(int fd) {
  static SyncFn real = Next<SyncFn>("fdatasync");
  const int rc = real(fd);
  AfterSync(fd, rc);
  return rc;
}

}  // extern "C"
