#include "ckpt/hdf5/shard_writer.h"

#include <hdf5.h>
#include <semaphore.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "baton/log.h"
#include "ckpt/agreement.h"
#include "ckpt/checksum.h"
#include "ckpt/chunk_digests.h"
#include "ckpt/hdf5/h5_check.h"
#include "ckpt/hdf5/h5_types.h"
#include "ckpt/hdf5/metadata_cache.h"
#include "ckpt/hdf5/shard_dataset.h"
#include "ckpt/metadata_checksum.h"
#include "ckpt/metadata_image.h"
#include "mpi_runtime/mpi_check.h"

namespace baton::ckpt::h5 {
namespace {

// Bytes hashed and written at a time (independent transfers): the hash
// brings a piece into the CPU's cache, the write's copy finds it there.
constexpr uint64_t kWritePieceBytes = 4u << 20;

struct MemberRows {
  uint64_t first_row;
  uint64_t rows;
};


// One array's dataset in the shard, created by every member.
struct Dataset {
  Hid ds, type;
  std::vector<hsize_t> dims;  // empty: a scalar dataspace
  uint64_t my_row = 0;        // where this member's rows begin
  uint64_t offset = UINT64_MAX, bytes = 0;  // its data in the file
  const ShardArray* array = nullptr;
};

// Phase 1, collective metadata: the dataset and its attributes (the same
// values on every member). *out stays invalid when the group holds no row.
Status CreateDataset(hid_t file, const ShardArray& a, const std::vector<MemberRows>& members, int me, Dataset* out) {
  uint64_t ds_rows = 0, my_row = 0;
  for (size_t m = 0; m < members.size(); ++m) {
    if (static_cast<int>(m) == me) my_row = ds_rows;
    ds_rows += members[m].rows;
  }
  if (ds_rows == 0) return Status::OK();  // the group holds none of it

  // A scalar (global shape {}) is an HDF5 scalar dataspace, as h5py writes
  // one; its one "row" is written by the member that holds it. The
  // attributes hold the same values on every member: collective metadata.
  std::vector<uint64_t> row_map;
  uint64_t ds_row = 0;
  for (const MemberRows& m : members) {
    if (m.rows == 0) continue;
    row_map.insert(row_map.end(), {ds_row, m.first_row, m.rows});
    ds_row += m.rows;
  }
  Hid type, fspace, ds;
  BATON_RETURN_IF_ERROR(CreateShardDataset(file, a, ds_rows, row_map, &type, &fspace, &ds, &out->offset));
  const bool scalar = a.global_shape.empty();
  std::vector<hsize_t> dims{ds_rows};
  for (size_t i = 1; i < a.global_shape.size(); ++i) dims.push_back(a.global_shape[i]);
  // Allocated early: where the data lie is known now (the same on every
  // member: metadata is collective).
  out->bytes = ds_rows * a.row_bytes;
  out->ds = std::move(ds);
  out->type = std::move(type);
  out->dims = scalar ? std::vector<hsize_t>() : dims;
  out->my_row = my_row;
  out->array = &a;
  return Status::OK();
}

// Where this member's rows of one array go in the file.
struct MyRows {
  uint64_t offset = 0, bytes = 0;
  const char* data = nullptr;
};

// Phase 2 of collective transfers: this member's rows, straight from the
// caller's buffer; every member takes part in every H5Dwrite, a member
// with nothing to write too.
Status WriteRows(const Dataset& d, hid_t dxpl) {
  const ShardArray& a = *d.array;
  Hid fspace, mspace;
  BATON_H5_OPEN(fspace, H5Dget_space(d.ds.get()), H5Sclose);
  if (a.rows == 0) {
    hsize_t one = 1;
    BATON_H5_OPEN(mspace, H5Screate_simple(1, &one, nullptr), H5Sclose);
    BATON_RETURN_IF_ERROR(BATON_H5_CHECK(H5Sselect_none(mspace.get())));
    BATON_RETURN_IF_ERROR(BATON_H5_CHECK(H5Sselect_none(fspace.get())));
    static const char kNothing = 0;
    return BATON_H5_CHECK(H5Dwrite(d.ds.get(), d.type.get(), mspace.get(), fspace.get(), dxpl, &kNothing));
  }
  if (d.dims.empty()) {  // a scalar
    BATON_H5_OPEN(mspace, H5Screate(H5S_SCALAR), H5Sclose);
    return BATON_H5_CHECK(H5Dwrite(d.ds.get(), d.type.get(), mspace.get(), fspace.get(), dxpl, a.data));
  }
  std::vector<hsize_t> start(d.dims.size(), 0), count = d.dims;
  start[0] = d.my_row;
  count[0] = a.rows;
  BATON_RETURN_IF_ERROR(BATON_H5_CHECK(
      H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr)));
  BATON_H5_OPEN(mspace, H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr), H5Sclose);
  return BATON_H5_CHECK(H5Dwrite(d.ds.get(), d.type.get(), mspace.get(), fspace.get(), dxpl, a.data));
}

