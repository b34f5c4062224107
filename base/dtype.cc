#include "baton/dtype.h"

#include <cstring>
#include <string>

namespace baton {

size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kF32: case DType::kI32: return 4;
    case DType::kF64: case DType::kI64: return 8;
    case DType::kBF16: case DType::kF16: return 2;
    case DType::kU8: return 1;
  }
  return 0;
}

std::string_view DTypeName(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kF64: return "f64";
    case DType::kBF16: return "bf16";
    case DType::kF16: return "f16";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
    case DType::kU8: return "u8";
  }
  return "?";
}

std::string_view ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kAvg: return "avg";
  }
  return "?";
}

bool IsFloating(DType t) {
  return t == DType::kF32 || t == DType::kF64 || t == DType::kBF16 || t == DType::kF16;
}

Status ParseDType(std::string_view text, DType* t) {
  for (DType d : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16, DType::kI32, DType::kI64, DType::kU8}) {
    if (text == DTypeName(d)) {
      *t = d;
      return Status::OK();
    }
  }
  return Status::InvalidArgument("runtime", "dtype '" + std::string(text) +
                                                "' is not one of f32, f64, bf16, f16, i32, i64, u8");
}

Status ParseReduceOp(std::string_view text, ReduceOp* op) {
  for (ReduceOp o : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kAvg}) {
    if (text == ReduceOpName(o)) {
      *op = o;
      return Status::OK();
    }
  }
  return Status::InvalidArgument("runtime", "op '" + std::string(text) + "' is not one of sum, max, min, avg");
}

float HalfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff, x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400) == 0);
      x = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ff) << 13);
    }
  } else if (exp == 0x1f) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
}

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const uint32_t sign = (x >> 16) & 0x8000;
  const uint32_t exp = (x >> 23) & 0xff;
  uint32_t mant = x & 0x7fffff;
  if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00 | (mant ? 0x200 : 0));  // inf, nan
  const int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00);  // overflow: inf
  if (e <= 0) {                                                  // subnormal or zero
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000;
    const int shift = 14 - e;
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half & 1))) ++half;  // round to nearest even
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;  // a carry rounds into the exponent
  return static_cast<uint16_t>(half);
}

float BFloat16ToFloat(uint16_t b) {
  uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
}

uint16_t FloatToBFloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet nan
  x += 0x7fff + ((x >> 16) & 1);  // round to nearest even
  return static_cast<uint16_t>(x >> 16);
}

void StoreValue(DType t, double v, void* out, size_t i) {
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

double LoadValue(DType t, const void* in, size_t i) {
  switch (t) {
    case DType::kF32: return static_cast<const float*>(in)[i];
    case DType::kF64: return static_cast<const double*>(in)[i];
    case DType::kF16: return HalfToFloat(static_cast<const uint16_t*>(in)[i]);
    case DType::kBF16: return BFloat16ToFloat(static_cast<const uint16_t*>(in)[i]);
    case DType::kI32: return static_cast<const int32_t*>(in)[i];
    case DType::kI64: return static_cast<double>(static_cast<const int64_t*>(in)[i]);
    case DType::kU8: return static_cast<const uint8_t*>(in)[i];
  }
  return 0;
}

}  // namespace baton
