#include "ckpt/hdf5/shard_dataset.h"

#include <string>

#include "baton/log.h"
#include "ckpt/hdf5/attributes.h"
#include "ckpt/hdf5/h5_types.h"

namespace baton::ckpt::h5 {

Status CreateShardDataset(hid_t file, const ShardArray& a, uint64_t ds_rows, const std::vector<uint64_t>& row_map,
                          Hid* type, Hid* fspace, Hid* ds, uint64_t* offset) {
  const bool scalar = a.global_shape.empty();
  std::vector<hsize_t> dims{ds_rows};
  for (size_t i = 1; i < a.global_shape.size(); ++i) dims.push_back(a.global_shape[i]);
  Hid dcpl;
  BATON_RETURN_IF_ERROR(MakeH5Type(a.dtype, type));
  if (scalar) {
    BATON_H5_OPEN(*fspace, H5Screate(H5S_SCALAR), H5Sclose);
  } else {
    BATON_H5_OPEN(*fspace, H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose);
  }
  BATON_H5_OPEN(dcpl, H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  BATON_RETURN_IF_ERROR(BATON_H5_CHECK(H5Pset_layout(dcpl.get(), H5D_CONTIGUOUS)));
  BATON_RETURN_IF_ERROR(BATON_H5_CHECK(H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY)));
  BATON_RETURN_IF_ERROR(BATON_H5_CHECK(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER)));
  // No access, modification, change and birth times in the object header:
  // the same arrays saved twice give the same shard bytes (and metadata
  // checksum), and the header is written with one message less.
  BATON_RETURN_IF_ERROR(BATON_H5_CHECK(H5Pset_obj_track_times(dcpl.get(), false)));
  BATON_H5_OPEN(*ds,
                H5Dcreate2(file, a.name.c_str(), type->get(), fspace->get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
                H5Dclose);

  BATON_RETURN_IF_ERROR(WriteStringAttribute(ds->get(), "dtype", std::string(DTypeName(a.dtype))));
  hsize_t shape_len = a.global_shape.size();
  BATON_RETURN_IF_ERROR(
      WriteAttribute(ds->get(), "global_shape", H5T_STD_U64LE, 1, &shape_len, a.global_shape.data()));
  hsize_t map_dims[2] = {row_map.size() / 3, 3};
  BATON_RETURN_IF_ERROR(WriteAttribute(ds->get(), "row_map", H5T_STD_U64LE, 2, map_dims, row_map.data()));
  bool consecutive = !row_map.empty();
  for (size_t t = 3; t + 2 < row_map.size(); t += 3) {
    if (row_map[t + 1] != row_map[t - 2] + row_map[t - 1]) consecutive = false;
  }
  if (consecutive) {
    BATON_RETURN_IF_ERROR(WriteAttribute(ds->get(), "offset", H5T_STD_U64LE, 0, nullptr, &row_map[1]));
  }
  uint8_t replicated = a.replicated ? 1 : 0;
  BATON_RETURN_IF_ERROR(WriteAttribute(ds->get(), "replicated", H5T_STD_U8LE, 0, nullptr, &replicated));
  if (ds_rows * a.row_bytes > 0) {
    const haddr_t at = H5Dget_offset(ds->get());
    if (at == HADDR_UNDEF) return Status::Internal(log::kCkpt, "dataset " + a.name + " has no data address");
    *offset = at;
  }
  return Status::OK();
}

std::string ShardLayoutKey(const char* kind, const std::vector<ShardArray>& arrays,
                           const std::vector<std::pair<uint64_t, uint64_t>>& member_rows) {
  std::string key = kind;
  auto put = [&key](uint64_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(arrays.size());
  put(member_rows.size());
  for (const ShardArray& a : arrays) {
    put(a.name.size());
    key += a.name;
    put(static_cast<uint64_t>(a.dtype));
    put(a.global_shape.size());
    for (uint64_t d : a.global_shape) put(d);
    put(a.replicated ? 1 : 0);
    put(a.row_bytes);
  }
  for (const auto& [first_row, rows] : member_rows) {
    put(first_row);
    put(rows);
  }
  return key;
}

Status ShardFileCreation(Hid* fcpl) {
  BATON_H5_OPEN(*fcpl, H5Pcreate(H5P_FILE_CREATE), H5Pclose);
  return BATON_H5_CHECK(H5Pset_obj_track_times(fcpl->get(), false));
}

uint64_t ShardReserveBytes(uint64_t data_bytes, size_t datasets) {
  constexpr uint64_t kFileMetadataBytes = 64 << 10, kDatasetMetadataBytes = 4 << 10;
  return kFileMetadataBytes + data_bytes + kDatasetMetadataBytes * datasets;
}

}  // namespace baton::ckpt::h5