// The group agrees; a member that did not fail itself stops as kAborted, so
// that the world's agreement reports the member that did.
// Open MPI's ompio (the default MPI-IO of Open MPI 4) opens a shared file
// pointer with every MPI_File_open; its "sm" component names a POSIX
// semaphore after the file's base name alone ("OMPIO_shard-0.h5", in
// /dev/shm of the node of the group's rank 0), creates it with value 1 if
// it does not exist, and has rank 0 sem_wait/sem_post it once before
// unlinking it. A rank killed between that wait and post (SIGKILL, the
// OOM killer, a preempted node's last moments) leaves the semaphore at 0
// under a name every later shard of that group reuses, and the next
// MPI_File_open of the group's rank 0 waits on it for ever (seen in the
// kill -9 loop of tests/cluster/test_ckpt.sh). So the group's rank 0
// removes any semaphore of that name before the (agreed) open; the open
// then creates a fresh one. No other rank waits on it, and baton uses no
// shared file pointers; another job's open of a file with the same base
// name at this instant would at worst get its own semaphore, which it
// needs for nothing either. ENOENT (the normal case, or another MPI-IO)
// is ignored; a semaphore this user may not remove makes the open fail
// with MPI's error, not hang.
void RemoveStaleOmpioSemaphore(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string name = "OMPIO_" + (slash == std::string::npos ? path : path.substr(slash + 1));
  (void)sem_unlink(name.c_str());
}

Status AgreeInGroup(MPI_Comm group, const Status& local) {
  Status agreed = Agree(group, local);
  if (agreed.ok() || !local.ok()) return local.ok() ? agreed : local;
  return Status::Aborted(log::kCkpt, "shard group member failed: " + agreed.message());
}

