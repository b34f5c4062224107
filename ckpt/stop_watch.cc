#include "ckpt/stop_watch.h"

#include <chrono>
#include <utility>

#include "baton/runtime.h"

namespace baton::ckpt {

StopWatch::~StopWatch() {
  Disarm();
  {
    std::lock_guard<std::mutex> lock(mu_);
    quit_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void StopWatch::Arm(std::function<void()> on_stop, double settle_seconds, std::function<bool()> confirm) {
  Disarm();
  {
    std::lock_guard<std::mutex> lock(mu_);
    on_stop_ = std::move(on_stop);
    confirm_ = std::move(confirm);
    settle_seconds_ = settle_seconds;
    ++generation_;
    armed_ = true;
  }
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
  cv_.notify_all();
}

void StopWatch::Disarm() {
  std::unique_lock<std::mutex> lock(mu_);
  armed_ = false;
  cv_.notify_all();
  cv_.wait(lock, [this] { return !running_; });
  on_stop_ = nullptr;
  confirm_ = nullptr;
}

void StopWatch::Loop() {
  using Seconds = std::chrono::duration<double>;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return quit_ || armed_; });
    if (quit_) return;
    const uint64_t generation = generation_;
    auto ended = [&] { return quit_ || !armed_ || generation_ != generation; };
    while (!ended() && !Runtime::stop_signal_received()) cv_.wait_for(lock, Seconds(poll_seconds_));
    if (ended()) continue;
    if (cv_.wait_for(lock, Seconds(settle_seconds_), ended)) continue;  // ended while settling
    std::function<void()> on_stop = on_stop_;
    std::function<bool()> confirm = confirm_;
    running_ = true;
    lock.unlock();
    if (confirm()) on_stop();
    lock.lock();
    running_ = false;
    if (generation_ == generation) armed_ = false;  // once per Arm
    cv_.notify_all();
  }
}

}  // namespace baton::ckpt
