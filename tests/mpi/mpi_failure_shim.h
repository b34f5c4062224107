// An MPI failure on demand, and a record of every MPI call made after it
// (tests/mpi/mpi_failure_shim.cc; issue 31, item 11). Linked into a test
// program, it defines every MPI function libbaton.so calls (MPI's
// profiling interface: an executable's definitions come first in symbol
// lookup), each forwarding to PMPI_*.
#pragma once

namespace baton::testing::mpi_failure {

// The `nth` call (1: the next) of `call` ("MPI_Allreduce") on the calling
// thread, or on any thread when `any_thread`, returns MPI_ERR_OTHER
// without being made: what Open MPI over UCX returns when a peer dies.
void Arm(const char* call, int nth, bool any_thread);

// Whether the armed call has failed.
bool Injected();

// MPI calls made after the injected failure: each is also written to
// stderr at once ("mpi-failure shim: MPI_Test called after ..."), since
// the process may end with _exit. Not counted: MPI_Error_string,
// MPI_Error_class, MPI_Initialized and MPI_Finalized (local, allowed at
// any time), and calls of other threads within 20 ms of the failure (a
// thread already past its own look at baton's failed mark when the
// failure came; written to stderr as "racing").
int CallsAfter();

}  // namespace baton::testing::mpi_failure