// The file in three phases, so that one member's failure never leaves the
// others in a collective HDF5 call it skips (item 5 of issue 15: a member
// returning early from a failed H5Dwrite closed the file, collectively,
// while the others created the next dataset, and the group hung):
//   1. create the file and every dataset (collective metadata); agreed;
//   2. collective transfers only: write this member's rows (every member
//      still makes every H5Dwrite after a failure of its own); agreed, so a
//      failed write (ENOSPC, EIO) on one member reaches all (independent
//      transfers write the rows after the close: WriteRowsAt);
//   3. close every dataset and the file (collective), on every member,
//      whatever phase 2 gave.
// What HDF5 1.10 cannot survive: an H5Fclose that fails (the metadata
// writer, the group's first rank, out of space at the close) leaves a
// half-destroyed file that HDF5's own clean-up at MPI_Finalize crashes on.
Status WriteFile(fs::Env* env, MPI_Comm group, const std::string& path, const std::vector<ShardArray>& arrays,
                 const std::vector<MemberRows>& all_rows, int me, int members, Transfer transfer, PhaseClock* clock,
                 std::vector<std::pair<uint64_t, uint64_t>>* extents, std::vector<uint64_t>* offsets,
                 std::vector<MyRows>* mine) {
  Hid fapl, file, dxpl;
  Status created = [&]() -> Status {
    BATON_H5_OPEN(fapl, H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
    BATON_RETURN_IF_ERROR(BATON_H5_CHECK(H5Pset_fapl_mpio(fapl.get(), group, MPI_INFO_NULL)));
    // Metadata written collectively (one writer, aggregated) rather than by
    // whichever rank evicts it.
    BATON_RETURN_IF_ERROR(BATON_H5_CHECK(H5Pset_coll_metadata_write(fapl.get(), true)));
    // HDF5 1.8's file format: superblock and object headers version 2,
    // which carry checksums of their own.
    BATON_RETURN_IF_ERROR(BATON_H5_CHECK(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_V18)));
    BATON_RETURN_IF_ERROR(BoundWriterMetadataCache(fapl.get()));  // ckpt/hdf5/metadata_cache.h
    Hid fcpl;
    BATON_RETURN_IF_ERROR(ShardFileCreation(&fcpl));  // no object times (shard_dataset.h)
    BATON_H5_OPEN(file, H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl.get(), fapl.get()), H5Fclose);
    BATON_H5_OPEN(dxpl, H5Pcreate(H5P_DATASET_XFER), H5Pclose);
    return BATON_H5_CHECK(H5Pset_dxpl_mpio(
        dxpl.get(), transfer == Transfer::kCollective ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT));
  }();
  clock->Lap("create");
  BATON_RETURN_IF_ERROR(AgreeInGroup(group, created));  // H5Fcreate is collective: all have it, or none
  clock->Lap("agree");

  const size_t n = arrays.size();
  // The group's first rank reserves the whole file's blocks right after
  // H5Fcreate (whose truncation would free a reservation made before it),
  // before any dataset or row reaches it: a full disk is then one named
  // error here, with only the superblock to close, instead of an ENOSPC
  // inside HDF5's collective close, which HDF5 1.10 does not survive
  // (HDFFV-11052: SIGSEGV at MPI_Finalize).
  Status phase;
  if (me == 0) {
    uint64_t data = 0;
    for (size_t k = 0; k < all_rows.size(); ++k) data += all_rows[k].rows * arrays[k % n].row_bytes;  // [member * n + array]
    phase = env->Reserve(path, ShardReserveBytes(data, n));
  }
  phase = AgreeInGroup(group, phase);
  clock->Lap("reserve");
  std::vector<Dataset> datasets(n);
  for (size_t i = 0; i < n && phase.ok(); ++i) {
    std::vector<MemberRows> members_rows(static_cast<size_t>(members));
    for (int m = 0; m < members; ++m) members_rows[m] = all_rows[static_cast<size_t>(m) * n + i];
    phase = CreateDataset(file.get(), arrays[i], members_rows, me, &datasets[i]);
  }
  clock->Lap("create");
  phase = AgreeInGroup(group, phase);
  clock->Lap("agree");
  offsets->assign(n, UINT64_MAX);
  for (size_t i = 0; i < n; ++i) {
    if (!datasets[i].ds.valid() || datasets[i].bytes == 0) continue;
    (*offsets)[i] = datasets[i].offset;
    extents->emplace_back(datasets[i].offset, datasets[i].offset + datasets[i].bytes);
  }
  mine->assign(n, MyRows());
  for (size_t i = 0; i < n; ++i) {
    const Dataset& d = datasets[i];
    if (!d.ds.valid() || d.bytes == 0 || arrays[i].rows == 0) continue;
    (*mine)[i] = {d.offset + d.my_row * arrays[i].row_bytes, arrays[i].rows * arrays[i].row_bytes,
                  static_cast<const char*>(arrays[i].data)};
  }
  if (phase.ok() && transfer == Transfer::kCollective) {
    Status wrote;
    for (const Dataset& d : datasets) {
      if (!d.ds.valid()) continue;
      Status w = WriteRows(d, dxpl.get());
      if (wrote.ok() && !w.ok()) wrote = w.Annotate("dataset " + d.array->name);
    }
    clock->Lap("write");
    phase = AgreeInGroup(group, wrote);
    clock->Lap("agree");
  }
  // Every member closes what it opened, collectively, in the same order.
  Status closed;
  for (Dataset& d : datasets) {
    if (d.ds.valid() && d.ds.Close() < 0 && closed.ok()) closed = CheckH5(-1, "H5Dclose", __FILE__, __LINE__);
  }
  if (file.Close() < 0 && closed.ok()) closed = CheckH5(-1, "H5Fclose", __FILE__, __LINE__);
  clock->Lap("close");
  return phase.ok() ? closed : phase;
}

