#include "mpi_runtime/mpi/collectives.h"

#include <algorithm>
#include <climits>
#include <cstdint>
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
  BATON_RETURN_IF_ERROR(CheckSize("all_reduce", count, DTypeSize(t)));
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
    default:
      // MPI counts are int: past kMaxCallCount elements, one call per
      // slice (element-wise, so the same result).
      for (size_t off = 0; off < count && s.ok(); off += kMaxCallCount) {
        char* slice = work + off * DTypeSize(w);
        const int n = static_cast<int>(std::min(kMaxCallCount, count - off));
        if (algo == Algorithm::kHierarchical) {
          s = Hierarchical(x, slice, static_cast<size_t>(n), w, op);
          continue;
        }
        s = Issue(
            x.deadline,
            [&] { return BATON_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, slice, n, MpiType(w), MpiOp(op), c.world)); },
            [&](MPI_Request* r) {
              return BATON_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, slice, n, MpiType(w), MpiOp(op), c.world, r));
            });
      }
  }
  if (s.code() == Code::kTimeout) Abandon(&widened);
  if (!s.ok()) return s.Annotate("all_reduce of " + std::to_string(count) + " " + std::string(DTypeName(t)));
  if (op == ReduceOp::kAvg) Scale(w, work, count, c.size);
  if (IsHalf(t)) Narrow(t, widened.data(), recv, count);
  return Status::OK();
}

namespace {

// Where each rank's block starts, in elements, and the total; `counts`
// must have one entry per rank.
Status Layout(const char* what, const std::vector<size_t>& counts, int size, std::vector<size_t>* start,
              size_t* total) {
  if (counts.size() != static_cast<size_t>(size))
    return Status::InvalidArgument(kComponent, std::string(what) + ": counts has " + std::to_string(counts.size()) +
                                                   " entries for " + std::to_string(size) + " ranks");
  start->resize(counts.size());
  *total = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    (*start)[r] = *total;
    if (counts[r] > SIZE_MAX / 16 - *total)
      return Status::InvalidArgument(kComponent, std::string(what) + ": counts overflow the buffer size");
    *total += counts[r];
  }
  return Status::OK();
}

std::vector<size_t> Scaled(const std::vector<size_t>& v, size_t by) {
  std::vector<size_t> out(v);
  for (size_t& e : out) e *= by;
  return out;
}

// The ring's all-gather of blocks in bytes (start/len), this rank's block
// first copied into place.
Status RingAllGather(const CallContext& x, const void* send, char* out, const std::vector<size_t>& start,
                     const std::vector<size_t>& len) {
  const Comms& c = x.comms;
  const size_t r = static_cast<size_t>(c.rank);
  if (len[r] > 0) std::memmove(out + start[r], send, len[r]);
  return Ring(c.world, c.rank, c.size, DType::kU8, ReduceOp::kSum, x.ring_chunk_bytes, x.deadline)
      .AllGather(out, start, len);
}

// MPI's int counts and displacements, or false where one does not fit.
bool IntCounts(const std::vector<size_t>& counts, const std::vector<size_t>& start, std::vector<int>* c,
               std::vector<int>* d) {
  for (size_t r = 0; r < counts.size(); ++r) {
    if (counts[r] > static_cast<size_t>(INT_MAX) || start[r] > static_cast<size_t>(INT_MAX)) return false;
    c->push_back(static_cast<int>(counts[r]));
    d->push_back(static_cast<int>(start[r]));
  }
  return true;
}

