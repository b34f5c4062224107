#include "mpi_runtime/nccl/nccl_communicator.h"

#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <thread>
#include <utility>

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

// The Status for an asynchronous NCCL error on `comm`.
Status AsyncError(const NcclApi& api, ncclComm_t comm, ncclResult_t rc, std::string_view what) {
  const char* text = api.GetErrorString ? api.GetErrorString(rc) : nullptr;
  std::string msg = std::string(what) + " failed: NCCL reported " +
                    std::to_string(static_cast<int>(rc)) + " (" +
                    (text ? text : "unknown NCCL error") + ")" + LastError(api, comm);
  return NcclErrorStatus(rc, msg);
}

std::string Pointer(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

}  // namespace

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
  // config = nullptr: the child inherits the parent's, non-blocking too.
  Status s = BATON_NCCL_CHECK_ASYNC(api, api.CommSplit(parent, color, key, &made, nullptr));
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

// ---- shared state and requests -----------------------------------------

struct NcclState {
  NcclState(const NcclApi& a, const NcclOptions& o) : api(a), options(o) {}
  ~NcclState();

  void AbortAll(const Status& why) {
    // Children first: they were split off the world communicator.
    for (ncclComm_t* c : {&leaders, &node, &world}) {
      if (*c != nullptr) api.CommAbort(*c);
      *c = nullptr;
    }
    if (broken.ok()) broken = why;
  }

  // One poll of the collectives in flight: NCCL's state, then the stream.
  // *done when both are finished; a failure aborts the communicators.
  Status Poll(std::string_view what, bool* done) {
    *done = false;
    if (!broken.ok()) {
      *done = true;
      return broken.Annotate(what);
    }
    ncclResult_t state = ncclInProgress;
    Status s = BATON_NCCL_CHECK(api, api.CommGetAsyncError(world, &state));
    if (s.ok() && state != ncclSuccess && state != ncclInProgress) s = AsyncError(api, world, state, what);
    if (!s.ok()) {
      AbortAll(s);
      *done = true;
      return s;
    }
    // In progress: NCCL has not yet enqueued its kernels, so the stream
    // cannot tell whether they are finished.
    if (state == ncclInProgress) return Status::OK();
    cudaError_t rc = api.StreamQuery(stream);
    if (rc == cudaErrorNotReady) return Status::OK();
    *done = true;
    if (rc == cudaSuccess) return Status::OK();
    s = CheckCuda(api, rc, "cudaStreamQuery", __FILE__, __LINE__).Annotate(what);
    AbortAll(s);
    return s;
  }

  // Polls until done or `deadline`; a timeout aborts the communicators.
  Status Wait(std::string_view what, const Deadline& deadline) {
    const auto spin_until = Clock::now() + options.spin;
    for (;;) {
      bool done = false;
      Status s = Poll(what, &done);
      if (done) return s;
      if (deadline.Passed()) {
        Status t = Status::Timeout(kComponent, std::string(what) + " did not complete within " +
                                                   deadline.Describe() +
                                                   "; NCCL communicators aborted");
        AbortAll(t);
        return options.on_timeout ? options.on_timeout(t) : t;
      }
      if (Clock::now() < spin_until)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(options.poll_interval);
    }
  }

  const NcclApi& api;
  NcclOptions options;
  int device = -1;
  cudaStream_t stream = nullptr;
  void* scratch = nullptr;  // the barrier's one element
  ncclComm_t world = nullptr, node = nullptr, leaders = nullptr;
  Status broken;  // OK while healthy; once aborted, why
};