// Independent transfers: the group's first rank alone creates the file's
// metadata with HDF5's sec2 (POSIX) driver, no MPI-IO: every dataset
// allocated (contiguous, early, never filled), its attributes, the close;
// the group agrees and the offsets are broadcast. Nothing collective runs
// inside HDF5, so (measured with Open MPI 4.1 and HDF5 1.10) a failed
// metadata write is reported instead of dropped by ompio's collective
// path, one member's failure cannot leave the others in HDF5's own
// collective metadata flush (it hung there at two ranks), no MPI_File_open
// waits on ompio's per-name semaphore, and the other members do not wait
// through a collective create. The file is the same: the datasets, their
// attributes and their offsets are those the collective create made.
// `created`: the first member's creation of the file (through the Env, with
// its mode); the metadata is written only when it succeeded, and one
// broadcast from the first member carries both outcomes and the offsets.
// With `images`, the first member writes a layout's metadata from the
// image an earlier save kept of it (no HDF5), and keeps the image of a new
// layout's; *image: the one this file's metadata is (null: none kept).
Status WriteMetadataAlone(fs::Env* env, MPI_Comm group, const std::string& path, const std::vector<ShardArray>& arrays,
                          const std::vector<MemberRows>& all_rows, int me, int members, Status created,
                          MetadataImages* images, PhaseClock* clock, std::vector<std::pair<uint64_t, uint64_t>>* extents,
                          std::vector<uint64_t>* offsets, std::vector<MyRows>* mine,
                          std::shared_ptr<const MetadataImage>* image, bool* reused) {
  const size_t n = arrays.size();
  std::vector<uint64_t> at(n, UINT64_MAX);
  std::string layout;
  if (me == 0 && created.ok() && images != nullptr) {
    std::vector<std::pair<uint64_t, uint64_t>> rows;
    rows.reserve(all_rows.size());
    for (const MemberRows& r : all_rows) rows.emplace_back(r.first_row, r.rows);
    layout = ShardLayoutKey("group", arrays, rows);
    *image = images->Find(layout);
    if (*image != nullptr) {
      *reused = true;
      created = WriteMetadataImage(env, path, **image);
      at = (*image)->offsets;
      if (!created.ok()) images->Forget(layout);  // the next save makes it anew with HDF5
    }
  }
  if (me == 0 && created.ok() && *image == nullptr) {
    created = [&]() -> Status {
      Hid fapl, file;
      BATON_H5_OPEN(fapl, H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
      BATON_RETURN_IF_ERROR(BATON_H5_CHECK(H5Pset_fapl_sec2(fapl.get())));
      // HDF5 1.8's file format: superblock and object headers version 2,
      // which carry checksums of their own.
      BATON_RETURN_IF_ERROR(BATON_H5_CHECK(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_V18)));
      BATON_RETURN_IF_ERROR(BoundWriterMetadataCache(fapl.get()));  // ckpt/hdf5/metadata_cache.h
      Hid fcpl;
      BATON_RETURN_IF_ERROR(ShardFileCreation(&fcpl));  // no object times (shard_dataset.h)
      BATON_H5_OPEN(file, H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl.get(), fapl.get()), H5Fclose);
      for (size_t i = 0; i < n; ++i) {
        std::vector<MemberRows> members_rows(static_cast<size_t>(members));
        for (int m = 0; m < members; ++m) members_rows[m] = all_rows[static_cast<size_t>(m) * n + i];
        Dataset d;
        BATON_RETURN_IF_ERROR(CreateDataset(file.get(), arrays[i], members_rows, me, &d));
        if (d.ds.valid() && d.bytes > 0) at[i] = d.offset;
        if (d.ds.valid() && d.ds.Close() < 0) return CheckH5(-1, "H5Dclose", __FILE__, __LINE__);
      }
      if (file.Close() < 0) return CheckH5(-1, "H5Fclose", __FILE__, __LINE__);
      // Every dataset is allocated (early, unfilled): the file has its
      // final size, sparse. Its blocks are reserved before any member
      // writes rows, so that a full disk is one named error here.
      fs::FileInfo info;
      BATON_RETURN_IF_ERROR(env->Stat(path, &info));
      BATON_RETURN_IF_ERROR(env->Reserve(path, info.size));
      if (images != nullptr) {
        // Read before any row is written: the bytes outside the data are
        // HDF5's alone. A read that fails keeps no image (the next save
        // calls HDF5 again); this save goes on as it would without one.
        std::vector<std::pair<uint64_t, uint64_t>> data;
        for (size_t i = 0; i < n; ++i) {
          if (at[i] == UINT64_MAX) continue;
          uint64_t ds_rows = 0;
          for (int m = 0; m < members; ++m) ds_rows += all_rows[static_cast<size_t>(m) * n + i].rows;
          data.emplace_back(at[i], at[i] + ds_rows * arrays[i].row_bytes);
        }
        *image = images->Capture(env, path, info.size, std::move(data), layout, at);
      }
      return Status::OK();
    }();
  }
  clock->Lap("create");
  // Only the first member did anything that could fail (ckpt/agreement.h).
  std::string payload(reinterpret_cast<const char*>(at.data()), n * sizeof(uint64_t));
  Status outcome = BcastOutcome(group, created, &payload);
  if (!outcome.ok()) {
    return me == 0 ? created : Status::Aborted(log::kCkpt, "shard group member failed: " + outcome.message());
  }
  if (payload.size() != n * sizeof(uint64_t)) {
    return Status::Internal(log::kCkpt, "the offsets of " + path + ": " + std::to_string(payload.size()) +
                                            " bytes received for " + std::to_string(n) + " arrays");
  }
  std::memcpy(at.data(), payload.data(), payload.size());
  clock->Lap("agree");
  offsets->assign(n, UINT64_MAX);
  mine->assign(n, MyRows());
  for (size_t i = 0; i < n; ++i) {
    if (at[i] == UINT64_MAX) continue;
    uint64_t ds_rows = 0, my_row = 0;
    for (int m = 0; m < members; ++m) {
      if (m == me) my_row = ds_rows;
      ds_rows += all_rows[static_cast<size_t>(m) * n + i].rows;
    }
    (*offsets)[i] = at[i];
    extents->emplace_back(at[i], at[i] + ds_rows * arrays[i].row_bytes);
    if (arrays[i].rows > 0) {
      (*mine)[i] = {at[i] + my_row * arrays[i].row_bytes, arrays[i].rows * arrays[i].row_bytes,
                    static_cast<const char*>(arrays[i].data)};
    }
  }
  return Status::OK();
}