// The reduce-scatter of every block of `send` (`total` elements of `t`,
// blocks at start/len) into `recv` (this rank's block), through a work copy
// in the work type: the ring reduces in place, MPI_Reduce_scatter(_block)
// into a second buffer. `even`: every block has len[0] elements, where
// MPI's _block form serves.
Status ReduceScatterBlocks(const CallContext& x, const void* send, void* recv, const std::vector<size_t>& start,
                           const std::vector<size_t>& len, size_t total, DType t, ReduceOp op, Algorithm algo,
                           bool even) {
  const Comms& c = x.comms;
  const size_t r = static_cast<size_t>(c.rank);
  const DType w = WorkType(t);
  const size_t wsize = DTypeSize(w);
  std::vector<char> work(total * wsize);
  if (IsHalf(t))
    Widen(t, send, reinterpret_cast<float*>(work.data()), total);
  else
    std::memcpy(work.data(), send, total * wsize);
  char* mine = work.data() + start[r] * wsize;
  std::vector<int> ints, displs;
  Status s;
  std::vector<char> out;
  if (algo == Algorithm::kRing || total > static_cast<size_t>(INT_MAX) || !IntCounts(len, start, &ints, &displs)) {
    s = Ring(c.world, c.rank, c.size, w, op, x.ring_chunk_bytes, x.deadline).ReduceScatter(work.data(), start, len);
  } else {
    out.resize(len[r] * wsize + 1);  // + 1: never a null buffer for an empty block
    s = even ? Issue(
                   x.deadline,
                   [&] {
                     return BATON_MPI_CHECK(
                         MPI_Reduce_scatter_block(work.data(), out.data(), ints[0], MpiType(w), MpiOp(op), c.world));
                   },
                   [&](MPI_Request* q) {
                     return BATON_MPI_CHECK(MPI_Ireduce_scatter_block(work.data(), out.data(), ints[0], MpiType(w),
                                                                      MpiOp(op), c.world, q));
                   })
             : Issue(
                   x.deadline,
                   [&] {
                     return BATON_MPI_CHECK(
                         MPI_Reduce_scatter(work.data(), out.data(), ints.data(), MpiType(w), MpiOp(op), c.world));
                   },
                   [&](MPI_Request* q) {
                     return BATON_MPI_CHECK(MPI_Ireduce_scatter(work.data(), out.data(), ints.data(), MpiType(w),
                                                                MpiOp(op), c.world, q));
                   });
    if (s.ok()) std::memcpy(mine, out.data(), len[r] * wsize);
  }
  if (s.code() == Code::kTimeout) {
    Abandon(&work);
    Abandon(&out);
    Abandon(&ints);
  }
  if (!s.ok()) return s;
  if (op == ReduceOp::kAvg) Scale(w, mine, len[r], c.size);
  if (IsHalf(t))
    Narrow(t, reinterpret_cast<const float*>(mine), recv, len[r]);
  else
    std::memcpy(recv, mine, len[r] * wsize);
  return Status::OK();
}

}  // namespace

Status AllGather(const CallContext& x, const void* send, void* recv, size_t count, DType t, Algorithm algo) {
  const Comms& c = x.comms;
  BATON_RETURN_IF_ERROR(CheckSize("all_gather", count, DTypeSize(t), static_cast<size_t>(c.size)));
  if (count == 0) return Status::OK();
  const size_t bytes = count * DTypeSize(t);
  if (algo == Algorithm::kRing) {
    std::vector<size_t> start(static_cast<size_t>(c.size)), len(static_cast<size_t>(c.size), bytes);
    for (int i = 0; i < c.size; ++i) start[static_cast<size_t>(i)] = bytes * static_cast<size_t>(i);
    return RingAllGather(x, send, static_cast<char*>(recv), start, len);
  }
  const ByteBlock b(bytes);  // past 2 GiB a block is one element of a derived type
  BATON_RETURN_IF_ERROR(b.status());
  return Issue(
      x.deadline,
      [&] { return BATON_MPI_CHECK(MPI_Allgather(send, b.count(), b.type(), recv, b.count(), b.type(), c.world)); },
      [&](MPI_Request* r) {
        return BATON_MPI_CHECK(MPI_Iallgather(send, b.count(), b.type(), recv, b.count(), b.type(), c.world, r));
      });
}

Status AllGatherV(const CallContext& x, const void* send, void* recv, const std::vector<size_t>& counts, DType t,
                  Algorithm algo) {
  const Comms& c = x.comms;
  std::vector<size_t> start;
  size_t total = 0;
  BATON_RETURN_IF_ERROR(Layout("all_gather_v", counts, c.size, &start, &total));
  if (total == 0) return Status::OK();
  const size_t esize = DTypeSize(t), r = static_cast<size_t>(c.rank);
  const std::vector<size_t> start_b = Scaled(start, esize), len_b = Scaled(counts, esize);
  char* out = static_cast<char*>(recv);
  std::vector<int> ints, displs;
  if (algo == Algorithm::kRing || total * esize > static_cast<size_t>(INT_MAX) || !IntCounts(len_b, start_b, &ints, &displs))
    return RingAllGather(x, send, out, start_b, len_b);
  // A send buffer that is already this rank's block of recv is MPI_IN_PLACE.
  const void* from = send == out + start_b[r] ? MPI_IN_PLACE : send;
  Status s = Issue(
      x.deadline,
      [&] {
        return BATON_MPI_CHECK(
            MPI_Allgatherv(from, ints[r], MPI_BYTE, recv, ints.data(), displs.data(), MPI_BYTE, c.world));
      },
      [&](MPI_Request* q) {
        return BATON_MPI_CHECK(
            MPI_Iallgatherv(from, ints[r], MPI_BYTE, recv, ints.data(), displs.data(), MPI_BYTE, c.world, q));
      });
  if (s.code() == Code::kTimeout) {
    Abandon(&ints);  // MPI may still read the counts of a collective in flight
    Abandon(&displs);
  }
  return s;
}

