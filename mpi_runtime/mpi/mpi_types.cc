#include "mpi_runtime/mpi/mpi_types.h"

#include <climits>

namespace baton::mpi {

MPI_Datatype MpiType(DType work) {
  switch (work) {
    case DType::kF64: return MPI_DOUBLE;
    case DType::kI32: return MPI_INT32_T;
    case DType::kI64: return MPI_INT64_T;
    case DType::kU8: return MPI_UINT8_T;
    default: return MPI_FLOAT;  // f32, and f16/bf16 widened to f32
  }
}

MPI_Op MpiOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kMax: return MPI_MAX;
    case ReduceOp::kMin: return MPI_MIN;
    default: return MPI_SUM;  // kSum, and kAvg before its division
  }
}

bool IsHalf(DType t) { return t == DType::kF16 || t == DType::kBF16; }

Status CheckOp(const char* what, DType t, ReduceOp op) {
  if (op == ReduceOp::kAvg && !IsFloating(t))
    return Status::InvalidArgument(kComponent, std::string(what) + ": avg is for floating types, not " +
                                                   std::string(DTypeName(t)));
  return Status::OK();
}

Status CheckCount(const char* what, size_t count, size_t esize) {
  if (count > static_cast<size_t>(INT_MAX) || count * esize / esize != count)
    return Status::InvalidArgument(kComponent, std::string(what) + ": count " + std::to_string(count) +
                                                   " exceeds MPI's int count limit");
  return Status::OK();
}

std::string Bytes(size_t count, DType t) { return std::to_string(count * DTypeSize(t)) + " bytes"; }

}  // namespace baton::mpi
