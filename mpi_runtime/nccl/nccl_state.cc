#include "mpi_runtime/nccl/nccl_state.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <thread>

#include "baton/health.h"
#include "mpi_runtime/nccl/nccl_setup.h"

namespace baton::nccl {

using Clock = std::chrono::steady_clock;

NcclOp::~NcclOp() {
  if (event != nullptr) (void)api.EventDestroy(event);
}

NcclState::NcclState(const NcclApi& api, const NcclOptions& options) : api_(api), options_(options) {}

NcclState::~NcclState() {
  StopWatchdog();
  DeviceGuard guard(api_, device_);
  std::vector<std::shared_ptr<NcclOp>> pending;
  {
    std::lock_guard<std::mutex> lock(ops_mu_);
    pending.swap(in_flight_);
  }
  if (!is_broken_.load() && world_ != nullptr) {
    // Let what is in flight finish (each within its deadline), then
    // finalize each communicator (which waits for its peers to quiesce);
    // whatever does not make it is aborted.
    // One bound for all of it: the watchdog is stopped, so nothing else
    // keeps a deadline here.
    const Deadline deadline = Deadline::After(options_.finalize_timeout, "finalize_timeout");
    Status s;
    for (auto& op : pending) {
      if (!s.ok()) break;
      bool done = false;
      while (s.ok() && !done) {
        s = Test(*op, &done);
        if (s.ok() && !done && deadline.Passed())
          s = Status::Timeout(kComponent, op->what + " did not complete within " + deadline.Describe());
        if (s.ok() && !done) std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
    for (ncclComm_t* c : {&leaders_, &node_, &world_}) {
      if (!s.ok() || *c == nullptr) continue;
      s = BATON_NCCL_CHECK_ASYNC(api_, api_.CommFinalize(*c));
      if (s.ok()) s = AwaitComm(api_, *c, "ncclCommFinalize", deadline, options_.poll_interval);
      if (s.ok() && BATON_NCCL_CHECK_ASYNC(api_, api_.CommDestroy(*c)).ok()) *c = nullptr;
    }
    if (!s.ok()) {
      s = s.Annotate("destroying the communicator" + Context());
      Break(s);
      // Reported: a teardown that fails is no success (the NCCL
      // communicators were aborted instead of finalized).
      std::fprintf(stderr, "%s; the NCCL communicators were aborted\n", broken().ToString().c_str());
      std::fflush(stderr);
    }
  }
  if (is_broken_.load()) return;  // stream and scratch leaked: see the header
  if (ready_ != nullptr) (void)api_.EventDestroy(ready_);
  if (scratch_ != nullptr) (void)api_.Free(scratch_);
  if (stream_ != nullptr) (void)api_.StreamDestroy(stream_);
}

Status NcclState::SetUpDevice(int local_rank) {
  BATON_RETURN_IF_ERROR(ChooseDevice(api_, options_.device, local_rank, &device_));
  // The chosen device becomes the calling thread's current device for
  // good: a program that never picked one then allocates where its
  // collectives run (restoring device 0 made it allocate there, and every
  // rank of a non-zero local rank was refused its own buffers).
  BATON_RETURN_IF_ERROR(BATON_CUDA_CHECK(api_, api_.SetDevice(device_)));
  BATON_RETURN_IF_ERROR(BATON_CUDA_CHECK(api_, api_.StreamCreateWithFlags(&stream_, cudaStreamNonBlocking)));
  BATON_RETURN_IF_ERROR(BATON_CUDA_CHECK(api_, api_.EventCreateWithFlags(&ready_, cudaEventDisableTiming)));
  return BATON_CUDA_CHECK(api_, api_.Malloc(&scratch_, 16));
}

Status NcclState::InitWorld(const ncclUniqueId& id, int rank, int size) {
  DeviceGuard guard(api_, device_);
  BATON_RETURN_IF_ERROR(guard.status());
  ncclComm_t made = nullptr;
  BATON_RETURN_IF_ERROR(InitComm(api_, id, size, rank, options_, &made));
  {
    std::lock_guard<std::mutex> lock(mu_);
    world_ = made;
  }
  watchdog_ = std::thread([this] { Watch(); });
  return Status::OK();
}

Status NcclState::Split(bool node, int color, int key, const std::string& what) {
  DeviceGuard guard(api_, device_);
  BATON_RETURN_IF_ERROR(guard.status());
  Status s;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (!broken_.ok()) {
      lock.unlock();
      return Refused(what);
    }
    if (world_ == nullptr) return Status::Internal(kComponent, what + " before the world communicator");
    ncclComm_t child = nullptr;
    bool world_aborted = false;
    s = SplitComm(api_, world_, color, key, what, options_, &child, &world_aborted);
    if (s.ok()) {
      (node ? node_ : leaders_) = child;
      return Status::OK();
    }
    if (!world_aborted) return s;
    world_ = nullptr;  // aborted with the split: Break must not abort it again
  }
  Break(s);
  return s;
}

ncclComm_t NcclState::world() const {
  std::lock_guard<std::mutex> lock(mu_);
  return world_;
}
ncclComm_t NcclState::node() const {
  std::lock_guard<std::mutex> lock(mu_);
  return node_;
}
ncclComm_t NcclState::leaders() const {
  std::lock_guard<std::mutex> lock(mu_);
  return leaders_;
}
Status NcclState::broken() const {
  std::lock_guard<std::mutex> lock(mu_);
  return broken_;
}

std::string NcclState::Context() const { return options_.context ? "; " + options_.context() : ""; }

void NcclState::ExitForRequeue(const Status& why) const {
  Status death;
  {
    std::lock_guard<std::mutex> lock(death_mu_);
    death = death_;
  }
  nccl::ExitForRequeue(options_, death.ok() ? why : death);
}

Status NcclState::Refused(const std::string& what) const {
  if (options_.on_timeout == OnTimeout::kExit) {
    Status death;
    Clock::time_point at;
    {
      std::lock_guard<std::mutex> lock(death_mu_);
      death = death_;
      at = death_at_;
    }
    // The death's exit is under way on the thread that saw it: this one
    // waits for the same end instead of returning an error the program
    // could end with another code.
    if (!death.ok()) nccl::ExitForRequeue(options_, death, at);
  }
  return broken().Annotate(what);
}

Status NcclState::Launch(const std::string& what,
                         const std::function<Status(ncclComm_t world, cudaStream_t stream)>& enqueue,
                         std::shared_ptr<NcclOp>* out) {
  DeviceGuard guard(api_, device_);
  BATON_RETURN_IF_ERROR(guard.status());
  const Deadline deadline = Deadline::After(options_.op_timeout, "op_timeout");
  auto op = std::make_shared<NcclOp>(api_, what, deadline);
  Status s;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (!broken_.ok()) {
      lock.unlock();
      return Refused(what);
    }
    if (world_ == nullptr) return Status::Internal(kComponent, what + ": communicator not initialized");
    // After the caller's work (the data it produced), without the
    // communicator's stream waiting on the legacy stream as a whole.
    s = BATON_CUDA_CHECK(api_, api_.EventRecord(ready_, options_.stream));
    if (s.ok()) s = BATON_CUDA_CHECK(api_, api_.StreamWaitEvent(stream_, ready_, 0));
    if (!s.ok()) return s.Annotate(what);
    s = enqueue(world_, stream_);
    if (s.ok()) {
      // Non-blocking communicators may answer ncclInProgress: NCCL is still
      // enqueueing, and takes no other call until it is done.
      s = AwaitComm(api_, world_, what, deadline, options_.poll_interval);
    } else {
      // A refused argument leaves the communicator usable; an error in its
      // state does not.
      ncclResult_t state = ncclSuccess;
      if (api_.CommGetAsyncError(world_, &state) == ncclSuccess && (state == ncclSuccess || state == ncclInProgress))
        return s.Annotate(what);
    }
    if (s.ok()) s = BATON_CUDA_CHECK(api_, api_.EventCreateWithFlags(&op->event, cudaEventDisableTiming));
    if (s.ok()) s = BATON_CUDA_CHECK(api_, api_.EventRecord(op->event, stream_));
  }
  if (s.code() == Code::kTimeout) {
    Status t = Status::Timeout(kComponent, s.message() + Context());
    if (options_.on_timeout == OnTimeout::kExit) ExitForRequeue(t);
    Break(t);
    return t.Annotate("NCCL communicators aborted");
  }
  if (!s.ok()) {
    Fail(s.Annotate(what), deadline);
    return s.Annotate(what);
  }
  {
    std::lock_guard<std::mutex> lock(ops_mu_);
    in_flight_.push_back(op);
  }
  *out = std::move(op);
  return Status::OK();
}

Status NcclState::Test(NcclOp& op, bool* done) {
  *done = true;
  if (op.complete.load()) return Status::OK();
  if (is_broken_.load()) return Refused(op.what);
  const cudaError_t rc = api_.EventQuery(op.event);
  if (rc == cudaSuccess) {
    op.complete = true;
    return Status::OK();
  }
  if (rc == cudaErrorNotReady) {
    *done = false;
    return Status::OK();
  }
  // A sticky CUDA error (a lost GPU, an uncorrectable ECC error, a fault
  // in the collective's kernel): this rank's device is gone.
  Status s = CheckCuda(api_, rc, "cudaEventQuery", __FILE__, __LINE__).Annotate(op.what);
  Fail(s, op.deadline);
  return s;
}

Status NcclState::Wait(NcclOp& op) {
  const auto spin_until = Clock::now() + options_.spin;
  std::chrono::microseconds nap(10);
  for (;;) {
    bool done = false;
    Status s = Test(op, &done);
    if (done) return s;
    if (op.deadline.Passed()) return Expire(op);
    if (Clock::now() < spin_until) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(nap);
      nap = std::min(nap * 2, std::chrono::microseconds(50));
    }
  }
}

