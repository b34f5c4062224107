#include "ckpt/hdf5/attributes.h"

#include "ckpt/hdf5/h5_check.h"

namespace baton::ckpt::h5 {

Status WriteAttribute(hid_t obj, const char* name, hid_t type, int ndims, const hsize_t* dims, const void* value) {
  Hid space;
  if (ndims == 0) {
    BATON_H5_OPEN(space, H5Screate(H5S_SCALAR), H5Sclose);
  } else {
    BATON_H5_OPEN(space, H5Screate_simple(ndims, dims, nullptr), H5Sclose);
  }
  Hid attr;
  BATON_H5_OPEN(attr, H5Acreate2(obj, name, type, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (ndims == 0 || dims[0] > 0) BATON_RETURN_IF_ERROR(BATON_H5_CHECK(H5Awrite(attr.get(), type, value)));
  return BATON_H5_CHECK(attr.Close());
}

Status WriteStringAttribute(hid_t obj, const char* name, const std::string& value) {
  Hid type;
  BATON_H5_OPEN(type, H5Tcopy(H5T_C_S1), H5Tclose);
  BATON_RETURN_IF_ERROR(BATON_H5_CHECK(H5Tset_size(type.get(), value.size())));
  BATON_RETURN_IF_ERROR(BATON_H5_CHECK(H5Tset_strpad(type.get(), H5T_STR_NULLTERM)));
  return WriteAttribute(obj, name, type.get(), 0, nullptr, value.c_str());
}

}  // namespace baton::ckpt::h5
