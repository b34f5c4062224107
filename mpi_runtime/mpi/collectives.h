// The collectives of the mpi backend, each written once: the same body
// serves the blocking call (caller's thread, first set of communicators)
// and the non-blocking one (the worker's thread, the duplicate set). The
// Deadline of the call decides the MPI form: under OnTimeout::kExit
// (Deadline::blocks(), a watchdog enforces the deadline) MPI's blocking
// call, the fastest; under kReturn the non-blocking call polled against
// the deadline. A Timeout leaves the collective in flight inside MPI; its
// temporary buffers are abandoned to it (mpi_types.h).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <vector>

#include "baton/communicator.h"
#include "baton/dtype.h"
#include "baton/status.h"
#include "mpi_runtime/deadline.h"

namespace baton::mpi {

// The MPI communicators a collective runs over: a duplicate of the
// runtime's world, node and leaders (leaders is MPI_COMM_NULL off the
// node leaders).
struct Comms {
  MPI_Comm world = MPI_COMM_NULL, node = MPI_COMM_NULL, leaders = MPI_COMM_NULL;
  int rank = 0, size = 1;
};

// What one collective runs with.
struct CallContext {
  const Comms& comms;
  const Deadline& deadline;  // from the collective's start
  size_t ring_chunk_bytes;
};

// algo: kNative, kHierarchical or kRing (never kAuto: the caller decides).
Status AllReduce(const CallContext& x, const void* send, void* recv, size_t count, DType t, ReduceOp op,
                 Algorithm algo);
// kRing: the ring's all-gather; anything else: MPI's own.
Status AllGather(const CallContext& x, const void* send, void* recv, size_t count, DType t, Algorithm algo);
Status ReduceScatter(const CallContext& x, const void* send, void* recv, size_t count, DType t, ReduceOp op,
                     Algorithm algo);
// Uneven blocks (counts per rank, baton::Communicator::AllGatherV). kRing,
// or more than MPI's int counts in all: the ring over the blocks; else
// MPI_Allgatherv / MPI_Reduce_scatter.
Status AllGatherV(const CallContext& x, const void* send, void* recv, const std::vector<size_t>& counts, DType t,
                  Algorithm algo);
Status ReduceScatterV(const CallContext& x, const void* send, void* recv, const std::vector<size_t>& counts, DType t,
                      ReduceOp op, Algorithm algo);
Status Broadcast(const CallContext& x, void* buffer, size_t count, DType t, int root);
Status AllToAll(const CallContext& x, const void* send, void* recv, size_t count, DType t);
Status Barrier(const CallContext& x);

}  // namespace baton::mpi
