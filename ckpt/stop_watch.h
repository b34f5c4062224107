// A watch for the agreed-stop signals (SIGTERM, BATON_STOP_SIGNAL:
// Runtime::stop_signal_received) while something that must know of them
// runs without looking: once this process has received one, and
// `settle_seconds` later `confirm()` still holds, it runs `on_stop` once,
// on the watch's thread, unless the watch was disarmed first.
//
// The restore attempt mark uses it (ckpt/candidates.cc): a process killed
// after a stop was requested, while every rank still answered heartbeats
// a few intervals after the signal, was preempted (Slurm's SIGTERM reaches
// every task and comes KillWait, 30 s by default, before its SIGKILL), so
// the mark that would count the kill as a failed restore is taken away. A
// launcher's SIGTERM after a rank crashed (mpirun, srun --kill-on-bad-exit)
// finds that rank silent, and the mark stays.
//
// One thread for the watch's life, started by the first Arm: a restore in
// a loop starts no thread per call (issue 48).
//
// Threading: on_stop and confirm run on the watch's thread; Disarm ends the
// watch (at once, also during the settling) and waits for an on_stop or
// confirm in progress, so nothing they touch is used by the watch
// afterwards; the destructor disarms and joins. Arm and Disarm from one
// thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

namespace baton::ckpt {

class StopWatch {
 public:
  // Polls the signal's flag every `poll_seconds` while armed (the handler
  // only stores into an atomic).
  explicit StopWatch(double poll_seconds = 0.05) : poll_seconds_(poll_seconds) {}
  ~StopWatch();
  StopWatch(const StopWatch&) = delete;
  StopWatch& operator=(const StopWatch&) = delete;

  // Watches until Disarm: once a stop signal arrived and settle_seconds
  // later confirm() holds, runs on_stop once. An armed watch is disarmed first.
  void Arm(std::function<void()> on_stop, double settle_seconds, std::function<bool()> confirm);
  void Disarm();

 private:
  void Loop();

  const double poll_seconds_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool quit_ = false;       // guarded by mu_
  bool armed_ = false;      // guarded by mu_
  bool running_ = false;    // guarded by mu_: confirm or on_stop in progress
  uint64_t generation_ = 0;  // guarded by mu_: one per Arm
  std::function<void()> on_stop_;   // guarded by mu_
  std::function<bool()> confirm_;   // guarded by mu_
  double settle_seconds_ = 0;       // guarded by mu_
  std::thread thread_;
};

}  // namespace baton::ckpt
