// A deadline for collective work whose waits have no bound of their own:
// the Checkpointer's agreements wait while the slowest rank writes its
// shard, which may rightly take minutes, so a per-call deadline would end
// good saves; but a peer that stopped (SIGSTOP, a hung node) must not hold
// the others for ever. Heartbeats tell the two apart: they run on their
// own thread (heartbeat.h), so a rank busy in I/O keeps answering, and a
// stopped or dead one does not. While armed, SilenceWatch ends the process
// with 75 (ExitForRequeue: MPI cannot cancel the call it waits in) once
// some rank has not answered heartbeats for `seconds`. With heartbeats off
// it never fires.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace baton {
class Runtime;
}

namespace baton::mpi {

class SilenceWatch {
 public:
  // Starts its thread; `rt` must outlive it.
  SilenceWatch(const Runtime& rt, double seconds);
  ~SilenceWatch();
  SilenceWatch(const SilenceWatch&) = delete;
  SilenceWatch& operator=(const SilenceWatch&) = delete;

  double seconds() const { return seconds_; }

  // Armed from construction to destruction, with `what` (a static string,
  // "Checkpointer::Save") named in the exit's message. Nested scopes keep
  // the outermost name.
  class Scope {
   public:
    Scope(SilenceWatch* watch, const char* what);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    SilenceWatch* watch_;
  };

 private:
  using Clock = std::chrono::steady_clock;
  void Loop();

  const Runtime& rt_;
  const double seconds_;
  std::mutex mu_;
  std::condition_variable cv_;
  int depth_ = 0;
  const char* what_ = "";
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace baton::mpi
