// The nccl side of `baton bench collectives`: one case on device buffers,
// baton's nccl communicator against the raw NCCL call on the same NCCL
// communicator and buffers (what nccl-tests measures), alternated in one
// loop, medians of the slowest rank's times.
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
  static RankSync OneRank();
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
// running baton's collective and then the raw NCCL call on
// comm.world_comm(), each after sync.barrier and timed to its completion
// on the host (enqueue to stream idle). row->time_us and raw_time_us are
// the medians of the slowest rank's times. Any rank's failure stops every
// rank at the same step: its own Status on that rank, Aborted "another
// rank failed" on the others. Device buffers are freed on every path.
Status MeasureNccl(nccl::NcclCommunicator& comm, const nccl::NcclApi& api, const Case& c,
                   const NcclBenchOptions& options, const RankSync& sync, Row* row);

}  // namespace baton::cli
