// The nccl backend: a baton::Communicator on device buffers over NCCL
// communicators that are created non-blocking, polled against a deadline,
// and aborted on error or timeout, so that no NCCL call can hang a rank
// forever and none aborts the process.
//
//   world    ncclCommInitRankConfig (config.blocking = 0) with an id that
//            rank 0 made and MPI_Bcast shared (nccl_bootstrap.cc);
//   node     ncclCommSplit(world, color = node id, key = rank);
//   leaders  ncclCommSplit(world, color = 0 on local rank 0 else
//            NCCL_SPLIT_NOCOLOR, key = rank): null on the other ranks.
//
// Every collective is enqueued on the communicator's own stream and then
// polled (ncclCommGetAsyncError, cudaStreamQuery) until it completes, NCCL
// reports an error, or op_timeout passes; an error or a timeout aborts the
// communicator (all three NCCL communicators) and every later call returns
// that Status. The stream is created with cudaStreamCreate, so it is
// ordered after work on the legacy default stream; work on other streams
// must be synchronized by the caller before a collective.
//
// Reductions of f16/bf16 are NCCL's own (NCCL reduces in the element type
// at each step, so at more than two ranks results may differ from the mpi
// backend's "f32, rounded once" by a few units in the last place).
//
// Everything in this header except CreateNcclCommunicator (defined in
// nccl_bootstrap.cc) needs no MPI: tests/gpu builds it without MPI.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "baton/communicator.h"
#include "baton/dtype.h"
#include "baton/status.h"
#include "mpi_runtime/nccl/nccl_api.h"

namespace baton {
class Runtime;  // baton/runtime.h needs <mpi.h>; this header does not
}

namespace baton::nccl {

// What CommOptions does not (yet) carry for this backend.
struct NcclOptions {
  // Communicator creation: ncclCommInitRankConfig, and each ncclCommSplit.
  std::chrono::milliseconds init_timeout{std::chrono::seconds(120)};
  // One collective, from its enqueue to its completion (Wait/Test, and the
  // blocking forms). 10 minutes, PyTorch's default collective timeout: a
  // collective waits for the slowest rank, which may be busy for minutes.
  std::chrono::milliseconds op_timeout{std::chrono::minutes(10)};
  // Sleep between polls of a communicator being created or finalized.
  std::chrono::microseconds poll_interval{1000};
  // A collective's Wait polls without sleeping for this long (small
  // collectives finish in microseconds), then sleeps poll_interval.
  std::chrono::microseconds spin{200};
  // CUDA device of this rank; -1: local rank modulo the visible devices
  // (one device per task under --baton-gpu-bind=local-rank).
  int device = -1;
  // Called with the Timeout of a collective after the communicators were
  // aborted; returns the Status to give the caller, or does not return
  // (CommOptions::on_timeout kExit: exit 75). Null: the Timeout as is.
  // CreateCommunicator sets it from CommOptions (nccl_bootstrap.cc).
  std::function<Status(const Status&)> on_timeout;
};

// A point in time and what it came from, for messages.
struct Deadline {
  std::chrono::steady_clock::time_point at;
  std::chrono::milliseconds timeout;
  const char* name;  // "init_timeout", "op_timeout"

