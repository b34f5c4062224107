#include "mpi_runtime/agreed_stop.h"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include "mpi_runtime/deadline.h"
#include "mpi_runtime/mpi_check.h"

namespace baton {
namespace {

constexpr const char* kComponent = "runtime";

std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free,
              "the stop handler stores into g_stop_signal: only a lock-free atomic is async-signal-safe");
struct sigaction g_old_term, g_old_stop;
int g_installed_signal = 0;  // while installed
int g_installs = 0;          // Runtimes that installed them (Create/~Runtime: one thread)

// Async-signal-safe: one lock-free store. Any thread may run it.
extern "C" void OnStopSignal(int sig) { g_stop_signal.store(sig, std::memory_order_relaxed); }

}  // namespace

Status InstallStopHandlers(int stop_signal) {
  // Two Runtimes at once (a test's own beside a shared one) share the
  // handlers and the flag: counted, installed by the first, restored by the last.
  if (g_installs > 0) {
    if (stop_signal != g_installed_signal)
      return Status::InvalidArgument(kComponent, "stop signal " + std::to_string(stop_signal) +
                                                     " differs from the other Runtime's " +
                                                     std::to_string(g_installed_signal));
    ++g_installs;
    return Status::OK();
  }
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // the training thread's system calls go on
  g_stop_signal.store(0);
  if (sigaction(SIGTERM, &sa, &g_old_term) != 0)
    return Status::IOError(kComponent, std::string("sigaction(SIGTERM) failed: ") + std::strerror(errno));
  if (stop_signal != SIGTERM && sigaction(stop_signal, &sa, &g_old_stop) != 0) {
    sigaction(SIGTERM, &g_old_term, nullptr);
    return Status::IOError(kComponent, "sigaction(" + std::to_string(stop_signal) +
                                           ") failed: " + std::strerror(errno));
  }
  g_installed_signal = stop_signal;
  g_installs = 1;
  return Status::OK();
}

void RestoreStopHandlers() {
  if (g_installs == 0 || --g_installs > 0) return;
  if (g_installed_signal != SIGTERM) sigaction(g_installed_signal, &g_old_stop, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
  g_installed_signal = 0;
}

int StopSignalReceived() { return g_stop_signal.load(std::memory_order_relaxed); }

StopAgreement::~StopAgreement() {
  if (!broken_) delete[] buf_;  // else abandoned: MPI may still write it, so it is leaked
}

Status StopAgreement::Check(bool* stop, const mpi::Deadline& deadline) {
  *stop = true;
  if (agreed_) return Status::OK();
  if (broken_) return Status::Aborted(kComponent, "an earlier agreement on stopping failed");
  ++calls_;
  if (calls_ % check_every_ != 0) return *stop = false, Status::OK();
  buf_[0] = StopSignalReceived() != 0 ? 1 : 0;
  Status s = mpi::Issue(
      deadline, [&] { return BATON_MPI_CHECK(MPI_Allreduce(&buf_[0], &buf_[1], 1, MPI_INT, MPI_MAX, comm_)); },
      [&](MPI_Request* r) { return BATON_MPI_CHECK(MPI_Iallreduce(&buf_[0], &buf_[1], 1, MPI_INT, MPI_MAX, comm_, r)); });
  if (!s.ok()) {
    broken_ = true;  // buf_ is abandoned with the exchange
    if (s.code() != Code::kTimeout) return s.Annotate("agreeing whether to stop");
    return s;
  }
  agreed_ = buf_[1] != 0;
  *stop = agreed_;
  return Status::OK();
}

}  // namespace baton
