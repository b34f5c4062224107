// The nccl side of `baton bench collectives`: one case on device buffers,
// baton's nccl communicator against the raw NCCL call on the same buffers
// and ranks (what nccl-tests measures), alternated in one loop, medians of
// the slowest rank's times. The raw calls go to a plain blocking NCCL
// communicator of their own (RawComm), as nccl-tests makes: never to
// baton's, whose watchdog polls it from another thread (two threads would
// finish and free the same group job), and without the waiting a
// non-blocking communicator costs, so that this cost shows in the ratio.
//
// MPI-free: the ranks agree through a RankSync that `baton bench
// collectives` makes from MPI and tests/gpu/nccl_bench_main.cc makes for
// one rank, so the benchmark also runs on a GPU machine without MPI. All
// device memory and copies go through the NcclApi table, so that a
// stand-in table drives the whole loop on a machine without a GPU
// (tests/unit/nccl_bench_test.cc).
#pragma once

#include <chrono>
#include <functional>
#include <memory>

#include "baton/status.h"
#include "cli/collective_case.h"
#include "mpi_runtime/nccl/nccl_api.h"
#include "mpi_runtime/nccl/nccl_communicator.h"

namespace baton::cli {

// How the ranks of one run act together; every rank calls both at the same
// points. One rank: barrier does nothing, agree returns its arguments.
struct RankSync {
  std::function<void()> barrier;
  // The slowest rank's seconds, and whether any rank failed (all ranks get
  // the same answer, so that all stop together).
  std::function<void(double seconds, bool failed, double* slowest, bool* any_failed)> agree;
  // Rank 0's *id into every rank's *id (one rank: nothing to do).
  std::function<Status(ncclUniqueId* id)> share_id;
  static RankSync OneRank();
};

// The raw baseline's NCCL communicator: blocking (config.blocking = 1),
// the same ranks as `comm`, on its device. Its blocking init has no
// deadline (nccl-tests' has none either); the ranks agree before it that
// every one has its id.
class RawComm {
 public:
  // Every rank at once: rank 0's ncclGetUniqueId, shared through
  // sync.share_id and agreed through sync.agree, then
  // ncclCommInitRankConfig, agreed again.
  static Status Make(const nccl::NcclApi& api, const nccl::NcclCommunicator& comm, const RankSync& sync,
                     std::unique_ptr<RawComm>* out);
  // ncclCommDestroy on its device; ncclCommAbort once a call on it failed
  // (a kernel may still wait for a peer).
  ~RawComm();
  RawComm(const RawComm&) = delete;
  RawComm& operator=(const RawComm&) = delete;

  ncclComm_t get() const { return comm_; }
  // A call on it failed: no later call uses it; the destructor aborts it.
  void Fail(const Status& why) { failed_ = why; }
  const Status& failed() const { return failed_; }

 private:
  RawComm(const nccl::NcclApi& api, int device) : api_(api), device_(device) {}
  const nccl::NcclApi& api_;
  const int device_;
  ncclComm_t comm_ = nullptr;
  Status failed_;
};

struct NcclBenchOptions {
  long iters = 20, warmup = 5;
  bool check = true;
  // Deadline of one raw NCCL call (baton's own calls have the
  // communicator's op_timeout): the raw baseline must not hang either.
  std::chrono::milliseconds raw_timeout{std::chrono::minutes(10)};
};

// Measures `c` (c.P, c.R: the communicator's size and rank) on `comm`:
// allocates device buffers through `api`, fills them from Fill(c); with
// check, runs baton's collective once, copies the result back and compares
// it with the reference (row->ok); then warmup + iters iterations, each
// running baton's collective and then the raw NCCL call, each after
// sync.barrier and timed to its completion
// on the host (enqueue to stream idle), the raw one on `raw` (refused
// once a raw call failed). row->time_us and raw_time_us are
// the medians of the slowest rank's times. Any rank's failure stops every
// rank at the same step: its own Status on that rank, Aborted "another
// rank failed" on the others. Device buffers are freed on every path.
Status MeasureNccl(nccl::NcclCommunicator& comm, RawComm& raw, const nccl::NcclApi& api, const Case& c,
                   const NcclBenchOptions& options, const RankSync& sync, Row* row);

}  // namespace baton::cli
