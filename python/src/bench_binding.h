// baton._baton._CppBench: the C++ side of python/bench/bench_overhead.py.
//
// The same registrations and saves as a Python program makes through
// ArrayCheckpointer, made by C++ with no Python between the calls and timed
// in C++, in the same process and on the same arrays, so that the
// benchmark can alternate the two and compare what the binding adds.
#pragma once

#include <pybind11/pybind11.h>

namespace baton::python {

namespace py = pybind11;

void BindBench(py::module_& m);

}  // namespace baton::python