void NcclState::Fail(const Status& why, const Deadline& deadline) {
  if (options_.on_timeout == OnTimeout::kExit) {
    const std::string context = Context();
    Status death = context.empty() ? why : why.Annotate(context.substr(2));
    Clock::time_point at;
    {
      // The watchdog may see the collective's deadline pass while this
      // thread waits for it: its exit names this death, not a timeout.
      // A second death (another thread's) ends with the first, at its time.
      std::lock_guard<std::mutex> lock(death_mu_);
      if (death_.ok()) {
        death_ = death;
        death_at_ = deadline.at;
      }
      death = death_;
      at = death_at_;
    }
    {
      // Broken for the wait, not aborted (kExit never aborts): every other
      // thread's collective, Test or Wait makes no NCCL or CUDA call on
      // the dead communicator and joins this exit (Refused).
      std::lock_guard<std::mutex> lock(mu_);
      if (broken_.ok()) {
        broken_ = death;
        is_broken_ = true;
      }
    }
    nccl::ExitForRequeue(options_, death, at);
  }
  Break(why);
}

Status NcclState::Expire(NcclOp& op) {
  bool done = false;
  Status s = Test(op, &done);  // one last look
  if (done) return s;
  Status t = Status::Timeout(kComponent, op.what + " did not complete within " + op.deadline.Describe() + Context());
  if (options_.on_timeout == OnTimeout::kExit) ExitForRequeue(t);
  Break(t.Annotate("NCCL communicators aborted"));
  return broken();
}

