#include "mpi_runtime/setup_guard.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "mpi_runtime/deadline.h"
#include "mpi_runtime/mpi/watchdog.h"

namespace baton::mpi {

struct SetupGuard::Shared {
  using Clock = std::chrono::steady_clock;
  explicit Shared(std::string w) : what(std::move(w)) {}
  const std::string what;
  std::mutex mu;
  std::condition_variable cv;
  std::string step = "starting";  // the step in progress, for messages
  // Every step's label, for the watchdog: never changed once added, so the
  // pointer an armed slot holds stays valid while a later step is added.
  std::deque<std::string> labels;
  Clock::time_point since = Clock::now();
  bool done = false;
  Status result;
};

SetupGuard::SetupGuard(double seconds, OnTimeout policy, const Runtime* rt, std::string what)
    : seconds_(seconds), policy_(policy), rt_(rt), shared_(std::make_shared<Shared>(std::move(what))) {
  if (policy_ == OnTimeout::kExit) {
    watchdog_ = std::make_unique<Watchdog>(seconds_, [this](const CallInfo& info) {
      ExitForRequeue(TimeoutStatus(rt_, info.label != nullptr ? info.label : shared_->what, seconds_));
    });
  }
}

SetupGuard::~SetupGuard() = default;

void SetupGuard::Steps::operator()(const std::string& name) const {
  std::lock_guard<std::mutex> lock(shared_->mu);
  shared_->step = shared_->what + ": " + name;
  shared_->since = Shared::Clock::now();
  if (watchdog_ != nullptr) {
    shared_->labels.push_back(shared_->step);
    CallInfo info;
    info.label = shared_->labels.back().c_str();
    watchdog_->Arm(0, info);
  }
}

Status SetupGuard::Run(std::function<Status(const Steps&)> body) {
  Steps steps;
  steps.shared_ = shared_;
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->step = shared_->what;
    shared_->since = Shared::Clock::now();
    shared_->done = false;
  }
  if (policy_ == OnTimeout::kExit) {
    steps.watchdog_ = watchdog_.get();
    Status s = body(steps);
    watchdog_->Disarm(0);
    return s;
  }
  // kReturn: the helper holds everything it uses (the shared state, the
  // body and what it captured), since it may run on after a timeout.
  std::shared_ptr<Shared> shared = shared_;
  std::thread helper([shared, steps, body = std::move(body)] {
    Status s = body(steps);
    std::lock_guard<std::mutex> lock(shared->mu);
    shared->result = s;
    shared->done = true;
    shared->cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(shared->mu);
  const auto limit = std::chrono::duration_cast<Shared::Clock::duration>(std::chrono::duration<double>(seconds_));
  for (;;) {
    if (shared->done) {
      lock.unlock();
      helper.join();
      return shared->result;
    }
    const auto until = shared->since + limit;
    if (Shared::Clock::now() >= until) break;
    shared->cv.wait_until(lock, until);
  }
  const std::string step = shared->step;
  lock.unlock();
  helper.detach();  // blocked in MPI for good, or until the late rank comes
  MarkAbandoned();
  return TimeoutStatus(rt_, step, seconds_);
}

}  // namespace baton::mpi
