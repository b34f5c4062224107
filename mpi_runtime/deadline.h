// Deadlines for MPI operations: non-blocking MPI polled until done or the
// deadline, so that no collective (nor the point-to-point waits of the
// ring) can hang a rank forever. What happens on expiry is the caller's
// policy (OnTimeout); ExitForRequeue is the kExit half of it.
#pragma once

#include <mpi.h>

#include <chrono>
#include <string>
#include <string_view>

#include "baton/health.h"
#include "baton/status.h"

namespace baton {
class Runtime;
}

namespace baton::mpi {

// The deadline of one operation, fixed when it starts.
class Deadline {
 public:
  using Clock = std::chrono::steady_clock;
  // block: wait in MPI_Waitall instead of polling, for callers whose
  // deadline a watchdog thread already enforces (the mpi backend under
  // OnTimeout::kExit): polling's naps cost the point-to-point steps of ring
  // and hierarchical up to a millisecond each on an oversubscribed node.
  explicit Deadline(double seconds, bool block = false)
      : at_(Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds))),
        block_(block) {}

  // Polls MPI_Testall on `reqs` until all are complete (OK), MPI reports
  // an error (IOError as BATON_MPI_CHECK makes it), or the deadline passes
  // (Timeout "timed out"; the requests are left in flight, since MPI
  // cannot cancel a collective: their buffers must stay valid for ever).
  // Spins for ~200 us first (small collectives finish in microseconds),
  // then sleeps with a backoff from 20 us to 1 ms.
  Status Wait(MPI_Request* reqs, int n) const;
  // Whether Wait blocks in MPI (a watchdog enforces the deadline).
  bool blocks() const { return block_; }
  // When the deadline passes.
  Clock::time_point at() const { return at_; }

 private:
  Clock::time_point at_;
  bool block_;
};

// One MPI operation in the form `deadline` asks for: `blocking()` (MPI's
// blocking call, the fastest) where a watchdog enforces the deadline, else
// `start(&request)` (its non-blocking form) waited for with Wait. Both
// return a Status (BATON_MPI_CHECK). On a Timeout the operation is left in
// flight: its buffers are the caller's to abandon.
template <typename Blocking, typename Start>
Status Issue(const Deadline& deadline, Blocking blocking, Start start) {
  if (deadline.blocks()) return blocking();
  MPI_Request request = MPI_REQUEST_NULL;
  Status s = start(&request);
  if (!s.ok()) return s;
  return deadline.Wait(&request, 1);
}

// The collective deadline in seconds: `option` if > 0, else
// BATON_COLLECTIVE_TIMEOUT, else 600 s. A bad value: InvalidArgument.
Status ResolveCollectiveTimeout(double option, double* seconds);

// "<what> at step 41 timed out after 5 s; ranks not answering heartbeats:
// 3 (n2)". `rt` may be null (no step, no heartbeats).
Status TimeoutStatus(const Runtime* rt, std::string_view what, double seconds);

// Logs `why`, flushes, and ends the process with kRequeueExitCode at once
// (_exit: destructors, atexit handlers and MPI_Finalize could all wait for
// the peer that stopped answering).
[[noreturn]] void ExitForRequeue(const Status& why);

// ExitForRequeue(why) once `at` (the failed call's deadline) has passed:
// what a rank does under kExit when its transport failed (an MPI error,
// mpi_check.h; NCCL's detected death, nccl_state.h). It ends the same way,
// and at the same time, as a rank whose peer stopped without an error:
// exiting at once made Slurm 22.05 refuse the next step launched in the
// allocation ("Requested nodes are busy", 2 of 17 runs): the step was
// still being released. Logs why it waits first.
[[noreturn]] void ExitForRequeueAt(const Status& why, std::chrono::steady_clock::time_point at);

// Process-wide: a collective (or a setup step) passed its deadline under
// OnTimeout::kReturn and was left in flight. MPI_Finalize would then wait
// for the rank that never came (it synchronizes every process), so
// ~Runtime skips it.
void MarkAbandoned();
bool Abandoned();

// Seconds as "5 s", "0.25 s".
std::string SecondsText(double seconds);

}  // namespace baton::mpi
