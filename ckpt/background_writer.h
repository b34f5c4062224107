// The thread of an asynchronous save: runs one job at a time (a rank's
// shard write) beside the caller's thread, and hands its Status back. One
// thread for the writer's life, started by the first Start and reused by
// every later one: a SaveAsync in a loop starts no thread (issue 48).
//
// A job must make no MPI call (ckpt/README.md, "Asynchronous saves") and
// reads only memory nobody writes while it runs (the staging copy). The
// caller learns the end by Join (the job's end is published under the
// writer's mutex, so everything the job wrote happens-before what the
// caller reads after Join) or by polling state().
//
// Threading: Start, WaitUntil, Abandon and Join from one thread (the
// Checkpointer's); state() from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "baton/status.h"

namespace baton::ckpt {

class BackgroundWriter {
 public:
  // The job: `abandon` turns true when the caller gives up on it; a job
  // checks it at points where it can stop cleanly.
  using Job = std::function<Status(const std::atomic<bool>& abandon)>;
  enum class State { kIdle, kRunning, kSucceeded, kFailed };

  BackgroundWriter() = default;
  ~BackgroundWriter();  // waits for a running job (it is not abandoned), ends the thread
  BackgroundWriter(const BackgroundWriter&) = delete;
  BackgroundWriter& operator=(const BackgroundWriter&) = delete;

  // Precondition: idle (no Start since the last Join; a running job is
  // waited for). The job runs at `nice` (0-19, Linux's per-thread
  // setpriority; a failure to change it is ignored: the job runs, at the
  // thread's priority).
  void Start(Job job, int nice = 0);
  // Waits until the job has ended or `deadline` (Now(), seconds) passed;
  // true when it has ended (or nothing runs).
  bool WaitUntil(double deadline);
  // Asks the job to stop at its next check.
  void Abandon() { abandon_.store(true, std::memory_order_release); }
  // Waits for the job and returns its Status; OK when idle. Back to idle
  // (the thread stays, waiting for the next Start).
  Status Join();
  // The job's state, and its failure once it failed.
  State state(Status* failure = nullptr) const;

 private:
  void Loop();  // the thread: runs each job handed over, until stop_

  std::thread thread_;
  std::atomic<bool> abandon_{false};
  mutable std::mutex mu_;
  std::condition_variable done_cv_;  // a job ended
  std::condition_variable job_cv_;   // a job was handed over, or stop_
  State state_ = State::kIdle;  // guarded by mu_
  Status result_;               // guarded by mu_
  Job job_;                     // guarded by mu_: handed over, not yet taken
  int nice_ = 0;                // guarded by mu_: job_'s
  bool stop_ = false;           // guarded by mu_
};

}  // namespace baton::ckpt
