#include "cli/nccl_bench.h"

#include <string>
#include <vector>

#include "base/median.h"

namespace baton::cli {
namespace {

using nccl::NcclApi;
using Clock = std::chrono::steady_clock;

// Device memory from the table, freed on every path.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(const NcclApi& api) : api_(api) {}
  ~DeviceBuffer() {
    if (ptr_ != nullptr) (void)api_.Free(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  Status Allocate(size_t bytes) { return BATON_CUDA_CHECK(api_, api_.Malloc(&ptr_, bytes)); }
  void* get() const { return ptr_; }

 private:
  const NcclApi& api_;
  void* ptr_ = nullptr;
};

class Stream {
 public:
  explicit Stream(const NcclApi& api) : api_(api) {}
  ~Stream() {
    if (made_) (void)api_.StreamDestroy(stream_);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  Status Create() {
    // Non-blocking, as the communicator's own: neither serialises with the
    // legacy default stream.
    Status s = BATON_CUDA_CHECK(api_, api_.StreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    made_ = s.ok();
    return s;
  }
  cudaStream_t get() const { return stream_; }

 private:
  const NcclApi& api_;
  cudaStream_t stream_{};
  bool made_ = false;
};

// Waits as nccl-tests does: spins on the stream, and every so often asks
// NCCL for an asynchronous error and checks the deadline.
Status AwaitStream(const NcclApi& api, ncclComm_t comm, cudaStream_t stream, const std::string& what,
                   Clock::time_point deadline, std::chrono::milliseconds timeout) {
  for (unsigned long polls = 0;; ++polls) {
    const cudaError_t q = api.StreamQuery(stream);
    if (q == cudaSuccess) return Status::OK();
    if (q != cudaErrorNotReady) return BATON_CUDA_CHECK(api, q);
    if (polls % 256 != 255) continue;
    ncclResult_t async = ncclSuccess;
    Status s = BATON_NCCL_CHECK(api, api.CommGetAsyncError(comm, &async));
    if (s.ok() && async != ncclSuccess && async != ncclInProgress)
      s = nccl::NcclErrorStatus(async, what + ": asynchronous NCCL error");
    if (!s.ok()) return s;
    if (Clock::now() >= deadline)
      return Status::Timeout("cli", what + " did not complete within " + std::to_string(timeout.count()) + " ms");
  }
}

// The raw NCCL call for the case, on comm and stream, waited for.
Status RawNccl(const NcclApi& api, ncclComm_t comm, cudaStream_t stream, const Case& c, const void* send,
               void* recv, std::chrono::milliseconds timeout) {
  ncclDataType_t type;
  ncclRedOp_t op = ncclSum;
  BATON_RETURN_IF_ERROR(nccl::ToNcclType(c.t, &type));
  if (c.reduces()) BATON_RETURN_IF_ERROR(nccl::ToNcclOp(c.op, c.t, &op));
  const std::string what = std::string("raw nccl ") + CollectiveName(c.coll);
  const Clock::time_point deadline = Clock::now() + timeout;
  const size_t B = c.block, block_bytes = B * DTypeSize(c.t);
  Status s;
  switch (c.coll) {
    case Collective::kAllReduce:
      s = BATON_NCCL_CHECK_ASYNC(api, api.AllReduce(send, recv, B, type, op, comm, stream));
      break;
    case Collective::kAllGather:
      s = BATON_NCCL_CHECK_ASYNC(api, api.AllGather(send, recv, B, type, comm, stream));
      break;
    case Collective::kReduceScatter:
      s = BATON_NCCL_CHECK_ASYNC(api, api.ReduceScatter(send, recv, B, type, op, comm, stream));
      break;
    case Collective::kBroadcast:
      s = BATON_NCCL_CHECK_ASYNC(api, api.Broadcast(recv, recv, B, type, 0, comm, stream));
      break;
    case Collective::kAllToAll: {
      s = BATON_NCCL_CHECK_ASYNC(api, api.GroupStart());
      for (int p = 0; s.ok() && p < c.P; ++p) {
        const auto* from = static_cast<const char*>(send) + static_cast<size_t>(p) * block_bytes;
        auto* to = static_cast<char*>(recv) + static_cast<size_t>(p) * block_bytes;
        s = BATON_NCCL_CHECK_ASYNC(api, api.Send(from, B, type, p, comm, stream));
        if (s.ok()) s = BATON_NCCL_CHECK_ASYNC(api, api.Recv(to, B, type, p, comm, stream));
      }
      Status end = BATON_NCCL_CHECK_ASYNC(api, api.GroupEnd());
      if (s.ok()) s = end;
      break;
    }
  }
  if (!s.ok()) return s;
  // A non-blocking communicator may answer ncclInProgress: NCCL is still
  // enqueueing, and the stream may look idle until it is done.
  s = nccl::AwaitComm(api, comm, what, nccl::Deadline{deadline, timeout, "raw_timeout"}, std::chrono::microseconds(0));
  if (!s.ok()) return s;
  return AwaitStream(api, comm, stream, what, deadline, timeout);
}

}  // namespace

RankSync RankSync::OneRank() {
  RankSync s;
  s.barrier = [] {};
  s.agree = [](double seconds, bool failed, double* slowest, bool* any_failed) {
    *slowest = seconds;
    *any_failed = failed;
  };
  return s;
}

Status MeasureNccl(nccl::NcclCommunicator& comm, const NcclApi& api, const Case& c, const NcclBenchOptions& o,
                   const RankSync& sync, Row* row) {
  HostBuffers host;
  Fill(c, &host);
  DeviceBuffer send(api), recv(api);
  Stream stream(api);
  Status mine = send.Allocate(host.send.size());
  if (mine.ok()) mine = recv.Allocate(host.recv.size());
  if (mine.ok()) mine = stream.Create();

  // Every step ends in one agreement; a failure anywhere stops all ranks.
  double slowest = 0;
  bool any_failed = false;
  auto agree = [&](double seconds) -> Status {
    sync.agree(seconds, !mine.ok(), &slowest, &any_failed);
    if (!any_failed) return Status::OK();
    return mine.ok() ? Status::Aborted("cli", "stopped: another rank failed (see its message)") : mine;
  };
  // Host inputs to the device (recv too: broadcast's root input is there).
  auto upload = [&]() {
    if (mine.ok()) mine = BATON_CUDA_CHECK(api, api.Memcpy(send.get(), host.send.data(), host.send.size(),
                                                            cudaMemcpyHostToDevice));
    if (mine.ok()) mine = BATON_CUDA_CHECK(api, api.Memcpy(recv.get(), host.recv.data(), host.recv.size(),
                                                            cudaMemcpyHostToDevice));
  };
  upload();
  BATON_RETURN_IF_ERROR(agree(0));

  row->ok = -1;
  if (o.check) {
    mine = RunCollective(comm, c, send.get(), recv.get());
    std::vector<char> got(host.recv.size());
    if (mine.ok())
      mine = BATON_CUDA_CHECK(api, api.Memcpy(got.data(), recv.get(), got.size(), cudaMemcpyDeviceToHost));
    const bool good = mine.ok() && FirstMismatch(c, got.data(), host.want.data()) < 0;
    BATON_RETURN_IF_ERROR(agree(good ? 0.0 : 1.0));
    row->ok = slowest == 0 ? 1 : 0;
    upload();  // broadcast wrote its input over
    BATON_RETURN_IF_ERROR(agree(0));
  }

  std::vector<double> baton_t, raw_t;
  for (long i = 0; i < o.warmup + o.iters; ++i) {
    sync.barrier();
    Clock::time_point t0 = Clock::now();
    mine = RunCollective(comm, c, send.get(), recv.get());
    BATON_RETURN_IF_ERROR(agree(std::chrono::duration<double>(Clock::now() - t0).count()));
    if (i >= o.warmup) baton_t.push_back(slowest);

    sync.barrier();
    t0 = Clock::now();
    mine = RawNccl(api, comm.world_comm(), stream.get(), c, send.get(), recv.get(), o.raw_timeout);
    if (!mine.ok()) comm.Abort(mine);  // the NCCL communicator is shared: no later call may hang on it
    BATON_RETURN_IF_ERROR(agree(std::chrono::duration<double>(Clock::now() - t0).count()));
    if (i >= o.warmup) raw_t.push_back(slowest);
  }
  row->time_us = Median(baton_t) * 1e6;
  row->raw_time_us = Median(raw_t) * 1e6;
  return Status::OK();
}

}  // namespace baton::cli
