#include "ckpt/hdf5/rank_shard_writer.h"

#include <hdf5.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "baton/hdf5_mutex.h"
#include "baton/log.h"
#include "ckpt/hdf5/h5_check.h"
#include "ckpt/hdf5/h5_types.h"
#include "ckpt/hdf5/metadata_cache.h"
#include "ckpt/hdf5/shard_dataset.h"
#include "ckpt/metadata_checksum.h"
#include "ckpt/metadata_image.h"

namespace baton::ckpt::h5 {
namespace {

constexpr uint64_t kSlabBytes = 64ull << 20;

Status Abandoned(const std::atomic<bool>* abandon) {
  if (abandon != nullptr && abandon->load(std::memory_order_acquire)) {
    return Status::Aborted(log::kCkpt, "abandoned (WaitOrAbandon)");
  }
  return Status::OK();
}

// One array's dataset: created, its attributes, its rows in slabs. Its data
// extent goes to *extent, its offset to *offset.
Status WriteDataset(hid_t file, const ShardArray& a, const std::atomic<bool>* abandon, uint64_t* offset,
                    std::pair<uint64_t, uint64_t>* extent) {
  const bool scalar = a.global_shape.empty();
  std::vector<hsize_t> dims{a.rows};
  for (size_t i = 1; i < a.global_shape.size(); ++i) dims.push_back(a.global_shape[i]);
  Hid type, fspace, ds;
  BATON_RETURN_IF_ERROR(CreateShardDataset(file, a, a.rows, {0, a.first_row, a.rows}, &type, &fspace, &ds, offset));
  const uint64_t bytes = a.rows * a.row_bytes;
  if (bytes > 0) *extent = {*offset, *offset + bytes};

  Hid mspace;
  if (scalar) {
    BATON_H5_OPEN(mspace, H5Screate(H5S_SCALAR), H5Sclose);
    BATON_RETURN_IF_ERROR(
        BATON_H5_CHECK(H5Dwrite(ds.get(), type.get(), mspace.get(), fspace.get(), H5P_DEFAULT, a.data)));
    return BATON_H5_CHECK(ds.Close());
  }
  // Slabs of whole rows, at most kSlabBytes (at least one row).
  const uint64_t slab_rows = std::max<uint64_t>(1, kSlabBytes / std::max<uint64_t>(a.row_bytes, 1));
  for (uint64_t row = 0; row < a.rows; row += slab_rows) {
    BATON_RETURN_IF_ERROR(Abandoned(abandon));
    std::vector<hsize_t> start(dims.size(), 0), count = dims;
    start[0] = row;
    count[0] = std::min(slab_rows, a.rows - row);
    BATON_RETURN_IF_ERROR(BATON_H5_CHECK(
        H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr)));
    Hid slab;
    BATON_H5_OPEN(slab, H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr), H5Sclose);
    BATON_RETURN_IF_ERROR(BATON_H5_CHECK(H5Dwrite(ds.get(), type.get(), slab.get(), fspace.get(), H5P_DEFAULT,
                                                  static_cast<const char*>(a.data) + row * a.row_bytes)));
  }
  return BATON_H5_CHECK(ds.Close());
}

// Every HDF5 call of the save, under the process's HDF5 lock. The file's
// blocks are reserved right after H5Fcreate (whose truncation would free a
// reservation made before it), so that a full disk is a named error before
// the first H5Dwrite rather than a failure inside HDF5 (HDFFV-11052).
Status WriteFile(fs::Env* env, const std::string& path, const std::vector<ShardArray>& arrays,
                 const std::atomic<bool>* abandon, std::vector<std::pair<uint64_t, uint64_t>>* extents,
                 std::vector<uint64_t>* offsets) {
  std::lock_guard<std::mutex> lock(Hdf5Mutex());
  QuietHdf5Errors();
  Hid fapl, file;
  BATON_H5_OPEN(fapl, H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  BATON_RETURN_IF_ERROR(BATON_H5_CHECK(H5Pset_fapl_sec2(fapl.get())));
  BATON_RETURN_IF_ERROR(BATON_H5_CHECK(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_V18)));
  BATON_RETURN_IF_ERROR(BoundWriterMetadataCache(fapl.get()));  // ckpt/hdf5/metadata_cache.h
  Hid fcpl;
  BATON_RETURN_IF_ERROR(ShardFileCreation(&fcpl));  // no object times (shard_dataset.h)
  BATON_H5_OPEN(file, H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl.get(), fapl.get()), H5Fclose);
  uint64_t data = 0;
  for (const ShardArray& a : arrays) data += a.rows * a.row_bytes;
  Status wrote = env->Reserve(path, ShardReserveBytes(data, arrays.size()));
  if (!wrote.ok()) {
    (void)file.Close();  // nothing of the arrays written: its metadata fits the blocks it has
    return wrote;
  }
  offsets->assign(arrays.size(), UINT64_MAX);
  for (size_t i = 0; i < arrays.size() && wrote.ok(); ++i) {
    if (arrays[i].rows == 0) continue;  // no dataset, as in a group's shard that holds none of it
    std::pair<uint64_t, uint64_t> extent{0, 0};
    wrote = WriteDataset(file.get(), arrays[i], abandon, &(*offsets)[i], &extent);
    if (!wrote.ok()) wrote = wrote.Annotate("dataset " + arrays[i].name);
    if (extent.second > extent.first) extents->push_back(extent);
  }
  if (file.Close() < 0 && wrote.ok()) wrote = CheckH5(-1, "H5Fclose", __FILE__, __LINE__);
  return wrote;
}

