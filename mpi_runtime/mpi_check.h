// The one check helper for MPI calls: a failed call becomes a Status that
// names the call, MPI's own error string, and file:line.
//
// MPI's default handler aborts the job on error; the runtime sets
// MPI_ERRORS_RETURN on the communicators it owns so that these checks, not
// an abort, decide what happens.
//
// An MPI error that is not the caller's misuse (a peer gone, UCX's
// "Endpoint timeout", a transport error) leaves MPI in a state the standard
// does not define: Open MPI over UCX then crashed (SIGSEGV) in the
// heartbeat's next MPI_Test, in MPI_*_free and in MPI_Finalize (issue 31,
// item 11). So such an error marks MPI failed for the whole process
// (MarkFailed), and from then on no baton thread calls MPI again:
// BATON_MPI_CHECK answers without making its call, the heartbeat stops,
// teardown frees nothing and skips MPI_Finalize.
#pragma once

#include <mpi.h>

#include "baton/status.h"

namespace baton::mpi {

// rc as a Status (OK for MPI_SUCCESS). An error that is not a misuse
// (misuse: MPI_ERR_ARG, _COUNT, _TYPE, _BUFFER, _TAG, _RANK, _ROOT, _OP,
// _COMM, _REQUEST, _TRUNCATE) also marks MPI failed (MarkFailed). Calls
// MPI_Error_class and MPI_Error_string only (local, allowed after an error).
Status CheckMpi(int rc, const char* call, const char* file, int line);

// Process-wide, once set never cleared; any thread. Failed(): whether an
// MPI call of this process failed for a reason other than misuse; then
// MPI must not be called again (not even to free or finalize).
void MarkFailed();
bool Failed();

// The answer to a call not made because MPI failed earlier: IOError naming
// `call` (up to its argument list), file:line and the first failure.
Status FailedStatus(const char* call, const char* file, int line);

}  // namespace baton::mpi

// Status s = BATON_MPI_CHECK(MPI_Allreduce(...)); after a failure
// (mpi::Failed) the call is not made.
#define BATON_MPI_CHECK(call)                                                   \
  (::baton::mpi::Failed() ? ::baton::mpi::FailedStatus(#call, __FILE__, __LINE__) \
                          : ::baton::mpi::CheckMpi((call), #call, __FILE__, __LINE__))
