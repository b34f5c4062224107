// The ring algorithm of the mpi backend, over point-to-point messages, in
// place on a buffer of elements of a work type: reduce-scatter leaves the
// fully reduced segment r on rank r, all-gather then passes every segment
// around. Segments may differ in length (an all-reduce splits its count
// evenly, the uneven all-gather and reduce-scatter take the caller's
// counts). Each segment moves in chunks whose receives are all posted
// first and reduced as they arrive, so the reduction of one chunk overlaps
// the transfer of the next. Every wait is under the caller's Deadline.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <vector>

#include "baton/dtype.h"
#include "baton/status.h"
#include "mpi_runtime/deadline.h"

namespace baton::mpi {

// Segment i of `count` elements split over `parts`: the first count % parts
// segments are one element longer.
void Segments(size_t count, int parts, std::vector<size_t>* start, std::vector<size_t>* len);

class Ring {
 public:
  // `t` is a work type (what MPI moves and Reduce adds); `chunk_bytes` the
  // largest message.
  Ring(MPI_Comm comm, int rank, int size, DType t, ReduceOp op, size_t chunk_bytes, const Deadline& deadline);

  // Segment s of `work` is elements [start[s], start[s] + len[s]).
  Status ReduceScatter(char* work, const std::vector<size_t>& start, const std::vector<size_t>& len);
  Status AllGather(char* work, const std::vector<size_t>& start, const std::vector<size_t>& len);

 private:
  int Mod(int x) const { return ((x % size_) + size_) % size_; }
  int Left() const { return Mod(rank_ - 1); }
  int Right() const { return Mod(rank_ + 1); }
  Status Post(char* data, size_t n, int peer, bool is_send, std::vector<MPI_Request>* reqs);

  MPI_Comm comm_;
  int rank_, size_;
  DType t_;
  ReduceOp op_;
  size_t esize_, chunk_;
  const Deadline& deadline_;
};

}  // namespace baton::mpi
