#include "mpi_runtime/mpi/worker.h"

#include <chrono>

namespace baton::mpi {

Worker::~Worker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

std::shared_future<Status> Worker::Submit(std::function<Status()> fn) {
  auto task = std::make_shared<std::packaged_task<Status()>>(std::move(fn));
  std::shared_future<Status> result = task->get_future().share();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
    queue_.push_back([task] { (*task)(); });
  }
  cv_.notify_one();
  return result;
}

void Worker::Loop() {
  while (true) {
    std::function<void()> next;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything submitted ran
      next = std::move(queue_.front());
      queue_.pop_front();
    }
    next();
  }
}

FutureRequest::~FutureRequest() {
  if (f_.valid()) f_.wait();
}

Status FutureRequest::Wait() { return f_.get(); }

Status FutureRequest::Test(bool* done) {
  *done = f_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  return *done ? f_.get() : Status::OK();
}

}  // namespace baton::mpi
