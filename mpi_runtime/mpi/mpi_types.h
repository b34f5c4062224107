// How the mpi backend hands baton's types to MPI: the MPI datatype and op
// of a dtype (f16/bf16 travel as f32, their work type), the checks every
// collective makes on its arguments, and what happens to a buffer that a
// collective abandoned at its deadline still uses.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <string>
#include <vector>

#include "baton/dtype.h"
#include "baton/status.h"

namespace baton::mpi {

inline constexpr const char* kComponent = "runtime";

// The MPI type of a work type (WorkType(t) in reduce_kernels.h).
MPI_Datatype MpiType(DType work);
// MPI's op for a reduction; kAvg reduces as MPI_SUM and is divided after.
MPI_Op MpiOp(ReduceOp op);

bool IsHalf(DType t);

// avg is for floating types only: InvalidArgument naming `what` and the type.
Status CheckOp(const char* what, DType t, ReduceOp op);

// MPI counts are int: larger messages are refused by name, not truncated.
Status CheckCount(const char* what, size_t count, size_t esize);

// A collective that passed its deadline is still in flight inside MPI and
// may yet read or write its buffers: a temporary buffer it uses is handed
// over to it (leaked) instead of freed.
template <typename T>
void Abandon(std::vector<T>* v) {
  new std::vector<T>(std::move(*v));  // the heap block moves with it
}

// "1048576 bytes": the size of `count` elements of `t`, for messages.
std::string Bytes(size_t count, DType t);

}  // namespace baton::mpi
