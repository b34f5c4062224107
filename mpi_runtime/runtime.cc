#include "baton/runtime.h"

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>

#include "base/env_options.h"
#include "base/events/event_log.h"
#include "base/launch/decimal.h"
#include "base/straggler_report.h"
#include "baton/identity.h"
#include "baton/log.h"
#include "mpi_runtime/agreed_stop.h"
#include "mpi_runtime/deadline.h"
#include "mpi_runtime/heartbeat.h"
#include "mpi_runtime/mpi/watchdog.h"
#include "mpi_runtime/mpi_check.h"
#include "mpi_runtime/open_mpi_mtl.h"
#include "mpi_runtime/setup_guard.h"

namespace baton {
namespace {

constexpr const char* kComponent = "runtime";

// A node key from Slurm: SLURM_NODEID, else the plugin's NODE_RANK.
bool NodeKeyFromSlurm(long* key) {
  for (const char* name : {"SLURM_NODEID", "NODE_RANK"}) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') continue;
    long long k = 0;
    if (launch::ParseDecimal(v, 0, std::numeric_limits<long>::max(), &k)) {
      *key = static_cast<long>(k);
      return true;
    }
  }
  return false;
}

std::string ThreadLevelName(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
  }
  return std::to_string(level);
}

// Every default of RuntimeOptions, in one place (man 3 baton lists them).
constexpr double kDefaultHeartbeatInterval = 1.0;
constexpr long kDefaultStragglerEvery = 100;
constexpr double kDefaultStragglerThreshold = 0.2;
constexpr double kDefaultStragglerMinSeconds = 0.005;
constexpr long kDefaultStopCheckEvery = 1;

Status ResolveOptions(const RuntimeOptions& in, RuntimeOptions* out) {
  *out = in;
  BATON_RETURN_IF_ERROR(PositiveNumberOption("heartbeat_interval", in.heartbeat_interval, "BATON_HEARTBEAT_INTERVAL",
                                             kDefaultHeartbeatInterval, &out->heartbeat_interval));
  BATON_RETURN_IF_ERROR(mpi::ResolveCollectiveTimeout(in.collective_timeout, &out->collective_timeout));
  BATON_RETURN_IF_ERROR(PositiveCountOption("straggler_every", in.straggler_every, "BATON_STRAGGLER_EVERY",
                                            kDefaultStragglerEvery, &out->straggler_every));
  BATON_RETURN_IF_ERROR(PositiveNumberOption("straggler_threshold", in.straggler_threshold,
                                             "BATON_STRAGGLER_THRESHOLD", kDefaultStragglerThreshold,
                                             &out->straggler_threshold));
  BATON_RETURN_IF_ERROR(PositiveNumberOption("straggler_min_seconds", in.straggler_min_seconds,
                                             "BATON_STRAGGLER_MIN_SECONDS", kDefaultStragglerMinSeconds,
                                             &out->straggler_min_seconds));
  BATON_RETURN_IF_ERROR(
      SignalOption("stop_signal", in.stop_signal, "BATON_STOP_SIGNAL", SIGUSR2, &out->stop_signal));
  BATON_RETURN_IF_ERROR(PositiveCountOption("stop_check_every", in.stop_check_every, "BATON_STOP_CHECK_EVERY",
                                            kDefaultStopCheckEvery, &out->stop_check_every));
  return Status::OK();
}

// torchrun (torch.distributed.elastic) starts the workers itself, as plain
// processes: MPI_Init in each makes a world of one, and every worker would
// then be rank 0 of 1, each writing the same checkpoint. baton's ranks are
// MPI processes, so a program torchrun started is refused before MPI_Init,
// in one line that says how to start it instead (docs/python.md, "torchrun").
Status RefuseTorchrun() {
  const char* run_id = std::getenv("TORCHELASTIC_RUN_ID");
  if (run_id == nullptr) return Status::OK();
  return Status::InvalidArgument(
      kComponent, std::string("started by torchrun (TORCHELASTIC_RUN_ID=") + run_id +
                      "), whose workers are not MPI processes: start the program itself, without torchrun, "
                      "as `baton run python train.py` or `srun --baton python train.py` on Slurm, or "
                      "`mpirun -n N python train.py` elsewhere");
}

}  // namespace

