// Reads rows of datasets from one shard file of a committed version, for
// one rank (sec2 driver, read-only: restore reads need no collective I/O).
//
// Hostile files: the shard is found through ResolveInside (a plain name,
// a regular file, no symlink), its size must equal the manifest's and
// (manifest format 2) the checksum of its metadata bytes the manifest's,
// all before HDF5 opens it. A format 1 shard has no such checksum: there a
// dataset must be a hard link (no soft or external link, no external
// storage) at the manifest's offset, and before the first read of a dataset
// its type, dims, layout (contiguous) and extent within the file are checked
// through HDF5 against what the manifest says. In format 2 the checksum
// already proved every byte HDF5 would read for those checks to be the
// writer's, so only the extent is checked (the manifest's offset and size
// within the file), with no HDF5 call at all: the file is opened with
// open(2), not H5Fopen, and its rows read with pread. A read never asks for,
// or allocates, more than the file on disk holds either way. Errors name
// the file (and dataset).
//
// How the rows are read (ReadMode, BATON_CKPT_READ): by default with pread
// (ReadRows) into a buffer of the caller's; or, asked for with
// BATON_CKPT_READ=mmap, through a read-only mapping of each dataset's
// checked extent (MapRows), so that ChunkReader hashes the page cache's
// pages in place and copies the kept rows from them once: one copy per byte
// instead of pread's copy into a buffer and a second out of it, 0.75-0.87
// of pread's restore time in `baton bench ckpt --verify-before-write`
// (docs/benchmarks.md, 2026-12-06, issue 48), within the noise from Python.
// Not the default, for the two costs below: a shard truncated by another
// program while a chunk is read kills the process with SIGBUS, and the
// bytes copied are the mapping's at the copy, not a private copy of the
// bytes hashed (pread's buffer is). With kMmap, pread is still used where a
// mapping fails (a file system without mmap, no address space). A dataset is mapped
// once for the reader's life, but each chunk's pages leave the page tables
// once ChunkReader used them (UnmapRows, MADV_DONTNEED; the page cache keeps
// them): mapped pages count in the process's RSS (RssFile), which a whole
// mapping made grow by the state's size during a restore (what Slurm's RSS
// accounting would see); so a chunk's pages are faulted in again by the
// second pass of verify_before_write, measured cheaper than pread's copies
// all the same (docs/benchmarks.md).
//
// A file that shrinks under a mapping: a page past its new end raises
// SIGBUS on access. MapRows checks the file's size (fstat) before it
// hands out a chunk's bytes, so a file truncated between two chunks, or
// between the two passes of verify_before_write, is an IOError naming the
// file, as pread's end of file is; what remains is a truncation during the
// few microseconds a chunk (at most 2 MiB) is hashed or copied, which kills
// the process with SIGBUS (as it would any reader of a mapping:
// numpy.memmap, torch.load(mmap=True)); catching SIGBUS would take a
// process-wide signal handler from the application. Version directories
// are written once and never rewritten in place, so only another program
// truncating a committed shard meets it; pread, the default, avoids it.
//
// The fault-injecting Envs (fs/fault_env.h) see the reads of Open (size,
// the metadata checksum's reads); the rows themselves are read through the
// sec2 driver's descriptor (pread or the mapping), never through the Env,
// in both modes.
//
// Threading: HDF5 calls, see h5_check.h. Not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "baton/status.h"
#include "ckpt/fs/env.h"
#include "ckpt/hdf5/h5_check.h"
#include "ckpt/manifest.h"

namespace baton::ckpt::h5 {

// How ShardReader reads rows: kPread (the default) reads with pread into
// the caller's buffer, kMmap maps each dataset's extent.
enum class ReadMode { kPread, kMmap };  // kPread first: a value-initialised ReadMode (checkpointer_impl.h) is the default

// The mode from BATON_CKPT_READ: "pread" or "mmap"; unset or empty: kPread.
// Any other value: InvalidArgument naming the variable and the value.
Status ReadModeFromEnv(ReadMode* mode);

class ShardReader {
 public:
  // Opens shards[shard] of manifest m in version_dir: its size must be the
  // manifest's and (format 2) its bytes outside the datasets' data must
  // match meta_xxh3, and then HDF5 is not needed (the file is opened with
  // open(2)); format 1: HDF5 opens it.
  // mode: how rows are read (above); a file whose mapping fails is read with pread.
  static Status Open(fs::Env* env, const std::string& version_dir, const Manifest& m, size_t shard,
                     std::unique_ptr<ShardReader>* out, ReadMode mode = ReadMode::kPread);
  ~ShardReader();