NcclState::~NcclState() {
  if (device >= 0) api.SetDevice(device);
  if (broken.ok() && world != nullptr) {
    // Let what is in flight finish, then finalize each communicator (which
    // waits for its peers to quiesce) within the deadlines; whatever does
    // not make it is aborted below.
    Status s = Wait("finishing the collectives in flight before destroying the communicator",
                    Deadline::After(options.op_timeout, "op_timeout"));
    for (ncclComm_t* c : {&leaders, &node, &world}) {
      if (!s.ok() || *c == nullptr) continue;
      s = BATON_NCCL_CHECK_ASYNC(api, api.CommFinalize(*c));
      if (s.ok())
        s = AwaitComm(api, *c, "ncclCommFinalize", Deadline::After(options.op_timeout, "op_timeout"),
                      options.poll_interval);
      if (s.ok() && BATON_NCCL_CHECK_ASYNC(api, api.CommDestroy(*c)).ok()) *c = nullptr;
    }
  }
  AbortAll(Status::Aborted(kComponent, "communicator destroyed"));
  if (scratch != nullptr) api.Free(scratch);
  if (stream != nullptr) api.StreamDestroy(stream);
}

namespace {

class NcclRequest : public Request {
 public:
  NcclRequest(std::shared_ptr<NcclState> state, std::string what, Deadline deadline)
      : state_(std::move(state)), what_(std::move(what)), deadline_(deadline) {}
  // The interface's promise: an unfinished Request is waited for.
  ~NcclRequest() override {
    if (!done_) Wait().IgnoreError();  // a destructor cannot report the result
  }

  Status Wait() override {
    if (!done_) {
      result_ = state_->Wait(what_, deadline_);
      done_ = true;
    }
    return result_;
  }

  Status Test(bool* done) override {
    if (!done_) {
      bool finished = false;
      Status s = state_->Poll(what_, &finished);
      if (!finished && deadline_.Passed()) {
        s = state_->Wait(what_, deadline_);  // one last poll, then the timeout and abort
        finished = true;
      }
      if (finished) {
        result_ = s;
        done_ = true;
      }
    }
    *done = done_;
    return done_ ? result_ : Status::OK();
  }

 private:
  std::shared_ptr<NcclState> state_;
  std::string what_;
  Deadline deadline_;
  bool done_ = false;
  Status result_;
};

}  // namespace

// ---- the communicator -----------------------------------------------------

NcclCommunicator::NcclCommunicator(const NcclApi& api, const NcclOptions& options)
    : state_(std::make_shared<NcclState>(api, options)) {}

NcclCommunicator::~NcclCommunicator() = default;  // the last Request frees the state

ncclComm_t NcclCommunicator::world_comm() const { return state_->world; }
ncclComm_t NcclCommunicator::node_comm() const { return state_->node; }
ncclComm_t NcclCommunicator::leaders_comm() const { return state_->leaders; }

Status NcclCommunicator::SetUpDevice(int local_rank) {
  NcclState& st = *state_;
  const NcclApi& api = st.api;
  int count = 0;
  BATON_RETURN_IF_ERROR(CheckDeviceVisible(api, &count));
  int device = st.options.device >= 0 ? st.options.device : local_rank % count;
  if (device >= count)
    return Status::InvalidArgument(kComponent, "CUDA device " + std::to_string(device) +
                                                   " asked for, but only " + std::to_string(count) +
                                                   " are visible");
  BATON_RETURN_IF_ERROR(BATON_CUDA_CHECK(api, api.SetDevice(device)));
  st.device = device;
  BATON_RETURN_IF_ERROR(BATON_CUDA_CHECK(api, api.StreamCreate(&st.stream)));
  BATON_RETURN_IF_ERROR(BATON_CUDA_CHECK(api, api.Malloc(&st.scratch, 16)));
  return Status::OK();
}

Status NcclCommunicator::InitWorld(const ncclUniqueId& id, int rank, int size) {
  if (rank < 0 || size < 1 || rank >= size)
    return Status::InvalidArgument(kComponent, "rank " + std::to_string(rank) + " of " +
                                                   std::to_string(size) + " is out of range");
  rank_ = rank;
  size_ = size;
  return InitComm(state_->api, id, size, rank, state_->options, &state_->world);
}

Status NcclCommunicator::SplitNode(int node) {
  if (state_->world == nullptr) return Status::Internal(kComponent, "SplitNode before InitWorld");
  if (node < 0) return Status::InvalidArgument(kComponent, "node id " + std::to_string(node) + " is negative");
  return SplitComm(state_->api, state_->world, node, rank_, "node " + std::to_string(node),
                   state_->options, &state_->node);
}

