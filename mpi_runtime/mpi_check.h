// The one check helper for MPI calls: a failed call becomes a Status that
// names the call, MPI's own error string, and file:line.
//
// MPI's default handler aborts the job on error; the runtime sets
// MPI_ERRORS_RETURN on the communicators it owns so that these checks, not
// an abort, decide what happens.
#pragma once

#include <mpi.h>

#include "baton/status.h"

namespace baton::mpi {

Status CheckMpi(int rc, const char* call, const char* file, int line);

}  // namespace baton::mpi

// Status s = BATON_MPI_CHECK(MPI_Allreduce(...));
#define BATON_MPI_CHECK(call) ::baton::mpi::CheckMpi((call), #call, __FILE__, __LINE__)
