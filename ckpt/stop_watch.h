// A watch for the agreed-stop signals (SIGTERM, BATON_STOP_SIGNAL:
// Runtime::stop_signal_received) while something that must know of them
// runs without looking: once this process has received one, and
// `settle_seconds` later `confirm()` still holds, it runs `on_stop` once,
// on a thread of its own, unless the watch ended first.
//
// The restore attempt mark uses it (ckpt/candidates.cc): a process killed
// after a stop was requested, while every rank still answered heartbeats
// a few intervals after the signal, was preempted (Slurm's SIGTERM reaches
// every task and comes KillWait, 30 s by default, before its SIGKILL), so
// the mark that would count the kill as a failed restore is taken away. A
// launcher's SIGTERM after a rank crashed (mpirun, srun --kill-on-bad-exit)
// finds that rank silent, and the mark stays.
//
// Threading: on_stop and confirm run on the watch's thread; the destructor
// ends the watch (at once, also during the settling) and joins, so nothing
// they touch is used by the watch afterwards.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace baton::ckpt {

class StopWatch {
 public:
  // Polls the signal's flag every `poll_seconds` (the handler only stores
  // into an atomic).
  StopWatch(std::function<void()> on_stop, double settle_seconds, std::function<bool()> confirm,
            double poll_seconds = 0.05);
  ~StopWatch();
  StopWatch(const StopWatch&) = delete;
  StopWatch& operator=(const StopWatch&) = delete;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace baton::ckpt
