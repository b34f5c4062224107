// Element types and reduction operations of baton's collectives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "baton/status.h"

namespace baton {

enum class DType { kF32, kF64, kBF16, kF16, kI32, kI64, kU8 };
enum class ReduceOp { kSum, kMax, kMin, kAvg };  // kAvg: floating types only

size_t DTypeSize(DType t);
std::string_view DTypeName(DType t);   // "f32", "bf16", ...
std::string_view ReduceOpName(ReduceOp op);
bool IsFloating(DType t);
Status ParseDType(std::string_view text, DType* t);
Status ParseReduceOp(std::string_view text, ReduceOp* op);

// f16 and bf16 are reduced in f32 and rounded once (round to nearest even);
// these convert one element.
float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);
float BFloat16ToFloat(uint16_t b);
uint16_t FloatToBFloat16(float f);

// Writes v as element i of a buffer of type t (f16/bf16 rounded once from
// f32; integers truncated). For filling inputs and references of known,
// small integer values, as the benchmark and the tests do.
void StoreValue(DType t, double v, void* out, size_t i);
// Element i of a buffer of type t, as a double (i64 beyond 2^53 rounded).
double LoadValue(DType t, const void* in, size_t i);

}  // namespace baton