Status Runtime::Create(int* argc, char*** argv, const RuntimeOptions& options, std::unique_ptr<Runtime>* out) {
  std::unique_ptr<Runtime> rt(new Runtime());
  // Checked on every rank before any collective: all ranks see the same
  // environment under srun and mpirun, so all fail alike.
  BATON_RETURN_IF_ERROR(ResolveOptions(options, &rt->options_));
  BATON_RETURN_IF_ERROR(RefuseTorchrun());
  const double seconds = rt->options_.collective_timeout;
  // The identity every Status and log line names is read from the
  // environment once, here, before any thread of ours runs: MPI_Init below
  // sets variables (setenv reallocates environ) while the watchdog may
  // build its timeout Status on its own thread. Reading environ then was a
  // data race (ThreadSanitizer, bench-np3 under load: MPI_Init past a 2 s
  // deadline), and a read of a reallocated environ can crash instead of
  // exiting 75.
  (void)CurrentIdentity();
  int initialized = 0, provided = MPI_THREAD_SINGLE;
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Initialized(&initialized)));
  // Before the watchdog's thread exists, for the reason above; only before
  // MPI_Init (Open MPI reads its parameters then, and its threads run after).
  const std::string mtl = initialized ? "" : mpi::SkipAbsentPsm();
  if (rt->options_.on_timeout == OnTimeout::kExit) {
    Runtime* self = rt.get();
    rt->watchdog_ = std::make_unique<mpi::Watchdog>(seconds, [self, seconds](const mpi::CallInfo& info) {
      mpi::ExitForRequeue(mpi::TimeoutStatus(self, mpi::Describe(info), seconds));
    });
  }
  if (!initialized) {
    // MPI_Init waits for every process of the job (its PMIx fence) and has
    // no way back: past the deadline the process exits 75 whatever
    // on_timeout says. It runs on this thread, the one that finalizes.
    mpi::SetupGuard init(seconds, OnTimeout::kExit, nullptr, "Runtime::Create");
    BATON_RETURN_IF_ERROR(init.Run([argc, argv, &provided](const mpi::SetupGuard::Steps& step) {
      step("MPI_Init_thread");
      return BATON_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
    }));
    rt->finalize_ = options.finalize_mpi;
  } else {
    BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Query_thread(&provided)));
  }
  if (options.require_thread_multiple && provided < MPI_THREAD_MULTIPLE) {
    // rt's destructor finalizes MPI if we initialized it.
    return Status::Unavailable(kComponent, "MPI provides " + ThreadLevelName(provided) +
                                               " but baton needs MPI_THREAD_MULTIPLE (Open MPI built "
                                               "without thread support?)");
  }
  // Every step that waits for the other ranks, under the deadline. Under
  // kReturn the steps run on a helper thread (which needs
  // MPI_THREAD_MULTIPLE; without it they are watched as under kExit), and
  // after a timeout the helper may still write the Runtime: it is leaked.
  const OnTimeout policy = provided == MPI_THREAD_MULTIPLE ? rt->options_.on_timeout : OnTimeout::kExit;
  Runtime* r = rt.get();
  mpi::SetupGuard guard(seconds, policy, r, "Runtime::Create");
  Status s = guard.Run([r](const mpi::SetupGuard::Steps& step) { return r->SetUp(step); });
  if (s.code() == Code::kTimeout) {
    (void)rt.release();
    return s;
  }
  BATON_RETURN_IF_ERROR(s);
  rt->RecordStart();
  if (!mtl.empty()) {
    BATON_LOG(kRuntime, debug) << "runtime: OMPI_MCA_mtl=" << mtl
                               << " (no Omni-Path or TrueScale adapter here: mpi_runtime/open_mpi_mtl.h)";
  }
  BATON_LOG(kRuntime, debug) << "runtime: " << rt->size_ << " ranks on " << rt->num_nodes() << " nodes; node "
                             << rt->node_rank() << ", local rank " << rt->local_rank_ << " of " << rt->local_size_;
  *out = std::move(rt);
  return Status::OK();
}