Status NcclState::StreamWait(NcclOp& op, cudaStream_t stream) {
  if (is_broken_.load() && !op.complete.load()) return Refused(op.what);
  DeviceGuard guard(api_, device_);
  BATON_RETURN_IF_ERROR(guard.status());
  return BATON_CUDA_CHECK(api_, api_.StreamWaitEvent(stream, op.event, 0)).Annotate(op.what);
}

void NcclState::Break(const Status& why) {
  std::vector<ncclComm_t> comms;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!broken_.ok()) return;
    broken_ = why;
    is_broken_ = true;
    // Children first: they were split off the world communicator.
    for (ncclComm_t* c : {&leaders_, &node_, &world_}) {
      if (*c != nullptr) comms.push_back(*c);
      *c = nullptr;
    }
  }
  {
    std::lock_guard<std::mutex> lock(ops_mu_);
    in_flight_.clear();  // nothing more to watch: later calls answer `why`
  }
  if (options_.on_break) options_.on_break(why);
  if (comms.empty()) return;
  // ncclCommAbort frees the communicators without waiting for the peers,
  // but can itself wait for a kernel spinning on a dead one.
  Status a = AbortWithin(api_, comms, options_.abort_timeout);
  if (a.ok()) return;
  std::lock_guard<std::mutex> state_lock(mu_);
  broken_ = broken_.Annotate(a.message());
}