Status NcclCommunicator::SplitLeaders(bool leader) {
  if (state_->world == nullptr) return Status::Internal(kComponent, "SplitLeaders before InitWorld");
  return SplitComm(state_->api, state_->world, leader ? 0 : NCCL_SPLIT_NOCOLOR, rank_,
                   leader ? "leaders" : "leaders, not one", state_->options, &state_->leaders);
}

void NcclCommunicator::Abort(const Status& why) { state_->AbortAll(why); }

Status NcclCommunicator::CheckBuffer(const void* ptr, size_t bytes, const char* which,
                                     const std::string& what) const {
  if (bytes == 0) return Status::OK();  // NCCL touches nothing
  if (ptr == nullptr)
    return Status::InvalidArgument(kComponent, what + ": " + which + " buffer is null");
  // A plain host pointer would make NCCL's kernels fault, which no Status
  // can report; CUDA tells them apart in about a microsecond.
  cudaPointerAttributes attributes{};
  Status s = BATON_CUDA_CHECK(state_->api, state_->api.PointerGetAttributes(&attributes, ptr));
  if (!s.ok()) return s.Annotate(what + ": checking the " + which + " buffer");
  if (attributes.type == cudaMemoryTypeUnregistered)
    return Status::InvalidArgument(kComponent, what + ": " + which + " buffer " + Pointer(ptr) +
                                                   " is host memory unknown to CUDA; the nccl "
                                                   "backend takes device buffers");
  return Status::OK();
}

template <typename Enqueue>
Status NcclCommunicator::Start(std::string what, Enqueue enqueue, std::unique_ptr<Request>* request) {
  NcclState& st = *state_;
  if (request == nullptr) return Status::InvalidArgument(kComponent, what + ": request is null");
  request->reset();
  if (!st.broken.ok()) return st.broken.Annotate(what);
  if (st.world == nullptr) return Status::Internal(kComponent, what + ": communicator not initialized");
  const Deadline deadline = Deadline::After(st.options.op_timeout, "op_timeout");
  Status s = enqueue();
  if (s.ok()) {
    // Non-blocking communicators may answer ncclInProgress: NCCL is still
    // enqueueing, and takes no other call until it is done.
    s = AwaitComm(st.api, st.world, what, deadline, std::chrono::microseconds(0));
    if (!s.ok()) st.AbortAll(s);
    if (s.code() == Code::kTimeout && st.options.on_timeout) return st.options.on_timeout(s.Annotate(what));
  } else {
    // A refused argument leaves the communicator usable; an error in its
    // state does not.
    ncclResult_t state = ncclSuccess;
    if (st.api.CommGetAsyncError(st.world, &state) != ncclSuccess ||
        (state != ncclSuccess && state != ncclInProgress))
      st.AbortAll(s);
  }
  if (!s.ok()) return s.Annotate(what);
  *request = std::make_unique<NcclRequest>(state_, std::move(what), deadline);
  return Status::OK();
}

namespace {

// count * factor elements of `dtype` in bytes, unless that overflows.
Status Bytes(size_t count, DType dtype, size_t factor, const std::string& what, size_t* bytes) {
  const size_t unit = DTypeSize(dtype) * factor;
  if (unit != 0 && count > std::numeric_limits<size_t>::max() / unit)
    return Status::InvalidArgument(kComponent, what + ": count " + std::to_string(count) +
                                                   " overflows the buffer size");
  *bytes = count * unit;
  return Status::OK();
}

std::string What(const char* op, size_t count, DType dtype, int rank, int size) {
  return std::string(op) + " of " + std::to_string(count) + " " + std::string(DTypeName(dtype)) +
         " (rank " + std::to_string(rank) + " of " + std::to_string(size) + ")";
}

}  // namespace