  // Reads dataset rows [first, first + rows) of `array`'s dataset, which the
  // manifest says has dataset_rows rows, into buf (rows * row_bytes bytes):
  // with pread at the checked dataset's offset (through HDF5's H5Dread only
  // where its sec2 driver gave no descriptor).
  Status ReadRows(const ArrayMeta& array, uint64_t dataset_rows, uint64_t first, uint64_t rows, void* buf);

  // The same rows as ReadRows, in place: *out points at them in a
  // read-only mapping of the dataset's extent, valid while this reader
  // lives. *out is null (and the caller reads with ReadRows) with kPread,
  // for no rows, where HDF5 gave no descriptor, or where mmap failed (the
  // dataset is then read with pread, and the failure logged once per
  // reader). Before it hands out the bytes it checks that the file still
  // holds them (fstat): a file that shrank since Open is an IOError naming
  // the file, the dataset and both sizes.
  Status MapRows(const ArrayMeta& array, uint64_t dataset_rows, uint64_t first, uint64_t rows, const char** out);

  // The pages of rows MapRows handed out leave this process's page tables
  // (madvise MADV_DONTNEED: the page cache keeps them; a later MapRows maps
  // them again), so the mapped pages held at a time stay about a chunk,
  // not the dataset. A hint: never fails.
  void UnmapRows(const ArrayMeta& array, uint64_t first, uint64_t rows);

  // Checks the dataset (format 1: type, dims, layout, extent within the
  // file; format 2: the extent, the rest being under the metadata checksum)
  // without reading; ReadRows does it on its first read of a dataset.
  Status CheckDataset(const ArrayMeta& array, uint64_t dataset_rows) {
    const Checked* unused;
    return OpenDataset(array, dataset_rows, &unused);
  }

  const std::string& path() const { return path_; }

 private:
  ShardReader() = default;
  // A read-only mapping of a dataset's extent, unmapped on destruction.
  struct Mapping {
    Mapping() = default;
    Mapping(const Mapping&) = delete;
    Mapping& operator=(const Mapping&) = delete;
    ~Mapping();
    void* base = nullptr;        // page-aligned start of the mapping (null: none)
    size_t length = 0;
    const char* data = nullptr;  // the dataset's first byte, inside it
    bool tried = false;          // mmap was tried (failed: data stays null)
  };
  struct Checked {
    Hid ds;
    Mapping map;  // kMmap, made by the first MapRows of the dataset
    // A scalar array's dataset: an HDF5 scalar dataspace (true), or, in
    // files written before scalars were stored as such, dims [1].
    bool scalar_space = false;
    uint64_t offset = 0;  // where the data begin in the file
  };
  Status OpenDataset(const ArrayMeta& array, uint64_t dataset_rows, const Checked** ds);
  // Rows [first, first + rows), checked against the dataset's rows.
  Status CheckRows(const ArrayMeta& array, uint64_t dataset_rows, uint64_t first, uint64_t rows) const;

  std::string path_;
  uint64_t file_bytes_ = 0;
  std::map<std::string, uint64_t> offsets_;  // format 2: where each dataset's data begin
  // Format 2: every byte outside the datasets' data matched the manifest's
  // meta_xxh3; OpenDataset then takes the manifest's offsets (no HDF5 call).
  bool meta_verified_ = false;
  Hid file_;     // format 1 only: HDF5 checks and reads its datasets
  int fd_ = -1;  // ReadRows', MapRows': the sec2 driver's descriptor of file_, or owned_fd_
  int owned_fd_ = -1;  // format 2: the file opened without HDF5 (closed with the reader)
  ReadMode mode_ = ReadMode::kPread;
  bool map_failure_logged_ = false;
  std::map<std::string, Checked> datasets_;  // checked ones, by name (never moved: mappings point into them)
};

}  // namespace baton::ckpt::h5
