#include "python/src/runtime_binding.h"

#include <mpi.h>
#include <pybind11/stl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "mpi_runtime/agreed_stop.h"
#include "python/src/errors.h"

namespace baton::python {
namespace {

// Every open PyRuntime (the GIL guards it), for AtExit.
std::set<PyRuntime*>& OpenRuntimes() {
  static auto* open = new std::set<PyRuntime*>();
  return *open;
}
// The same, in the order they were made: the first one not foreign is the
// process's Runtime, which BatonWriter and BatonReader use when the program
// gives them none (_process_runtime; one Runtime per process unless the
// program makes another, issue 46 item 11).
std::vector<PyRuntime*>& RuntimesInOrder() {
  static auto* in_order = new std::vector<PyRuntime*>();
  return *in_order;
}
bool g_initialized_mpi = false;  // a Runtime of this module called MPI_Init
long g_mpi_pid = 0;              // the process of the first Runtime: MPI is its (a forked child's is not)
// MPI_Finalize's wait for the other ranks at exit: as ~Runtime's
// (min(collective_timeout, 60 s)), of the last Runtime made; past it, exit 75.
double g_finalize_timeout = 60;

}  // namespace

PyRuntime::PyRuntime(std::optional<double> collective_timeout, bool heartbeats) : pid_(::getpid()) {
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
  if (g_mpi_pid == 0) g_mpi_pid = pid_;
  Check(s);
  OpenRuntimes().insert(this);
  RuntimesInOrder().push_back(this);
  g_finalize_timeout = std::min(rt_->options().collective_timeout, 60.0);
  // From here on an uncaught exception ends the job with exit 1 (the hook
  // names this rank and host).
  py::module_::import("baton.excepthook").attr("install")(rt_->rank(), rt_->host(rt_->rank()));
}

PyRuntime::~PyRuntime() {
  try {
    Close(/*commit=*/false);  // garbage: not a point every rank reaches together
  } catch (const std::exception& e) {
    // A destructor cannot raise: the failure (a checkpointer's save that
    // could not be committed) is said here.
    PySys_WriteStderr("baton: closing a Runtime that was garbage-collected: %s\n", e.what());
  }
}

bool PyRuntime::Foreign() const { return ::getpid() != pid_; }

Runtime& PyRuntime::get() {
  if (!rt_) ThrowInvalid("Runtime is closed");
  return *rt_;
}

void PyRuntime::Close(bool commit) {
  // The users' references to this Runtime, dropped last: the last one
  // destroys this object (declared first, so destroyed after everything
  // below, also when a failure is thrown).
  std::vector<py::object> references;
  Status first_failure;
  // Users remove themselves while closing: iterate over a copy.
  const std::set<RuntimeUser*> users = users_;
  for (RuntimeUser* u : users) {
    Status failure;
    references.push_back(u->CloseForRuntime(commit, &failure));
    if (first_failure.ok()) first_failure = failure;
  }
  users_.clear();
  if (rt_) {
    if (Foreign()) {
      // A forked child: the heartbeat and watchdog threads are the
      // parent's (not running here; joining them waits for ever) and so is
      // MPI. Left as it is; the child's exit frees the memory.
      (void)rt_.release();
    } else {
      py::gil_scoped_release release;  // stopping the heartbeat thread waits for it
      rt_.reset();
    }
  }
  OpenRuntimes().erase(this);
  auto& in_order = RuntimesInOrder();
  in_order.erase(std::remove(in_order.begin(), in_order.end(), this), in_order.end());
  Check(first_failure);
}

void PyRuntime::AtExit() {
  const std::set<PyRuntime*> open = OpenRuntimes();
  Status first_failure;
  for (PyRuntime* r : open) {
    // Closing one may have destroyed another (by dropping its last reference).
    if (OpenRuntimes().count(r) == 0) continue;
    try {
      r->Close();
    } catch (const StatusError& e) {
      if (first_failure.ok()) first_failure = e.status();
    }
  }
  if (g_initialized_mpi && g_mpi_pid == ::getpid()) {
    Status s;
    {
      py::gil_scoped_release release;
      s = Runtime::FinalizeMpi(g_finalize_timeout);
    }
    Check(s);
  }
  Check(first_failure);
}

void PyRuntime::AfterForkInChild() {
  // Each open Runtime installed the handlers once (counted): the last
  // restore puts the earlier handlers back.
  for (PyRuntime* r : OpenRuntimes())
    if (r->rt_) RestoreStopHandlers();
}

void PyRuntime::AbortJob(int code) {
  std::fflush(nullptr);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  // MPI_Abort in a forked child would act on the parent's connections.
  const bool mine = g_mpi_pid == 0 || g_mpi_pid == ::getpid();
  if (initialized && !finalized && mine) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

void BindRuntime(py::module_& m) {
  m.def(
      "_process_runtime",
      []() -> py::object {
        for (PyRuntime* r : RuntimesInOrder())
          if (!r->closed() && !r->Foreign()) return py::cast(r, py::return_value_policy::reference);
        return py::none();
      },
      R"(The first baton.Runtime of this process still open (not a forked parent's), or None.

What baton.dcp's BatonWriter and BatonReader use when given no runtime=: the
program's own Runtime, not a second one.)");
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
call close().

An uncaught exception on any rank ends the whole job at once with exit 1
(sys.excepthook, installed here: the traceback names the rank and host, then
MPI_Abort), not 75 after MPI_Finalize's wait: a requeue would raise it again.
sys.exit(EXIT_REQUEUE) and sys.exit(0) keep their meaning (baton.excepthook).
A child forked after it (os.fork, a DataLoader worker) leaves its threads,
its checkpointers and MPI alone and exits normally.)")
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
          "record_failure",
          [](const std::string& what, const std::string& kind) {
            Runtime::FailureKind k = Runtime::FailureKind::kOther;
            if (kind == "uncaught") {
              k = Runtime::FailureKind::kUncaught;
            } else if (kind == "refused") {
              k = Runtime::FailureKind::kRefused;
            } else if (kind != "other") {
              throw py::value_error("record_failure: kind '" + kind + "' is none of 'other', 'uncaught', 'refused'");
            }
            Runtime::RecordFailure(what, k);
          },
          py::arg("what"), py::arg("kind") = "other",
          R"(Records in the event log the failure that ends this rank's run, as the
program saw it, and writes the log out. Call it before exiting. `kind`, which
`baton run` decides by: "uncaught" (a bug or bad input: the job ends with the
program's status), "refused" (the program refused to go on at this world size:
exit 75, to be requeued), "other" (anything else).)")
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
      .def(
          "close", [](PyRuntime& r) { r.Close(); },
           "Closes the checkpointers made on it (committing their save_async in flight, as their close() "
           "does: collective then), then the Runtime (its communicators, its heartbeat thread). MPI stays "
           "initialized. Not collective otherwise; closing twice is harmless.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__",
           [](PyRuntime& r, const py::object& type, const py::object&, const py::object&) {
             // While an exception unwinds the other ranks are not closing:
             // no commit (collective), the exception goes on.
             r.Close(/*commit=*/type.is_none());
           })
      .def("__repr__", [](PyRuntime& r) {
        if (r.closed()) return std::string("<baton.Runtime closed>");
        Runtime& rt = r.get();
        return "<baton.Runtime rank " + std::to_string(rt.rank()) + " of " + std::to_string(rt.size()) + " on " +
               rt.host(rt.rank()) + ", node " + std::to_string(rt.node_rank()) + " of " +
               std::to_string(rt.num_nodes()) + ">";
      });
}

}  // namespace baton::python
