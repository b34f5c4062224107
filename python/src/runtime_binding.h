// baton.Runtime: a baton::Runtime owned by a Python object.
//
// MPI is started by the first Runtime of the process unless someone
// (mpi4py, the program) started it before, and stays initialized after
// a Runtime closes (RuntimeOptions::finalize_mpi = false): MPI cannot be
// initialized twice in a process, so later Runtimes and mpi4py keep
// working. At interpreter exit (atexit, registered by the module) every
// Runtime still open is closed, then MPI is finalized if baton initialized
// it (mpi4py finalizes what it initialized itself).
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <optional>
#include <set>

#include "baton/runtime.h"

namespace baton::python {

namespace py = pybind11;

// Something that must end before its Runtime does (a checkpointer).
class RuntimeUser {
 public:
  virtual ~RuntimeUser() = default;
  virtual void CloseForRuntime() = 0;
};

class PyRuntime {
 public:
  // Collective (Runtime::Create); the GIL is released while it waits.
  PyRuntime(std::optional<double> collective_timeout, bool heartbeats);
  ~PyRuntime();

  // The runtime; throws InvalidArgument once closed.
  Runtime& get();
  bool closed() const { return rt_ == nullptr; }
  // Closes the users first (they must end before the Runtime), then the
  // Runtime. Not collective; idempotent.
  void Close();

  void AddUser(RuntimeUser* user) { users_.insert(user); }
  void RemoveUser(RuntimeUser* user) { users_.erase(user); }

  // Closes every open Runtime, then finalizes MPI if baton initialized it.
  static void AtExit();

 private:
  std::unique_ptr<Runtime> rt_;
  std::set<RuntimeUser*> users_;
};

void BindRuntime(py::module_& m);

}  // namespace baton::python
