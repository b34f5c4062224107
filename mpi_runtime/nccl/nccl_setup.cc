#include "mpi_runtime/nccl/nccl_setup.h"

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/events/event_log.h"
#include "baton/health.h"

namespace baton::nccl {

using Clock = std::chrono::steady_clock;

Deadline Deadline::After(std::chrono::milliseconds timeout, const char* name) {
  return Deadline{Clock::now() + timeout, timeout, name};
}

std::string Deadline::Describe() const {
  return std::string(name) + " of " + std::to_string(timeout.count()) + " ms";
}

namespace {

// NCCL's detail for `comm` ("" when it has none), as " (detail)".
std::string LastError(const NcclApi& api, ncclComm_t comm) {
  const char* text = api.GetLastError ? api.GetLastError(comm) : nullptr;
  if (text == nullptr || *text == '\0') return "";
  return std::string(": ") + text;
}

}  // namespace

// The Status for an asynchronous NCCL error on `comm`.
Status AsyncError(const NcclApi& api, ncclComm_t comm, ncclResult_t rc, std::string_view what) {
  const char* text = api.GetErrorString ? api.GetErrorString(rc) : nullptr;
  std::string msg = std::string(what) + " failed: NCCL reported " +
                    std::to_string(static_cast<int>(rc)) + " (" +
                    (text ? text : "unknown NCCL error") + ")" + LastError(api, comm);
  return NcclErrorStatus(rc, msg);
}


// ---- control logic -------------------------------------------------------

Status AbortWithin(const NcclApi& api, std::vector<ncclComm_t> comms, std::chrono::milliseconds within,
                   std::function<void()> then) {
  struct Done {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
  };
  auto done = std::make_shared<Done>();
  const NcclApi* table = &api;
  std::thread([table, comms, then, done] {
    for (ncclComm_t c : comms)
      if (c != nullptr) (void)table->CommAbort(c);
    if (then) then();
    std::lock_guard<std::mutex> lock(done->mu);
    done->done = true;
    done->cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(done->mu);
  if (done->cv.wait_for(lock, within, [&] { return done->done; })) return Status::OK();
  return Status::Timeout(kComponent, "ncclCommAbort did not return within " + std::to_string(within.count()) +
                                         " ms and was left running");
}

void ExitForRequeue(const NcclOptions& options, const Status& why, std::chrono::steady_clock::time_point at) {
  if (options.exit_for_requeue) options.exit_for_requeue(why, at);
  std::this_thread::sleep_until(at);
  events::Emit(events::Record("failure").Str("what", why.ToString()).Int("exit", kRequeueExitCode),
               events::Flush::kNow);
  std::fprintf(stderr, "%s; exiting with %d (requeue me)\n", why.ToString().c_str(), kRequeueExitCode);
  std::fflush(nullptr);
  _exit(kRequeueExitCode);
}

Status AwaitComm(const NcclApi& api, ncclComm_t comm, std::string_view what,
                 const Deadline& deadline, std::chrono::microseconds poll_interval) {
  // Naps from 1 us doubling up to poll_interval: what NCCL finishes in
  // microseconds (most enqueues) is seen at once, a long wait costs one
  // poll per poll_interval, never a spinning core beside NCCL's own
  // threads (2.28 starts one per collective on a non-blocking
  // communicator).
  const std::chrono::microseconds longest = std::max(poll_interval, std::chrono::microseconds(1));
  std::chrono::microseconds nap(1);
  for (;;) {
    ncclResult_t state = ncclInProgress;
    Status s = BATON_NCCL_CHECK(api, api.CommGetAsyncError(comm, &state));
    if (!s.ok()) return s.Annotate(what);
    if (state == ncclSuccess) return Status::OK();
    if (state != ncclInProgress) return AsyncError(api, comm, state, what);
    // Checked after a poll, so a deadline already passed still gets one
    // look at the communicator.
    if (deadline.Passed())
      return Status::Timeout(kComponent, std::string(what) + " did not finish within " +
                                             deadline.Describe() + " (NCCL still in progress)");
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, longest);
  }
}

Status InitComm(const NcclApi& api, const ncclUniqueId& id, int nranks, int rank,
                const NcclOptions& options, ncclComm_t* comm) {
  *comm = nullptr;
  const std::string what = "ncclCommInitRankConfig (rank " + std::to_string(rank) + " of " +
                           std::to_string(nranks) + ")";
  const Deadline deadline = Deadline::After(options.init_timeout, "init_timeout");
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  // Non-blocking: the call returns at once and the communicator's state is
  // polled, so that a peer that never arrives costs a deadline, not a hang.
  config.blocking = 0;
  ncclComm_t made = nullptr;
  Status s = BATON_NCCL_CHECK_ASYNC(api, api.CommInitRankConfig(&made, nranks, id, rank, &config));
  if (s.ok()) s = AwaitComm(api, made, what, deadline, options.poll_interval);
  if (!s.ok()) {
    const std::string step = "creating the NCCL world communicator";
    if (made == nullptr) return s.Annotate(step);
    // Under kExit a deadline ends the process before any abort: NCCL's
    // abort joins the init thread, which may wait for the missing peer.
    if (s.code() == Code::kTimeout && options.on_timeout == OnTimeout::kExit)
      ExitForRequeue(options, s.Annotate(step));
    // A half-made communicator holds threads, sockets and device memory;
    // only ncclCommAbort frees them without waiting for the peers.
    Status a = AbortWithin(api, {made}, options.abort_timeout);
    return s.Annotate(step + "; " + (a.ok() ? std::string("communicator aborted") : a.message()));
  }
  *comm = made;
  return Status::OK();
}

Status SplitComm(const NcclApi& api, ncclComm_t parent, int color, int key, std::string_view what,
                 const NcclOptions& options, ncclComm_t* child, bool* parent_aborted) {
  *child = nullptr;
  if (parent_aborted != nullptr) *parent_aborted = false;
  const std::string call = "ncclCommSplit (" + std::string(what) + ")";
  const Deadline deadline = Deadline::After(options.init_timeout, "init_timeout");
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  // The child shares the parent's resources (buffers, proxy threads)
  // instead of making its own: it is used by some collectives only.
  config.splitShare = 1;
  // NCCL's split job writes the child's handle when it ends, on its own
  // thread, which may be after this function gave up: the handle lives on
  // the heap, never in this frame, and is freed only once the job has
  // surely ended (the parent's abort joins it).
  auto* made = new ncclComm_t(nullptr);
  Status s = BATON_NCCL_CHECK_ASYNC(api, api.CommSplit(parent, color, key, made, &config));
  const bool started = s.ok();
  // The parent is in progress while the split runs and must be ready again
  // before its next call; its job's end writes the child (absent for
  // NCCL_SPLIT_NOCOLOR), whose own state is then looked at too.
  if (s.ok()) s = AwaitComm(api, parent, call + ", parent", deadline, options.poll_interval);
  if (s.ok() && *made != nullptr) s = AwaitComm(api, *made, call, deadline, options.poll_interval);
  if (s.ok()) {
    *child = *made;
    delete made;
    return Status::OK();
  }
  if (!started) {
    delete made;  // refused at once: no job, no child
    return s.Annotate("splitting the NCCL world communicator; nothing aborted");
  }
  // A split that did not finish leaves the parent in progress for good:
  // the parent is aborted (which joins the split's job), then the
  // half-made child the job left behind; the handle's slot goes with the
  // abort's thread, which may outlive this call. Under kExit a deadline
  // ends the process first.
  const std::string step = "splitting the NCCL world communicator";
  if (s.code() == Code::kTimeout && options.on_timeout == OnTimeout::kExit)
    ExitForRequeue(options, s.Annotate(step));
  if (parent_aborted != nullptr) *parent_aborted = true;
  const NcclApi* table = &api;
  Status a = AbortWithin(api, {parent}, options.abort_timeout, [table, made] {
    if (*made != nullptr) (void)table->CommAbort(*made);
    delete made;
  });
  return s.Annotate(step + "; " + (a.ok() ? std::string("the world communicator and the new one aborted") : a.message()));
}

Status ToNcclType(DType dtype, ncclDataType_t* out) {
  switch (dtype) {
    case DType::kF32: *out = ncclFloat32; return Status::OK();
    case DType::kF64: *out = ncclFloat64; return Status::OK();
    case DType::kF16: *out = ncclFloat16; return Status::OK();
    case DType::kI32: *out = ncclInt32; return Status::OK();
    case DType::kI64: *out = ncclInt64; return Status::OK();
    case DType::kU8: *out = ncclUint8; return Status::OK();
    case DType::kI8: *out = ncclInt8; return Status::OK();
    case DType::kU32: *out = ncclUint32; return Status::OK();
    case DType::kU64: *out = ncclUint64; return Status::OK();
    // bool (0/1: max is or, min is and) and the 8-bit floats (never
    // reduced: CheckReducible) as bytes; NCCL has no 16-bit integers, so
    // i16 and u16 move as 2-byte elements (copied bit for bit) and
    // ToNcclOp refuses to reduce them.
    case DType::kBool: case DType::kF8E4M3: case DType::kF8E5M2: *out = ncclUint8; return Status::OK();
    case DType::kI16: case DType::kU16: *out = ncclFloat16; return Status::OK();
    case DType::kBF16:
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
      *out = ncclBfloat16;
      return Status::OK();
#else
      return Status::Unavailable(kComponent, "bf16 needs NCCL >= 2.10; this one is " +
                                                 std::to_string(NCCL_VERSION_CODE));
#endif
  }
  return Status::InvalidArgument(kComponent, "unknown dtype " + std::to_string(static_cast<int>(dtype)));
}

Status ToNcclOp(ReduceOp op, DType dtype, ncclRedOp_t* out) {
  Status reducible = CheckReducible(dtype, op);
  if (!reducible.ok()) return Status::InvalidArgument(kComponent, reducible.message());
  if (dtype == DType::kI16 || dtype == DType::kU16)
    return Status::InvalidArgument(kComponent, "reduce op " + std::string(ReduceOpName(op)) + " on dtype " +
                                                   std::string(DTypeName(dtype)) +
                                                   ": NCCL has no 16-bit integer type (the mpi backend reduces it)");
  switch (op) {
    case ReduceOp::kSum: *out = ncclSum; return Status::OK();
    case ReduceOp::kMax: *out = ncclMax; return Status::OK();
    case ReduceOp::kMin: *out = ncclMin; return Status::OK();
    case ReduceOp::kAvg:
      if (!IsFloating(dtype))
        return Status::InvalidArgument(kComponent, "reduce op avg is for floating types only, not " +
                                                       std::string(DTypeName(dtype)));
      *out = ncclAvg;
      return Status::OK();
  }
  return Status::InvalidArgument(kComponent, "unknown reduce op " + std::to_string(static_cast<int>(op)));
}

Status CheckDeviceVisible(const NcclApi& api, int* count) {
  int n = 0;
  cudaError_t rc = api.GetDeviceCount(&n);
  if (rc != cudaSuccess) {
    const char* text = api.CudaGetErrorString ? api.CudaGetErrorString(rc) : nullptr;
    return Status::Unavailable(kComponent, std::string("no CUDA device visible: cudaGetDeviceCount failed with ") +
                                               std::to_string(static_cast<int>(rc)) + " (" +
                                               (text ? text : "unknown CUDA error") + ")");
  }
  if (n <= 0)
    return Status::Unavailable(kComponent, "no CUDA device visible: cudaGetDeviceCount found " +
                                               std::to_string(n) + " devices");
  *count = n;
  return Status::OK();
}

bool NcclDeviceVisible(const NcclApi& api) {
  int n = 0;
  return CheckDeviceVisible(api, &n).ok();
}


Status ChooseDevice(const NcclApi& api, int requested, int local_rank, int* device) {
  int count = 0;
  BATON_RETURN_IF_ERROR(CheckDeviceVisible(api, &count));
  if (requested >= count)
    return Status::InvalidArgument(kComponent, "CUDA device " + std::to_string(requested) +
                                                   " asked for, but only " + std::to_string(count) +
                                                   " are visible");
  if (requested >= 0) return *device = requested, Status::OK();
  // A program that made a device current and used it (cudaSetDevice makes
  // the primary context) chose it: the backend follows, rather than
  // putting this rank's collectives on another GPU than its data.
  int current = -1, active = 0;
  if (api.GetDevice(&current) == cudaSuccess && current >= 0 && current < count &&
      api.PrimaryContextActive(current, &active) == cudaSuccess && active)
    return *device = current, Status::OK();
  *device = local_rank % count;
  return Status::OK();
}

DeviceGuard::DeviceGuard(const NcclApi& api, int device) : api_(api) {
  if (device < 0) return;
  status_ = BATON_CUDA_CHECK(api_, api_.GetDevice(&previous_));
  if (status_.ok() && previous_ != device) {
    status_ = BATON_CUDA_CHECK(api_, api_.SetDevice(device));
    switched_ = status_.ok();
  }
}

DeviceGuard::~DeviceGuard() {
  if (switched_) (void)api_.SetDevice(previous_);
}

}  // namespace baton::nccl
