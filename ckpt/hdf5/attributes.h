// Writing HDF5 attributes of a shard: the one implementation both shard
// writers (shard_writer.cc, a group's file over MPI-IO; rank_shard_writer.cc,
// one rank's file with sec2) use, so that their files do not differ in
// anything a reader checks.
#pragma once

#include <hdf5.h>

#include <string>

#include "baton/status.h"

namespace baton::ckpt::h5 {

// An attribute `name` of `type` on `obj`: scalar when ndims is 0, else of
// shape dims (nothing written when dims[0] is 0).
Status WriteAttribute(hid_t obj, const char* name, hid_t type, int ndims, const hsize_t* dims, const void* value);
// A null-terminated fixed-length string attribute.
Status WriteStringAttribute(hid_t obj, const char* name, const std::string& value);

}  // namespace baton::ckpt::h5
