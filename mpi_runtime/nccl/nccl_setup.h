// Making the NCCL side of the nccl backend, MPI-free and testable through
// the stand-in table: the device, non-blocking communicators polled
// against init_timeout (aborted on any failure), the type and op mapping.
#pragma once

#include <string_view>

#include "baton/dtype.h"
#include "baton/status.h"
#include "mpi_runtime/nccl/nccl_api.h"
#include "mpi_runtime/nccl/nccl_options.h"

namespace baton::nccl {

// The Status of an asynchronous NCCL error `rc` on `comm`: NCCL's strings
// and its last error, kind as NcclErrorStatus.
Status AsyncError(const NcclApi& api, ncclComm_t comm, ncclResult_t rc, std::string_view what);

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

// ncclCommSplit (non-blocking, and splitShare: the child shares the
// parent's buffers and proxy threads), then AwaitComm on the child and the
// parent until init_timeout. *child is null where color is
// NCCL_SPLIT_NOCOLOR. On failure the child (if any) is aborted and null;
// the parent is left to the caller.
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

// This rank's device: `requested` when >= 0 (InvalidArgument beyond the
// visible ones); else the current device where its primary context exists
// (the program chose it: cudaSetDevice, or memory it allocated); else
// local_rank modulo the visible devices.
Status ChooseDevice(const NcclApi& api, int requested, int local_rank, int* device);

// Makes `device` current for the life of the guard and then puts the
// caller's back: the backend's internal calls never leave the program on
// another device.
class DeviceGuard {
 public:
  DeviceGuard(const NcclApi& api, int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  const Status& status() const { return status_; }

 private:
  const NcclApi& api_;
  int previous_ = -1;
  bool switched_ = false;
  Status status_;
};

}  // namespace baton::nccl