// The collective half of Create: communicators, topology, health. `step`
// names each call that waits for the other ranks (setup_guard.h).
Status Runtime::SetUp(const std::function<void(const std::string&)>& step) {
  step("MPI_Comm_dup of MPI_COMM_WORLD");
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &world_)));
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_set_errhandler(world_, MPI_ERRORS_RETURN)));
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_rank(world_, &rank_)));
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_size(world_, &size_)));
  SetIdentityRank(rank_);

  // Slurm's node ids are used only when every rank has one; otherwise
  // (mpirun, a partial environment) MPI's shared-memory split decides.
  long key = 0;
  int have = NodeKeyFromSlurm(&key) ? 1 : 0, all_have = 0;
  step("MPI_Allreduce (whether every rank has a Slurm node id)");
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Allreduce(&have, &all_have, 1, MPI_INT, MPI_MIN, world_)));
  if (!all_have) {
    MPI_Comm shared;
    step("MPI_Comm_split_type (ranks sharing memory)");
    BATON_RETURN_IF_ERROR(
        BATON_MPI_CHECK(MPI_Comm_split_type(world_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &shared)));
    int leader = rank_;
    step("MPI_Bcast (the node's first rank)");
    Status s = BATON_MPI_CHECK(MPI_Bcast(&leader, 1, MPI_INT, 0, shared));
    if (!mpi::Failed()) MPI_Comm_free(&shared);  // mpi_check.h: no MPI call after a failure
    BATON_RETURN_IF_ERROR(s);
    key = leader;
  }
  std::vector<long> keys(static_cast<size_t>(size_));
  step("MPI_Allgather (node keys)");
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Allgather(&key, 1, MPI_LONG, keys.data(), 1, MPI_LONG, world_)));
  topology_ = TopologyFromNodeKeys(keys);

  step("MPI_Comm_split (node communicator)");
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_split(world_, node_rank(), rank_, &node_)));
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_set_errhandler(node_, MPI_ERRORS_RETURN)));
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_rank(node_, &local_rank_)));
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_size(node_, &local_size_)));
  step("MPI_Comm_split (leaders communicator)");
  BATON_RETURN_IF_ERROR(
      BATON_MPI_CHECK(MPI_Comm_split(world_, local_rank_ == 0 ? 0 : MPI_UNDEFINED, rank_, &leaders_)));
  if (leaders_ != MPI_COMM_NULL)
    BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_set_errhandler(leaders_, MPI_ERRORS_RETURN)));
  return StartHealth(options_, step);
}

// Host names, the runtime's own communicator, heartbeats, stop handlers.
Status Runtime::StartHealth(const RuntimeOptions& o, const std::function<void(const std::string&)>& step) {
  char name[64] = {};
  if (gethostname(name, sizeof name - 1) != 0) std::strcpy(name, "?");
  std::vector<char> all(sizeof name * static_cast<size_t>(size_));
  step("MPI_Allgather (host names)");
  BATON_RETURN_IF_ERROR(
      BATON_MPI_CHECK(MPI_Allgather(name, sizeof name, MPI_CHAR, all.data(), sizeof name, MPI_CHAR, world_)));
  for (int r = 0; r < size_; ++r) hosts_.emplace_back(all.data() + sizeof name * static_cast<size_t>(r));

  step("MPI_Comm_dup (the runtime's own communicator)");
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_dup(world_, &control_)));
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_set_errhandler(control_, MPI_ERRORS_RETURN)));
  stop_ = std::make_unique<StopAgreement>(control_, o.stop_check_every);

  int provided = MPI_THREAD_SINGLE;
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Query_thread(&provided)));
  if (o.heartbeats && provided == MPI_THREAD_MULTIPLE) {
    // Stop() waits this long for the others' goodbyes (all ranks normally
    // end together; a dead one must not hold the others long).
    const double drain = std::min(o.collective_timeout, std::max(2.0, 5 * o.heartbeat_interval));
    step("MPI_Comm_dup (heartbeats)");
    BATON_RETURN_IF_ERROR(Heartbeat::Start(world_, o.heartbeat_interval, drain, hosts_, &heartbeat_));
  } else if (o.heartbeats && rank_ == 0) {
    BATON_LOG(kRuntime, warning) << "heartbeats off: MPI gives " << ThreadLevelName(provided)
                                 << ", the heartbeat thread needs MPI_THREAD_MULTIPLE";
  }
  if (o.install_stop_handlers) {
    BATON_RETURN_IF_ERROR(InstallStopHandlers(o.stop_signal));
    handlers_installed_ = true;
  }
  return Status::OK();
}

void Runtime::BeginStep(int64_t step) {
  step_.store(step, std::memory_order_relaxed);
  step_start_ = std::chrono::steady_clock::now();
  in_step_ = true;
}

