#include "mpi_runtime/deadline.h"

#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

#include "base/env_options.h"
#include "base/events/event_log.h"
#include "baton/log.h"
#include "baton/runtime.h"
#include "mpi_runtime/mpi_check.h"
#include "mpi_runtime/requeue.h"

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
  if (block_) return BATON_MPI_CHECK(MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE));
  const Clock::time_point spin_until = Clock::now() + microseconds(200);
  microseconds nap(20);
  for (;;) {
    // Another thread's call may have failed meanwhile (the heartbeat's).
    if (Failed()) return FailedStatus("MPI_Testall", __FILE__, __LINE__);
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
  // The failure as this rank saw it, for `baton report` (the log's other
  // holder may be inside it: bounded).
  events::Emit(events::Record("failure").Str("what", why.ToString()).Int("exit", kRequeueExitCode),
               events::Flush::kNow);
  // In a Slurm job, Slurm is asked to requeue it as well: exit 75 alone
  // relies on the batch script exiting 75 (RequeueExit=75), and a rank
  // that is stuck for good keeps srun from saying 75 (srun -K SIGKILLs it
  // and reports 137; without -K it waits for it for ever). Bounded: the
  // process must end even if slurmctld does not answer.
  if (std::getenv("SLURM_JOB_ID") != nullptr || std::getenv("SLURM_JOBID") != nullptr) {
    struct Asked {
      std::mutex mu;
      std::condition_variable cv;
      bool done = false;
      Status status;
      std::string what;
    };
    auto asked = std::make_shared<Asked>();
    std::thread([asked] {
      std::string what;
      Status s = RequeueJob(&what);
      std::lock_guard<std::mutex> lock(asked->mu);
      asked->status = s;
      asked->what = what;
      asked->done = true;
      asked->cv.notify_all();
    }).detach();
    std::unique_lock<std::mutex> lock(asked->mu);
    if (!asked->cv.wait_for(lock, std::chrono::seconds(5), [&] { return asked->done; })) {
      BATON_LOG(kRuntime, warning) << "requeue: slurmctld did not answer within 5 s";
    } else if (asked->status.ok()) {
      BATON_LOG(kRuntime, warning) << asked->what << " (a rank timed out)";
    } else {
      BATON_LOG(kRuntime, warning) << asked->status.message();
    }
  }
  std::fflush(nullptr);
  _exit(kRequeueExitCode);
}

void ExitForRequeueAt(const Status& why, std::chrono::steady_clock::time_point at) {
  const double left = std::chrono::duration<double>(at - std::chrono::steady_clock::now()).count();
  if (left > 0) {
    BATON_LOG(kRuntime, error) << why << "; exiting with " << kRequeueExitCode << " at the call's deadline, in "
                               << SecondsText(left);
    std::this_thread::sleep_until(at);
  }
  ExitForRequeue(why);
}

}  // namespace baton::mpi
