// Element-wise reduction and half-precision widening for the mpi backend.
//
// f16 and bf16 never reach MPI or the kernels as themselves: they are
// widened to f32, reduced in f32, and narrowed once at the end, so a sum
// over P ranks is rounded once, not P-1 times.
#pragma once

#include <cstddef>
#include <vector>

#include "baton/dtype.h"

namespace baton::mpi {

// The type a dtype is reduced in: f32 for f16 and bf16, itself otherwise.
DType WorkType(DType t);

// inout[i] = op(inout[i], in[i]) for `count` elements of `t` (a work type);
// kAvg reduces as kSum (the caller divides once at the end).
void Reduce(DType t, ReduceOp op, const void* in, void* inout, size_t count);

// Divides every element by `n` (floating work types only).
void Scale(DType t, void* data, size_t count, double n);

// f16/bf16 <-> f32.
void Widen(DType t, const void* src, float* dst, size_t count);
void Narrow(DType t, const float* src, void* dst, size_t count);

}  // namespace baton::mpi
