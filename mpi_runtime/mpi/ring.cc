#include "mpi_runtime/mpi/ring.h"

#include <algorithm>
#include <climits>

#include "mpi_runtime/mpi/mpi_types.h"
#include "mpi_runtime/mpi/reduce_kernels.h"
#include "mpi_runtime/mpi_check.h"

namespace baton::mpi {

void Segments(size_t count, int parts, std::vector<size_t>* start, std::vector<size_t>* len) {
  start->resize(static_cast<size_t>(parts));
  len->resize(static_cast<size_t>(parts));
  const size_t base = count / static_cast<size_t>(parts), rem = count % static_cast<size_t>(parts);
  for (size_t i = 0; i < static_cast<size_t>(parts); ++i) {
    (*start)[i] = i * base + std::min(i, rem);
    (*len)[i] = base + (i < rem ? 1 : 0);
  }
}

Ring::Ring(MPI_Comm comm, int rank, int size, DType t, ReduceOp op, size_t chunk_bytes, const Deadline& deadline)
    : comm_(comm), rank_(rank), size_(size), t_(t), op_(op), esize_(DTypeSize(t)),
      // A chunk is one message: at least one element, at most MPI's int count.
      chunk_(std::clamp<size_t>(chunk_bytes / DTypeSize(t), 1, INT_MAX)), deadline_(deadline) {}

Status Ring::ReduceScatter(char* work, const std::vector<size_t>& start, const std::vector<size_t>& len) {
  size_t max_len = 0;
  for (size_t l : len) max_len = std::max(max_len, l);
  std::vector<char> tmp(max_len * esize_);
  for (int s = 0; s < size_ - 1; ++s) {
    const int send = Mod(rank_ - s - 1), recv = Mod(rank_ - s - 2);
    std::vector<MPI_Request> recvs, sends;
    BATON_RETURN_IF_ERROR(Post(tmp.data(), len[recv], Left(), /*is_send=*/false, &recvs));
    BATON_RETURN_IF_ERROR(Post(work + start[send] * esize_, len[send], Right(), true, &sends));
    Status st;
    for (size_t k = 0; k < recvs.size() && st.ok(); ++k) {
      st = deadline_.Wait(&recvs[k], 1);
      if (!st.ok()) break;
      const size_t off = k * chunk_, n = std::min(chunk_, len[recv] - off);
      Reduce(t_, op_, tmp.data() + off * esize_, work + (start[recv] + off) * esize_, n);
    }
    if (st.ok()) st = deadline_.Wait(sends.data(), static_cast<int>(sends.size()));
    if (!st.ok()) {
      if (st.code() == Code::kTimeout) Abandon(&tmp);
      return st;
    }
  }
  return Status::OK();
}

Status Ring::AllGather(char* work, const std::vector<size_t>& start, const std::vector<size_t>& len) {
  for (int s = 0; s < size_ - 1; ++s) {
    const int send = Mod(rank_ - s), recv = Mod(rank_ - s - 1);
    std::vector<MPI_Request> reqs;
    BATON_RETURN_IF_ERROR(Post(work + start[recv] * esize_, len[recv], Left(), false, &reqs));
    BATON_RETURN_IF_ERROR(Post(work + start[send] * esize_, len[send], Right(), true, &reqs));
    BATON_RETURN_IF_ERROR(deadline_.Wait(reqs.data(), static_cast<int>(reqs.size())));
  }
  return Status::OK();
}

// One message per chunk; messages between a pair keep their order in MPI,
// so chunk k of a segment always meets receive k.
Status Ring::Post(char* data, size_t n, int peer, bool is_send, std::vector<MPI_Request>* reqs) {
  for (size_t off = 0; off < n; off += chunk_) {
    const int c = static_cast<int>(std::min(chunk_, n - off));
    MPI_Request r;
    Status s = is_send ? BATON_MPI_CHECK(MPI_Isend(data + off * esize_, c, MpiType(t_), peer, 0, comm_, &r))
                       : BATON_MPI_CHECK(MPI_Irecv(data + off * esize_, c, MpiType(t_), peer, 0, comm_, &r));
    BATON_RETURN_IF_ERROR(s);
    reqs->push_back(r);
  }
  return Status::OK();
}

}  // namespace baton::mpi
