#include "mpi_runtime/silence_watch.h"

#include <algorithm>
#include <vector>

#include "baton/runtime.h"
#include "mpi_runtime/deadline.h"

namespace baton::mpi {

SilenceWatch::SilenceWatch(const Runtime& rt, double seconds) : rt_(rt), seconds_(seconds) {
  thread_ = std::thread([this] { Loop(); });
}

SilenceWatch::~SilenceWatch() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

SilenceWatch::Scope::Scope(SilenceWatch* watch, const char* what) : watch_(watch) {
  if (watch_ == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(watch_->mu_);
    if (watch_->depth_++ == 0) watch_->what_ = what;
  }
  watch_->cv_.notify_all();
}

SilenceWatch::Scope::~Scope() {
  if (watch_ == nullptr) return;
  std::lock_guard<std::mutex> lock(watch_->mu_);
  --watch_->depth_;
}

void SilenceWatch::Loop() {
  // Polled a few times per deadline (at most once per 250 ms): the exit
  // comes within a quarter of `seconds` after it is due.
  const auto poll = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(std::clamp(seconds_ / 4, 0.05, 0.25)));
  const auto limit = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds_));
  bool silent_before = false;  // silent at the last poll too, since silent_since
  Clock::time_point silent_since = Clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (depth_ == 0) {
      silent_before = false;
      cv_.wait(lock, [this] { return stop_ || depth_ > 0; });
      continue;
    }
    const char* what = what_;
    lock.unlock();
    const bool silent = !rt_.silent_ranks().empty();
    const Clock::time_point now = Clock::now();
    lock.lock();
    if (depth_ == 0 || !silent) {
      silent_before = false;
    } else if (!silent_before) {
      silent_before = true;
      silent_since = now;
    } else if (now - silent_since >= limit) {
      lock.unlock();
      ExitForRequeue(TimeoutStatus(&rt_, std::string(what) + " waiting for ranks that stopped answering heartbeats",
                                   seconds_));
    }
    cv_.wait_for(lock, poll, [this] { return stop_; });
  }
}

}  // namespace baton::mpi
