// baton.ArrayCheckpointer: a baton::Checkpointer over Python arrays
// (NumPy, or anything with __dlpack__ such as torch.Tensor).
//
// Registration keeps the caller's object and its exporter (ArrayView) and
// copies nothing: what the array holds at a save is what is saved, and a
// restore writes into it. The GIL is released for every call that does
// I/O or waits for other ranks, so other Python threads (a data loader) run
// meanwhile; one thread at a time may call a checkpointer (a second one gets
// baton.Error at once instead of racing).
#pragma once

#include <pybind11/pybind11.h>

namespace baton::python {

namespace py = pybind11;

void BindCheckpointer(py::module_& m);

}  // namespace baton::python