// Independent transfers: this member's rows, written into the closed file
// at the offsets HDF5 allocated, each piece hashed just before its write;
// the file opened once for all its arrays (a state of many small tensors
// opened it once per tensor).
Status WriteRowsAt(fs::Env* env, const std::string& path, const std::vector<ShardArray>& arrays,
                   const std::vector<MyRows>& mine, PhaseClock* clock, std::vector<std::vector<uint64_t>>* xxh3) {
  std::unique_ptr<fs::WritableFile> f;
  for (size_t i = 0; i < mine.size(); ++i) {
    const MyRows& m = mine[i];
    if (m.bytes == 0) continue;
    if (f == nullptr) {
      BATON_RETURN_IF_ERROR(env->OpenForWriteAt(path, m.offset, &f));
    } else {
      BATON_RETURN_IF_ERROR(f->Seek(m.offset));
    }
    clock->Lap("create");
    ChunkHasher sum(arrays[i].rows, arrays[i].row_bytes);
    for (uint64_t at = 0; at < m.bytes; at += kWritePieceBytes) {
      const uint64_t n = std::min(kWritePieceBytes, m.bytes - at);
      sum.Update(m.data + at, n);
      clock->Lap("hash");
      BATON_RETURN_IF_ERROR(f->Append(m.data + at, n));
      f->StartWriteback();  // the disk writes this piece while the next is copied
      clock->Lap("write");
    }
    (*xxh3)[i] = sum.Finish();
  }
  if (f != nullptr) BATON_RETURN_IF_ERROR(f->Close());
  clock->Lap("write");
  return Status::OK();
}