  static Deadline After(std::chrono::milliseconds timeout, const char* name);
  bool Passed() const { return std::chrono::steady_clock::now() >= at; }
  std::string Describe() const;  // "init_timeout of 200 ms"
};

// ---- The control logic, exposed for tests/unit/nccl_control_test.cc -----

// Polls ncclCommGetAsyncError(comm) until it reports ncclSuccess (OK), an
// error (a Status with NCCL's strings), or `deadline` passes (Timeout
// naming the deadline). `what` names the operation in messages. Never
// aborts: the caller decides.
Status AwaitComm(const NcclApi& api, ncclComm_t comm, std::string_view what,
                 const Deadline& deadline, std::chrono::microseconds poll_interval);

// ncclCommInitRankConfig with config.blocking = 0, then AwaitComm until
// init_timeout. On any failure the communicator (if NCCL made one) is
// aborted with ncclCommAbort and *comm is null.
Status InitComm(const NcclApi& api, const ncclUniqueId& id, int nranks, int rank,
                const NcclOptions& options, ncclComm_t* comm);

// ncclCommSplit (non-blocking, inherits the parent's config), then
// AwaitComm on the child and the parent until init_timeout. *child is
// null where color is NCCL_SPLIT_NOCOLOR. On failure the child (if any) is
// aborted and null; the parent is left to the caller.
Status SplitComm(const NcclApi& api, ncclComm_t parent, int color, int key, std::string_view what,
                 const NcclOptions& options, ncclComm_t* child);

// NCCL's type for a baton dtype (bf16 needs NCCL >= 2.10), and its op
// (kAvg only for floating types: InvalidArgument otherwise).
Status ToNcclType(DType dtype, ncclDataType_t* out);
Status ToNcclOp(ReduceOp op, DType dtype, ncclRedOp_t* out);

// True when cudaGetDeviceCount succeeds and finds at least one device.
bool NcclDeviceVisible(const NcclApi& api);
// The same as a Status: Unavailable "no CUDA device visible: ..." with
// CUDA's error string, else OK and *count.
Status CheckDeviceVisible(const NcclApi& api, int* count);

// ---- The communicator ---------------------------------------------------

struct NcclState;  // shared by a communicator and its Requests

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(const NcclApi& api, const NcclOptions& options);
  // Finalizes and destroys the NCCL communicators (aborts them if that
  // fails or passes op_timeout), the stream and the scratch buffer.
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  // Creation in stages, so that the MPI bootstrap can agree across ranks
  // between them (and tests/gpu can run them without MPI):
  // 1. the device (options.device, else local_rank % count), the stream,
  //    the barrier's scratch buffer. Unavailable without a device.
  Status SetUpDevice(int local_rank);
  // 2. the world communicator from the shared id (InitComm).
  Status InitWorld(const ncclUniqueId& id, int rank, int size);
  // 3. the node communicator (SplitComm, color = node id).
  Status SplitNode(int node);
  // 4. the leaders communicator (color 0 where `leader`, else none).
  Status SplitLeaders(bool leader);
  // Aborts every NCCL communicator; later calls return `why`.
  void Abort(const Status& why);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Backend backend() const override { return Backend::kNccl; }
  ncclComm_t world_comm() const;
  ncclComm_t node_comm() const;
  ncclComm_t leaders_comm() const;  // null unless local rank 0

  Status AllReduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) override;
  Status AllGather(const void* send, void* recv, size_t count, DType dtype) override;
  Status ReduceScatter(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) override;
  Status Broadcast(void* buffer, size_t count, DType dtype, int root) override;
  Status AllToAll(const void* send, void* recv, size_t count, DType dtype) override;
  Status Barrier() override;
  // One ncclBroadcast (all-gather) or ncclReduce (reduce-scatter) per
  // rank's block, rooted at that rank, in one NCCL group.
  Status AllGatherV(const void* send, void* recv, const std::vector<size_t>& counts, DType dtype) override;
  Status ReduceScatterV(const void* send, void* recv, const std::vector<size_t>& counts, DType dtype,
                        ReduceOp op) override;

  Status IAllReduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                    std::unique_ptr<Request>* request) override;
  Status IAllGather(const void* send, void* recv, size_t count, DType dtype,
                    std::unique_ptr<Request>* request) override;
  Status IReduceScatter(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                        std::unique_ptr<Request>* request) override;
  Status IBroadcast(void* buffer, size_t count, DType dtype, int root,
                    std::unique_ptr<Request>* request) override;
  Status IAllToAll(const void* send, void* recv, size_t count, DType dtype,
                   std::unique_ptr<Request>* request) override;
  Status IBarrier(std::unique_ptr<Request>* request) override;
  Status IAllGatherV(const void* send, void* recv, const std::vector<size_t>& counts, DType dtype,
                     std::unique_ptr<Request>* request) override;
  Status IReduceScatterV(const void* send, void* recv, const std::vector<size_t>& counts, DType dtype, ReduceOp op,
                         std::unique_ptr<Request>* request) override;

 private:
  // Checks the buffers (device or host-registered memory, count*size
  // fits), enqueues with `enqueue`, waits for NCCL to accept it, and makes
  // the Request.
  template <typename Enqueue>
  Status Start(std::string what, Enqueue enqueue, std::unique_ptr<Request>* request);
  Status CheckBuffer(const void* ptr, size_t bytes, const char* which, const std::string& what) const;

  std::shared_ptr<NcclState> state_;
  int rank_ = 0, size_ = 1;
};

// The nccl backend over the runtime's world, for the runtime's
// CreateCommunicator. Collective over the world: checks the device,
// exchanges the id, creates world/node/leaders, and agrees on the outcome
// after each step (MPI_Allreduce), so that either every rank returns OK or
// every rank returns an error (Aborted naming the first failed rank on the
// ranks that did not fail themselves). Without a visible device:
// Unavailable "no CUDA device visible: ...". Defined in nccl_bootstrap.cc.
Status CreateNcclCommunicator(Runtime& rt, const CommOptions& opts, const NcclApi& api,
                              std::unique_ptr<Communicator>* out);
Status CreateNcclCommunicator(Runtime& rt, const CommOptions& opts, const NcclOptions& nccl_options,
                              const NcclApi& api, std::unique_ptr<Communicator>* out);

}  // namespace baton::nccl
