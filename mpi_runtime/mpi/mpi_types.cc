#include "mpi_runtime/mpi/mpi_types.h"

#include <climits>
#include <cstdint>

#include "mpi_runtime/mpi_check.h"

namespace baton::mpi {

MPI_Datatype MpiType(DType work) {
  switch (work) {
    case DType::kF32: case DType::kF16: case DType::kBF16: return MPI_FLOAT;  // f16/bf16 widened to f32
    case DType::kF64: return MPI_DOUBLE;
    case DType::kI8: return MPI_INT8_T;
    case DType::kI16: return MPI_INT16_T;
    case DType::kI32: return MPI_INT32_T;
    case DType::kI64: return MPI_INT64_T;
    case DType::kU16: return MPI_UINT16_T;
    case DType::kU32: return MPI_UINT32_T;
    case DType::kU64: return MPI_UINT64_T;
    // bool: 0 or 1, reduced by max (or) and min (and), which MPI does not
    // define on MPI_C_BOOL; the 8-bit floats are never reduced
    // (CheckReducible), so they reach MPI as bytes only.
    case DType::kU8: case DType::kBool: case DType::kF8E4M3: case DType::kF8E5M2: return MPI_UINT8_T;
  }
  return MPI_BYTE;
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
  Status s = CheckReducible(t, op);
  return s.ok() ? s : Status::InvalidArgument(kComponent, std::string(what) + ": " + s.message());
}

Status CheckSize(const char* what, size_t count, size_t esize, size_t blocks) {
  const size_t unit = esize * blocks;
  if (blocks != 0 && esize != 0 && (unit / blocks != esize || count > SIZE_MAX / unit))
    return Status::InvalidArgument(kComponent, std::string(what) + ": count " + std::to_string(count) +
                                                   " overflows the buffer size");
  return Status::OK();
}

ByteBlock::ByteBlock(size_t bytes) {
  if (bytes <= static_cast<size_t>(INT_MAX)) {
    count_ = static_cast<int>(bytes);
    return;
  }
  constexpr size_t kUnit = size_t{1} << 20;
  const size_t units = bytes / kUnit, rest = bytes % kUnit;
  MPI_Datatype unit = MPI_DATATYPE_NULL, whole = MPI_DATATYPE_NULL;
  status_ = BATON_MPI_CHECK(MPI_Type_contiguous(static_cast<int>(kUnit), MPI_BYTE, &unit));
  if (status_.ok()) {
    int lengths[2] = {static_cast<int>(units), static_cast<int>(rest)};
    MPI_Aint displacements[2] = {0, static_cast<MPI_Aint>(units * kUnit)};
    MPI_Datatype types[2] = {unit, MPI_BYTE};
    status_ = BATON_MPI_CHECK(MPI_Type_create_struct(rest > 0 ? 2 : 1, lengths, displacements, types, &whole));
  }
  if (status_.ok()) status_ = BATON_MPI_CHECK(MPI_Type_commit(&whole));
  // Not freed after an MPI failure (mpi_check.h): leaked.
  if (unit != MPI_DATATYPE_NULL && !Failed()) MPI_Type_free(&unit);  // `whole` keeps what it needs
  if (!status_.ok()) {
    if (whole != MPI_DATATYPE_NULL && !Failed()) MPI_Type_free(&whole);
    status_ = status_.Annotate("a datatype for a block of " + std::to_string(bytes) + " bytes");
    return;
  }
  type_ = whole;
  derived_ = true;
  count_ = 1;
}

ByteBlock::~ByteBlock() {
  if (derived_ && !Failed()) MPI_Type_free(&type_);
}

std::string Bytes(size_t count, DType t) { return std::to_string(count * DTypeSize(t)) + " bytes"; }

}  // namespace baton::mpi
