// The options of the nccl backend, and its deadlines. MPI-free.
#pragma once

#include <cuda_runtime_api.h>

#include <chrono>
#include <functional>
#include <string>

#include "baton/health.h"
#include "baton/status.h"

namespace baton::nccl {

struct NcclOptions {
  // Communicator creation: ncclCommInitRankConfig, and each ncclCommSplit
  // (the bootstrap's MPI exchanges wait twice this).
  std::chrono::milliseconds init_timeout{std::chrono::seconds(120)};
  // One collective, from its enqueue to its completion, watched by the
  // communicator's watchdog thread whether or not anyone waits for it. 10
  // minutes, PyTorch's default collective timeout: a collective waits for
  // the slowest rank, which may be busy for minutes.
  std::chrono::milliseconds op_timeout{std::chrono::minutes(10)};
  // What a collective's timeout does (and an asynchronous NCCL error under
  // kReturn). kExit: log it and end the process with 75 at once, from the
  // thread that sees it first (the watchdog, or a Wait), without calling
  // ncclCommAbort, which can wait for a stuck peer; the caller may be
  // blocked in a host-blocking CUDA call that never returns. kReturn:
  // abort the NCCL communicators on a thread of their own, waited for at
  // most abort_timeout, and return the Timeout (every later call returns
  // it at once).
  OnTimeout on_timeout = OnTimeout::kReturn;
  std::chrono::milliseconds abort_timeout{std::chrono::seconds(10)};
  // The communicator's destruction: what is in flight and each
  // ncclCommFinalize get at most this long together (not op_timeout: the
  // watchdog is stopped by then); past it, or on an error, the NCCL
  // communicators are aborted (within abort_timeout) and the failure is
  // written to stderr.
  std::chrono::milliseconds finalize_timeout{std::chrono::seconds(30)};
  // What timeouts add after their own text ("at step 41; ranks not
  // answering heartbeats: 3 (n2)"); may be null.
  std::function<std::string()> context;
  // kExit's end: once `at` has passed (a detected death: the failed
  // collective's deadline; a timeout: now), logs `why` and _exit(75)s,
  // never returning. Null: the wait, `why` to stderr, then _exit(75) (the
  // backend needs no logger; the runtime passes mpi::ExitForRequeueAt, the
  // MPI path's own end).
  std::function<void(const Status&, std::chrono::steady_clock::time_point at)> exit_for_requeue;
  // Called once, with why, when the communicator breaks (a timeout under
  // kReturn, an asynchronous error); may be null. The runtime notes that a
  // peer may never come (MPI_Finalize is then skipped).
  std::function<void(const Status&)> on_break;
  // Sleep between polls of a communicator being created or finalized (not
  // on any collective's path).
  std::chrono::microseconds poll_interval{1000};
  // A Wait spins (yielding) this long (small collectives finish in
  // microseconds), then naps from 10 us doubling to at most 50 us.
  std::chrono::microseconds spin{200};
  // CUDA device of this rank; -1: the current device where the program
  // already made it current (its primary context exists), else local rank
  // modulo the visible devices (one device per task under
  // --baton-gpu-bind=local-rank).
  int device = -1;
  // The stream whose work every collective follows (an event recorded on
  // it, waited for on the communicator's own, non-blocking stream); null:
  // the legacy default stream.
  cudaStream_t stream = nullptr;
};

// A point in time and what it came from, for messages.
struct Deadline {
  std::chrono::steady_clock::time_point at;
  std::chrono::milliseconds timeout;
  const char* name;  // "init_timeout", "op_timeout"

  static Deadline After(std::chrono::milliseconds timeout, const char* name);
  bool Passed() const { return std::chrono::steady_clock::now() >= at; }
  std::string Describe() const;  // "init_timeout of 200 ms"
};

}  // namespace baton::nccl
