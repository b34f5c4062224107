#include "mpi_runtime/mpi/reduce_kernels.h"

#include <algorithm>
#include <cstdint>

namespace baton::mpi {
namespace {

template <typename T>
void ReduceT(ReduceOp op, const T* in, T* inout, size_t n) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      for (size_t i = 0; i < n; ++i) inout[i] = static_cast<T>(inout[i] + in[i]);
      break;
    case ReduceOp::kMax:
      for (size_t i = 0; i < n; ++i) inout[i] = std::max(inout[i], in[i]);
      break;
    case ReduceOp::kMin:
      for (size_t i = 0; i < n; ++i) inout[i] = std::min(inout[i], in[i]);
      break;
  }
}

}  // namespace

DType WorkType(DType t) { return t == DType::kF16 || t == DType::kBF16 ? DType::kF32 : t; }

void Reduce(DType t, ReduceOp op, const void* in, void* inout, size_t count) {
  switch (t) {
    case DType::kF32: case DType::kF16: case DType::kBF16:
      ReduceT(op, static_cast<const float*>(in), static_cast<float*>(inout), count);
      break;
    case DType::kF64: ReduceT(op, static_cast<const double*>(in), static_cast<double*>(inout), count); break;
    case DType::kI32: ReduceT(op, static_cast<const int32_t*>(in), static_cast<int32_t*>(inout), count); break;
    case DType::kI64: ReduceT(op, static_cast<const int64_t*>(in), static_cast<int64_t*>(inout), count); break;
    case DType::kU8: case DType::kBool:  // bool: max and min only (CheckReducible), or and and of 0/1
      ReduceT(op, static_cast<const uint8_t*>(in), static_cast<uint8_t*>(inout), count);
      break;
    case DType::kI8: ReduceT(op, static_cast<const int8_t*>(in), static_cast<int8_t*>(inout), count); break;
    case DType::kI16: ReduceT(op, static_cast<const int16_t*>(in), static_cast<int16_t*>(inout), count); break;
    case DType::kU16: ReduceT(op, static_cast<const uint16_t*>(in), static_cast<uint16_t*>(inout), count); break;
    case DType::kU32: ReduceT(op, static_cast<const uint32_t*>(in), static_cast<uint32_t*>(inout), count); break;
    case DType::kU64: ReduceT(op, static_cast<const uint64_t*>(in), static_cast<uint64_t*>(inout), count); break;
    case DType::kF8E4M3: case DType::kF8E5M2: break;  // never reduced (CheckReducible refuses every op)
  }
}

void Scale(DType t, void* data, size_t count, double n) {
  if (t == DType::kF64) {
    auto* d = static_cast<double*>(data);
    for (size_t i = 0; i < count; ++i) d[i] /= n;
  } else {
    auto* f = static_cast<float*>(data);
    const float fn = static_cast<float>(n);
    for (size_t i = 0; i < count; ++i) f[i] /= fn;
  }
}

void Widen(DType t, const void* src, float* dst, size_t count) {
  const auto* s = static_cast<const uint16_t*>(src);
  if (t == DType::kF16)
    for (size_t i = 0; i < count; ++i) dst[i] = HalfToFloat(s[i]);
  else
    for (size_t i = 0; i < count; ++i) dst[i] = BFloat16ToFloat(s[i]);
}

void Narrow(DType t, const float* src, void* dst, size_t count) {
  auto* d = static_cast<uint16_t*>(dst);
  if (t == DType::kF16)
    for (size_t i = 0; i < count; ++i) d[i] = FloatToHalf(src[i]);
  else
    for (size_t i = 0; i < count; ++i) d[i] = FloatToBFloat16(src[i]);
}

}  // namespace baton::mpi
