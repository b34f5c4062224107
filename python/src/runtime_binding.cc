#include "python/src/runtime_binding.h"

#include <mpi.h>
#include <pybind11/stl.h>

#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "python/src/errors.h"

namespace baton::python {
namespace {

// Every open PyRuntime (the GIL guards it), for AtExit.
std::set<PyRuntime*>& OpenRuntimes() {
  static auto* open = new std::set<PyRuntime*>();
  return *open;
}
bool g_initialized_mpi = false;  // a Runtime of this module called MPI_Init

}  // namespace

PyRuntime::PyRuntime(std::optional<double> collective_timeout, bool heartbeats) {
  RuntimeOptions options;
  if (collective_timeout) {
    if (!(*collective_timeout > 0))
      ThrowInvalid("Runtime: collective_timeout=" + std::to_string(*collective_timeout) +
                   " must be a positive number of seconds (None: BATON_COLLECTIVE_TIMEOUT, else 600)");
    options.collective_timeout = *collective_timeout;
  }
  options.heartbeats = heartbeats;
  options.finalize_mpi = false;  // AtExit does it, once per process
  int initialized = 0;
  MPI_Initialized(&initialized);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    ThrowInvalid("Runtime: MPI was finalized already in this process (mpi4py's MPI.Finalize()?) and cannot "
                 "start again");
  Status s;
  {
    py::gil_scoped_release release;
    int argc = 0;
    char** argv = nullptr;
    s = Runtime::Create(&argc, &argv, options, &rt_);
  }
  if (!initialized) {
    int now = 0;
    MPI_Initialized(&now);
    if (now) g_initialized_mpi = true;
  }
  Check(s);
  OpenRuntimes().insert(this);
}

PyRuntime::~PyRuntime() { Close(); }

Runtime& PyRuntime::get() {
  if (!rt_) ThrowInvalid("Runtime is closed");
  return *rt_;
}

void PyRuntime::Close() {
  // Users remove themselves while closing: iterate over a copy.
  const std::set<RuntimeUser*> users = users_;
  for (RuntimeUser* u : users) u->CloseForRuntime();
  users_.clear();
  if (rt_) {
    py::gil_scoped_release release;  // stopping the heartbeat thread waits for it
    rt_.reset();
  }
  OpenRuntimes().erase(this);
}

void PyRuntime::AtExit() {
  const std::set<PyRuntime*> open = OpenRuntimes();
  for (PyRuntime* r : open) r->Close();
  if (!g_initialized_mpi) return;
  Status s;
  {
    py::gil_scoped_release release;
    s = Runtime::FinalizeMpi(60);
  }
  Check(s);
}

void BindRuntime(py::module_& m) {
  py::class_<PyRuntime>(m, "Runtime", R"(The job's MPI runtime: ranks, nodes, the agreed stop and requeue.

Runtime(collective_timeout=None, heartbeats=True)

Collective: every rank of the job creates it. Starts MPI (MPI_THREAD_MULTIPLE)
unless it is already started (by mpi4py, imported first), in which case it
adopts it; MPI stays initialized when the Runtime closes, so mpi4py and later
Runtimes keep working, and is finalized at interpreter exit if baton started
it. Beside torch.distributed (gloo or nccl from the env:// variables that
`srun --baton` sets) it needs nothing: torch has its own connections.

collective_timeout: seconds that baton's own collectives (should_stop, the
  setup) may wait for the other ranks; past it the process exits 75 (requeue
  me), naming the silent ranks. None: $BATON_COLLECTIVE_TIMEOUT, else 600.
heartbeats: a thread per rank that notices silent ranks (it names them in
  timeouts and lets a checkpointer give up on a dead peer).

SIGTERM and SIGUSR2 ($BATON_STOP_SIGNAL) are caught from creation on and
turned into the agreed stop (should_stop()). Use it as a context manager or
call close().)")
      .def(py::init<std::optional<double>, bool>(), py::arg("collective_timeout") = py::none(),
           py::arg("heartbeats") = true)
      .def_property_readonly("rank", [](PyRuntime& r) { return r.get().rank(); }, "This process's rank in the job.")
      .def_property_readonly("size", [](PyRuntime& r) { return r.get().size(); }, "The number of ranks.")
      .def_property_readonly("local_rank", [](PyRuntime& r) { return r.get().local_rank(); },
                             "The rank among the ranks of this node (0..local_size-1).")
      .def_property_readonly("local_size", [](PyRuntime& r) { return r.get().local_size(); },
                             "The number of ranks on this node.")
      .def_property_readonly("node", [](PyRuntime& r) { return r.get().node_rank(); },
                             "This node's index in the job (0..num_nodes-1; SLURM_NODEID under srun).")
      .def_property_readonly("num_nodes", [](PyRuntime& r) { return r.get().num_nodes(); },
                             "The number of nodes of the job.")
      .def_property_readonly("host", [](PyRuntime& r) { return r.get().host(r.get().rank()); },
                             "This rank's host name.")
      .def(
          "host_of", [](PyRuntime& r, int rank) {
            if (rank < 0 || rank >= r.get().size())
              ThrowInvalid("Runtime.host_of(" + std::to_string(rank) + "): ranks are 0.." +
                           std::to_string(r.get().size() - 1));
            return r.get().host(rank);
          },
          py::arg("rank"), "The host name of `rank`.")
      .def_property_readonly("collective_timeout", [](PyRuntime& r) { return r.get().options().collective_timeout; },
                             "The deadline of baton's collectives, in seconds (past it: exit 75).")
      .def(
          "begin_step", [](PyRuntime& r, int64_t step) { r.get().BeginStep(step); }, py::arg("step"),
          R"(Marks the start of training step `step` (what timeouts name; end_step times it).)")
      .def(
          "end_step",
          [](PyRuntime& r, std::optional<double> loss) {
            Runtime& rt = r.get();
            Status s;
            {
              // Every straggler_every-th call is a collective.
              py::gil_scoped_release release;
              s = rt.EndStep(loss ? *loss : std::numeric_limits<double>::quiet_NaN());
            }
            Check(s);
          },
          py::arg("loss") = py::none(),
          R"(Marks the end of the step begun by begin_step: the step, its time and its
`loss` (a float, optional) go into the job's event log beside the checkpoints,
which `baton report` reads (docs/events.md). Every rank calls it equally often.)")
      .def_static(
          "record_failure", [](const std::string& what) { Runtime::RecordFailure(what); }, py::arg("what"),
          R"(Records in the event log the failure that ends this rank's run, as the
program saw it, and writes the log out. Call it before exiting.)")
      .def(
          "should_stop",
          [](PyRuntime& r) {
            Runtime& rt = r.get();
            bool stop = false;
            Status s;
            {
              py::gil_scoped_release release;
              s = rt.ShouldStop(&stop);
            }
            Check(s);
            return stop;
          },
          R"(The agreed stop: True on every rank at the same call once any rank got
SIGTERM or the stop signal (SIGUSR2 by default; `sbatch --signal=USR2@120`).

Collective: every rank calls it equally often (once per step). Each call
all-reduces every rank's flag as it is at that call, so the decision is the
same everywhere. After a True it stays True. Then save, and exit with
EXIT_REQUEUE (75) to be requeued.)")
      .def(
          "requeue",
          [](PyRuntime& r) {
            Runtime& rt = r.get();
            std::string what;
            Status s;
            {
              py::gil_scoped_release release;
              s = rt.Requeue(&what);
            }
            Check(s);
            return what;
          },
          R"(Asks Slurm to requeue this job (slurm_requeue), once per process; returns
what was done. Not collective: call it on one rank (rank 0 after should_stop()).
Unavailable outside a Slurm job or when Slurm refuses (--no-requeue).)")
      .def_property_readonly("closed", &PyRuntime::closed, "Whether close() was called.")
      .def("close", &PyRuntime::Close,
           "Closes the checkpointers made on it, then the Runtime (its communicators, its heartbeat thread). "
           "MPI stays initialized. Not collective; closing twice is harmless.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](PyRuntime& r, py::args) { r.Close(); })
      .def("__repr__", [](PyRuntime& r) {
        if (r.closed()) return std::string("<baton.Runtime closed>");
        Runtime& rt = r.get();
        return "<baton.Runtime rank " + std::to_string(rt.rank()) + " of " + std::to_string(rt.size()) + " on " +
               rt.host(rt.rank()) + ", node " + std::to_string(rt.node_rank()) + " of " +
               std::to_string(rt.num_nodes()) + ">";
      });
}

}  // namespace baton::python
