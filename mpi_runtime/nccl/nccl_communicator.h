// The nccl backend: a baton::Communicator on device buffers over NCCL
// communicators that are created non-blocking and polled against
// init_timeout (nccl_setup.h), whose collectives run on the communicator's
// own non-blocking stream after the caller's stream, each completing on its
// own event, under a watchdog thread that keeps every deadline whether or
// not anyone waits (nccl_state.h), so that no NCCL call can hang a rank
// for ever and none aborts the process.
//
//   world    ncclCommInitRankConfig (config.blocking = 0) with an id that
//            rank 0 made and MPI shared (nccl_bootstrap.cc);
//   node, leaders   made only when asked (SplitNode, SplitLeaders:
//            ncclCommSplit with splitShare), since no collective here uses
//            them yet: each costs buffers, proxy threads and an init that
//            can fail.
//
// Buffers must be device memory of the communicator's device (or managed
// or host-registered memory): plain host memory and another device's
// memory are refused with a Status, never a fault. Every call restores the
// caller's current device.
//
// Reductions of f16/bf16 are NCCL's own (NCCL reduces in the element type
// at each step, so at more than two ranks results may differ from the mpi
// backend's "f32, rounded once" by a few units in the last place).
//
// Everything in this header except CreateNcclCommunicator (defined in
// nccl_bootstrap.cc) needs no MPI: tests/gpu builds it without MPI.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "baton/communicator.h"
#include "baton/dtype.h"
#include "baton/status.h"
#include "mpi_runtime/nccl/nccl_api.h"
#include "mpi_runtime/nccl/nccl_options.h"
#include "mpi_runtime/nccl/nccl_setup.h"

namespace baton {
class Runtime;  // baton/runtime.h needs <mpi.h>; this header does not
}

namespace baton::nccl {

class NcclState;  // shared by a communicator and its Requests (nccl_state.h)

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(const NcclApi& api, const NcclOptions& options);
  // Finalizes and destroys the NCCL communicators (aborts them if that
  // fails or passes op_timeout), the stream and the scratch buffer, once
  // the last Request is gone too.
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  // Creation in stages, so that the MPI bootstrap can agree across ranks
  // between them (and tests/gpu can run them without MPI):
  // 1. the device (ChooseDevice), made the calling thread's current device
  //    and left so; the non-blocking stream, the barrier's scratch buffer.
  //    Unavailable without a device.
  Status SetUpDevice(int local_rank);
  // 2. the world communicator from the shared id (InitComm); the watchdog.
  Status InitWorld(const ncclUniqueId& id, int rank, int size);
  // On demand, collective over the world: the node communicator
  // (color = node id) and the leaders (color 0 where `leader`, else none).
  Status SplitNode(int node);
  Status SplitLeaders(bool leader);
  // Aborts every NCCL communicator; later calls return `why`.
  void Abort(const Status& why);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Backend backend() const override { return Backend::kNccl; }
  int device() const override;
  cudaStream_t stream() const;
  // For messages and tests; an NCCL call on them would race the watchdog
  // (nccl_state.h): a raw call needs a communicator of its own.
  ncclComm_t world_comm() const;
  ncclComm_t node_comm() const;     // null until SplitNode
  ncclComm_t leaders_comm() const;  // null until SplitLeaders, and off local rank 0

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

  // The Request of these also offers WaitOnStream(cudaStream_t): the
  // caller's stream waits for the collective's event on the device.
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
  // Enqueues with `enqueue(world, stream)` through the state (ordering,
  // acceptance, the op's event, the watchdog) and makes the Request.
  template <typename Enqueue>
  Status Start(std::string what, Enqueue enqueue, std::unique_ptr<Request>* request);
  // Device memory of this communicator's device (or managed or registered
  // host memory); InvalidArgument otherwise.
  Status CheckBuffer(const void* ptr, size_t bytes, const char* which, const std::string& what) const;

  std::shared_ptr<NcclState> state_;
  int rank_ = 0, size_ = 1;
};

// The nccl backend over the runtime's world, for the runtime's
// CreateCommunicator. Collective over the world: checks the device,
// exchanges the id, creates the world communicator, and agrees on the
// outcome after each step (MPI_Iallreduce under a deadline), so that either
// every rank returns OK or every rank returns an error (Aborted naming the
// first failed rank on the ranks that did not fail themselves). Without a
// visible device: Unavailable "no CUDA device visible: ...". The first form
// takes CommOptions::nccl, timeout and on_timeout. Defined in
// nccl_bootstrap.cc.
Status CreateNcclCommunicator(Runtime& rt, const CommOptions& opts, const NcclApi& api,
                              std::unique_ptr<Communicator>* out);
Status CreateNcclCommunicator(Runtime& rt, const CommOptions& opts, const NcclOptions& nccl_options,
                              const NcclApi& api, std::unique_ptr<Communicator>* out);

}  // namespace baton::nccl
