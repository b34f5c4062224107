// baton::Runtime: MPI start-up and the job's topology.
//
//   std::unique_ptr<baton::Runtime> rt;
//   baton::Status s = baton::Runtime::Create(&argc, &argv, {}, &rt);
//   if (!s.ok()) { std::cerr << s << "\n"; return 75; }   // 75: requeue me
//   rt->rank(); rt->node_rank(); rt->local_rank(); rt->node_comm(); ...
//
// Started from MPI_COMM_WORLD under `srun --mpi=pmix` or mpirun. Threading:
// MPI_THREAD_MULTIPLE is required (the heartbeat and async-save threads
// call MPI); a Runtime is created and destroyed on one thread, and must
// outlive the communicators made from it (their timeouts read its step and
// its heartbeats).
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "baton/health.h"
#include "baton/status.h"
#include "baton/topology.h"

namespace baton {

class Heartbeat;
class StopAgreement;
namespace mpi {
class Watchdog;
}

// Every number below that is 0 comes from its environment variable, else
// the default named; an explicit value wins over the environment. A bad
// value is an InvalidArgument from Create naming the variable and value.
struct RuntimeOptions {
  // Fail unless MPI gives MPI_THREAD_MULTIPLE.
  bool require_thread_multiple = true;

  // Heartbeats on their own thread and communicator (see heartbeat.h). A
  // rank silent for two intervals is reported (logged, silent_ranks(), and
  // named in collective timeouts). BATON_HEARTBEAT_INTERVAL, default 1 s.
  bool heartbeats = true;
  double heartbeat_interval = 0;

  // Deadline and policy of the runtime's own collectives (should_stop's
  // agreement, the straggler gather). BATON_COLLECTIVE_TIMEOUT, default 600 s.
  double collective_timeout = 0;
  OnTimeout on_timeout = OnTimeout::kExit;

  // Stragglers: every `straggler_every` EndStep() calls (BATON_STRAGGLER_EVERY,
  // default 100) the per-rank mean step times are gathered; ranks slower
  // than the median by more than `straggler_threshold` (a fraction;
  // BATON_STRAGGLER_THRESHOLD, default 0.2) and by at least
  // `straggler_min_seconds` (BATON_STRAGGLER_MIN_SECONDS, default 0.005)
  // are logged with their host.
  long straggler_every = 0;
  double straggler_threshold = 0;
  double straggler_min_seconds = 0;

  // Agreed stop: SIGTERM and `stop_signal` (BATON_STOP_SIGNAL, default
  // SIGUSR2) set a flag that should_stop() agrees on across ranks, once
  // every `stop_check_every` calls (BATON_STOP_CHECK_EVERY, default 1).
  bool install_stop_handlers = true;
  int stop_signal = 0;
  long stop_check_every = 0;

  // Whether the destructor finalizes MPI when Create initialized it. false:
  // MPI stays initialized after the Runtime (MPI cannot be initialized
  // twice in a process), so that a later Runtime, or mpi4py, can still use
  // it; the program calls FinalizeMpi() once at its end. The Python
  // binding does (at interpreter exit). A Runtime that found MPI
  // initialized (by mpi4py, by the program) never finalizes it.
  bool finalize_mpi = true;
};

class Runtime {
 public:
  // Initializes MPI if nobody did, reads the topology: the node from
  // SLURM_NODEID (or the plugin's NODE_RANK), else MPI_COMM_TYPE_SHARED.
  // Creates the world, node and leaders communicators. Collective.
  // Every step that waits for the other ranks is under collective_timeout
  // and on_timeout, named in the timeout ("Runtime::Create: MPI_Comm_split
  // (node communicator) timed out after 5 s"); MPI_Init, which cannot be
  // returned from, exits 75 past it under either policy.
  static Status Create(int* argc, char*** argv, const RuntimeOptions& options,
                       std::unique_ptr<Runtime>* out);
  // Frees the communicators; finalizes MPI if Create initialized it, within
  // min(collective_timeout, 60 s) (else exit 75). After a collective was
  // left in flight at its deadline (collective_abandoned()) it does
  // neither: MPI_Finalize would wait for the missing rank for ever.
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int node_rank() const { return topology_.node_of[rank_]; }
  int num_nodes() const { return topology_.num_nodes(); }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  const Topology& topology() const { return topology_; }

  // Owned by the Runtime; errors return (MPI_ERRORS_RETURN), never abort.
  MPI_Comm world_comm() const { return world_; }
  MPI_Comm node_comm() const { return node_; }
  // Local rank 0 of every node; MPI_COMM_NULL on the other ranks.
  MPI_Comm leaders_comm() const { return leaders_; }

  // The host name of every rank (gethostname, gathered at Create).
  const std::string& host(int rank) const { return hosts_.at(static_cast<size_t>(rank)); }
  // The options with every default and environment variable resolved.
  const RuntimeOptions& options() const { return options_; }

