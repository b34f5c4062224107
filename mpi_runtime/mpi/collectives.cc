#include "mpi_runtime/mpi/collectives.h"

#include <cstring>
#include <string>
#include <vector>

#include "mpi_runtime/mpi/mpi_types.h"
#include "mpi_runtime/mpi/reduce_kernels.h"
#include "mpi_runtime/mpi/ring.h"
#include "mpi_runtime/mpi_check.h"

namespace baton::mpi {
namespace {

// Reduce to local rank 0, all-reduce among the node leaders, broadcast
// back in the node: one inter-node message per node instead of per rank.
Status Hierarchical(const CallContext& x, char* work, size_t count, DType w, ReduceOp op) {
  const Comms& c = x.comms;
  int local_rank = 0;
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_rank(c.node, &local_rank)));
  const int n = static_cast<int>(count);
  const bool root = local_rank == 0;
  BATON_RETURN_IF_ERROR(Issue(
      x.deadline,
      [&] {
        return BATON_MPI_CHECK(
            MPI_Reduce(root ? MPI_IN_PLACE : work, root ? work : nullptr, n, MpiType(w), MpiOp(op), 0, c.node));
      },
      [&](MPI_Request* r) {
        return BATON_MPI_CHECK(MPI_Ireduce(root ? MPI_IN_PLACE : work, root ? work : nullptr, n, MpiType(w),
                                           MpiOp(op), 0, c.node, r));
      }));
  if (c.leaders != MPI_COMM_NULL)
    BATON_RETURN_IF_ERROR(Issue(
        x.deadline,
        [&] { return BATON_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, work, n, MpiType(w), MpiOp(op), c.leaders)); },
        [&](MPI_Request* r) {
          return BATON_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, work, n, MpiType(w), MpiOp(op), c.leaders, r));
        }));
  return Issue(
      x.deadline, [&] { return BATON_MPI_CHECK(MPI_Bcast(work, n, MpiType(w), 0, c.node)); },
      [&](MPI_Request* r) { return BATON_MPI_CHECK(MPI_Ibcast(work, n, MpiType(w), 0, c.node, r)); });
}

}  // namespace

Status AllReduce(const CallContext& x, const void* send, void* recv, size_t count, DType t, ReduceOp op,
                 Algorithm algo) {
  const Comms& c = x.comms;
  BATON_RETURN_IF_ERROR(CheckOp("all_reduce", t, op));
  BATON_RETURN_IF_ERROR(CheckCount("all_reduce", count, DTypeSize(t)));
  if (count == 0) return Status::OK();
  const DType w = WorkType(t);
  std::vector<float> widened;
  char* work = static_cast<char*>(recv);
  if (IsHalf(t)) {
    widened.resize(count);
    Widen(t, send, widened.data(), count);
    work = reinterpret_cast<char*>(widened.data());
  } else if (send != recv) {
    std::memcpy(recv, send, count * DTypeSize(t));
  }
  Status s;
  switch (algo) {
    case Algorithm::kRing: {
      std::vector<size_t> start, len;
      Segments(count, c.size, &start, &len);
      Ring ring(c.world, c.rank, c.size, w, op, x.ring_chunk_bytes, x.deadline);
      s = ring.ReduceScatter(work, start, len);
      if (s.ok()) s = ring.AllGather(work, start, len);
      break;
    }
    case Algorithm::kHierarchical:
      s = Hierarchical(x, work, count, w, op);
      break;
    default: {
      const int n = static_cast<int>(count);
      s = Issue(
          x.deadline,
          [&] { return BATON_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, work, n, MpiType(w), MpiOp(op), c.world)); },
          [&](MPI_Request* r) {
            return BATON_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, work, n, MpiType(w), MpiOp(op), c.world, r));
          });
    }
  }
  if (s.code() == Code::kTimeout) Abandon(&widened);
  if (!s.ok()) return s.Annotate("all_reduce of " + std::to_string(count) + " " + std::string(DTypeName(t)));
  if (op == ReduceOp::kAvg) Scale(w, work, count, c.size);
  if (IsHalf(t)) Narrow(t, widened.data(), recv, count);
  return Status::OK();
}

Status AllGather(const CallContext& x, const void* send, void* recv, size_t count, DType t, Algorithm algo) {
  const Comms& c = x.comms;
  const size_t bytes = count * DTypeSize(t);
  BATON_RETURN_IF_ERROR(CheckCount("all_gather", bytes * static_cast<size_t>(c.size), 1));
  if (count == 0) return Status::OK();
  char* out = static_cast<char*>(recv);
  if (algo == Algorithm::kRing) {
    std::memmove(out + bytes * static_cast<size_t>(c.rank), send, bytes);
    std::vector<size_t> start(static_cast<size_t>(c.size)), len(static_cast<size_t>(c.size), bytes);
    for (int i = 0; i < c.size; ++i) start[static_cast<size_t>(i)] = bytes * static_cast<size_t>(i);
    return Ring(c.world, c.rank, c.size, DType::kU8, ReduceOp::kSum, x.ring_chunk_bytes, x.deadline)
        .AllGather(out, start, len);
  }
  const int n = static_cast<int>(bytes);
  return Issue(
      x.deadline, [&] { return BATON_MPI_CHECK(MPI_Allgather(send, n, MPI_BYTE, recv, n, MPI_BYTE, c.world)); },
      [&](MPI_Request* r) {
        return BATON_MPI_CHECK(MPI_Iallgather(send, n, MPI_BYTE, recv, n, MPI_BYTE, c.world, r));
      });
}

