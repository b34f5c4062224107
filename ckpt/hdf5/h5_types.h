// baton's element types as HDF5 types, the same in memory and in the file
// so that HDF5 converts nothing (and collective MPI-IO stays collective).
//
//   f32 f64 i32 i64 u8: H5T_IEEE_F32LE, H5T_IEEE_F64LE, H5T_STD_I32LE,
//                       H5T_STD_I64LE, H5T_STD_U8LE
//   f16:  IEEE 754 binary16: sign bit 15, exponent bits 10-14 (bias 15),
//         mantissa bits 0-9, implied leading 1. h5py and numpy read it as
//         float16.
//   bf16: bfloat16, a custom float: sign bit 15, exponent bits 7-14
//         (bias 127), mantissa bits 0-6, implied leading 1 (the upper half
//         of an IEEE f32). h5dump prints it as a 16-bit float; h5py reads it
//         as a float type it converts to f32 or f64 on request.
// Both are built from a copy of H5T_IEEE_F32LE (H5Tset_fields, H5Tset_size,
// H5Tset_ebias); the dataset's "dtype" attribute names the baton type.
//   i8 i16 u16 u32 u64: H5T_STD_I8LE, H5T_STD_I16LE, H5T_STD_U16LE,
//                       H5T_STD_U32LE, H5T_STD_U64LE
//   bool: h5py's convention, an enum of H5T_STD_I8LE with FALSE = 0 and
//         TRUE = 1: h5py reads it as numpy bool_, h5dump as the names.
//   f8e4m3, f8e5m2: the bits as H5T_STD_U8LE (numpy has no 8-bit float, and
//         HDF5 1.10 cannot describe e4m3fn, which has no infinities): h5py
//         reads uint8, which .view(ml_dtypes.float8_e4m3fn) or
//         torch.from_numpy(a).view(torch.float8_e4m3fn) turn into floats;
//         the "dtype" attribute ("f8e4m3", "f8e5m2") says which. Restore
//         checks the stored type is u8; the attribute is covered by the
//         shard's metadata checksum and the manifest names the dtype.
//
// Threading: HDF5 calls, see h5_check.h.
#pragma once

#include <hdf5.h>

#include "baton/dtype.h"
#include "baton/status.h"
#include "ckpt/hdf5/h5_check.h"

namespace baton::ckpt::h5 {

// A new type id for t (closed by the Hid).
Status MakeH5Type(DType t, Hid* out);

// Whether an existing dataset's type is exactly t's (size, byte order,
// fields, bias): restore refuses anything else rather than convert.
Status TypeMatches(hid_t type, DType t, bool* matches);

}  // namespace baton::ckpt::h5
