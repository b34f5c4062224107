#include "ckpt/stop_watch.h"

#include <chrono>
#include <utility>

#include "baton/runtime.h"

namespace baton::ckpt {

StopWatch::StopWatch(std::function<void()> on_stop, double settle_seconds, std::function<bool()> confirm,
                     double poll_seconds) {
  using Seconds = std::chrono::duration<double>;
  thread_ = std::thread([this, on_stop = std::move(on_stop), confirm = std::move(confirm),
                         settle = Seconds(settle_seconds), poll = Seconds(poll_seconds)] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!done_ && !Runtime::stop_signal_received()) cv_.wait_for(lock, poll);
    if (done_) return;
    if (cv_.wait_for(lock, settle, [this] { return done_; })) return;  // ended while settling
    lock.unlock();
    if (confirm()) on_stop();
  });
}

StopWatch::~StopWatch() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

}  // namespace baton::ckpt
