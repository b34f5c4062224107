// baton.Runtime: a baton::Runtime owned by a Python object.
//
// MPI is started by the first Runtime of the process unless someone
// (mpi4py, the program) started it before, and stays initialized after
// a Runtime closes (RuntimeOptions::finalize_mpi = false): MPI cannot be
// initialized twice in a process, so later Runtimes and mpi4py keep
// working. At interpreter exit (atexit, registered by the module) every
// Runtime still open is closed, then MPI is finalized if baton initialized
// it (mpi4py finalizes what it initialized itself).
//
// An uncaught Python exception ends the whole job at once with exit 1
// (baton/excepthook.py, installed by the first Runtime, calls AbortJob):
// else the raising rank would wait in MPI_Finalize for ranks that sit in
// their next collective, and leave with 75 (requeue) a minute later.
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
  // Ends the user (with `commit`, committing its save in flight, if any:
  // collective; its failure goes into *failure, never thrown) and hands
  // back its reference to the Runtime's Python object. The Runtime drops
  // those references only after its own Close is done: the last one
  // destroys the Runtime, which must not happen inside a member function
  // of it still running.
  virtual py::object CloseForRuntime(bool commit, Status* failure) = 0;
};

class PyRuntime {
 public:
  // Collective (Runtime::Create); the GIL is released while it waits.
  PyRuntime(std::optional<double> collective_timeout, bool heartbeats);
  ~PyRuntime();

  // The runtime; throws InvalidArgument once closed.
  Runtime& get();
  bool closed() const { return rt_ == nullptr; }
  // Closes the users first (they must end before the Runtime; with
  // `commit` a user's save in flight is committed, which is collective:
  // not while an exception unwinds, when the other ranks are elsewhere),
  // then the Runtime. Idempotent. Raises the first user's failure after
  // closing everything.
  // In a child forked after the Runtime was made (Foreign) nothing of the
  // parent's is touched: its threads do not exist here and MPI is the
  // parent's, so the objects are left, not destroyed.
  void Close(bool commit = true);
  // Made by another process: this one is a child forked after it.
  bool Foreign() const;

  void AddUser(RuntimeUser* user) { users_.insert(user); }
  void RemoveUser(RuntimeUser* user) { users_.erase(user); }

  // Closes every open Runtime, then finalizes MPI if baton initialized it
  // in this process (not in a forked child).
  static void AtExit();
  // Ends the whole job with `code` (MPI_Abort on MPI_COMM_WORLD: under
  // mpirun and srun every rank ends), or this process where MPI is not
  // running here (not started, finalized, or a forked child's).
  [[noreturn]] static void AbortJob(int code);
  // In a child just forked (os.register_at_fork): SIGTERM and the stop
  // signal get back the handlers they had before the Runtimes, so that the
  // child dies of SIGTERM as a child should (multiprocessing's
  // Pool.terminate, a DataLoader's shutdown send it); with baton's handler
  // it only set a flag no one reads there, and the parent waited for ever.
  static void AfterForkInChild();

 private:
  std::unique_ptr<Runtime> rt_;
  long pid_;  // the process that made it
  std::set<RuntimeUser*> users_;
};

void BindRuntime(py::module_& m);

}  // namespace baton::python
