#include "mpi_runtime/deadline.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <sstream>
#include <thread>

#include "base/env_options.h"
#include "baton/log.h"
#include "baton/runtime.h"
#include "mpi_runtime/mpi_check.h"

namespace baton::mpi {

namespace {
constexpr const char* kComponent = "runtime";
constexpr double kDefaultCollectiveTimeout = 600;
std::atomic<bool> g_abandoned{false};
}  // namespace

void MarkAbandoned() { g_abandoned.store(true); }
bool Abandoned() { return g_abandoned.load(); }

Status Deadline::Wait(MPI_Request* reqs, int n) const {
  using std::chrono::microseconds;
  if (block_) return CheckMpi(MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE), "MPI_Waitall", __FILE__, __LINE__);
  const Clock::time_point spin_until = Clock::now() + microseconds(200);
  microseconds nap(20);
  for (;;) {
    int done = 0;
    const int rc = MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) return CheckMpi(rc, "MPI_Testall", __FILE__, __LINE__);
    if (done) return Status::OK();
    const Clock::time_point now = Clock::now();
    if (now >= at_) return Status::Timeout(kComponent, "timed out");
    if (now < spin_until) continue;
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, microseconds(1000));
  }
}

Status ResolveCollectiveTimeout(double option, double* seconds) {
  return PositiveNumberOption("collective timeout", option, "BATON_COLLECTIVE_TIMEOUT", kDefaultCollectiveTimeout,
                              seconds);
}

std::string SecondsText(double seconds) {
  std::ostringstream os;
  os << seconds << " s";
  return os.str();
}

Status TimeoutStatus(const Runtime* rt, std::string_view what, double seconds) {
  std::string msg(what);
  if (rt != nullptr && rt->step() >= 0) msg += " at step " + std::to_string(rt->step());
  msg += " timed out after " + SecondsText(seconds);
  if (rt != nullptr) msg += "; ranks not answering heartbeats: " + rt->DescribeSilentRanks();
  return Status::Timeout(kComponent, msg);
}

void ExitForRequeue(const Status& why) {
  BATON_LOG(kRuntime, error) << why << "; exiting with " << kRequeueExitCode << " (requeue me)";
  std::fflush(nullptr);
  _exit(kRequeueExitCode);
}

}  // namespace baton::mpi
