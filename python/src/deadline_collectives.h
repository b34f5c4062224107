// baton._baton's small collectives under the runtime's deadline, for the
// state-dict layer (python/baton/): _allgather_bytes (every rank's bytes:
// the plan of a save or a restore is agreed with it before any other
// collective step, plan_agreement.py; on a communicator given too:
// AllgatherBytesOn) and _broadcast (rank 0's copy of a
// replicated array, Checkpointer(replicas="rank0")).
#pragma once

#include <mpi.h>
#include <pybind11/pybind11.h>

#include <optional>
#include <string>

#include "baton/runtime.h"

namespace baton::python {

// Every rank's `data`, in rank order, over `comm` (one MPI_Iallgather of the
// lengths, then one MPI_Iallgatherv of the bytes; `fixed`: every rank gives
// that many bytes, checked on this rank: one all-gather), under the
// runtime's collective deadline (past it the process exits 75 naming
// `what`). The GIL is released while it waits. _allgather_bytes runs it on
// the runtime's world, ArrayCheckpointer._allgather_bytes on the
// checkpointer's own communicator (the thread of a dcp.async_save, beside
// the program's collectives on the world).
pybind11::list AllgatherBytesOn(Runtime& rt, MPI_Comm comm, const pybind11::bytes& data, const std::string& what,
                                std::optional<size_t> fixed);

void BindDeadlineCollectives(pybind11::module_& m);

}  // namespace baton::python
