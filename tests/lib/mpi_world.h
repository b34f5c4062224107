// Rank and size of MPI_COMM_WORLD for multi-rank tests.
#pragma once

#include <mpi.h>

namespace baton::testing {

inline int WorldRank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

inline int WorldSize() {
  int s = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

}  // namespace baton::testing
