// baton._baton's small collectives under the runtime's deadline, for the
// state-dict layer (python/baton/): _allgather_bytes (every rank's bytes:
// the plan of a save or a restore is agreed with it before any other
// collective step, plan_agreement.py) and _broadcast (rank 0's copy of a
// replicated array, Checkpointer(replicas="rank0")).
#pragma once

#include <pybind11/pybind11.h>

namespace baton::python {

void BindDeadlineCollectives(pybind11::module_& m);

}  // namespace baton::python
