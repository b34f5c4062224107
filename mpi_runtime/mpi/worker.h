// The thread of an mpi communicator's non-blocking collectives: closures
// run in submission order, one at a time, on one thread (so they never
// interleave inside MPI on one communicator), and each one's Request is a
// future of its Status.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

#include "baton/communicator.h"

namespace baton::mpi {

class Worker {
 public:
  Worker() = default;
  // Runs what was submitted, then stops the thread.
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Queues `fn`; the thread starts with the first submission.
  std::shared_future<Status> Submit(std::function<Status()> fn);

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

// A Request completed by a Worker's future. Destroying an unfinished one
// waits for it (baton::Request's promise).
class FutureRequest : public Request {
 public:
  explicit FutureRequest(std::shared_future<Status> f) : f_(std::move(f)) {}
  ~FutureRequest() override;
  Status Wait() override;
  Status Test(bool* done) override;

 private:
  std::shared_future<Status> f_;
};

}  // namespace baton::mpi