// The launch, as this rank sees it: the first record of its run in the
// event log (kept in memory until a Checkpointer opens the log's file).
void Runtime::RecordStart() {
  // One process per node writes its step records at once: srun SIGKILLs the
  // survivors of a node failure before they can flush, and the report's
  // interruption and "steps computed twice" start from the last step in the log.
  events::WriteStepsAtOnce(local_rank_ == 0);
  const char* restart = std::getenv("SLURM_RESTART_COUNT");
  long long restarts = 0;
  if (restart == nullptr || !launch::ParseDecimal(restart, 0, 1000000000, &restarts)) restarts = 0;
  events::Record r("start");
  r.Str("launch", events::LaunchKey())
      .Str("job", events::JobName())
      .Int("restart", restarts)
      .Int("rank", rank_)
      .Int("world", size_)
      .Int("nodes", num_nodes())
      .Str("host", hosts_.at(static_cast<size_t>(rank_)))
      .Int("pid", static_cast<int64_t>(::getpid()));
  if (rank_ == 0) {
    std::string hosts = "[";
    for (size_t i = 0; i < hosts_.size(); ++i) hosts += (i > 0 ? "," : "") + events::JsonString(hosts_[i]);
    r.Raw("hosts", hosts + "]");
  }
  events::Emit(r);
}

void Runtime::RecordFailure(const std::string& what) { RecordFailure(what, FailureKind::kOther); }

void Runtime::RecordFailure(const std::string& what, FailureKind kind) {
  const char* name = kind == FailureKind::kUncaught ? "uncaught" : kind == FailureKind::kRefused ? "refused" : "other";
  events::Emit(events::Record("failure").Str("what", what).Str("kind", name), events::Flush::kNow);
}

Status Runtime::EndStep() { return EndStep(std::numeric_limits<double>::quiet_NaN()); }

Status Runtime::EndStep(double loss) {
  if (!in_step_) return Status::InvalidArgument(kComponent, "EndStep without BeginStep");
  in_step_ = false;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start_).count();
  events::Record r("step");
  r.Int("step", step()).Num("dur", seconds);
  if (loss == loss) r.Num("loss", loss);
  events::Emit(r);
  window_seconds_ += seconds;
  ++window_steps_;
  if (++end_steps_ % options_.straggler_every != 0) return Status::OK();
  return GatherStepTimes();
}

// One small collective: every rank's mean step time over the window.
Status Runtime::GatherStepTimes() {
  const double mine = window_seconds_ / static_cast<double>(std::max(1L, window_steps_));
  window_seconds_ = 0;
  window_steps_ = 0;
  // On the heap: a gather abandoned at its deadline may still write them.
  auto* buf = new std::vector<double>(static_cast<size_t>(size_) + 1);
  (*buf)[0] = mine;
  MPI_Request req = MPI_REQUEST_NULL;
  const mpi::Deadline deadline(options_.collective_timeout);
  Status s = BATON_MPI_CHECK(MPI_Iallgather(buf->data(), 1, MPI_DOUBLE, buf->data() + 1, 1, MPI_DOUBLE, control_, &req));
  if (s.ok()) s = deadline.Wait(&req, 1);
  if (!s.ok() && mpi::Failed() && options_.on_timeout == OnTimeout::kExit)
    mpi::ExitForRequeueAt(s.Annotate("gathering the step times"), deadline.at());  // buf is leaked
  if (s.code() == Code::kTimeout) {
    s = mpi::TimeoutStatus(this, "gathering the step times of " + std::to_string(size_) + " ranks",
                           options_.collective_timeout);
    if (options_.on_timeout == OnTimeout::kExit) mpi::ExitForRequeue(s);
    mpi::MarkAbandoned();
    return s;  // buf is leaked with the request
  }
  std::vector<double> times(buf->begin() + 1, buf->end());
  delete buf;
  if (!s.ok()) return s.Annotate("gathering the step times");
  StragglerReport report =
      FindStragglers(step(), std::move(times), options_.straggler_threshold, options_.straggler_min_seconds);
  if (rank_ == 0) {
    for (int r : report.stragglers) {
      BATON_LOG(kRuntime, warning) << "straggler at step " << report.step << ": rank " << r << " ("
                                   << hosts_[static_cast<size_t>(r)] << ") takes "
                                   << report.step_seconds[static_cast<size_t>(r)] << " s per step, median "
                                   << report.median_seconds << " s (threshold +"
                                   << report.threshold * 100 << "% and +" << report.min_seconds << " s)";
    }
  }
  std::lock_guard<std::mutex> lock(report_mu_);
  report_ = std::move(report);
  return Status::OK();
}

StragglerReport Runtime::stragglers() const {
  std::lock_guard<std::mutex> lock(report_mu_);
  return report_;
}

std::vector<int> Runtime::silent_ranks() const {
  return heartbeat_ ? heartbeat_->Silent() : std::vector<int>{};
}

std::string Runtime::DescribeSilentRanks() const {
  std::string out;
  for (int r : silent_ranks())
    out += (out.empty() ? "" : ", ") + std::to_string(r) + " (" + hosts_.at(static_cast<size_t>(r)) + ")";
  return out.empty() ? "none" : out;
}

