#include "mpi_runtime/nccl/nccl_communicator.h"

#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>

#include "mpi_runtime/nccl/buffer_location.h"
#include "mpi_runtime/nccl/nccl_state.h"

namespace baton::nccl {
namespace {

std::string Pointer(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

// A collective in flight. Wait and Test look at its own event (nothing
// else in flight); its deadline is the watchdog's whether or not anyone
// looks. The interface's promise: an unfinished Request is waited for when
// destroyed, unless WaitOnStream handed it to a stream.
class NcclRequest : public Request {
 public:
  NcclRequest(std::shared_ptr<NcclState> state, std::shared_ptr<NcclOp> op)
      : state_(std::move(state)), op_(std::move(op)) {}
  ~NcclRequest() override {
    if (!done_ && !on_stream_) Wait().IgnoreError();  // a destructor cannot report the result
  }

  Status Wait() override {
    if (!done_) {
      result_ = state_->Wait(*op_);
      done_ = true;
    }
    return result_;
  }

  Status Test(bool* done) override {
    if (!done_) {
      bool finished = false;
      Status s = state_->Test(*op_, &finished);
      if (!finished && op_->deadline.Passed()) {
        s = state_->Expire(*op_);
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

  Status WaitOnStream(void* stream) override {
    Status s = state_->StreamWait(*op_, static_cast<cudaStream_t>(stream));
    if (s.ok()) on_stream_ = true;
    return s;
  }

 private:
  std::shared_ptr<NcclState> state_;
  std::shared_ptr<NcclOp> op_;
  bool done_ = false, on_stream_ = false;
  Status result_;
};

}  // namespace

// ---- the communicator -----------------------------------------------------

NcclCommunicator::NcclCommunicator(const NcclApi& api, const NcclOptions& options)
    : state_(std::make_shared<NcclState>(api, options)) {}

NcclCommunicator::~NcclCommunicator() = default;  // the last Request frees the state

int NcclCommunicator::device() const { return state_->device(); }
cudaStream_t NcclCommunicator::stream() const { return state_->stream(); }
ncclComm_t NcclCommunicator::world_comm() const { return state_->world(); }
ncclComm_t NcclCommunicator::node_comm() const { return state_->node(); }
ncclComm_t NcclCommunicator::leaders_comm() const { return state_->leaders(); }

Status NcclCommunicator::SetUpDevice(int local_rank) { return state_->SetUpDevice(local_rank); }

Status NcclCommunicator::InitWorld(const ncclUniqueId& id, int rank, int size) {
  if (rank < 0 || size < 1 || rank >= size)
    return Status::InvalidArgument(kComponent, "rank " + std::to_string(rank) + " of " +
                                                   std::to_string(size) + " is out of range");
  rank_ = rank;
  size_ = size;
  return state_->InitWorld(id, rank, size);
}

Status NcclCommunicator::SplitNode(int node) {
  if (node < 0) return Status::InvalidArgument(kComponent, "node id " + std::to_string(node) + " is negative");
  return state_->Split(true, node, rank_, "node " + std::to_string(node));
}

Status NcclCommunicator::SplitLeaders(bool leader) {
  return state_->Split(false, leader ? 0 : NCCL_SPLIT_NOCOLOR, rank_, leader ? "leaders" : "leaders, not one");
}

void NcclCommunicator::Abort(const Status& why) { state_->Break(why); }

Status NcclCommunicator::CheckBuffer(const void* ptr, size_t bytes, const char* which,
                                     const std::string& what) const {
  if (bytes == 0) return Status::OK();  // NCCL touches nothing
  if (ptr == nullptr)
    return Status::InvalidArgument(kComponent, what + ": " + which + " buffer is null");
  // A plain host pointer, or another device's memory, would make NCCL's
  // kernels fault, which no Status can report; CUDA tells them apart in
  // about a microsecond.
  const NcclApi& api = state_->api();
  // On the communicator's device: on a thread with another current
  // device (or none), the query would make a context there.
  DeviceGuard guard(api, state_->device());
  BATON_RETURN_IF_ERROR(guard.status().Annotate(what));
  BufferLocation where;
  Status s = LocateBuffer(api, ptr, &where);
  if (!s.ok()) return s.Annotate(what + ": checking the " + which + " buffer");
  if (where.kind == BufferLocation::kUnregistered)
    return Status::InvalidArgument(kComponent, what + ": " + which + " buffer " + Pointer(ptr) +
                                                   " is host memory unknown to CUDA; the nccl "
                                                   "backend takes device buffers");
  if (where.kind == BufferLocation::kDevice && where.device != state_->device())
    return Status::InvalidArgument(kComponent, what + ": " + which + " buffer " + Pointer(ptr) + " is on CUDA device " +
                                                   std::to_string(where.device) + ", the communicator's is " +
                                                   std::to_string(state_->device()));
  return Status::OK();
}

template <typename Enqueue>
Status NcclCommunicator::Start(std::string what, Enqueue enqueue, std::unique_ptr<Request>* request) {
  if (request == nullptr) return Status::InvalidArgument(kComponent, what + ": request is null");
  request->reset();
  std::shared_ptr<NcclOp> op;
  BATON_RETURN_IF_ERROR(state_->Launch(what, enqueue, &op));
  *request = std::make_unique<NcclRequest>(state_, std::move(op));
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
  const NcclApi& api = state_->api();
  return Start(what, [&](ncclComm_t world, cudaStream_t stream) {
    return BATON_NCCL_CHECK_ASYNC(api, api.AllReduce(send, recv, count, type, nop, world, stream));
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
  const NcclApi& api = state_->api();
  return Start(what, [&](ncclComm_t world, cudaStream_t stream) {
    return BATON_NCCL_CHECK_ASYNC(api, api.AllGather(send, recv, count, type, world, stream));
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
  const NcclApi& api = state_->api();
  return Start(what, [&](ncclComm_t world, cudaStream_t stream) {
    return BATON_NCCL_CHECK_ASYNC(api, api.ReduceScatter(send, recv, count, type, nop, world, stream));
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
  const NcclApi& api = state_->api();
  return Start(what, [&](ncclComm_t world, cudaStream_t stream) {
    return BATON_NCCL_CHECK_ASYNC(api, api.Broadcast(buffer, buffer, count, type, root, world, stream));
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
  const NcclApi& api = state_->api();
  const size_t block = count * DTypeSize(dtype);
  return Start(what, [&](ncclComm_t world, cudaStream_t stream) {
    // One group: NCCL runs the sends and receives of every peer together
    // (one after another they would deadlock).
    Status s = BATON_NCCL_CHECK_ASYNC(api, api.GroupStart());
    if (!s.ok()) return s;
    for (int peer = 0; peer < size_ && s.ok(); ++peer) {
      const char* from = static_cast<const char*>(send) + block * peer;
      char* to = static_cast<char*>(recv) + block * peer;
      s = BATON_NCCL_CHECK_ASYNC(api, api.Send(from, count, type, peer, world, stream));
      if (s.ok()) s = BATON_NCCL_CHECK_ASYNC(api, api.Recv(to, count, type, peer, world, stream));
    }
    // The group is closed even after a failure, or NCCL stays inside it.
    Status end = BATON_NCCL_CHECK_ASYNC(api, api.GroupEnd());
    return s.ok() ? end : s;
  }, request);
}

Status NcclCommunicator::IBarrier(std::unique_ptr<Request>* request) {
  const std::string what = "barrier (rank " + std::to_string(rank_) + " of " + std::to_string(size_) + ")";
  const NcclApi& api = state_->api();
  // An all_reduce of one byte on the scratch buffer: it completes on no
  // rank before every rank has entered it. The value is never read.
  void* scratch = state_->scratch();
  return Start(what, [&](ncclComm_t world, cudaStream_t stream) {
    return BATON_NCCL_CHECK_ASYNC(api, api.AllReduce(scratch, scratch, 1, ncclUint8, ncclMax,
                                                           world, stream));
  }, request);
}

namespace {

// Where each rank's block starts (elements) and the total; one count per rank.
Status Blocks(const std::string& what, const std::vector<size_t>& counts, int size, std::vector<size_t>* start,
              size_t* total) {
  if (counts.size() != static_cast<size_t>(size))
    return Status::InvalidArgument(kComponent, what + ": counts has " + std::to_string(counts.size()) +
                                                   " entries for " + std::to_string(size) + " ranks");
  *total = 0;
  for (size_t c : counts) {
    start->push_back(*total);
    if (c > std::numeric_limits<size_t>::max() / 16 - *total)
      return Status::InvalidArgument(kComponent, what + ": counts overflow the buffer size");
    *total += c;
  }
  return Status::OK();
}

}  // namespace

Status NcclCommunicator::IAllGatherV(const void* send, void* recv, const std::vector<size_t>& counts, DType dtype,
                                     std::unique_ptr<Request>* request) {
  std::vector<size_t> start;
  size_t total = 0;
  BATON_RETURN_IF_ERROR(Blocks("all_gather_v", counts, size_, &start, &total));
  const std::string what = What("all_gather_v", total, dtype, rank_, size_);
  ncclDataType_t type;
  BATON_RETURN_IF_ERROR(ToNcclType(dtype, &type));
  const size_t esize = DTypeSize(dtype);
  BATON_RETURN_IF_ERROR(CheckBuffer(send, counts[static_cast<size_t>(rank_)] * esize, "send", what));
  BATON_RETURN_IF_ERROR(CheckBuffer(recv, total * esize, "recv", what));
  const NcclApi& api = state_->api();
  return Start(what, [&](ncclComm_t world, cudaStream_t stream) {
    // Each rank broadcasts its block into its place in every recv; one
    // group, so NCCL runs them together.
    Status s = BATON_NCCL_CHECK_ASYNC(api, api.GroupStart());
    if (!s.ok()) return s;
    for (int r = 0; r < size_ && s.ok(); ++r) {
      const size_t n = counts[static_cast<size_t>(r)];
      if (n == 0) continue;
      char* to = static_cast<char*>(recv) + start[static_cast<size_t>(r)] * esize;
      s = BATON_NCCL_CHECK_ASYNC(api, api.Broadcast(r == rank_ ? send : to, to, n, type, r, world, stream));
    }
    Status end = BATON_NCCL_CHECK_ASYNC(api, api.GroupEnd());  // closed even after a failure
    return s.ok() ? end : s;
  }, request);
}

Status NcclCommunicator::IReduceScatterV(const void* send, void* recv, const std::vector<size_t>& counts,
                                         DType dtype, ReduceOp op, std::unique_ptr<Request>* request) {
  std::vector<size_t> start;
  size_t total = 0;
  BATON_RETURN_IF_ERROR(Blocks("reduce_scatter_v", counts, size_, &start, &total));
  const std::string what =
      What(("reduce_scatter_v(" + std::string(ReduceOpName(op)) + ")").c_str(), total, dtype, rank_, size_);
  ncclDataType_t type;
  ncclRedOp_t nop;
  BATON_RETURN_IF_ERROR(ToNcclType(dtype, &type));
  BATON_RETURN_IF_ERROR(ToNcclOp(op, dtype, &nop));
  const size_t esize = DTypeSize(dtype);
  BATON_RETURN_IF_ERROR(CheckBuffer(send, total * esize, "send", what));
  BATON_RETURN_IF_ERROR(CheckBuffer(recv, counts[static_cast<size_t>(rank_)] * esize, "recv", what));
  const NcclApi& api = state_->api();
  return Start(what, [&](ncclComm_t world, cudaStream_t stream) {
                 // Block r is reduced onto rank r (recv is written on the root only).
                 Status s = BATON_NCCL_CHECK_ASYNC(api, api.GroupStart());
                 if (!s.ok()) return s;
                 for (int r = 0; r < size_ && s.ok(); ++r) {
                   const size_t n = counts[static_cast<size_t>(r)];
                   if (n == 0) continue;
                   const char* from = static_cast<const char*>(send) + start[static_cast<size_t>(r)] * esize;
                   s = BATON_NCCL_CHECK_ASYNC(api,
                                              api.Reduce(from, recv, n, type, nop, r, world, stream));
                 }
                 Status end = BATON_NCCL_CHECK_ASYNC(api, api.GroupEnd());
                 return s.ok() ? end : s;
               },
               request);
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
Status NcclCommunicator::AllGatherV(const void* send, void* recv, const std::vector<size_t>& counts, DType dtype) {
  std::unique_ptr<Request> r;
  return Finish(IAllGatherV(send, recv, counts, dtype, &r), r);
}
Status NcclCommunicator::ReduceScatterV(const void* send, void* recv, const std::vector<size_t>& counts, DType dtype,
                                        ReduceOp op) {
  std::unique_ptr<Request> r;
  return Finish(IReduceScatterV(send, recv, counts, dtype, op, &r), r);
}

}  // namespace baton::nccl