Status ReduceScatter(const CallContext& x, const void* send, void* recv, size_t count, DType t, ReduceOp op,
                     Algorithm algo) {
  const Comms& c = x.comms;
  BATON_RETURN_IF_ERROR(CheckOp("reduce_scatter", t, op));
  BATON_RETURN_IF_ERROR(CheckSize("reduce_scatter", count, DTypeSize(t), static_cast<size_t>(c.size)));
  const size_t total = count * static_cast<size_t>(c.size);
  if (count == 0) return Status::OK();
  std::vector<size_t> start(static_cast<size_t>(c.size)), len(static_cast<size_t>(c.size), count);
  for (int i = 0; i < c.size; ++i) start[static_cast<size_t>(i)] = count * static_cast<size_t>(i);
  Status s = ReduceScatterBlocks(x, send, recv, start, len, total, t, op, algo, /*even=*/true);
  return s.ok() ? s : s.Annotate("reduce_scatter of " + std::to_string(count) + " per rank");
}

Status ReduceScatterV(const CallContext& x, const void* send, void* recv, const std::vector<size_t>& counts, DType t,
                      ReduceOp op, Algorithm algo) {
  const Comms& c = x.comms;
  BATON_RETURN_IF_ERROR(CheckOp("reduce_scatter_v", t, op));
  std::vector<size_t> start;
  size_t total = 0;
  BATON_RETURN_IF_ERROR(Layout("reduce_scatter_v", counts, c.size, &start, &total));
  if (total == 0) return Status::OK();
  Status s = ReduceScatterBlocks(x, send, recv, start, counts, total, t, op, algo, /*even=*/false);
  return s.ok() ? s : s.Annotate("reduce_scatter_v of " + std::to_string(total) + " in all");
}

Status Broadcast(const CallContext& x, void* buffer, size_t count, DType t, int root) {
  const Comms& c = x.comms;
  if (root < 0 || root >= c.size)
    return Status::InvalidArgument(kComponent, "broadcast: root " + std::to_string(root) + " is not a rank of 0.." +
                                                   std::to_string(c.size - 1));
  BATON_RETURN_IF_ERROR(CheckSize("broadcast", count, DTypeSize(t)));
  if (count == 0) return Status::OK();
  const ByteBlock b(count * DTypeSize(t));
  BATON_RETURN_IF_ERROR(b.status());
  return Issue(
      x.deadline, [&] { return BATON_MPI_CHECK(MPI_Bcast(buffer, b.count(), b.type(), root, c.world)); },
      [&](MPI_Request* r) { return BATON_MPI_CHECK(MPI_Ibcast(buffer, b.count(), b.type(), root, c.world, r)); });
}

Status AllToAll(const CallContext& x, const void* send, void* recv, size_t count, DType t) {
  const Comms& c = x.comms;
  BATON_RETURN_IF_ERROR(CheckSize("all_to_all", count, DTypeSize(t), static_cast<size_t>(c.size)));
  if (count == 0) return Status::OK();
  const ByteBlock b(count * DTypeSize(t));
  BATON_RETURN_IF_ERROR(b.status());
  return Issue(
      x.deadline,
      [&] { return BATON_MPI_CHECK(MPI_Alltoall(send, b.count(), b.type(), recv, b.count(), b.type(), c.world)); },
      [&](MPI_Request* r) {
        return BATON_MPI_CHECK(MPI_Ialltoall(send, b.count(), b.type(), recv, b.count(), b.type(), c.world, r));
      });
}

Status Barrier(const CallContext& x) {
  return Issue(
      x.deadline, [&] { return BATON_MPI_CHECK(MPI_Barrier(x.comms.world)); },
      [&](MPI_Request* r) { return BATON_MPI_CHECK(MPI_Ibarrier(x.comms.world, r)); });
}

}  // namespace baton::mpi
