#include "ckpt/hdf5/h5_types.h"

#include <string>

#include "baton/log.h"

namespace baton::ckpt::h5 {
namespace {

// A 16-bit float with the given exponent and mantissa widths, from a copy of
// IEEE f32 (which brings little-endian order and the implied leading 1).
Status MakeFloat16(size_t exponent_bits, size_t mantissa_bits, size_t bias, Hid* out) {
  Hid t;
  BATON_H5_OPEN(t, H5Tcopy(H5T_IEEE_F32LE), H5Tclose);
  // Fields first (they fit the 32-bit precision), then shrink the size: the
  // precision follows down to 16 bits.
  BATON_RETURN_IF_ERROR(BATON_H5_CHECK(
      H5Tset_fields(t.get(), 15, mantissa_bits, exponent_bits, 0, mantissa_bits)));
  BATON_RETURN_IF_ERROR(BATON_H5_CHECK(H5Tset_size(t.get(), 2)));
  BATON_RETURN_IF_ERROR(BATON_H5_CHECK(H5Tset_ebias(t.get(), bias)));
  *out = std::move(t);
  return Status::OK();
}

// h5py's bool: an enum of int8 with FALSE = 0 and TRUE = 1 (h5py reads
// exactly this enum as numpy's bool_).
Status MakeBoolEnum(Hid* out) {
  Hid t;
  BATON_H5_OPEN(t, H5Tenum_create(H5T_STD_I8LE), H5Tclose);
  const int8_t no = 0, yes = 1;
  BATON_RETURN_IF_ERROR(BATON_H5_CHECK(H5Tenum_insert(t.get(), "FALSE", &no)));
  BATON_RETURN_IF_ERROR(BATON_H5_CHECK(H5Tenum_insert(t.get(), "TRUE", &yes)));
  *out = std::move(t);
  return Status::OK();
}

}  // namespace

Status MakeH5Type(DType t, Hid* out) {
  QuietHdf5Errors();
  hid_t base = H5I_INVALID_HID;
  switch (t) {
    case DType::kF16: return MakeFloat16(5, 10, 15, out);
    case DType::kBF16: return MakeFloat16(8, 7, 127, out);
    case DType::kF32: base = H5T_IEEE_F32LE; break;
    case DType::kF64: base = H5T_IEEE_F64LE; break;
    case DType::kI32: base = H5T_STD_I32LE; break;
    case DType::kI64: base = H5T_STD_I64LE; break;
    case DType::kU8: base = H5T_STD_U8LE; break;
    case DType::kI8: base = H5T_STD_I8LE; break;
    case DType::kI16: base = H5T_STD_I16LE; break;
    case DType::kU16: base = H5T_STD_U16LE; break;
    case DType::kU32: base = H5T_STD_U32LE; break;
    case DType::kU64: base = H5T_STD_U64LE; break;
    case DType::kBool: return MakeBoolEnum(out);
    // The bits as u8: numpy has no 8-bit float and HDF5 1.10 cannot describe
    // e4m3fn (no infinities, NaN only at S.1111.111); the "dtype"
    // attribute names the format.
    case DType::kF8E4M3: case DType::kF8E5M2: base = H5T_STD_U8LE; break;
  }
  if (base == H5I_INVALID_HID) {
    return Status::Internal(log::kCkpt, "no HDF5 type for dtype " + std::to_string(static_cast<int>(t)));
  }
  BATON_H5_OPEN(*out, H5Tcopy(base), H5Tclose);
  return Status::OK();
}

Status TypeMatches(hid_t type, DType t, bool* matches) {
  Hid want;
  BATON_RETURN_IF_ERROR(MakeH5Type(t, &want));
  htri_t eq = H5Tequal(type, want.get());
  BATON_RETURN_IF_ERROR(BATON_H5_CHECK(eq));
  *matches = eq > 0;
  return Status::OK();
}

}  // namespace baton::ckpt::h5
