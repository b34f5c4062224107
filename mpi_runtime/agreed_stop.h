// Agreed stop: SIGTERM (Slurm's time limit, preemption, scancel, requeue)
// and a configurable signal (default SIGUSR2, as in `sbatch
// --signal=USR2@120`) set a process-wide flag; StopAgreement turns the
// flags of all ranks into one decision that every rank sees at the same
// call.
//
// The flag is a lock-free std::atomic<int>: the handler may run on any
// thread of the process (the heartbeat's, MPI's, the worker's), and the
// training thread reads it; a lock-free atomic is both async-signal-safe
// to store from the handler and well-defined to read from another thread
// (a volatile sig_atomic_t is only the former).
//
// Each exchanging call sends this rank's flag as it is at that call and
// waits for the others' (an MPI_Iallreduce MAX of one int under the
// deadline): a stop is acted on at the first call after the signal, on
// every rank. The cost when nothing happened is that one small all-reduce
// per call, and the wait for the slowest rank to reach it (which the
// step's own collectives would wait for anyway). With check_every N only
// every N-th call exchanges; the others make no MPI call at all.
#pragma once

#include <mpi.h>

#include "baton/status.h"
#include "mpi_runtime/deadline.h"

namespace baton {

// Installs the handler (sigaction; it only stores into the atomic) for SIGTERM
// and `stop_signal`, remembering the previous handlers, and clears the
// flag. RestoreStopHandlers() puts the previous handlers back. Counted:
// Runtimes alive at once share them (the same signal, else an error).
Status InstallStopHandlers(int stop_signal);
void RestoreStopHandlers();
// Non-zero (the signal number) once a stop signal arrived in this process.
int StopSignalReceived();

class StopAgreement {
 public:
  // `comm` is owned by the caller and only used by the training thread.
  StopAgreement(MPI_Comm comm, long check_every) : comm_(comm), check_every_(check_every) {}
  ~StopAgreement();

  // Whether the next Check exchanges (a collective call).
  bool WillExchange() const { return !agreed_ && !broken_ && (calls_ + 1) % check_every_ == 0; }

  // *stop: the decision of this call (identical on every rank): the OR of
  // every rank's flag as it was at this call. The exchange waits under
  // `deadline` (blocking in MPI where a watchdog guards it); a timeout
  // gives Status::Timeout to be completed by the caller, and *stop is then
  // true; the exchange is abandoned with its buffer.
  Status Check(bool* stop, const mpi::Deadline& deadline);

 private:
  MPI_Comm comm_;
  long check_every_;
  long calls_ = 0;
  bool agreed_ = false, broken_ = false;
  // {mine, all}: on the heap, since an abandoned exchange may still write it.
  int* buf_ = new int[2]{0, 0};
};

}  // namespace baton
