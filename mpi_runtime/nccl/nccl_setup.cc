#include "mpi_runtime/nccl/nccl_setup.h"

#include <string>
#include <thread>

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

Status AwaitComm(const NcclApi& api, ncclComm_t comm, std::string_view what,
                 const Deadline& deadline, std::chrono::microseconds poll_interval) {
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
    std::this_thread::sleep_for(poll_interval);
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
    // A half-made communicator holds threads, sockets and device memory;
    // only ncclCommAbort frees them without waiting for the peers.
    if (made != nullptr) api.CommAbort(made);
    return s.Annotate("creating the NCCL world communicator; communicator aborted");
  }
  *comm = made;
  return Status::OK();
}

Status SplitComm(const NcclApi& api, ncclComm_t parent, int color, int key, std::string_view what,
                 const NcclOptions& options, ncclComm_t* child) {
  *child = nullptr;
  const std::string call = "ncclCommSplit (" + std::string(what) + ")";
  const Deadline deadline = Deadline::After(options.init_timeout, "init_timeout");
  ncclComm_t made = nullptr;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  // The child shares the parent's resources (buffers, proxy threads)
  // instead of making its own: it is used by some collectives only.
  config.splitShare = 1;
  Status s = BATON_NCCL_CHECK_ASYNC(api, api.CommSplit(parent, color, key, &made, &config));
  // Both are in progress while the split runs: the child (absent for
  // NCCL_SPLIT_NOCOLOR), and the parent, which must be ready again before
  // its next call.
  if (s.ok() && made != nullptr) s = AwaitComm(api, made, call, deadline, options.poll_interval);
  if (s.ok()) s = AwaitComm(api, parent, call + ", parent", deadline, options.poll_interval);
  if (!s.ok()) {
    if (made != nullptr) api.CommAbort(made);
    return s.Annotate("splitting the NCCL world communicator; new communicator aborted");
  }
  *child = made;
  return Status::OK();
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
