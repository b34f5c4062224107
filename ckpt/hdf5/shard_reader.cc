#include "ckpt/hdf5/shard_reader.h"

#include <sys/mman.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <hdf5.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <string>
#include <utility>
#include <vector>

#include "base/printable.h"
#include "baton/log.h"
#include "ckpt/catalog.h"
#include "ckpt/checksum.h"
#include "ckpt/fs/syscall_check.h"
#include "ckpt/hdf5/h5_types.h"
#include "ckpt/metadata_checksum.h"

namespace baton::ckpt::h5 {
namespace {

std::string ShapeText(const std::vector<hsize_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

}  // namespace

Status ReadModeFromEnv(ReadMode* mode) {
  const char* v = std::getenv("BATON_CKPT_READ");
  const std::string text = v != nullptr ? v : "";
  if (text.empty() || text == "pread") {
    *mode = ReadMode::kPread;
  } else if (text == "mmap") {
    *mode = ReadMode::kMmap;
  } else {
    return Status::InvalidArgument(log::kCkpt, "BATON_CKPT_READ='" + Printable(text) +
                                                   "': how a restore reads shard files is pread (the default) or mmap");
  }
  return Status::OK();
}

ShardReader::Mapping::~Mapping() {
  if (base != nullptr) ::munmap(base, length);
}

ShardReader::~ShardReader() {
  datasets_.clear();
  file_.Reset();
  if (owned_fd_ >= 0) ::close(owned_fd_);  // read-only: nothing to report
}

Status ShardReader::Open(fs::Env* env, const std::string& version_dir, const Manifest& m, size_t shard,
                         std::unique_ptr<ShardReader>* out, ReadMode mode) {
  QuietHdf5Errors();
  const ShardMeta& meta = m.shards.at(shard);
  const std::string& file = meta.file;
  const uint64_t expected_bytes = meta.bytes;
  std::unique_ptr<ShardReader> r(new ShardReader());
  r->mode_ = mode;
  // A shard the committed manifest lists that is missing, a symlink or not
  // a regular file: the version is damaged (kCorruption). Other failures
  // (EIO, ESTALE, EACCES) may pass: they keep their code.
  Status s = ResolveInside(env, version_dir, file, &r->path_);
  if (s.code() == Code::kNotFound) {
    return Status::Corruption(log::kCkpt, version_dir + "/" + file + ": missing, yet the manifest lists it (" +
                                              s.message() + ")");
  }
  if (s.code() == Code::kInvalidArgument) return Status::Corruption(log::kCkpt, s.message());
  BATON_RETURN_IF_ERROR(s);
  fs::FileInfo info;
  BATON_RETURN_IF_ERROR(env->Stat(r->path_, &info));
  if (info.size != expected_bytes) {
    // Which one is wrong the sizes cannot tell (a truncated file, or a
    // manifest whose size was overstated): both are named, no cause guessed.
    const uint64_t diff = info.size < expected_bytes ? expected_bytes - info.size : info.size - expected_bytes;
    return Status::Corruption(log::kCkpt, r->path_ + ": " + std::to_string(info.size) + " bytes, the manifest says " +
                                              std::to_string(expected_bytes) + " (" + std::to_string(diff) +
                                              (info.size < expected_bytes ? " fewer)" : " more)"));
  }
  r->file_bytes_ = info.size;
  if (m.format >= 2) {
    // Every byte HDF5 will parse, checked first: one damaged metadata byte
    // once made verify die inside H5Dopen2.
    std::vector<std::pair<uint64_t, uint64_t>> extents;
    for (const DatasetMeta& d : meta.datasets) {
      const uint64_t bytes = d.rows * m.arrays[d.array].row_bytes();  // the parser checked: no overflow
      r->offsets_[m.arrays[d.array].name] = d.offset;
      if (bytes > 0) extents.emplace_back(d.offset, d.offset + bytes);
    }
    uint64_t xxh3 = 0;
    BATON_RETURN_IF_ERROR(HashOutsideExtents(env, r->path_, info.size, extents, &xxh3));
    if (xxh3 != meta.meta_xxh3) {
      return Status::Corruption(log::kCkpt, r->path_ + ": its HDF5 metadata fail their checksum (xxh3 " +
                                                HexU64(xxh3) + ", the manifest says " + HexU64(meta.meta_xxh3) + ")");
    }
    r->meta_verified_ = true;
    // Nothing is left for HDF5 to do: the datasets' places are the
    // manifest's (OpenDataset) and their rows are read with pread (ReadRows).
    // H5Fopen, which parsed the superblock and root group again only to hand
    // back its descriptor, cost 0.2-0.4 ms a shard (docs/benchmarks.md). The
    // file is opened as HDF5's sec2 driver opened it, by the path resolved
    // inside the version directory above; O_NOFOLLOW keeps a link put in its
    // place since from being followed.
    int fd = -1;
    BATON_RETURN_IF_ERROR(
        BATON_SYSCALL("open", r->path_, fd = ::open(r->path_.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW)));
    r->owned_fd_ = r->fd_ = fd;
    *out = std::move(r);
    return Status::OK();
  }
  Hid fapl;
  BATON_H5_OPEN(fapl, H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  BATON_RETURN_IF_ERROR(BATON_H5_CHECK(H5Pset_fapl_sec2(fapl.get())));
  hid_t f = H5Fopen(r->path_.c_str(), H5F_ACC_RDONLY, fapl.get());
  if (f < 0) return CheckH5(-1, "H5Fopen", __FILE__, __LINE__).Annotate(r->path_);
  r->file_ = Hid(f, H5Fclose);
  void* handle = nullptr;
  if (H5Fget_vfd_handle(f, fapl.get(), &handle) >= 0 && handle != nullptr) r->fd_ = *static_cast<int*>(handle);
  *out = std::move(r);
  return Status::OK();
}

Status ShardReader::OpenDataset(const ArrayMeta& array, uint64_t dataset_rows, const Checked** out) {
  auto it = datasets_.find(array.name);
  if (it != datasets_.end()) {
    *out = &it->second;
    return Status::OK();
  }
  const std::string where = path_ + ", dataset " + array.name;
  auto bad = [&](const std::string& what) { return Status::Corruption(log::kCkpt, where + ": " + what); };
  const uint64_t bytes = dataset_rows * array.row_bytes();
  auto want_offset = offsets_.find(array.name);
  if (meta_verified_ && fd_ >= 0) {
    // Every byte of the file outside the datasets' data matched the
    // manifest's checksum (Open): the dataset's link, type, dims, layout
    // and offset are the writer's, which the manifest recorded, and the
    // checks below (a dozen HDF5 calls, 40-50 us a dataset: 0.2-0.3 s of
    // a restore of 5,000 arrays at 2 ranks) would find what the checksum found. Its
    // rows are read with pread at the manifest's offset (ReadRows), within
    // the file as checked here; whatever they hold, their own checksums say.
    if (bytes > 0 && want_offset == offsets_.end()) return bad("not in the shard's index of the manifest");
    const uint64_t offset = bytes > 0 ? want_offset->second : 0;
    if (bytes > 0 && (offset > file_bytes_ || bytes > file_bytes_ - offset)) {
      return bad(std::to_string(bytes) + " bytes at offset " + std::to_string(offset) + " exceed the file's " +
                 std::to_string(file_bytes_) + " bytes");
    }
    Checked& checked = datasets_[array.name];
    checked.offset = offset;
    *out = &checked;
    return Status::OK();
  }
  Hid ds, space, dcpl;
  // The dataset's link must be a hard link in this file: HDF5 would follow
  // a soft link elsewhere in the file, or an external link into another
  // file (outside the version directory: what verify then checked was
  // not this version's data).
  const htri_t exists = H5Lexists(file_.get(), array.name.c_str(), H5P_DEFAULT);
  if (exists == 0) return bad("no such dataset, yet the manifest lists it");
  BATON_RETURN_IF_ERROR(BATON_H5_CHECK(exists));
  H5L_info_t link;
  BATON_RETURN_IF_ERROR(BATON_H5_CHECK(H5Lget_info(file_.get(), array.name.c_str(), &link, H5P_DEFAULT)));
  if (link.type != H5L_TYPE_HARD) {
    const char* kind = link.type == H5L_TYPE_SOFT       ? "a soft"
                       : link.type == H5L_TYPE_EXTERNAL ? "an external"
                                                        : "a user-defined";
    return bad(std::string(kind) + " link, not a dataset of this file");
  }
  hid_t id = H5Dopen2(file_.get(), array.name.c_str(), H5P_DEFAULT);
  if (id < 0) return CheckH5(-1, "H5Dopen2", __FILE__, __LINE__).Annotate(where);
  ds = Hid(id, H5Dclose);

  Hid type;
  BATON_H5_OPEN(type, H5Dget_type(ds.get()), H5Tclose);
  bool type_ok = false;
  BATON_RETURN_IF_ERROR(TypeMatches(type.get(), array.dtype, &type_ok));
  if (!type_ok) return bad("its type is not " + std::string(DTypeName(array.dtype)));

  std::vector<hsize_t> want{dataset_rows};
  for (size_t i = 1; i < array.shape.size(); ++i) want.push_back(array.shape[i]);
  BATON_H5_OPEN(space, H5Dget_space(ds.get()), H5Sclose);
  int ndims = H5Sget_simple_extent_ndims(space.get());
  BATON_RETURN_IF_ERROR(BATON_H5_CHECK(ndims));
  std::vector<hsize_t> dims(static_cast<size_t>(ndims));
  if (ndims > 0) BATON_RETURN_IF_ERROR(BATON_H5_CHECK(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr)));
  const bool scalar_space = H5Sget_simple_extent_type(space.get()) == H5S_SCALAR;
  if (array.shape.empty() && scalar_space && dataset_rows == 1) {
    want.clear();  // a scalar: dims [] (its one row); [1] in older files
  } else if (scalar_space) {
    return bad("a scalar dataspace, the manifest says " + ShapeText(want));
  }
  if (dims != want) {
    return bad("dims " + ShapeText(dims) + ", the manifest says " + ShapeText(want));
  }

  BATON_H5_OPEN(dcpl, H5Dget_create_plist(ds.get()), H5Pclose);
  if (H5Pget_layout(dcpl.get()) != H5D_CONTIGUOUS) return bad("not a contiguous dataset");
  // Contiguous data kept in external files (H5Pset_external) is outside too.
  const int external = H5Pget_external_count(dcpl.get());
  BATON_RETURN_IF_ERROR(BATON_H5_CHECK(external));
  if (external > 0) return bad("its data is in " + std::to_string(external) + " external file(s)");
  // The rows must lie within the file: no read (or buffer) beyond what is on disk.
  const haddr_t offset = H5Dget_offset(ds.get());
  if (want_offset != offsets_.end() && bytes > 0 && offset != want_offset->second) {
    return bad("data at byte " + (offset == HADDR_UNDEF ? std::string("(none)") : std::to_string(offset)) +
               ", the manifest says " + std::to_string(want_offset->second));
  }
  if (bytes > 0 && (offset == HADDR_UNDEF || offset > file_bytes_ || bytes > file_bytes_ - offset)) {
    return bad(std::to_string(bytes) + " bytes at offset " +
               (offset == HADDR_UNDEF ? std::string("(none)") : std::to_string(offset)) + " exceed the file's " +
               std::to_string(file_bytes_) + " bytes");
  }
  Checked& checked = datasets_[array.name];
  checked.ds = std::move(ds);
  checked.scalar_space = scalar_space;
  checked.offset = offset == HADDR_UNDEF ? 0 : offset;
  *out = &checked;
  return Status::OK();
}

Status ShardReader::CheckRows(const ArrayMeta& array, uint64_t dataset_rows, uint64_t first, uint64_t rows) const {
  if (first > dataset_rows || rows > dataset_rows - first) {
    return Status::Corruption(log::kCkpt, path_ + ", dataset " + array.name + ": rows [" + std::to_string(first) +
                                              ", +" + std::to_string(rows) + ") outside its " +
                                              std::to_string(dataset_rows) + " rows");
  }
  return Status::OK();
}

Status ShardReader::MapRows(const ArrayMeta& array, uint64_t dataset_rows, uint64_t first, uint64_t rows,
                            const char** out) {
  *out = nullptr;
  if (rows == 0 || mode_ != ReadMode::kMmap || fd_ < 0) return Status::OK();
  BATON_RETURN_IF_ERROR(CheckRows(array, dataset_rows, first, rows));
  const Checked* found = nullptr;
  BATON_RETURN_IF_ERROR(OpenDataset(array, dataset_rows, &found));
  Checked& checked = datasets_.at(array.name);  // found, not const: its mapping is made here once
  const uint64_t rb = array.row_bytes();
  if (!checked.map.tried) {
    checked.map.tried = true;
    // The checked extent (within the file, OpenDataset), from the page
    // boundary below it: mmap's offset must be page-aligned.
    const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    const uint64_t start = checked.offset / page * page, end = checked.offset + dataset_rows * rb;
    void* p = ::mmap(nullptr, static_cast<size_t>(end - start), PROT_READ, MAP_SHARED, fd_, static_cast<off_t>(start));
    if (p == MAP_FAILED) {
      if (!map_failure_logged_) {
        map_failure_logged_ = true;
        BATON_LOG(kCkpt, info) << path_ << ": mmap of dataset " << array.name << " failed (" << std::strerror(errno)
                               << "); its rows are read with pread";
      }
      return Status::OK();
    }
    // Read once, front to back, by pass 1; the kernel reads ahead further
    // for a sequential mapping (a cold file).
    ::madvise(p, static_cast<size_t>(end - start), MADV_SEQUENTIAL);
    checked.map.base = p;
    checked.map.length = static_cast<size_t>(end - start);
    checked.map.data = static_cast<const char*>(p) + (checked.offset - start);
  }
  if (checked.map.data == nullptr) return Status::OK();  // mmap failed: pread
  // A page past the file's end raises SIGBUS: the file must still hold these
  // rows (its size was checked at Open; another program may have cut it since).
  const uint64_t at = checked.offset + first * rb, end = at + rows * rb;
  struct stat st;
  Status s = BATON_SYSCALL("fstat", path_, ::fstat(fd_, &st));
  if (!s.ok()) return s.Annotate("dataset " + array.name);
  if (static_cast<uint64_t>(st.st_size) < end) {
    return Status::IOError(log::kCkpt, path_ + ", dataset " + array.name + ": the file shrank to " +
                                           std::to_string(st.st_size) + " bytes since it was opened (" +
                                           std::to_string(file_bytes_) + "), its rows end at byte " +
                                           std::to_string(end));
  }
  *out = checked.map.data + first * rb;
  return Status::OK();
}

void ShardReader::UnmapRows(const ArrayMeta& array, uint64_t first, uint64_t rows) {
  auto it = datasets_.find(array.name);
  if (it == datasets_.end() || it->second.map.data == nullptr || rows == 0) return;
  const Mapping& map = it->second.map;
  // Whole pages inside the rows only: the pages at either end may hold
  // rows of the chunks beside them.
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t base = reinterpret_cast<uintptr_t>(map.base);
  const uint64_t lo = reinterpret_cast<uintptr_t>(map.data + first * array.row_bytes());
  const uint64_t hi = lo + rows * array.row_bytes();
  const uint64_t a = (lo + page - 1) / page * page, b = hi / page * page;
  if (a >= b || a < base || b > base + map.length) return;
  ::madvise(reinterpret_cast<void*>(a), static_cast<size_t>(b - a), MADV_DONTNEED);
}

Status ShardReader::ReadRows(const ArrayMeta& array, uint64_t dataset_rows, uint64_t first, uint64_t rows, void* buf) {
  if (rows == 0) return Status::OK();
  BATON_RETURN_IF_ERROR(CheckRows(array, dataset_rows, first, rows));
  const Checked* checked = nullptr;
  BATON_RETURN_IF_ERROR(OpenDataset(array, dataset_rows, &checked));
  if (fd_ >= 0) {
    // The checked dataset is contiguous, of the manifest's type (H5Tequal:
    // no conversion) and within the file, so its rows are the bytes at
    // offset + first * row_bytes: read straight into buf, without HDF5's
    // selection and dispatch on every piece of a restore.
    const uint64_t n = rows * array.row_bytes(), at = checked->offset + first * array.row_bytes();
    char* p = static_cast<char*>(buf);
    for (uint64_t done = 0; done < n;) {
      ssize_t got = 0;
      Status s = BATON_SYSCALL("pread", path_, got = ::pread(fd_, p + done, n - done, static_cast<off_t>(at + done)));
      if (!s.ok()) return s.Annotate("dataset " + array.name);
      if (got == 0) {  // the size was checked at Open: the file shrank since
        return Status::IOError(log::kCkpt, path_ + ", dataset " + array.name + ": end of file at byte " +
                                               std::to_string(at + done) + ", " + std::to_string(n - done) +
                                               " bytes short");
      }
      done += static_cast<uint64_t>(got);
    }
    return Status::OK();
  }
  const hid_t ds = checked->ds.get();
  Hid type, fspace, mspace;
  BATON_RETURN_IF_ERROR(MakeH5Type(array.dtype, &type));
  if (checked->scalar_space) {  // its one element (rows == 1, first == 0: checked above)
    Status s = BATON_H5_CHECK(H5Dread(ds, type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf));
    return s.ok() ? s : s.Annotate(path_ + ", dataset " + array.name);
  }
  BATON_H5_OPEN(fspace, H5Dget_space(ds), H5Sclose);
  std::vector<hsize_t> start{first}, count{rows};
  for (size_t i = 1; i < array.shape.size(); ++i) {
    start.push_back(0);
    count.push_back(array.shape[i]);
  }
  BATON_RETURN_IF_ERROR(BATON_H5_CHECK(
      H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr)));
  BATON_H5_OPEN(mspace, H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr), H5Sclose);
  Status s = BATON_H5_CHECK(H5Dread(ds, type.get(), mspace.get(), fspace.get(), H5P_DEFAULT, buf));
  return s.ok() ? s : s.Annotate(path_ + ", dataset " + array.name);
}

}  // namespace baton::ckpt::h5
