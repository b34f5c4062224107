#include "baton/dtype.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace baton {

size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kF32: case DType::kI32: case DType::kU32: return 4;
    case DType::kF64: case DType::kI64: case DType::kU64: return 8;
    case DType::kBF16: case DType::kF16: case DType::kI16: case DType::kU16: return 2;
    case DType::kU8: case DType::kBool: case DType::kI8: case DType::kF8E4M3: case DType::kF8E5M2: return 1;
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
    case DType::kBool: return "bool";
    case DType::kI8: return "i8";
    case DType::kI16: return "i16";
    case DType::kU16: return "u16";
    case DType::kU32: return "u32";
    case DType::kU64: return "u64";
    case DType::kF8E4M3: return "f8e4m3";
    case DType::kF8E5M2: return "f8e5m2";
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
  return t == DType::kF32 || t == DType::kF64 || t == DType::kBF16 || t == DType::kF16 || t == DType::kF8E4M3 ||
         t == DType::kF8E5M2;
}

const std::string& DTypeNames() {
  static const std::string names = [] {
    std::string s;
    for (DType d : kAllDTypes) s += (s.empty() ? "" : ", ") + std::string(DTypeName(d));
    return s;
  }();
  return names;
}

Status ParseDType(std::string_view text, DType* t) {
  for (DType d : kAllDTypes) {
    if (text == DTypeName(d)) {
      *t = d;
      return Status::OK();
    }
  }
  return Status::InvalidArgument("runtime", "dtype '" + std::string(text) + "' is not one of " + DTypeNames());
}

