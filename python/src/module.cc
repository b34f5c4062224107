// baton._baton: the compiled half of the Python package `baton` (pybind11).
// python/baton/__init__.py re-exports it; see docs/architecture.md, "python/".
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <string>

#include "baton/dtype.h"
#include "baton/version.h"
#include "python/src/array_view.h"
#include "python/src/bench_binding.h"
#include "python/src/checkpointer_binding.h"
#include "python/src/errors.h"
#include "python/src/deadline_collectives.h"
#include "python/src/runtime_binding.h"

namespace py = pybind11;

PYBIND11_MODULE(_baton, m) {
  m.doc() = "baton's runtime and checkpointer (the C++ library libbaton), for Python programs.";
  m.attr("__version__") = BATON_VERSION;
  m.attr("EXIT_REQUEUE") = 75;  // EX_TEMPFAIL: "requeue me", everywhere in baton
  baton::python::BindErrors(m);
  baton::python::BindRuntime(m);
  baton::python::BindCheckpointer(m);
  baton::python::BindBench(m);
  baton::python::BindDeadlineCollectives(m);
  // Runtimes left open at exit are closed, then MPI finalized if baton
  // started it: after Python's own atexit handlers registered later
  // (mpi4py's, if imported after baton) and before the interpreter goes.
  m.def(
      "_parse_dtype",
      [](const std::string& name) {
        baton::DType t;
        baton::python::Check(baton::ParseDType(name, &t));
        return py::make_tuple(std::string(baton::DTypeName(t)), baton::DTypeSize(t));
      },
      py::arg("name"), "(canonical name, element bytes) of a baton dtype name; InvalidArgument if baton has none.");
  m.def(
      "_view_array",
      [](const py::handle& array, const std::optional<std::string>& dtype, bool torch_attributes) {
        baton::python::ViewWay way;
        const baton::python::ArrayView v = baton::python::ViewArray("view", array, dtype, &way, torch_attributes);
        static const char* const kWays[] = {"buffer", "torch", "dlpack"};
        return py::make_tuple(reinterpret_cast<uintptr_t>(v.data), std::string(baton::DTypeName(v.dtype)),
                              py::tuple(py::cast(v.shape)), kWays[static_cast<int>(way)]);
      },
      py::arg("array"), py::arg("dtype") = py::none(), py::arg("torch_attributes") = true,
      "(address, baton dtype, shape, way in) of the view a registration takes of `array` (python/src/array_view.h); "
      "torch_attributes=False skips the torch way. For the tests.");
  m.def(
      "_dtypes",
      [] {
        py::list out;
        for (baton::DType d : baton::kAllDTypes) out.append(py::make_tuple(std::string(baton::DTypeName(d)), baton::DTypeSize(d)));
        return out;
      },
      "[(name, element bytes)] of every baton dtype: the one dtype table (base/dtype.cc), which Python's "
      "dtype rule (baton/tensors.py) reads.");
  m.def(
      "_abort_job", [](int code) { baton::python::PyRuntime::AbortJob(code); }, py::arg("code"),
      "Ends the whole job with `code` (MPI_Abort), or this process where MPI is not running in it; does not "
      "return (baton/excepthook.py).");
  m.def("_at_exit", &baton::python::PyRuntime::AtExit,
        "Closes every open Runtime and finalizes MPI if baton started it (registered with atexit).");
  py::module_::import("atexit").attr("register")(m.attr("_at_exit"));
  m.def("_after_fork_in_child", &baton::python::PyRuntime::AfterForkInChild,
        "In a forked child: SIGTERM and the stop signal get back their handlers from before the Runtimes "
        "(registered with os.register_at_fork).");
  py::module_::import("os").attr("register_at_fork")(py::arg("after_in_child") = m.attr("_after_fork_in_child"));
}