// ---- the watchdog ------------------------------------------------------------

void NcclState::StopWatchdog() {
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    stop_ = true;
  }
  watch_cv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
}

void NcclState::Watch() {
  // Event queries need no current device, but a CUDA call on a thread
  // with none current would make device 0's context; this thread's own.
  (void)api_.SetDevice(device_);
  const auto period = std::clamp<Clock::duration>(options_.op_timeout / 20, std::chrono::milliseconds(1),
                                                  std::chrono::milliseconds(100));
  std::unique_lock<std::mutex> lock(watch_mu_);
  while (!watch_cv_.wait_for(lock, period, [this] { return stop_; })) {
    lock.unlock();
    WatchOnce();
    lock.lock();
  }
}

void NcclState::WatchOnce() {
  std::vector<std::shared_ptr<NcclOp>> ops;
  {
    std::lock_guard<std::mutex> lock(ops_mu_);
    ops = in_flight_;
  }
  for (const auto& op : ops) {
    if (is_broken_.load()) break;
    bool done = false;
    (void)Test(*op, &done);
    if (!done && op->deadline.Passed()) (void)Expire(*op);
  }
  {
    std::lock_guard<std::mutex> lock(ops_mu_);
    in_flight_.erase(std::remove_if(in_flight_.begin(), in_flight_.end(),
                                    [](const std::shared_ptr<NcclOp>& op) { return op->complete.load(); }),
                     in_flight_.end());
  }
  if (is_broken_.load()) return;
  // An asynchronous error (a peer that died, a network failure) breaks
  // the communicator at once, not at the deadline. Only a look: a caller
  // in the middle of an NCCL call holds the lock, and the next period
  // will do.
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (!lock.owns_lock() || world_ == nullptr) return;
  ncclResult_t state = ncclSuccess;
  const ncclResult_t rc = api_.CommGetAsyncError(world_, &state);
  Status s;
  if (rc != ncclSuccess)
    s = CheckNccl(api_, rc, false, "ncclCommGetAsyncError", __FILE__, __LINE__);
  else if (state != ncclSuccess && state != ncclInProgress)
    s = AsyncError(api_, world_, state, "the communicator");
  lock.unlock();
  if (s.ok()) return;
  // The deadline of the oldest collective in flight; none: one that
  // started now.
  Deadline deadline = Deadline::After(options_.op_timeout, "op_timeout");
  {
    std::lock_guard<std::mutex> ops_lock(ops_mu_);
    for (const auto& op : in_flight_)
      if (op->deadline.at < deadline.at) deadline = op->deadline;
  }
  Fail(s, deadline);
}

}  // namespace baton::nccl
