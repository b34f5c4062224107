// Element types and reduction operations of baton's collectives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "baton/status.h"

namespace baton {

// bool: one byte, 0 or 1 (C++'s bool, numpy's bool_, torch.bool).
// f8e4m3: 8-bit float, 4 exponent bits (bias 7), 3 mantissa bits, no
// infinity, NaN = S.1111.111, largest 448 (OCP "E4M3FN": torch.float8_e4m3fn,
// ml_dtypes.float8_e4m3fn). f8e5m2: 8-bit float, 5 exponent bits (bias 15),
// 2 mantissa bits, IEEE-like infinities and NaNs (the upper byte of an f16:
// torch.float8_e5m2, ml_dtypes.float8_e5m2).
// New types are appended: the values are not stored anywhere (the manifest
// and the HDF5 attribute hold the names), but keep them stable anyway.
enum class DType { kF32, kF64, kBF16, kF16, kI32, kI64, kU8, kBool, kI8, kI16, kU16, kU32, kU64, kF8E4M3, kF8E5M2 };
inline constexpr DType kAllDTypes[] = {DType::kF32,  DType::kF64, DType::kBF16, DType::kF16, DType::kI32,
                                       DType::kI64,  DType::kU8,  DType::kBool, DType::kI8,  DType::kI16,
                                       DType::kU16,  DType::kU32, DType::kU64,  DType::kF8E4M3, DType::kF8E5M2};
inline constexpr size_t kNumDTypes = sizeof kAllDTypes / sizeof kAllDTypes[0];
enum class ReduceOp { kSum, kMax, kMin, kAvg };  // kAvg: floating types only

size_t DTypeSize(DType t);
std::string_view DTypeName(DType t);   // "f32", "bf16", "bool", "f8e4m3", ...
std::string_view ReduceOpName(ReduceOp op);
bool IsFloating(DType t);  // f32 f64 bf16 f16 f8e4m3 f8e5m2
// Every dtype's name, for messages: "f32, f64, ..., f8e5m2".
const std::string& DTypeNames();
Status ParseDType(std::string_view text, DType* t);
// Whether the collectives reduce elements of t with op; InvalidArgument
// naming both otherwise: avg is for floating types; bool takes max (or) and
// min (and), not sum nor avg; the 8-bit floats take none (no arithmetic is
// done in 8 bits here: convert to bf16, f16 or f32 to reduce). Every dtype
// moves (broadcast, all_gather, all_to_all).
Status CheckReducible(DType t, ReduceOp op);
Status ParseReduceOp(std::string_view text, ReduceOp* op);

// f16 and bf16 are reduced in f32 and rounded once (round to nearest even);
// these convert one element.
float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);
float BFloat16ToFloat(uint16_t b);
uint16_t FloatToBFloat16(float f);
// f8e4m3 and f8e5m2 (round to nearest even; past the largest finite value
// f8e4m3 gives NaN and f8e5m2 infinity, as ml_dtypes does).
float Float8E4M3ToFloat(uint8_t b);
uint8_t FloatToFloat8E4M3(float f);
float Float8E5M2ToFloat(uint8_t b);
uint8_t FloatToFloat8E5M2(float f);

// Writes v as element i of a buffer of type t (f16/bf16 rounded once from
// f32, f8 likewise; integers truncated; bool: v != 0). For filling inputs and references of known,
// small integer values, as the benchmark and the tests do.
void StoreValue(DType t, double v, void* out, size_t i);
// Element i of a buffer of type t, as a double (i64 beyond 2^53 rounded).
double LoadValue(DType t, const void* in, size_t i);

}  // namespace baton
