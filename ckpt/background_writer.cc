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
  if (thread_.joinable()) thread_.join();
}

void BackgroundWriter::Start(Job job, int nice) {
  if (thread_.joinable()) thread_.join();  // a caller that skipped Join: never assign over a live thread
  {
    std::lock_guard<std::mutex> lock(mu_);
    state_ = State::kRunning;
    result_ = Status::OK();
  }
  abandon_.store(false, std::memory_order_release);
  thread_ = std::thread([this, nice, job = std::move(job)] {
    if (nice > 0) {
      (void)setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), nice);
    }
    Status s = job(abandon_);
    std::lock_guard<std::mutex> lock(mu_);
    result_ = std::move(s);
    state_ = result_.ok() ? State::kSucceeded : State::kFailed;
    done_cv_.notify_all();
  });
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
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
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
