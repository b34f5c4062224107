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
      s = BATON_NCCL_CHECK(api, api.AllReduce(send, recv, B, type, op, comm, stream));
      break;
    case Collective::kAllGather:
      s = BATON_NCCL_CHECK(api, api.AllGather(send, recv, B, type, comm, stream));
      break;
    case Collective::kReduceScatter:
      s = BATON_NCCL_CHECK(api, api.ReduceScatter(send, recv, B, type, op, comm, stream));
      break;
    case Collective::kBroadcast:
      s = BATON_NCCL_CHECK(api, api.Broadcast(recv, recv, B, type, 0, comm, stream));
      break;
    case Collective::kAllToAll: {
      s = BATON_NCCL_CHECK(api, api.GroupStart());
      for (int p = 0; s.ok() && p < c.P; ++p) {
        const auto* from = static_cast<const char*>(send) + static_cast<size_t>(p) * block_bytes;
        auto* to = static_cast<char*>(recv) + static_cast<size_t>(p) * block_bytes;
        s = BATON_NCCL_CHECK(api, api.Send(from, B, type, p, comm, stream));
        if (s.ok()) s = BATON_NCCL_CHECK(api, api.Recv(to, B, type, p, comm, stream));
      }
      Status end = BATON_NCCL_CHECK(api, api.GroupEnd());
      if (s.ok()) s = end;
      break;
    }
  }
  if (!s.ok()) return s;
  // A blocking communicator: the kernel is on the stream once the call
  // returned.
  return AwaitStream(api, comm, stream, what, deadline, timeout);
}

}  // namespace

RankSync RankSync::OneRank() {
  RankSync s;
  s.barrier = [] {};
  s.share_id = [](ncclUniqueId*) { return Status::OK(); };
  s.agree = [](double seconds, bool failed, double* slowest, bool* any_failed) {
    *slowest = seconds;
    *any_failed = failed;
  };
  return s;
}

Status RawComm::Make(const NcclApi& api, const nccl::NcclCommunicator& comm, const RankSync& sync,
                     std::unique_ptr<RawComm>* out) {
  std::unique_ptr<RawComm> raw(new RawComm(api, comm.device()));
  nccl::DeviceGuard guard(api, raw->device_);
  Status mine = guard.status();
  ncclUniqueId id{};
  if (mine.ok() && comm.rank() == 0) mine = BATON_NCCL_CHECK(api, api.GetUniqueId(&id));
  double slowest = 0;
  bool any_failed = false;
  auto agree = [&](const char* step) -> Status {
    sync.agree(0, !mine.ok(), &slowest, &any_failed);
    if (!any_failed) return Status::OK();
    if (!mine.ok()) return mine.Annotate(std::string("raw baseline's communicator: ") + step);
    return Status::Aborted("cli", std::string("raw baseline's communicator: ") + step +
                                      ": another rank failed (see its message)");
  };
  // Every rank takes part in the sharing, then all agree that it worked.
  Status shared = sync.share_id(&id);
  if (mine.ok()) mine = shared;
  BATON_RETURN_IF_ERROR(agree("sharing its id"));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
  mine = BATON_NCCL_CHECK(api, api.CommInitRankConfig(&raw->comm_, comm.size(), id, comm.rank(), &config));
  if (!mine.ok()) raw->failed_ = mine;
  BATON_RETURN_IF_ERROR(agree("ncclCommInitRankConfig"));
  *out = std::move(raw);
  return Status::OK();
}

RawComm::~RawComm() {
  if (comm_ == nullptr) return;
  nccl::DeviceGuard guard(api_, device_);
  if (failed_.ok())
    (void)api_.CommDestroy(comm_);
  else
    (void)api_.CommAbort(comm_);
}

Status MeasureNccl(nccl::NcclCommunicator& comm, RawComm& raw, const NcclApi& api, const Case& c,
                   const NcclBenchOptions& o, const RankSync& sync, Row* row) {
  HostBuffers host;
  Fill(c, &host);
  DeviceBuffer send(api), recv(api);
  Stream stream(api);
  Status mine = raw.failed().Annotate("the raw baseline's communicator failed before");
  if (mine.ok()) mine = send.Allocate(host.send.size());
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
    mine = RawNccl(api, raw.get(), stream.get(), c, send.get(), recv.get(), o.raw_timeout);
    if (!mine.ok()) raw.Fail(mine);  // no later call may hang on it
    BATON_RETURN_IF_ERROR(agree(std::chrono::duration<double>(Clock::now() - t0).count()));
    if (i >= o.warmup) raw_t.push_back(slowest);
  }
  row->time_us = Median(baton_t) * 1e6;
  row->raw_time_us = Median(raw_t) * 1e6;
  return Status::OK();
}

}  // namespace baton::cli
