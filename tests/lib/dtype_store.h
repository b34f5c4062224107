// Writes a small integer-valued double as element i of a buffer of a dtype,
// rounded the way the collectives round (f16/bf16 once, from f32).
#pragma once

#include <cstddef>
#include <cstdint>

#include "baton/dtype.h"

namespace baton::testing {

inline void Store(DType t, double v, void* out, size_t i) {
  switch (t) {
    case DType::kF32: static_cast<float*>(out)[i] = static_cast<float>(v); break;
    case DType::kF64: static_cast<double*>(out)[i] = v; break;
    case DType::kF16: static_cast<uint16_t*>(out)[i] = FloatToHalf(static_cast<float>(v)); break;
    case DType::kBF16: static_cast<uint16_t*>(out)[i] = FloatToBFloat16(static_cast<float>(v)); break;
    case DType::kI32: static_cast<int32_t*>(out)[i] = static_cast<int32_t>(v); break;
    case DType::kI64: static_cast<int64_t*>(out)[i] = static_cast<int64_t>(v); break;
    case DType::kU8: static_cast<uint8_t*>(out)[i] = static_cast<uint8_t>(v); break;
  }
}

}  // namespace baton::testing
