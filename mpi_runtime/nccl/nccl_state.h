// The state of one nccl communicator, shared by it and its Requests (a
// Request may outlive its communicator): the device, the communicator's own
// non-blocking stream, the NCCL communicators, the collectives in flight,
// and the watchdog thread that keeps their deadlines.
//
// Ordering: each collective first waits (cudaStreamWaitEvent) for an event
// recorded on the caller's stream (NcclOptions::stream, else the legacy
// default stream), so it sees what the program computed; the communicator's
// stream is cudaStreamNonBlocking, so default-stream work neither waits for
// nor serialises with the collectives. Each collective completes on its own
// event (cudaEventDisableTiming), so waiting for one waits for nothing else.
//
// Deadlines: the watchdog thread looks at every collective in flight every
// clamp(op_timeout / 20, 1 ms, 100 ms) whether or not anyone waits for it
// (the caller may be blocked in cudaMemcpy behind a kernel that waits for a
// dead peer), and at the world communicator's asynchronous error. A
// collective past its deadline follows NcclOptions::on_timeout: kExit ends
// the process with 75 at once and never calls ncclCommAbort (which can
// itself wait for the stuck peer); kReturn breaks the communicator: the
// NCCL communicators are aborted on a thread of their own, waited for at
// most abort_timeout, and every later call returns the Status. A failure
// detected before the deadline (an asynchronous NCCL error, a sticky CUDA
// error, a failed enqueue) follows the same policy: exit 75 under kExit
// (at the failed collective's deadline, as an MPI failure does:
// mpi::ExitForRequeueAt; until then the communicator is broken, and a
// call of another thread makes no NCCL call and waits for that exit),
// broken under kReturn.
//
// Threads: the program's thread issues collectives and may wait; the
// watchdog polls; NCCL calls on the communicators are serialised by one
// mutex, never held while ncclCommAbort runs. MPI-free.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "baton/status.h"
#include "mpi_runtime/nccl/nccl_api.h"
#include "mpi_runtime/nccl/nccl_options.h"

namespace baton::nccl {

// One collective in flight: its completion event on the communicator's
// stream and its deadline. Shared by its Request and the watchdog.
struct NcclOp {
  NcclOp(const NcclApi& a, std::string w, const Deadline& d) : api(a), what(std::move(w)), deadline(d) {}
  ~NcclOp();  // destroys the event (CUDA releases it once the stream passed it)
  NcclOp(const NcclOp&) = delete;
  NcclOp& operator=(const NcclOp&) = delete;

  const NcclApi& api;
  const std::string what;
  const Deadline deadline;
  cudaEvent_t event = nullptr;
  std::atomic<bool> complete{false};
};

class NcclState {
 public:
  NcclState(const NcclApi& api, const NcclOptions& options);
  // Stops the watchdog; when healthy, waits for what is in flight and
  // finalizes and destroys the NCCL communicators (within op_timeout,
  // else aborted); the caller's device is current again afterwards. A
  // broken state leaks its stream and scratch buffer (a kernel of an
  // aborted communicator may still run: cudaFree would wait for it).
  ~NcclState();
  NcclState(const NcclState&) = delete;
  NcclState& operator=(const NcclState&) = delete;

  // ---- setup (the program's thread, before any collective) ----
  // Chooses the device (ChooseDevice) and makes it the calling thread's
  // current device, left so: the program's allocations go where its
  // collectives run.
  Status SetUpDevice(int local_rank);
  // The world communicator; starts the watchdog.
  Status InitWorld(const ncclUniqueId& id, int rank, int size);
  // color: the node id, or 0 / NCCL_SPLIT_NOCOLOR for the leaders.
  Status Split(bool node, int color, int key, const std::string& what);

  // ---- collectives ----
  // Orders the communicator's stream after the caller's, runs `enqueue`
  // (NCCL calls on `world` and `stream`), waits for NCCL to accept it
  // (ncclInProgress on a non-blocking communicator), records the op's
  // event and hands the op to the watchdog.
  Status Launch(const std::string& what, const std::function<Status(ncclComm_t world, cudaStream_t stream)>& enqueue,
                std::shared_ptr<NcclOp>* op);
  // One look: *done when the op's event fired (OK) or the communicator is
  // broken (its Status).
  Status Test(NcclOp& op, bool* done);
  // Until done or the deadline: spins (yielding) for options.spin, then
  // naps of 10 us doubling to at most 50 us.
  Status Wait(NcclOp& op);
  // The deadline passed: one last look, then the policy (kExit: exit 75).
  Status Expire(NcclOp& op);
  // Makes `stream` wait for the op on the device (cudaStreamWaitEvent).
  Status StreamWait(NcclOp& op, cudaStream_t stream);
  // Breaks the communicator (aborting the NCCL communicators); later calls
  // return `why`.
  void Break(const Status& why);

  // For messages and tests: the world communicator (null once broken) and
  // stream. No NCCL call may be made on them outside this class: the
  // watchdog polls and may abort the same communicator (issue 31, item 4;
  // the benchmark's raw baseline has a communicator of its own, RawComm).
  ncclComm_t world() const;
  ncclComm_t node() const;
  ncclComm_t leaders() const;
  cudaStream_t stream() const { return stream_; }
  void* scratch() const { return scratch_; }
  int device() const { return device_; }
  const NcclApi& api() const { return api_; }
  const NcclOptions& options() const { return options_; }
  // OK while healthy; once broken, why.
  Status broken() const;

 private:
  // Exits 75 now, naming `why`, or the death detected earlier (death_).
  [[noreturn]] void ExitForRequeue(const Status& why) const;
  // A failure detected rather than waited out (an asynchronous NCCL error:
  // a dead peer; a sticky CUDA error; an enqueue that failed): under kExit
  // the process exits 75 at `deadline` (the failed collective's; a later
  // death's at the first one's), as the deadline would have made it and
  // when the other ranks' deadlines end them (ExitForRequeue), and the
  // communicator is broken (not aborted) while it waits; under kReturn
  // the communicator breaks at once.
  void Fail(const Status& why, const Deadline& deadline);
  // The answer of a call on a broken communicator, which makes no NCCL or
  // CUDA call: `what` with the broken Status; under kExit after a death
  // (Fail) the caller instead waits for that death's exit 75 with it.
  Status Refused(const std::string& what) const;
  std::string Context() const;
  void Watch();
  void WatchOnce();
  void StopWatchdog();

  const NcclApi& api_;
  const NcclOptions options_;
  int device_ = -1;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;  // recorded on the caller's stream before each collective
  void* scratch_ = nullptr;      // the barrier's one element

  mutable std::mutex mu_;  // the NCCL communicators' handles and calls, broken_
  ncclComm_t world_ = nullptr, node_ = nullptr, leaders_ = nullptr;
  Status broken_;
  // kExit: the first death detected, waiting for its deadline (Fail). Any
  // exit from then on, a timeout's included, names it instead.
  mutable std::mutex death_mu_;
  Status death_;
  std::chrono::steady_clock::time_point death_at_;  // when it exits
  std::atomic<bool> is_broken_{false};

  std::mutex ops_mu_;
  std::vector<std::shared_ptr<NcclOp>> in_flight_;

  std::mutex watch_mu_;
  std::condition_variable watch_cv_;
  bool stop_ = false;
  std::thread watchdog_;
};

}  // namespace baton::nccl