// The group's first rank opens the closed file again (sec2, read-only) and
// finds every dataset at the offset the writers used: the metadata HDF5
// wrote at the close went through MPI-IO's collective path, where Open MPI
// 4.1's ompio drops a failed pwrite (ENOSPC at the close: H5Fclose returns
// success and the file has no superblock or object headers). Without this
// the save would commit a shard no reader can open, its metadata checksum
// computed from the broken bytes. Metadata only: a few KiB read.
Status CheckMetadataReachedFile(const std::string& path, const std::vector<ShardArray>& arrays,
                                const std::vector<uint64_t>& offsets) {
  Hid file;
  BATON_H5_OPEN(file, H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  for (size_t i = 0; i < arrays.size(); ++i) {
    if (offsets[i] == UINT64_MAX) continue;  // no dataset, or one without bytes
    Hid ds;
    BATON_H5_OPEN(ds, H5Dopen2(file.get(), arrays[i].name.c_str(), H5P_DEFAULT), H5Dclose);
    const haddr_t at = H5Dget_offset(ds.get());
    if (at != offsets[i]) {
      return Status::IOError("ckpt", "dataset " + arrays[i].name + " is at offset " + std::to_string(at) +
                                         " in the file read back, not " + std::to_string(offsets[i]));
    }
  }
  return Status::OK();
}

// Collective transfers: Open MPI 4.1's ompio drops an aggregator's failed
// pwrite in its two-phase write path (H5Dwrite and H5Fclose then succeed on
// every member), so a write is trusted only once read back: each member
// reads its rows from the closed file and compares them with the hash taken
// before the write. An I/O error, not corruption: the bytes never reached
// the file, and the next save rewrites them.
Status ReadBackRows(fs::Env* env, const std::string& path, const std::vector<ShardArray>& arrays,
                    const std::vector<MyRows>& mine, const std::vector<std::vector<uint64_t>>& xxh3,
                    PhaseClock* clock) {
  std::vector<char> buf;
  for (size_t i = 0; i < mine.size(); ++i) {
    const MyRows& m = mine[i];
    if (m.bytes == 0) continue;
    buf.resize(static_cast<size_t>(std::min(kWritePieceBytes, m.bytes)));
    ChunkHasher sum(arrays[i].rows, arrays[i].row_bytes);
    for (uint64_t at = 0; at < m.bytes; at += kWritePieceBytes) {
      const uint64_t n = std::min(kWritePieceBytes, m.bytes - at);
      BATON_RETURN_IF_ERROR(env->ReadAt(path, m.offset + at, static_cast<size_t>(n), buf.data()));
      sum.Update(buf.data(), n);
    }
    clock->Lap("verify");
    if (sum.Finish() != xxh3[i]) {
      return Status::IOError("ckpt", "dataset " + arrays[i].name + ": the " + std::to_string(m.bytes) +
                                         " bytes of this rank's rows read back from the file differ from those "
                                         "written (the MPI-IO layer lost a failed write)");
    }
  }
  return Status::OK();
}

}  // namespace

