#include "python/src/errors.h"

#include <array>
#include <utility>

namespace baton::python {
namespace {

// One Python class per Code, made once by BindErrors; kOk's slot is unused.
constexpr size_t kCodes = static_cast<size_t>(Code::kInternal) + 1;
std::array<PyObject*, kCodes> g_classes{};  // strong references, never released (module lifetime)

}  // namespace

void Check(const Status& s) {
  if (!s.ok()) throw StatusError(s);
}

void ThrowInvalid(const std::string& message) { throw StatusError(Status::InvalidArgument(kComponent, message)); }

void BindErrors(py::module_& m) {
  py::module_ builtins = py::module_::import("builtins");
  py::object type = builtins.attr("type");
  const auto make = [&](const char* name, py::tuple bases, const char* doc) {
    py::dict body;
    body["__doc__"] = doc;
    body["__module__"] = "baton";
    py::object cls = type(name, bases, body);
    m.attr(name) = cls;
    return cls;
  };
  py::object error = make("Error", py::make_tuple(builtins.attr("Exception")),
                          "Every failure of baton. The message is baton's own text, naming the component, the code, "
                          "where it happened (rank, host, job) and the value that was wrong; the attributes code, "
                          "component, where and message hold those parts.");
  const auto set = [](Code code, const py::object& cls) {
    g_classes[static_cast<size_t>(code)] = cls.inc_ref().ptr();
  };
  set(Code::kInvalidArgument,
      make("InvalidArgument", py::make_tuple(error, builtins.attr("ValueError")),
           "A bad argument, option, environment variable or file (also a ValueError)."));
  set(Code::kNotFound, make("NotFound", py::make_tuple(error), "What was asked for does not exist (a step, a name)."));
  set(Code::kCorruption,
      make("CorruptCheckpointError", py::make_tuple(error),
           "Checkpoint data that fails its checksum or its format."));
  set(Code::kIOError,
      make("IOError", py::make_tuple(error, builtins.attr("OSError")), "An I/O or MPI failure (also an OSError)."));
  set(Code::kTimeout, make("TimeoutError", py::make_tuple(error, builtins.attr("TimeoutError")),
                           "A deadline passed (also the builtin TimeoutError)."));
  set(Code::kUnavailable,
      make("Unavailable", py::make_tuple(error),
           "A resource is not there (MPI's thread level, Slurm outside a job, a lock another process holds)."));
  set(Code::kAborted, make("Aborted", py::make_tuple(error), "Another rank failed, or a save was abandoned."));
  set(Code::kInternal, make("InternalError", py::make_tuple(error), "A bug in baton."));
  g_classes[0] = error.inc_ref().ptr();

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      const Status& s = e.status();
      PyObject* cls = g_classes[static_cast<size_t>(s.code())];
      if (cls == nullptr) cls = g_classes[0];
      // The instance is made here so that its attributes can be set.
      py::object exc = py::reinterpret_borrow<py::object>(cls)(e.what());
      exc.attr("code") = std::string(CodeName(s.code()));
      exc.attr("component") = s.component();
      exc.attr("where") = s.where();
      exc.attr("message") = s.message();
      PyErr_SetObject(cls, exc.ptr());
    }
  });
}

}  // namespace baton::python
