#include "mpi_runtime/nccl/nccl_state.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "base/events/event_log.h"
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
    Status s;
    for (auto& op : pending)
      if (s.ok()) s = Wait(*op);
    for (ncclComm_t* c : {&leaders_, &node_, &world_}) {
      if (!s.ok() || *c == nullptr) continue;
      s = BATON_NCCL_CHECK_ASYNC(api_, api_.CommFinalize(*c));
      if (s.ok())
        s = AwaitComm(api_, *c, "ncclCommFinalize", Deadline::After(options_.op_timeout, "op_timeout"),
                      options_.poll_interval);
      if (s.ok() && BATON_NCCL_CHECK_ASYNC(api_, api_.CommDestroy(*c)).ok()) *c = nullptr;
    }
    if (!s.ok()) Break(s.Annotate("destroying the communicator"));
  }
  if (is_broken_.load()) return;  // stream and scratch leaked: see the header
  if (ready_ != nullptr) (void)api_.EventDestroy(ready_);
  if (scratch_ != nullptr) (void)api_.Free(scratch_);
  if (stream_ != nullptr) (void)api_.StreamDestroy(stream_);
}

Status NcclState::SetUpDevice(int local_rank) {
  BATON_RETURN_IF_ERROR(ChooseDevice(api_, options_.device, local_rank, &device_));
  DeviceGuard guard(api_, device_);
  BATON_RETURN_IF_ERROR(guard.status());
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
  std::lock_guard<std::mutex> lock(mu_);
  if (!broken_.ok()) return broken_.Annotate(what);
  if (world_ == nullptr) return Status::Internal(kComponent, what + " before the world communicator");
  ncclComm_t child = nullptr;
  BATON_RETURN_IF_ERROR(SplitComm(api_, world_, color, key, what, options_, &child));
  (node ? node_ : leaders_) = child;
  return Status::OK();
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
  if (options_.exit_for_requeue) options_.exit_for_requeue(why);
  events::Emit(events::Record("failure").Str("what", why.ToString()).Int("exit", kRequeueExitCode),
               events::Flush::kNow);
  std::fprintf(stderr, "%s; exiting with %d (requeue me)\n", why.ToString().c_str(), kRequeueExitCode);
  std::fflush(nullptr);
  _exit(kRequeueExitCode);
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
    std::lock_guard<std::mutex> lock(mu_);
    if (!broken_.ok()) return broken_.Annotate(what);
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
      s = AwaitComm(api_, world_, what, deadline, std::chrono::microseconds(0));
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
    Break(s.Annotate(what));
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
  if (is_broken_.load()) return broken().Annotate(op.what);
  const cudaError_t rc = api_.EventQuery(op.event);
  if (rc == cudaSuccess) {
    op.complete = true;
    return Status::OK();
  }
  if (rc == cudaErrorNotReady) {
    *done = false;
    return Status::OK();
  }
  Status s = CheckCuda(api_, rc, "cudaEventQuery", __FILE__, __LINE__).Annotate(op.what);
  Break(s);
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
  if (is_broken_.load() && !op.complete.load()) return broken().Annotate(op.what);
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
  // but can itself wait for a kernel spinning on a dead one: on a thread
  // of its own, waited for at most abort_timeout, then left to run.
  struct Done {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
  };
  auto done = std::make_shared<Done>();
  const NcclApi* api = &api_;
  std::thread([api, comms, done] {
    for (ncclComm_t c : comms) (void)api->CommAbort(c);
    std::lock_guard<std::mutex> lock(done->mu);
    done->done = true;
    done->cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(done->mu);
  if (done->cv.wait_for(lock, options_.abort_timeout, [&] { return done->done; })) return;
  lock.unlock();
  std::lock_guard<std::mutex> state_lock(mu_);
  broken_ = broken_.Annotate("ncclCommAbort did not return within " + std::to_string(options_.abort_timeout.count()) +
                             " ms and was left running");
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
  if (!s.ok()) Break(s);
}

}  // namespace baton::nccl
