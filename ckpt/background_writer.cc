#include "ckpt/background_writer.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <utility>

#include "ckpt/checkpointer_impl.h"

namespace baton::ckpt {

BackgroundWriter::~BackgroundWriter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  job_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void BackgroundWriter::Start(Job job, int nice) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    // A caller that skipped Join: the job before runs to its end first.
    done_cv_.wait(lock, [&] { return state_ != State::kRunning; });
    state_ = State::kRunning;
    result_ = Status::OK();
    job_ = std::move(job);
    nice_ = nice;
    abandon_.store(false, std::memory_order_release);
  }
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
  job_cv_.notify_one();
}

void BackgroundWriter::Loop() {
  int applied_nice = 0;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    job_cv_.wait(lock, [&] { return stop_ || job_; });
    if (!job_) return;  // stopped, nothing handed over
    Job job = std::move(job_);
    job_ = nullptr;
    const int nice = nice_;
    lock.unlock();
    if (nice != applied_nice) {
      (void)setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), nice);
      applied_nice = nice;
    }
    Status s = job(abandon_);
    job = nullptr;  // what the job holds goes before its end is published
    lock.lock();
    result_ = std::move(s);
    state_ = result_.ok() ? State::kSucceeded : State::kFailed;
    done_cv_.notify_all();
  }
}

bool BackgroundWriter::WaitUntil(double deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  while (state_ == State::kRunning) {
    const double left = deadline - Now();
    if (!(left > 0)) return false;
    // Bounded waits: an infinite deadline would overflow a time_point.
    done_cv_.wait_for(lock, std::chrono::duration<double>(std::min(left, 3600.0)));
  }
  return true;
}

Status BackgroundWriter::Join() {
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return state_ != State::kRunning; });
  Status s = std::move(result_);
  result_ = Status::OK();
  state_ = State::kIdle;
  return s;
}

BackgroundWriter::State BackgroundWriter::state(Status* failure) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (failure != nullptr && state_ == State::kFailed) *failure = result_;
  return state_;
}

}  // namespace baton::ckpt