Status NcclCommunicator::IAllReduce(const void* send, void* recv, size_t count, DType dtype,
                                    ReduceOp op, std::unique_ptr<Request>* request) {
  const std::string what = What(("all_reduce(" + std::string(ReduceOpName(op)) + ")").c_str(),
                                count, dtype, rank_, size_);
  ncclDataType_t type;
  ncclRedOp_t nop;
  size_t bytes = 0;
  BATON_RETURN_IF_ERROR(ToNcclType(dtype, &type));
  BATON_RETURN_IF_ERROR(ToNcclOp(op, dtype, &nop));
  BATON_RETURN_IF_ERROR(Bytes(count, dtype, 1, what, &bytes));
  BATON_RETURN_IF_ERROR(CheckBuffer(send, bytes, "send", what));
  BATON_RETURN_IF_ERROR(CheckBuffer(recv, bytes, "recv", what));
  const NcclState& st = *state_;
  return Start(what, [&] {
    return BATON_NCCL_CHECK_ASYNC(st.api, st.api.AllReduce(send, recv, count, type, nop, st.world, st.stream));
  }, request);
}

Status NcclCommunicator::IAllGather(const void* send, void* recv, size_t count, DType dtype,
                                    std::unique_ptr<Request>* request) {
  const std::string what = What("all_gather", count, dtype, rank_, size_);
  ncclDataType_t type;
  size_t bytes = 0, all_bytes = 0;
  BATON_RETURN_IF_ERROR(ToNcclType(dtype, &type));
  BATON_RETURN_IF_ERROR(Bytes(count, dtype, 1, what, &bytes));
  BATON_RETURN_IF_ERROR(Bytes(count, dtype, size_, what, &all_bytes));
  BATON_RETURN_IF_ERROR(CheckBuffer(send, bytes, "send", what));
  BATON_RETURN_IF_ERROR(CheckBuffer(recv, all_bytes, "recv", what));
  const NcclState& st = *state_;
  return Start(what, [&] {
    return BATON_NCCL_CHECK_ASYNC(st.api, st.api.AllGather(send, recv, count, type, st.world, st.stream));
  }, request);
}

Status NcclCommunicator::IReduceScatter(const void* send, void* recv, size_t count, DType dtype,
                                        ReduceOp op, std::unique_ptr<Request>* request) {
  const std::string what = What(("reduce_scatter(" + std::string(ReduceOpName(op)) + ")").c_str(),
                                count, dtype, rank_, size_);
  ncclDataType_t type;
  ncclRedOp_t nop;
  size_t bytes = 0, all_bytes = 0;
  BATON_RETURN_IF_ERROR(ToNcclType(dtype, &type));
  BATON_RETURN_IF_ERROR(ToNcclOp(op, dtype, &nop));
  BATON_RETURN_IF_ERROR(Bytes(count, dtype, 1, what, &bytes));
  BATON_RETURN_IF_ERROR(Bytes(count, dtype, size_, what, &all_bytes));
  BATON_RETURN_IF_ERROR(CheckBuffer(send, all_bytes, "send", what));
  BATON_RETURN_IF_ERROR(CheckBuffer(recv, bytes, "recv", what));
  const NcclState& st = *state_;
  return Start(what, [&] {
    return BATON_NCCL_CHECK_ASYNC(st.api, st.api.ReduceScatter(send, recv, count, type, nop, st.world, st.stream));
  }, request);
}

Status NcclCommunicator::IBroadcast(void* buffer, size_t count, DType dtype, int root,
                                    std::unique_ptr<Request>* request) {
  const std::string what = What(("broadcast(root " + std::to_string(root) + ")").c_str(), count,
                                dtype, rank_, size_);
  if (root < 0 || root >= size_)
    return Status::InvalidArgument(kComponent, what + ": root " + std::to_string(root) +
                                                   " is not a rank of " + std::to_string(size_));
  ncclDataType_t type;
  size_t bytes = 0;
  BATON_RETURN_IF_ERROR(ToNcclType(dtype, &type));
  BATON_RETURN_IF_ERROR(Bytes(count, dtype, 1, what, &bytes));
  BATON_RETURN_IF_ERROR(CheckBuffer(buffer, bytes, "broadcast", what));
  const NcclState& st = *state_;
  return Start(what, [&] {
    return BATON_NCCL_CHECK_ASYNC(st.api, st.api.Broadcast(buffer, buffer, count, type, root, st.world, st.stream));
  }, request);
}