Status WriteShard(MPI_Comm group, const std::string& path, const std::vector<ShardArray>& arrays,
                  const ShardWriteOptions& options, ShardWriteResult* result) {
  QuietHdf5Errors();
  *result = ShardWriteResult();
  fs::Env* env = options.env != nullptr ? options.env : fs::Env::Default();
  PhaseClock untimed;
  PhaseClock* clock = options.clock != nullptr ? options.clock : &untimed;
  int me = 0, members = 0;
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_rank(group, &me)));
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_size(group, &members)));

  // Every member learns every member's rows of every array.
  const size_t n = arrays.size();
  std::vector<MemberRows> mine(n), all(n * static_cast<size_t>(members));
  for (size_t i = 0; i < n; ++i) {
    mine[i] = {arrays[i].first_row, arrays[i].rows};
    result->bytes_written += arrays[i].rows * arrays[i].row_bytes;
  }
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Allgather(mine.data(), static_cast<int>(2 * n), MPI_UINT64_T, all.data(),
                                                      static_cast<int>(2 * n), MPI_UINT64_T, group)));
  clock->Lap("agree");

  // The first member creates the file with its mode; nobody opens it before.
  const bool collective = options.transfer == Transfer::kCollective;
  Status created;
  if (me == 0) {
    if (collective) RemoveStaleOmpioSemaphore(path);
    std::unique_ptr<fs::WritableFile> f;
    created = env->NewWritableFile(path, options.file_mode, &f);
    if (created.ok()) created = f->Close();
  }
  clock->Lap("create");
  // Collective transfers: every member opens the file next (H5Fcreate over
  // MPI-IO). Independent ones: the first member alone goes on to write the
  // metadata, and its one broadcast after it carries both outcomes.
  if (collective) BATON_RETURN_IF_ERROR(AgreeInGroup(group, created));
  clock->Lap("agree");

  std::vector<std::pair<uint64_t, uint64_t>> extents;
  std::vector<MyRows> mine_rows;
  std::shared_ptr<const MetadataImage> image;  // the first member's, independent transfers
  // Collective transfers: the rows are hashed whole, then written by HDF5.
  result->xxh3.assign(n, {});
  for (size_t i = 0; i < n; ++i) {  // rows of no bytes (a dimension of 0): chunks that hash nothing
    if (arrays[i].rows * arrays[i].row_bytes == 0) result->xxh3[i] = ChunkDigests(nullptr, arrays[i].rows, 0);
  }
  if (collective) {
    for (size_t i = 0; i < n; ++i) result->xxh3[i] = ChunkDigests(arrays[i].data, arrays[i].rows, arrays[i].row_bytes);
    clock->Lap("hash");
  }
  // WriteMetadataAlone's result is already the group's (one broadcast);
  // WriteFile's is agreed here, and so is the check of what its close wrote.
  Status written = collective ? WriteFile(env, group, path, arrays, all, me, members, options.transfer, clock, &extents,
                                          &result->offsets, &mine_rows)
                              : WriteMetadataAlone(env, group, path, arrays, all, me, members, created,
                                                   options.metadata_images, clock, &extents, &result->offsets,
                                                   &mine_rows, &image, &result->metadata_reused);
  // What the reservation held past HDF5's end of file (the file is closed
  // on every member: the close is collective).
  if (me == 0 && collective) env->ReleaseUnused(path);
  if (!written.ok()) written = written.Annotate("writing " + path);
  if (collective) {
    BATON_RETURN_IF_ERROR(AgreeInGroup(group, written));
    clock->Lap("agree");
    if (me == 0) {
      written = CheckMetadataReachedFile(path, arrays, result->offsets);
      if (!written.ok()) written = written.Annotate("the HDF5 metadata written at the close of " + path + " did not reach the file (a write MPI-IO did not report)");
    }
    clock->Lap("verify");
    BATON_RETURN_IF_ERROR(AgreeInGroup(group, written));
    clock->Lap("agree");
    written = ReadBackRows(env, path, arrays, mine_rows, result->xxh3, clock);
    if (!written.ok()) written = written.Annotate("writing " + path);
    BATON_RETURN_IF_ERROR(AgreeInGroup(group, written));
    clock->Lap("agree");
  } else {
    BATON_RETURN_IF_ERROR(written);
    // No agreement between this write and the fsync below: both are this
    // member's own, and the one after the fsync reports either.
    written = WriteRowsAt(env, path, arrays, mine_rows, clock, &result->xxh3);
    if (!written.ok()) written = written.Annotate("writing " + path);
  }
  // Every member that wrote bytes syncs the file (the first member wrote
  // the metadata): a member on another node has its own dirty pages of it,
  // which only its own fsync makes durable. Agreed (by the caller, with
  // caller_agrees), then the size.
  Status synced = written;
  if (synced.ok() && (me == 0 || result->bytes_written > 0)) synced = env->SyncFile(path);
  clock->Lap("sync");
  if (options.caller_agrees) {
    BATON_RETURN_IF_ERROR(synced);
  } else {
    BATON_RETURN_IF_ERROR(AgreeInGroup(group, synced));
  }
  clock->Lap("agree");
  if (me == 0) {
    fs::FileInfo info;
    BATON_RETURN_IF_ERROR(env->Stat(path, &info));
    result->file_bytes = info.size;
    if (image != nullptr && image->file_bytes == info.size) {
      // The bytes outside the data are the image's, written by this rank
      // (or read from HDF5's file before any row): their checksum is its.
      result->meta_xxh3 = image->meta_xxh3;
    } else {
      BATON_RETURN_IF_ERROR(HashOutsideExtents(env, path, info.size, extents, &result->meta_xxh3));
    }
  }
  if (options.drop_cache && (me == 0 || result->bytes_written > 0)) env->DropFileCache(path);
  clock->Lap("meta_hash");
  return Status::OK();
}

}  // namespace baton::ckpt::h5