  // ---- Steps: what timeouts name, and what straggler detection times ----
  // BeginStep(step) marks the start of a training step; EndStep() its end.
  // Every rank must call EndStep the same number of times: every
  // straggler_every-th call is a collective (one MPI_Allgather of a double,
  // under the deadline). Training thread only.
  void BeginStep(int64_t step);
  Status EndStep();
  // The same, and the step's loss goes into the event log (docs/events.md)
  // for `baton report --plot`. NaN: no loss.
  Status EndStep(double loss);
  // The step of the last BeginStep (-1 before the first). Any thread.
  int64_t step() const { return step_.load(std::memory_order_relaxed); }
  // The last gathered step times; step -1 before the first gather.
  StragglerReport stragglers() const;

  // ---- Heartbeats ----
  // Ranks that have not answered heartbeats for two intervals, as this
  // rank knows them (rank 0 watches everyone; the others learn rank 0's
  // view through its heartbeats and watch rank 0 themselves). Any thread.
  std::vector<int> silent_ranks() const;
  // "3 (n2), 5 (n3)", or "none".
  std::string DescribeSilentRanks() const;

  // ---- Agreed stop and requeue ----
  // True once any rank got SIGTERM or the stop signal, at the same call on
  // every rank: each exchanging call returns the OR of every rank's flag as
  // it is at that call (one all-reduce of an int, under the deadline), so
  // a stop is acted on at the first call after the signal. Collective:
  // every rank calls it equally often (typically once per step). After a
  // true it stays true and makes no more MPI calls. A failure of the
  // agreement follows on_timeout; with kReturn, *stop is true and the
  // Status says why.
  Status ShouldStop(bool* stop);
  bool should_stop();  // ShouldStop, logging a failure; a failure counts as "stop"
  // True once a collective of this process (baton's, or a setup step)
  // passed its deadline under OnTimeout::kReturn and was left in flight.
  // A program that called MPI_Init itself must then not call MPI_Finalize
  // (it would wait for the rank that never came); it exits instead.
  static bool collective_abandoned();
  // MPI_Finalize, for a program whose Runtimes were made with
  // finalize_mpi = false: nothing when MPI is not initialized, already
  // finalized, or a collective was abandoned (collective_abandoned(): it
  // would wait for ever); past `timeout_seconds` the process exits 75, as
  // ~Runtime does. Call it on the thread that initialized MPI, after every
  // Runtime is destroyed.
  static Status FinalizeMpi(double timeout_seconds);
  // Whether this process got SIGTERM or the stop signal (not agreed). Any
  // thread: the flag is a lock-free atomic set by the handler.
  static bool stop_signal_received();

  // Asks Slurm (libslurm slurm_requeue) to requeue this job (SLURM_JOB_ID),
  // once per process: later calls ask nothing and say so in *what. Not
  // collective: call it on one rank, e.g. rank 0 after should_stop().
  // Slurm then ends the job (SIGTERM to every task, then SIGKILL) and
  // runs it again; a program typically saves and exits 75. Unavailable
  // outside a Slurm job or when Slurm refuses (e.g. --no-requeue), with
  // Slurm's reason.
  Status Requeue(std::string* what = nullptr);

  // ---- Event log (docs/events.md) ----
  // Records in the job's event log the failure that ends this rank's run
  // as the program saw it (the runtime records its own: deadlines, silent
  // peers), and writes the log out. The log is the process's: a static, for
  // code that holds no Runtime. Any thread; call it before exiting.
  static void RecordFailure(const std::string& what);
  // The same with the record's "kind", which `baton run` decides by (never
  // by the text of `what`): kUncaught, a bug or bad input (the job ends with
  // the program's status, no relaunch); kRefused, the program refused to go
  // on at this world size (exit 75 once, to be requeued onto the allocation
  // it was saved by); kOther (what the one-argument form writes), any other.
  enum class FailureKind { kOther, kUncaught, kRefused };
  static void RecordFailure(const std::string& what, FailureKind kind);

 private:
  Runtime() = default;
  Status SetUp(const std::function<void(const std::string&)>& step);
  Status StartHealth(const RuntimeOptions& options, const std::function<void(const std::string&)>& step);
  Status GatherStepTimes();
  void RecordStart();

  int rank_ = 0, size_ = 0, local_rank_ = 0, local_size_ = 0;
  bool finalize_ = false, handlers_installed_ = false;
  RuntimeOptions options_;
  Topology topology_;
  std::vector<std::string> hosts_;
  MPI_Comm world_ = MPI_COMM_NULL, node_ = MPI_COMM_NULL, leaders_ = MPI_COMM_NULL;
  // The runtime's own collectives, apart from the program's.
  MPI_Comm control_ = MPI_COMM_NULL;

  std::unique_ptr<Heartbeat> heartbeat_;
  std::unique_ptr<StopAgreement> stop_;
  // Under OnTimeout::kExit: watches the runtime's own collectives (slot 0,
  // the training thread) and exits 75 past collective_timeout.
  std::unique_ptr<mpi::Watchdog> watchdog_;

  std::atomic<int64_t> step_{-1};
  std::chrono::steady_clock::time_point step_start_{};
  bool in_step_ = false;
  bool stop_recorded_ = false;  // the agreed stop is in the event log
  double window_seconds_ = 0;
  long window_steps_ = 0, end_steps_ = 0;
  mutable std::mutex report_mu_;
  StragglerReport report_;

  std::mutex requeue_mu_;
  bool requeue_asked_ = false;
  std::string requeue_what_;
};

}  // namespace baton