Status NcclCommunicator::IAllToAll(const void* send, void* recv, size_t count, DType dtype,
                                   std::unique_ptr<Request>* request) {
  const std::string what = What("all_to_all", count, dtype, rank_, size_);
  ncclDataType_t type;
  size_t all_bytes = 0;
  BATON_RETURN_IF_ERROR(ToNcclType(dtype, &type));
  BATON_RETURN_IF_ERROR(Bytes(count, dtype, size_, what, &all_bytes));
  BATON_RETURN_IF_ERROR(CheckBuffer(send, all_bytes, "send", what));
  BATON_RETURN_IF_ERROR(CheckBuffer(recv, all_bytes, "recv", what));
  const NcclState& st = *state_;
  const size_t block = count * DTypeSize(dtype);
  return Start(what, [&] {
    // One group: NCCL runs the sends and receives of every peer together
    // (one after another they would deadlock).
    Status s = BATON_NCCL_CHECK_ASYNC(st.api, st.api.GroupStart());
    if (!s.ok()) return s;
    for (int peer = 0; peer < size_ && s.ok(); ++peer) {
      const char* from = static_cast<const char*>(send) + block * peer;
      char* to = static_cast<char*>(recv) + block * peer;
      s = BATON_NCCL_CHECK_ASYNC(st.api, st.api.Send(from, count, type, peer, st.world, st.stream));
      if (s.ok()) s = BATON_NCCL_CHECK_ASYNC(st.api, st.api.Recv(to, count, type, peer, st.world, st.stream));
    }
    // The group is closed even after a failure, or NCCL stays inside it.
    Status end = BATON_NCCL_CHECK_ASYNC(st.api, st.api.GroupEnd());
    return s.ok() ? end : s;
  }, request);
}

Status NcclCommunicator::IBarrier(std::unique_ptr<Request>* request) {
  const std::string what = "barrier (rank " + std::to_string(rank_) + " of " + std::to_string(size_) + ")";
  const NcclState& st = *state_;
  // An all_reduce of one byte on the scratch buffer: it completes on no
  // rank before every rank has entered it. The value is never read.
  return Start(what, [&] {
    return BATON_NCCL_CHECK_ASYNC(st.api, st.api.AllReduce(st.scratch, st.scratch, 1, ncclUint8, ncclMax,
                                                           st.world, st.stream));
  }, request);
}

// The blocking forms: the non-blocking one, waited for.
namespace {
Status Finish(Status started, std::unique_ptr<Request>& request) {
  if (!started.ok()) return started;
  return request->Wait();
}
}  // namespace

Status NcclCommunicator::AllReduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) {
  std::unique_ptr<Request> r;
  return Finish(IAllReduce(send, recv, count, dtype, op, &r), r);
}
Status NcclCommunicator::AllGather(const void* send, void* recv, size_t count, DType dtype) {
  std::unique_ptr<Request> r;
  return Finish(IAllGather(send, recv, count, dtype, &r), r);
}
Status NcclCommunicator::ReduceScatter(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) {
  std::unique_ptr<Request> r;
  return Finish(IReduceScatter(send, recv, count, dtype, op, &r), r);
}
Status NcclCommunicator::Broadcast(void* buffer, size_t count, DType dtype, int root) {
  std::unique_ptr<Request> r;
  return Finish(IBroadcast(buffer, count, dtype, root, &r), r);
}
Status NcclCommunicator::AllToAll(const void* send, void* recv, size_t count, DType dtype) {
  std::unique_ptr<Request> r;
  return Finish(IAllToAll(send, recv, count, dtype, &r), r);
}
Status NcclCommunicator::Barrier() {
  std::unique_ptr<Request> r;
  return Finish(IBarrier(&r), r);
}

}  // namespace baton::nccl