// The file from the image of an earlier save of the same layout: its
// metadata, then each array's rows at its dataset's offset, in slabs
// (abandon read between them), with no HDF5 call: the bytes H5Dwrite puts
// there (contiguous, no conversion).
Status WriteFromImage(fs::Env* env, const std::string& path, const std::vector<ShardArray>& arrays,
                      const MetadataImage& image, const std::atomic<bool>* abandon) {
  BATON_RETURN_IF_ERROR(WriteMetadataImage(env, path, image));
  std::unique_ptr<fs::WritableFile> f;
  for (size_t i = 0; i < arrays.size(); ++i) {
    const uint64_t bytes = arrays[i].rows * arrays[i].row_bytes;
    if (bytes == 0 || image.offsets[i] == UINT64_MAX) continue;
    if (f == nullptr) {
      BATON_RETURN_IF_ERROR(env->OpenForWriteAt(path, image.offsets[i], &f));
    } else {
      BATON_RETURN_IF_ERROR(f->Seek(image.offsets[i]));
    }
    const char* data = static_cast<const char*>(arrays[i].data);
    for (uint64_t at = 0; at < bytes; at += kSlabBytes) {
      BATON_RETURN_IF_ERROR(Abandoned(abandon));
      const uint64_t n = std::min(kSlabBytes, bytes - at);
      BATON_RETURN_IF_ERROR(f->Append(data + at, n).Annotate("dataset " + arrays[i].name));
      f->StartWriteback();  // the disk writes this slab while the next is copied
    }
  }
  return f != nullptr ? f->Close() : Status::OK();
}

}  // namespace

Status WriteRankShard(const std::string& path, const std::vector<ShardArray>& arrays,
                      const ShardWriteOptions& options, const std::atomic<bool>* abandon,
                      ShardWriteResult* result) {
  *result = ShardWriteResult();
  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  Clock::time_point t0 = Clock::now();
  fs::Env* env = options.env != nullptr ? options.env : fs::Env::Default();
  for (const ShardArray& a : arrays) result->bytes_written += a.rows * a.row_bytes;
  {
    std::unique_ptr<fs::WritableFile> f;
    BATON_RETURN_IF_ERROR(env->NewWritableFile(path, options.file_mode, &f));
    BATON_RETURN_IF_ERROR(f->Close());
  }
  std::vector<std::pair<uint64_t, uint64_t>> extents;
  MetadataImages* images = options.metadata_images;
  std::string layout;
  if (images != nullptr) {
    std::vector<std::pair<uint64_t, uint64_t>> rows;
    rows.reserve(arrays.size());
    for (const ShardArray& a : arrays) rows.emplace_back(a.first_row, a.rows);
    layout = ShardLayoutKey("rank", arrays, rows);
  }
  std::shared_ptr<const MetadataImage> image = images != nullptr ? images->Find(layout) : nullptr;
  Status written;
  if (image != nullptr) {
    result->metadata_reused = true;
    result->offsets = image->offsets;
    written = WriteFromImage(env, path, arrays, *image, abandon);
    if (!written.ok()) images->Forget(layout);  // the next save makes it anew with HDF5
  } else {
    written = WriteFile(env, path, arrays, abandon, &extents, &result->offsets);
    env->ReleaseUnused(path);  // what the reservation held past HDF5's end of file
    if (written.ok() && images != nullptr) {
      // The bytes outside the data are HDF5's alone, whatever the rows
      // written since: kept for the next save of this layout. A read that
      // fails keeps none (this save goes on as it would without).
      fs::FileInfo info;
      if (env->Stat(path, &info).ok()) image = images->Capture(env, path, info.size, extents, layout, result->offsets);
    }
  }
  if (!written.ok()) return written.Annotate("writing " + path);
  BATON_RETURN_IF_ERROR(Abandoned(abandon));
  result->write_seconds = since(t0);
  t0 = Clock::now();
  BATON_RETURN_IF_ERROR(env->SyncFile(path));
  result->sync_seconds = since(t0);
  t0 = Clock::now();
  fs::FileInfo info;
  BATON_RETURN_IF_ERROR(env->Stat(path, &info));
  result->file_bytes = info.size;
  if (image != nullptr && image->file_bytes == info.size) {
    result->meta_xxh3 = image->meta_xxh3;  // the bytes outside the data are the image's
  } else {
    if (extents.empty() && image != nullptr) {  // written from an image of another size: the extents anew
      for (size_t i = 0; i < arrays.size(); ++i) {
        const uint64_t bytes = arrays[i].rows * arrays[i].row_bytes, at = result->offsets[i];
        if (bytes > 0 && at != UINT64_MAX) extents.emplace_back(at, at + bytes);
      }
    }
    std::sort(extents.begin(), extents.end());
    BATON_RETURN_IF_ERROR(HashOutsideExtents(env, path, info.size, extents, &result->meta_xxh3));
  }
  result->meta_hash_seconds = since(t0);
  if (options.drop_cache) env->DropFileCache(path);
  return Status::OK();
}

}  // namespace baton::ckpt::h5