Status CheckReducible(DType t, ReduceOp op) {
  auto refuse = [&](const std::string& why) {
    return Status::InvalidArgument("runtime", "reduce op " + std::string(ReduceOpName(op)) + " on dtype " +
                                                  std::string(DTypeName(t)) + ": " + why);
  };
  if (t == DType::kF8E4M3 || t == DType::kF8E5M2)
    return refuse("8-bit floats are not reduced (convert to bf16, f16 or f32 to reduce); they move only");
  if (t == DType::kBool && (op == ReduceOp::kSum || op == ReduceOp::kAvg))
    return refuse("bool takes max (or) and min (and) only");
  if (op == ReduceOp::kAvg && !IsFloating(t)) return refuse("avg is for floating types only");
  return Status::OK();
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

namespace {

// An 8-bit float of `mbits` mantissa bits and exponent bias `bias` (the
// exponent takes the other 7 - mbits bits). fn: no infinities, only
// S.1111.111 is NaN (e4m3fn); else IEEE-like (e5m2).
float Float8ToFloat(uint8_t b, int mbits, int bias, bool fn) {
  const int ebits = 7 - mbits;
  const uint32_t emax = (1u << ebits) - 1, mmask = (1u << mbits) - 1;
  const uint32_t exp = (b >> mbits) & emax, mant = b & mmask;
  const float sign = (b & 0x80) ? -1.0f : 1.0f;
  if (fn && exp == emax && mant == mmask) return std::nanf("");
  if (!fn && exp == emax) return mant ? std::nanf("") : sign * INFINITY;
  if (exp == 0) return sign * std::ldexp(static_cast<float>(mant), 1 - bias - mbits);
  return sign * std::ldexp(static_cast<float>(mant | (1u << mbits)), static_cast<int>(exp) - bias - mbits);
}

uint8_t FloatToFloat8(float f, int mbits, int bias, bool fn) {
  const int ebits = 7 - mbits;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  const uint8_t nan = fn ? 0x7f : static_cast<uint8_t>(((1u << ebits) - 1) << mbits | 1u << (mbits - 1));
  const uint8_t inf = fn ? nan : static_cast<uint8_t>(((1u << ebits) - 1) << mbits);
  // The largest finite code: fn's all-ones exponent holds numbers too.
  const uint32_t max_code = fn ? 0x7e : inf - 1u;
  if (std::isnan(f)) return static_cast<uint8_t>(sign | nan);
  const float a = std::fabs(f);
  if (std::isinf(a)) return static_cast<uint8_t>(sign | inf);
  if (a == 0) return sign;
  int e = 0;
  (void)std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  // The value in units of the last mantissa bit at a's exponent (or of
  // the subnormals' spacing), rounded to nearest even (the default mode).
  const int unit_exp = std::max(e - 1, 1 - bias) - mbits;
  const uint32_t q = static_cast<uint32_t>(std::nearbyint(std::ldexp(a, -unit_exp)));
  uint32_t code;
  if (e - 1 < 1 - bias) {
    code = q;  // subnormal (q == 1 << mbits: the smallest normal, encoded alike)
  } else {
    // q in [2^mbits, 2^(mbits+1)]: a carry to 2^(mbits+1) moves the exponent up.
    code = (static_cast<uint32_t>(e - 1 + bias) << mbits) + (q - (1u << mbits));
  }
  if (code > max_code) return static_cast<uint8_t>(sign | inf);
  return static_cast<uint8_t>(sign | code);
}

}  // namespace

float Float8E4M3ToFloat(uint8_t b) { return Float8ToFloat(b, 3, 7, /*fn=*/true); }
uint8_t FloatToFloat8E4M3(float f) { return FloatToFloat8(f, 3, 7, /*fn=*/true); }
float Float8E5M2ToFloat(uint8_t b) { return Float8ToFloat(b, 2, 15, /*fn=*/false); }
uint8_t FloatToFloat8E5M2(float f) { return FloatToFloat8(f, 2, 15, /*fn=*/false); }

void StoreValue(DType t, double v, void* out, size_t i) {
  switch (t) {
    case DType::kF32: static_cast<float*>(out)[i] = static_cast<float>(v); break;
    case DType::kF64: static_cast<double*>(out)[i] = v; break;
    case DType::kF16: static_cast<uint16_t*>(out)[i] = FloatToHalf(static_cast<float>(v)); break;
    case DType::kBF16: static_cast<uint16_t*>(out)[i] = FloatToBFloat16(static_cast<float>(v)); break;
    case DType::kI32: static_cast<int32_t*>(out)[i] = static_cast<int32_t>(v); break;
    case DType::kI64: static_cast<int64_t*>(out)[i] = static_cast<int64_t>(v); break;
    case DType::kU8: static_cast<uint8_t*>(out)[i] = static_cast<uint8_t>(v); break;
    case DType::kBool: static_cast<uint8_t*>(out)[i] = v != 0 ? 1 : 0; break;
    case DType::kI8: static_cast<int8_t*>(out)[i] = static_cast<int8_t>(v); break;
    case DType::kI16: static_cast<int16_t*>(out)[i] = static_cast<int16_t>(v); break;
    case DType::kU16: static_cast<uint16_t*>(out)[i] = static_cast<uint16_t>(v); break;
    case DType::kU32: static_cast<uint32_t*>(out)[i] = static_cast<uint32_t>(v); break;
    case DType::kU64: static_cast<uint64_t*>(out)[i] = static_cast<uint64_t>(v); break;
    case DType::kF8E4M3: static_cast<uint8_t*>(out)[i] = FloatToFloat8E4M3(static_cast<float>(v)); break;
    case DType::kF8E5M2: static_cast<uint8_t*>(out)[i] = FloatToFloat8E5M2(static_cast<float>(v)); break;
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
    case DType::kBool: return static_cast<const uint8_t*>(in)[i] != 0 ? 1 : 0;
    case DType::kI8: return static_cast<const int8_t*>(in)[i];
    case DType::kI16: return static_cast<const int16_t*>(in)[i];
    case DType::kU16: return static_cast<const uint16_t*>(in)[i];
    case DType::kU32: return static_cast<const uint32_t*>(in)[i];
    case DType::kU64: return static_cast<double>(static_cast<const uint64_t*>(in)[i]);
    case DType::kF8E4M3: return Float8E4M3ToFloat(static_cast<const uint8_t*>(in)[i]);
    case DType::kF8E5M2: return Float8E5M2ToFloat(static_cast<const uint8_t*>(in)[i]);
  }
  return 0;
}

}  // namespace baton
