// Making the NCCL side of the nccl backend, MPI-free and testable through
// the stand-in table: the device, non-blocking communicators polled
// against init_timeout (aborted on any failure), the type and op mapping.
#pragma once

#include <chrono>
#include <functional>
#include <string_view>
#include <vector>

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
// naming the deadline), napping from 1 us doubling up to `poll_interval`
// between polls. `what` names the operation in messages. Never
// aborts: the caller decides.
Status AwaitComm(const NcclApi& api, ncclComm_t comm, std::string_view what,
                 const Deadline& deadline, std::chrono::microseconds poll_interval);

// ncclCommAbort of each of `comms`, in order, on a thread of its own
// (NCCL's abort joins a running init or split job first, and can wait for
// a kernel spinning on a dead peer), waited for at most `within`: OK, or
// a Timeout saying it was left running. `then`, where given, runs on that
// thread after the aborts (it may read what the aborted jobs wrote).
Status AbortWithin(const NcclApi& api, std::vector<ncclComm_t> comms, std::chrono::milliseconds within,
                   std::function<void()> then = nullptr);

// Under OnTimeout::kExit: options.exit_for_requeue(why, at) (the
// runtime's: waits until `at`, logs, asks Slurm to requeue), else waits
// until `at`, then "<why>; exiting with 75" on stderr and _exit(75).
// Never waits on NCCL. `at`: now for a timeout, the collective's deadline
// for a death detected before it (see mpi::ExitForRequeueAt for why).
[[noreturn]] void ExitForRequeue(const NcclOptions& options, const Status& why,
                                 std::chrono::steady_clock::time_point at = std::chrono::steady_clock::now());

// ncclCommInitRankConfig with config.blocking = 0, then AwaitComm until
// init_timeout. On any failure the communicator (if NCCL made one) is
// aborted (AbortWithin abort_timeout) and *comm is null; a timeout under
// kExit exits 75 instead, before any abort.
Status InitComm(const NcclApi& api, const ncclUniqueId& id, int nranks, int rank,
                const NcclOptions& options, ncclComm_t* comm);

// ncclCommSplit (non-blocking, and splitShare: the child shares the
// parent's buffers and proxy threads), then AwaitComm on the parent (NCCL
// writes the child's handle, into a heap slot, when the split's job ends)
// and the child until init_timeout. *child is null where color is
// NCCL_SPLIT_NOCOLOR. A split NCCL refuses at once aborts nothing and
// leaves the parent usable; one that fails or times out later leaves the
// parent in progress for good: the parent is aborted (joining the job),
// then the child, *parent_aborted is set, and the caller must not use the
// parent again.
Status SplitComm(const NcclApi& api, ncclComm_t parent, int color, int key, std::string_view what,
                 const NcclOptions& options, ncclComm_t* child, bool* parent_aborted = nullptr);

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