Status ReduceScatter(const CallContext& x, const void* send, void* recv, size_t count, DType t, ReduceOp op,
                     Algorithm algo) {
  const Comms& c = x.comms;
  BATON_RETURN_IF_ERROR(CheckOp("reduce_scatter", t, op));
  const size_t total = count * static_cast<size_t>(c.size);
  BATON_RETURN_IF_ERROR(CheckCount("reduce_scatter", total, DTypeSize(t)));
  if (count == 0) return Status::OK();
  const DType w = WorkType(t);
  const size_t wsize = DTypeSize(w);
  // The ring reduces in place, so it works on a copy of the whole input.
  std::vector<char> work(total * wsize);
  if (IsHalf(t))
    Widen(t, send, reinterpret_cast<float*>(work.data()), total);
  else
    std::memcpy(work.data(), send, total * wsize);
  char* mine = work.data() + count * wsize * static_cast<size_t>(c.rank);
  Status s;
  std::vector<char> out;
  if (algo == Algorithm::kRing) {
    std::vector<size_t> start(static_cast<size_t>(c.size)), len(static_cast<size_t>(c.size), count);
    for (int i = 0; i < c.size; ++i) start[static_cast<size_t>(i)] = count * static_cast<size_t>(i);
    s = Ring(c.world, c.rank, c.size, w, op, x.ring_chunk_bytes, x.deadline).ReduceScatter(work.data(), start, len);
  } else {
    out.resize(count * wsize);
    const int n = static_cast<int>(count);
    s = Issue(
        x.deadline,
        [&] {
          return BATON_MPI_CHECK(
              MPI_Reduce_scatter_block(work.data(), out.data(), n, MpiType(w), MpiOp(op), c.world));
        },
        [&](MPI_Request* r) {
          return BATON_MPI_CHECK(
              MPI_Ireduce_scatter_block(work.data(), out.data(), n, MpiType(w), MpiOp(op), c.world, r));
        });
    if (s.ok()) std::memcpy(mine, out.data(), out.size());
  }
  if (s.code() == Code::kTimeout) {
    Abandon(&work);
    Abandon(&out);
  }
  if (!s.ok()) return s.Annotate("reduce_scatter of " + std::to_string(count) + " per rank");
  if (op == ReduceOp::kAvg) Scale(w, mine, count, c.size);
  if (IsHalf(t))
    Narrow(t, reinterpret_cast<const float*>(mine), recv, count);
  else
    std::memcpy(recv, mine, count * wsize);
  return Status::OK();
}

Status Broadcast(const CallContext& x, void* buffer, size_t count, DType t, int root) {
  const Comms& c = x.comms;
  if (root < 0 || root >= c.size)
    return Status::InvalidArgument(kComponent, "broadcast: root " + std::to_string(root) + " is not a rank of 0.." +
                                                   std::to_string(c.size - 1));
  BATON_RETURN_IF_ERROR(CheckCount("broadcast", count * DTypeSize(t), 1));
  if (count == 0) return Status::OK();
  const int n = static_cast<int>(count * DTypeSize(t));
  return Issue(
      x.deadline, [&] { return BATON_MPI_CHECK(MPI_Bcast(buffer, n, MPI_BYTE, root, c.world)); },
      [&](MPI_Request* r) { return BATON_MPI_CHECK(MPI_Ibcast(buffer, n, MPI_BYTE, root, c.world, r)); });
}

Status AllToAll(const CallContext& x, const void* send, void* recv, size_t count, DType t) {
  const Comms& c = x.comms;
  const size_t bytes = count * DTypeSize(t);
  BATON_RETURN_IF_ERROR(CheckCount("all_to_all", bytes * static_cast<size_t>(c.size), 1));
  if (count == 0) return Status::OK();
  const int n = static_cast<int>(bytes);
  return Issue(
      x.deadline, [&] { return BATON_MPI_CHECK(MPI_Alltoall(send, n, MPI_BYTE, recv, n, MPI_BYTE, c.world)); },
      [&](MPI_Request* r) { return BATON_MPI_CHECK(MPI_Ialltoall(send, n, MPI_BYTE, recv, n, MPI_BYTE, c.world, r)); });
}

Status Barrier(const CallContext& x) {
  return Issue(
      x.deadline, [&] { return BATON_MPI_CHECK(MPI_Barrier(x.comms.world)); },
      [&](MPI_Request* r) { return BATON_MPI_CHECK(MPI_Ibarrier(x.comms.world, r)); });
}

}  // namespace baton::mpi