namespace {
constexpr const char* kStopAgreement = "agreeing whether to stop (all_reduce of 4 bytes on the runtime's communicator)";
}  // namespace

Status Runtime::ShouldStop(bool* stop) {
  // Under kExit the exchange waits in MPI while the watchdog keeps the
  // deadline (polling would add its naps to every step); under kReturn it
  // is polled.
  const bool guarded = watchdog_ != nullptr && stop_->WillExchange();
  if (guarded) {
    mpi::CallInfo info;
    info.label = kStopAgreement;
    watchdog_->Arm(0, info);
  }
  const mpi::Deadline deadline(options_.collective_timeout, watchdog_ != nullptr);
  Status s = stop_->Check(stop, deadline);
  if (guarded) watchdog_->Disarm(0);
  if (!s.ok() && mpi::Failed() && options_.on_timeout == OnTimeout::kExit)
    mpi::ExitForRequeueAt(s.Annotate(kStopAgreement), deadline.at());
  if (*stop && s.ok() && !stop_recorded_) {
    stop_recorded_ = true;
    events::Emit(events::Record("stop").Int("step", step()), events::Flush::kNow);
  }
  if (s.code() == Code::kTimeout) {
    s = mpi::TimeoutStatus(this, kStopAgreement, options_.collective_timeout);
    if (options_.on_timeout == OnTimeout::kExit) mpi::ExitForRequeue(s);
    mpi::MarkAbandoned();
  }
  return s;
}

bool Runtime::should_stop() {
  bool stop = true;
  Status s = ShouldStop(&stop);
  if (!s.ok()) {
    BATON_LOG(kRuntime, error) << s << "; stopping";
  }
  return stop || !s.ok();
}

bool Runtime::stop_signal_received() { return StopSignalReceived() != 0; }

Runtime::~Runtime() {
  events::Emit(events::Record("end").Int("step", step()).Int("dropped", static_cast<int64_t>(events::DroppedRecords())),
               events::Flush::kNow);
  if (heartbeat_) heartbeat_->Stop();
  heartbeat_.reset();
  stop_.reset();
  watchdog_.reset();
  if (handlers_installed_) RestoreStopHandlers();
  if (mpi::Failed()) {
    // MPI returned an error that was not a misuse (mpi_check.h): its state
    // is undefined, and under UCX freeing a communicator or MPI_Finalize
    // then crashed. Nothing more is asked of it; the process ends without.
    BATON_LOG(kRuntime, warning) << "MPI failed earlier: communicators not freed, MPI_Finalize skipped";
    return;
  }
  if (mpi::Abandoned()) {
    // A collective of this process passed its deadline and is still in
    // flight: its communicator must not be freed (a new one could reuse
    // its context id), and MPI_Finalize would wait for the rank that never
    // came (it synchronizes every process) for ever.
    BATON_LOG(kRuntime, warning) << "a collective was left in flight at its deadline: MPI_Finalize skipped "
                                    "(it would wait for the rank that did not come)";
    return;
  }
  for (MPI_Comm* c : {&control_, &leaders_, &node_, &world_})
    if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
  if (!finalize_) return;
  const Status s = FinalizeMpi(std::min(options_.collective_timeout, 60.0));
  if (!s.ok()) {
    BATON_LOG(kRuntime, error) << s;
  }
}

Status Runtime::FinalizeMpi(double timeout_seconds) {
  if (mpi::Failed()) {
    BATON_LOG(kRuntime, warning) << "MPI failed earlier: MPI_Finalize skipped";
    return Status::OK();
  }
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return Status::OK();
  if (mpi::Abandoned()) {
    BATON_LOG(kRuntime, warning) << "a collective was left in flight at its deadline: MPI_Finalize skipped "
                                    "(it would wait for the rank that did not come)";
    return Status::OK();
  }
  // A rank that stops (SIGSTOP, a hung driver) after the last collective
  // would hold MPI_Finalize's synchronization for ever: past the timeout
  // (~Runtime: min(collective_timeout, 60 s)) the process exits 75.
  mpi::SetupGuard fin(timeout_seconds, OnTimeout::kExit, nullptr, "MPI_Finalize");
  return fin.Run([](const mpi::SetupGuard::Steps& step) {
    step("MPI_Finalize");
    return BATON_MPI_CHECK(MPI_Finalize());
  });
}

bool Runtime::collective_abandoned() { return mpi::Abandoned(); }

}  // namespace baton
