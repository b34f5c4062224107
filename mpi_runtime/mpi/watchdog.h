// The watchdog of the mpi backend under OnTimeout::kExit: the collective
// runs as MPI's own blocking call (the fastest form: Open MPI's tuned
// MPI_Allreduce beats its non-blocking MPI_Iallreduce by about a
// microsecond at 8 bytes), and a thread ends the process with 75 when a
// call stays armed past the deadline; there is nothing to return to, so
// the call need not return. Under kReturn the communicator polls
// non-blocking MPI instead (deadline.h), since the caller must get control
// back. As PyTorch's NCCL watchdog, in short.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "baton/dtype.h"

namespace baton::mpi {

// What a collective is, for the timeout message; plain values, so arming
// costs no allocation.
struct CallInfo {
  const char* name = "";  // "all_reduce"
  size_t count = 0;       // elements (of one rank's block where per_rank)
  DType dtype = DType::kU8;
  int op = -1;            // a ReduceOp, or -1
  int root = -1;          // broadcast's root, or -1
  bool per_rank = false;
  bool non_blocking = false;
  // A fixed description instead of the fields above (the runtime's own
  // calls: "agreeing whether to stop (...)").
  const char* label = nullptr;
};

// "all_reduce of 1048576 bytes (f32 sum)", "broadcast of 8 bytes from
// rank 0", "barrier": what a timeout message names.
std::string Describe(const CallInfo& info);

class Watchdog {
 public:
  // `on_expiry` runs on the watchdog's thread with the call that passed
  // `seconds` in its slot; it is expected not to return (ExitForRequeue).
  Watchdog(double seconds, std::function<void(const CallInfo&)> on_expiry);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // A slot per thread that issues collectives (0: blocking calls, 1: the
  // worker of the non-blocking ones). Arm before the MPI call, Disarm after.
  void Arm(int slot, const CallInfo& info);
  void Disarm(int slot);

 private:
  void Loop();

  using Clock = std::chrono::steady_clock;
  struct Slot {
    std::mutex mu;
    bool armed = false;
    Clock::time_point since;
    CallInfo info;
  };
  Clock::duration timeout_, poll_;
  std::function<void(const CallInfo&)> on_expiry_;
  Slot slots_[2];
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace baton::mpi
