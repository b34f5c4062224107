// Agreed stop: SIGTERM (Slurm's time limit, preemption, scancel, requeue)
// and a configurable signal (default SIGUSR2, as in `sbatch
// --signal=USR2@120`) set a process-wide flag; StopAgreement turns the
// flags of all ranks into one decision that every rank sees at the same
// call.
//
// The cost when nothing happened: each exchanging call completes the
// MPI_Iallreduce (MAX of one int) that the previous one started, usually
// finished by then since the step's own MPI calls progressed it, and starts
// the next. With check_every N only every N-th call exchanges; the others
// make no MPI call at all.
#pragma once

#include <mpi.h>

#include "baton/status.h"

namespace baton {

// Installs the handler (sigaction; it only sets a sig_atomic_t) for SIGTERM
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
  StopAgreement(MPI_Comm comm, long check_every, double timeout_seconds)
      : comm_(comm), check_every_(check_every), timeout_(timeout_seconds) {}
  // Completes an exchange in flight (all ranks started it, so it finishes
  // at once unless a rank died; it waits at most min(timeout, 10 s), then
  // abandons it) so that the communicator can be freed.
  ~StopAgreement();

  // *stop: the decision of this call (identical on every rank). A timeout
  // gives Status::Timeout("agreeing whether to stop") to be completed by
  // the caller; *stop is then true.
  Status Check(bool* stop);

 private:
  MPI_Comm comm_;
  long check_every_;
  double timeout_;
  long calls_ = 0;
  bool agreed_ = false, broken_ = false;
  // {mine, all}: on the heap, since an abandoned exchange may still write it.
  int* buf_ = new int[2]{0, 0};
  MPI_Request req_ = MPI_REQUEST_NULL;
};

}  // namespace baton
