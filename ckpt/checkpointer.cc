// baton::Checkpointer (include/baton/checkpointer.h): save with an agreed,
// atomically committed manifest; restore with verification, fallback and
// resharding; retention.
//
// Save, in order (each step agreed by all ranks before the next):
//   1. registrations agree (a hash), every rank checksums its rows (xxh3
//      over the user's buffers) and sends (first_row, rows, xxh3) per array
//      to rank 0 (one MPI_Gather of a fixed-size record);
//   2. rank 0 checks that sharded rows tile their arrays, lists the
//      versions and creates the fresh version directory (NextSeq: a save
//      never writes into an existing directory), broadcasts its name;
//   3. each shard group writes its shard file (ckpt/hdf5/shard_writer.h),
//      the group's first rank fsyncs it; agreed; Env::Mark("agreed");
//   4. rank 0 writes manifest.json.tmp, fsyncs, renames it to
//      manifest.json, fsyncs the version directory and the checkpoint
//      directory; agreed (the commit);
//   5. rank 0 applies retention (PlanRetention, RemoveTree).
// A failure abandons the version on every rank (rank 0 removes its
// directory, best effort) and every rank returns the failure of the lowest
// failing rank, naming it and the file.
//
// Restore: rank 0 lists the versions, reads the newest complete one's
// manifest and broadcasts its text; every rank checks its registrations
// against it, reads and verifies the chunks holding its rows
// (ckpt/hdf5/shard_reader.h), replicated arrays are read in parts and
// all-gathered; agreed; on any failure a warning naming the file, the
// failure recorded beside the version (quarantine after
// max_restore_failures), and the next older version.
#include "baton/checkpointer.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <string>
#include <vector>

#include "baton/log.h"
#include "baton/version.h"
#include "ckpt/agreement.h"
#include "ckpt/catalog.h"
#include "ckpt/checksum.h"
#include "ckpt/fs/env.h"
#include "ckpt/hdf5/shard_reader.h"
#include "ckpt/hdf5/shard_writer.h"
#include "ckpt/layout.h"
#include "ckpt/manifest.h"
#include "mpi_runtime/mpi_check.h"

namespace baton {
namespace {

using ckpt::Agree;
namespace fs = ckpt::fs;

// A manifest is small (arrays, chunks and the user blob in base64); a
// larger file is not one baton wrote.
constexpr uint64_t kMaxManifestBytes = 1ull << 30;

struct Registered {
  ckpt::ArrayMeta meta;
  void* data = nullptr;
  uint64_t first_row = 0;  // sharded: this rank's rows
  uint64_t rows = 0;
};

// Per rank and array, what rank 0 needs for the manifest.
struct ChunkRecord {
  uint64_t first_row;
  uint64_t rows;
  uint64_t xxh3;
};

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string UtcNow() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string ShapeText(const std::vector<uint64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

bool MulOverflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_mul_overflow(a, b, out); }

// Array names become HDF5 dataset names: one path component.
bool ValidArrayName(const std::string& name) {
  return !name.empty() && name.size() <= 255 && name != "." && name != ".." &&
         name.find('/') == std::string::npos && name.find('\0') == std::string::npos;
}

std::string ShardFileName(int group) { return "shard-" + std::to_string(group) + ".h5"; }

class CheckpointerImpl : public Checkpointer {
 public:
  CheckpointerImpl(Runtime& runtime, CheckpointOptions options, std::string dir, fs::Env* env)
      : runtime_(runtime), options_(std::move(options)), dir_(std::move(dir)), env_(env) {}
  ~CheckpointerImpl() override {
    if (group_ != MPI_COMM_NULL) MPI_Comm_free(&group_);
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }

  Status Init();

  Status RegisterReplicated(const std::string& name, void* data, DType dtype,
                            const std::vector<uint64_t>& shape) override;
  Status RegisterSharded(const std::string& name, void* data, DType dtype, const std::vector<uint64_t>& global_shape,
                         uint64_t first_row, uint64_t rows) override;
  Status SetUserBlob(std::string bytes) override {
    if (bytes.size() > ckpt::kMaxUserBlobBytes) {
      return Status::InvalidArgument(log::kCkpt, "user blob of " + std::to_string(bytes.size()) +
                                                     " bytes exceeds the limit of " +
                                                     std::to_string(ckpt::kMaxUserBlobBytes));
    }
    blob_ = std::move(bytes);
    return Status::OK();
  }
  const std::string& user_blob() const override { return blob_; }
  Status Save(int64_t step) override;
  Status Restore(std::optional<int64_t>* step) override;
  const CheckpointStats& last_stats() const override { return stats_; }
  const std::string& dir() const override { return dir_; }

 private:
  Status Register(Registered r);
  Status CheckRegistrationsAgree(const std::string& call);
  Status CheckTiling(const std::vector<ChunkRecord>& all) const;
  Status CreateVersionDir(int64_t step, std::string* name);
  Status WriteMyShard(const std::string& vdir, uint64_t* bytes, uint64_t* file_bytes);
  Status BuildManifest(int64_t step, const std::vector<ChunkRecord>& records, const std::vector<uint64_t>& file_bytes,
                       ckpt::Manifest* m) const;
  Status CommitManifest(const std::string& vdir, const ckpt::Manifest& m);
  void ApplyRetention();

  void NextCandidate(std::vector<ckpt::VersionInfo>* candidates, std::string* name, std::string* text);
  Status CompareWithManifest(const ckpt::Manifest& m, std::vector<int>* index_of) const;
  Status ReadMyRows(const std::string& vdir, const ckpt::Manifest& m, const std::vector<int>& index_of,
                    bool gather_replicated, uint64_t* bytes);
  Status GatherReplicated(const ckpt::Manifest& m, const std::vector<int>& index_of);
  bool GatherFits(const ckpt::Manifest& m) const;

  Runtime& runtime_;
  const CheckpointOptions options_;
  const std::string dir_;
  fs::Env* const env_;
  int rank_ = 0, size_ = 0;
  MPI_Comm comm_ = MPI_COMM_NULL;   // a dup of the world: ckpt's messages stay apart
  MPI_Comm group_ = MPI_COMM_NULL;  // this rank's shard group
  std::vector<int> group_of_;       // shard group of every world rank
  std::map<std::string, Registered> arrays_;  // by name: the same order on every rank
  std::string blob_;
  CheckpointStats stats_;
};

Status CheckpointerImpl::Init() {
  rank_ = runtime_.rank();
  size_ = runtime_.size();
  Status local;
  if (rank_ == 0) {
    local = env_->CreateDir(dir_, options_.dir_mode, /*exist_ok=*/true);
    fs::FileInfo info;
    if (local.ok()) local = env_->Stat(dir_, &info);
    if (local.ok() && info.type != fs::FileType::kDirectory && info.type != fs::FileType::kSymlink) {
      local = Status::InvalidArgument(log::kCkpt, "checkpoint directory " + dir_ + " is not a directory");
    }
  }
  BATON_RETURN_IF_ERROR(Agree(runtime_.world_comm(), local));
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_dup(runtime_.world_comm(), &comm_)));
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN)));
  group_of_ = ckpt::ShardGroups(runtime_.topology(), options_.group_size);
  if (static_cast<int>(group_of_.size()) != size_) {
    return Status::Internal(log::kCkpt, "ShardGroups gave " + std::to_string(group_of_.size()) + " groups for " +
                                            std::to_string(size_) + " ranks");
  }
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_split(comm_, group_of_[rank_], rank_, &group_)));
  return BATON_MPI_CHECK(MPI_Comm_set_errhandler(group_, MPI_ERRORS_RETURN));
}

// --- registration ---------------------------------------------------------------

Status CheckpointerImpl::Register(Registered r) {
  const std::string& name = r.meta.name;
  if (!ValidArrayName(name)) {
    return Status::InvalidArgument(log::kCkpt, "array name \"" + name +
                                                   "\": must be 1-255 bytes, not \".\" or \"..\", without '/'");
  }
  uint64_t n = DTypeSize(r.meta.dtype);
  for (size_t i = 1; i < r.meta.shape.size(); ++i) {
    if (MulOverflows(n, r.meta.shape[i], &n)) {
      return Status::InvalidArgument(log::kCkpt, "array " + name + ": shape " + ShapeText(r.meta.shape) +
                                                     " overflows 64 bits");
    }
  }
  uint64_t total = 0;
  if (MulOverflows(n, r.meta.rows(), &total)) {
    return Status::InvalidArgument(log::kCkpt, "array " + name + ": shape " + ShapeText(r.meta.shape) +
                                                   " overflows 64 bits");
  }
  if (r.first_row > r.meta.rows() || r.rows > r.meta.rows() - r.first_row) {
    return Status::InvalidArgument(log::kCkpt, "array " + name + ": rows [" + std::to_string(r.first_row) + ", " +
                                                   std::to_string(r.first_row + r.rows) + ") outside its " +
                                                   std::to_string(r.meta.rows()) + " rows");
  }
  if (r.data == nullptr && r.rows * n > 0) {
    return Status::InvalidArgument(log::kCkpt, "array " + name + ": null data for " +
                                                   std::to_string(r.rows * n) + " bytes");
  }
  arrays_[name] = std::move(r);
  return Status::OK();
}

Status CheckpointerImpl::RegisterReplicated(const std::string& name, void* data, DType dtype,
                                            const std::vector<uint64_t>& shape) {
  Registered r;
  r.meta.name = name;
  r.meta.dtype = dtype;
  r.meta.shape = shape;
  r.meta.replicated = true;
  r.data = data;
  r.first_row = 0;
  r.rows = r.meta.rows();
  return Register(std::move(r));
}

Status CheckpointerImpl::RegisterSharded(const std::string& name, void* data, DType dtype,
                                         const std::vector<uint64_t>& global_shape, uint64_t first_row,
                                         uint64_t rows) {
  if (global_shape.empty()) {
    return Status::InvalidArgument(log::kCkpt, "sharded array " + name + ": a scalar cannot be sharded");
  }
  Registered r;
  r.meta.name = name;
  r.meta.dtype = dtype;
  r.meta.shape = global_shape;
  r.data = data;
  r.first_row = first_row;
  r.rows = rows;
  return Register(std::move(r));
}

// --- save ---------------------------------------------------------------------

// Every rank registered the same arrays (names, dtypes, shapes, kinds) and
// makes the same call (Save's step included).
Status CheckpointerImpl::CheckRegistrationsAgree(const std::string& call) {
  std::string text = call + '\0';
  for (const auto& [name, r] : arrays_) {
    text += name + '\0' + std::string(DTypeName(r.meta.dtype)) + ShapeText(r.meta.shape) +
            (r.meta.replicated ? "R" : "S") + '\0';
  }
  uint64_t h = ckpt::Xxh3(text.data(), text.size());
  uint64_t mine[2] = {h, ~h}, most[2] = {0, 0};
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Allreduce(mine, most, 2, MPI_UINT64_T, MPI_MAX, comm_)));
  if (most[0] != h || most[1] != ~h) {
    return Status::InvalidArgument(log::kCkpt, call + ": the ranks registered different arrays (names, dtypes, "
                                                      "shapes or kinds differ) or passed different steps");
  }
  return Status::OK();
}

// Rank 0: the sharded arrays' rows over all ranks tile each array exactly.
Status CheckpointerImpl::CheckTiling(const std::vector<ChunkRecord>& all) const {
  const size_t n = arrays_.size();
  size_t i = 0;
  for (const auto& [name, r] : arrays_) {
    if (!r.meta.replicated) {
      std::vector<std::pair<uint64_t, int>> starts;  // (first_row, rank)
      for (int k = 0; k < size_; ++k) {
        const ChunkRecord& c = all[static_cast<size_t>(k) * n + i];
        if (c.rows > 0) starts.emplace_back(c.first_row, k);
      }
      std::sort(starts.begin(), starts.end());
      uint64_t next = 0;
      for (const auto& [first, k] : starts) {
        const ChunkRecord& c = all[static_cast<size_t>(k) * n + i];
        if (first != next) {
          return Status::InvalidArgument(
              log::kCkpt, "sharded array " + name + ": " +
                              (first > next ? "rows [" + std::to_string(next) + ", " + std::to_string(first) +
                                                  ") are held by no rank"
                                            : "rank " + std::to_string(k) + "'s rows [" + std::to_string(first) +
                                                  ", " + std::to_string(first + c.rows) +
                                                  ") overlap another rank's"));
        }
        next = first + c.rows;
      }
      if (next != r.meta.rows()) {
        return Status::InvalidArgument(log::kCkpt, "sharded array " + name + ": rows [" + std::to_string(next) +
                                                       ", " + std::to_string(r.meta.rows()) +
                                                       ") are held by no rank");
      }
    }
    ++i;
  }
  return Status::OK();
}

Status CheckpointerImpl::CreateVersionDir(int64_t step, std::string* name) {
  std::vector<ckpt::VersionInfo> versions;
  BATON_RETURN_IF_ERROR(ckpt::ListVersions(env_, dir_, options_.max_restore_failures, &versions));
  *name = ckpt::VersionName(ckpt::NextSeq(versions), step);
  // exist_ok false: never into a directory someone else made.
  return env_->CreateDir(dir_ + "/" + *name, options_.dir_mode, /*exist_ok=*/false);
}

Status CheckpointerImpl::WriteMyShard(const std::string& vdir, uint64_t* bytes, uint64_t* file_bytes) {
  std::vector<ckpt::h5::ShardArray> shard;
  for (const auto& [name, r] : arrays_) {
    ckpt::h5::ShardArray a;
    a.name = name;
    a.dtype = r.meta.dtype;
    a.global_shape = r.meta.shape;
    a.replicated = r.meta.replicated;
    a.row_bytes = r.meta.row_bytes();
    if (r.meta.replicated) {
      ckpt::ReplicatedRows(r.meta.rows(), size_, rank_, &a.first_row, &a.rows);
    } else {
      a.first_row = r.first_row;
      a.rows = r.rows;
    }
    uint64_t buffer_first = r.meta.replicated ? a.first_row : 0;
    a.data = static_cast<const char*>(r.data) + buffer_first * a.row_bytes;
    shard.push_back(std::move(a));
  }
  ckpt::h5::ShardWriteOptions wo;
  wo.transfer = options_.transfer;
  wo.file_mode = options_.file_mode;
  wo.env = env_;
  ckpt::h5::ShardWriteResult res;
  Status s = ckpt::h5::WriteShard(group_, vdir + "/" + ShardFileName(group_of_[rank_]), shard, wo, &res);
  *bytes = res.bytes_written;
  *file_bytes = res.file_bytes;
  return s;
}

Status CheckpointerImpl::BuildManifest(int64_t step, const std::vector<ChunkRecord>& records,
                                       const std::vector<uint64_t>& file_bytes, ckpt::Manifest* m) const {
  m->step = step;
  m->world_size = size_;
  m->group_size = options_.group_size;
  m->time = UtcNow();
  m->baton_version = kVersion;
  for (const auto& [name, r] : arrays_) m->arrays.push_back(r.meta);
  const size_t n = arrays_.size();
  int groups = 0;
  for (int g : group_of_) groups = std::max(groups, g + 1);
  m->shards.resize(static_cast<size_t>(groups));
  for (int k = 0; k < size_; ++k) {
    ckpt::ShardMeta& s = m->shards[static_cast<size_t>(group_of_[k])];
    if (s.ranks.empty()) {
      s.file = ShardFileName(group_of_[k]);
      s.bytes = file_bytes[static_cast<size_t>(k)];  // the group's first rank reported it
    }
    s.ranks.push_back(k);
  }
  for (ckpt::ShardMeta& s : m->shards) {
    for (size_t i = 0; i < n; ++i) {
      ckpt::DatasetMeta d;
      d.array = static_cast<uint32_t>(i);
      for (int k : s.ranks) {
        const ChunkRecord& c = records[static_cast<size_t>(k) * n + i];
        if (c.rows == 0) continue;
        ckpt::Chunk chunk;
        chunk.rank = k;
        chunk.first_row = c.first_row;
        chunk.rows = c.rows;
        chunk.dataset_row = d.rows;
        chunk.xxh3 = c.xxh3;
        d.chunks.push_back(chunk);
        d.rows += c.rows;
      }
      if (d.rows > 0) s.datasets.push_back(std::move(d));
    }
  }
  m->user_blob = blob_;
  m->user_blob_xxh3 = ckpt::Xxh3(blob_.data(), blob_.size());
  return Status::OK();
}

// Rank 0: the manifest becomes visible atomically and durably.
Status CheckpointerImpl::CommitManifest(const std::string& vdir, const ckpt::Manifest& m) {
  std::string text;
  BATON_RETURN_IF_ERROR(ckpt::WriteManifestJson(m, &text));
  const std::string final_path = vdir + "/" + ckpt::kManifestName;
  const std::string tmp = final_path + ".tmp";
  std::unique_ptr<fs::WritableFile> f;
  BATON_RETURN_IF_ERROR(env_->NewWritableFile(tmp, options_.file_mode, &f));
  BATON_RETURN_IF_ERROR(f->Append(text.data(), text.size()));
  BATON_RETURN_IF_ERROR(f->Sync());
  BATON_RETURN_IF_ERROR(f->Close());
  BATON_RETURN_IF_ERROR(env_->Rename(tmp, final_path));
  BATON_RETURN_IF_ERROR(env_->SyncDir(vdir));
  return env_->SyncDir(dir_);
}

void CheckpointerImpl::ApplyRetention() {
  std::vector<ckpt::VersionInfo> versions;
  Status s = ckpt::ListVersions(env_, dir_, options_.max_restore_failures, &versions);
  if (!s.ok()) {
    BATON_LOG(kCkpt, warning) << "retention skipped: " << s;
    return;
  }
  for (const ckpt::VersionInfo& v : ckpt::PlanRetention(versions, options_.keep)) {
    s = ckpt::RemoveVersion(env_, v);
    if (!s.ok()) {
      BATON_LOG(kCkpt, warning) << "retention could not remove " << v.path << ": " << s;
    }
  }
}

Status CheckpointerImpl::Save(int64_t step) {
  const double t0 = Now();
  stats_ = CheckpointStats();
  stats_.step = step;

  // 1. Agreed registrations; my chunk records (checksums over the user's buffers).
  BATON_RETURN_IF_ERROR(CheckRegistrationsAgree("Save(" + std::to_string(step) + ")"));
  const size_t n = arrays_.size();
  std::vector<ChunkRecord> mine;
  mine.reserve(n);
  uint64_t total = 0;
  for (const auto& [name, r] : arrays_) {
    ChunkRecord c{0, 0, 0};
    const uint64_t rb = r.meta.row_bytes();
    if (r.meta.replicated) {
      ckpt::ReplicatedRows(r.meta.rows(), size_, rank_, &c.first_row, &c.rows);
      c.xxh3 = ckpt::Xxh3(static_cast<const char*>(r.data) + c.first_row * rb, c.rows * rb);
    } else {
      c.first_row = r.first_row;
      c.rows = r.rows;
      c.xxh3 = ckpt::Xxh3(r.data, r.rows * rb);
    }
    total += r.meta.rows() * rb;
    mine.push_back(c);
  }
  std::vector<ChunkRecord> all(rank_ == 0 ? n * static_cast<size_t>(size_) : 0);
  static_assert(sizeof(ChunkRecord) == 3 * sizeof(uint64_t));
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Gather(mine.data(), static_cast<int>(3 * n), MPI_UINT64_T, all.data(),
                                                   static_cast<int>(3 * n), MPI_UINT64_T, 0, comm_)));

  // 2. Rank 0: tiling, the fresh version directory.
  std::string name;
  Status local;
  if (rank_ == 0) {
    local = CheckTiling(all);
    if (local.ok()) local = CreateVersionDir(step, &name);
  }
  BATON_RETURN_IF_ERROR(Agree(comm_, local).Annotate("saving step " + std::to_string(step)));
  int len = static_cast<int>(name.size());
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Bcast(&len, 1, MPI_INT, 0, comm_)));
  name.resize(static_cast<size_t>(len));
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Bcast(name.data(), len, MPI_CHAR, 0, comm_)));
  const std::string vdir = dir_ + "/" + name;
  stats_.version_path = vdir;

  auto abandon = [&](const Status& failed) {
    if (rank_ == 0) {
      Status rm = env_->RemoveTree(vdir);
      if (!rm.ok()) {
        BATON_LOG(kCkpt, warning) << "could not remove the abandoned version " << vdir << ": " << rm;
      }
    }
    return failed.Annotate("saving step " + std::to_string(step) + " (" + vdir + ", abandoned)");
  };

  // 3. The shards, written, synced and agreed.
  uint64_t file_bytes = 0;
  local = WriteMyShard(vdir, &stats_.bytes, &file_bytes);
  Status agreed = Agree(comm_, local);
  if (!agreed.ok()) return abandon(agreed);
  env_->Mark("agreed");

  // 4. Rank 0 commits the manifest.
  std::vector<uint64_t> sizes(rank_ == 0 ? static_cast<size_t>(size_) : 0);
  BATON_RETURN_IF_ERROR(
      BATON_MPI_CHECK(MPI_Gather(&file_bytes, 1, MPI_UINT64_T, sizes.data(), 1, MPI_UINT64_T, 0, comm_)));
  local = Status::OK();
  if (rank_ == 0) {
    ckpt::Manifest m;
    local = BuildManifest(step, all, sizes, &m);
    if (local.ok()) local = CommitManifest(vdir, m);
  }
  agreed = Agree(comm_, local);
  if (!agreed.ok()) return abandon(agreed);

  // 5. Retention, only after the commit.
  if (rank_ == 0) ApplyRetention();
  stats_.total_bytes = total;
  stats_.seconds = Now() - t0;
  return Status::OK();
}

// --- restore ------------------------------------------------------------------

// Rank 0: the newest remaining candidate whose manifest reads and parses;
// the ones that do not are recorded as failed. Empty name: none left.
void CheckpointerImpl::NextCandidate(std::vector<ckpt::VersionInfo>* candidates, std::string* name,
                                     std::string* text) {
  name->clear();
  while (!candidates->empty()) {
    ckpt::VersionInfo v = candidates->back();
    candidates->pop_back();
    std::string path;
    ckpt::Manifest m;
    Status s = ckpt::ResolveInside(env_, v.path, ckpt::kManifestName, &path);
    if (s.ok()) s = env_->ReadFile(path, kMaxManifestBytes, text);
    if (s.ok()) s = ckpt::ParseManifestJson(*text, &m);
    if (s.ok()) {
      *name = v.name;
      return;
    }
    BATON_LOG(kCkpt, warning) << "cannot restore " << v.path << ": " << s.message()
                              << "; trying the next older version";
    Status r = ckpt::RecordRestoreFailure(env_, v, s.message());
    if (!r.ok()) {
      BATON_LOG(kCkpt, warning) << "could not record the failure: " << r;
    }
    ++stats_.fallbacks;
  }
}

// index_of[i]: the manifest's index of the i-th registered array.
Status CheckpointerImpl::CompareWithManifest(const ckpt::Manifest& m, std::vector<int>* index_of) const {
  std::vector<std::string> diffs;
  std::map<std::string, int> in_manifest;
  for (size_t i = 0; i < m.arrays.size(); ++i) in_manifest[m.arrays[i].name] = static_cast<int>(i);
  index_of->clear();
  for (const auto& [name, r] : arrays_) {
    auto it = in_manifest.find(name);
    if (it == in_manifest.end()) {
      diffs.push_back(name + ": registered, not in the checkpoint");
      index_of->push_back(-1);
      continue;
    }
    const ckpt::ArrayMeta& a = m.arrays[static_cast<size_t>(it->second)];
    if (a.dtype != r.meta.dtype) {
      diffs.push_back(name + ": dtype " + std::string(DTypeName(r.meta.dtype)) + " registered, " +
                      std::string(DTypeName(a.dtype)) + " in the checkpoint");
    }
    if (a.shape != r.meta.shape) {
      diffs.push_back(name + ": shape " + ShapeText(r.meta.shape) + " registered, " + ShapeText(a.shape) +
                      " in the checkpoint");
    }
    index_of->push_back(it->second);
    in_manifest.erase(it);
  }
  for (const auto& [name, i] : in_manifest) diffs.push_back(name + ": in the checkpoint, not registered");
  if (diffs.empty()) return Status::OK();
  std::string msg = "step " + std::to_string(m.step) + " does not match the registered arrays: ";
  for (size_t i = 0; i < diffs.size(); ++i) msg += (i ? "; " : "") + diffs[i];
  return Status::InvalidArgument(log::kCkpt, msg);
}

// Replicated arrays are read in parts and all-gathered when every part's
// byte count fits MPI's int; otherwise every rank reads all of it.
bool CheckpointerImpl::GatherFits(const ckpt::Manifest& m) const {
  for (const ckpt::ArrayMeta& a : m.arrays) {
    if (a.replicated && a.rows() * a.row_bytes() > static_cast<uint64_t>(INT_MAX)) return false;
  }
  return true;
}

Status CheckpointerImpl::ReadMyRows(const std::string& vdir, const ckpt::Manifest& m,
                                    const std::vector<int>& index_of, bool gather_replicated, uint64_t* bytes) {
  std::map<size_t, std::unique_ptr<ckpt::h5::ShardReader>> readers;
  std::vector<char> partial;  // a chunk that only partly holds my rows
  size_t i = 0;
  for (const auto& [name, r] : arrays_) {
    const ckpt::ArrayMeta& a = m.arrays[static_cast<size_t>(index_of[i++])];
    const uint64_t rb = a.row_bytes();
    uint64_t first = r.first_row, rows = r.rows;
    if (r.meta.replicated) {
      first = 0;
      rows = r.meta.rows();
      if (gather_replicated) ckpt::ReplicatedRows(r.meta.rows(), size_, rank_, &first, &rows);
    }
    const uint64_t buffer_first = r.meta.replicated ? 0 : r.first_row;
    char* base = static_cast<char*>(r.data);
    std::vector<ckpt::ReadPiece> pieces;
    BATON_RETURN_IF_ERROR(ckpt::PlanRead(m, static_cast<uint32_t>(index_of[i - 1]), first, rows, &pieces));
    for (const ckpt::ReadPiece& p : pieces) {
      const ckpt::ShardMeta& shard = m.shards[p.shard];
      const ckpt::DatasetMeta& d = shard.datasets[p.dataset];
      const ckpt::Chunk& c = d.chunks[p.chunk];
      auto& reader = readers[p.shard];
      if (!reader) BATON_RETURN_IF_ERROR(ckpt::h5::ShardReader::Open(env_, vdir, shard.file, shard.bytes, &reader));
      auto check = [&](const void* data) -> Status {
        if (ckpt::Xxh3(data, c.rows * rb) == c.xxh3) return Status::OK();
        return Status::Corruption(log::kCkpt, reader->path() + ", dataset " + name + ": the rows [" +
                                                  std::to_string(c.first_row) + ", " +
                                                  std::to_string(c.first_row + c.rows) + ") written by rank " +
                                                  std::to_string(c.rank) + " fail their checksum");
      };
      char* dst = base + (p.first_row - buffer_first) * rb;
      if (p.first_row == c.first_row && p.rows == c.rows) {
        // The whole chunk is mine: straight into the user's buffer.
        BATON_RETURN_IF_ERROR(reader->ReadRows(a, d.rows, c.dataset_row, c.rows, dst));
        BATON_RETURN_IF_ERROR(check(dst));
      } else {
        // Verify the whole chunk, keep my part. The reader has checked
        // (first ReadRows of the dataset) that the chunk lies in the file
        // before we size the buffer for it.
        BATON_RETURN_IF_ERROR(reader->CheckDataset(a, d.rows));
        partial.resize(c.rows * rb);
        BATON_RETURN_IF_ERROR(reader->ReadRows(a, d.rows, c.dataset_row, c.rows, partial.data()));
        BATON_RETURN_IF_ERROR(check(partial.data()));
        std::memcpy(dst, partial.data() + (p.first_row - c.first_row) * rb, p.rows * rb);
      }
      *bytes += p.rows * rb;
    }
  }
  if (ckpt::Xxh3(m.user_blob.data(), m.user_blob.size()) != m.user_blob_xxh3) {
    return Status::Corruption(log::kCkpt, vdir + "/" + ckpt::kManifestName + ": the user blob fails its checksum");
  }
  return Status::OK();
}

Status CheckpointerImpl::GatherReplicated(const ckpt::Manifest& m, const std::vector<int>& index_of) {
  size_t i = 0;
  std::vector<int> counts(static_cast<size_t>(size_)), displs(static_cast<size_t>(size_));
  for (const auto& [name, r] : arrays_) {
    const ckpt::ArrayMeta& a = m.arrays[static_cast<size_t>(index_of[i++])];
    if (!r.meta.replicated || size_ == 1) continue;
    const uint64_t rb = a.row_bytes();
    for (int k = 0; k < size_; ++k) {
      uint64_t first = 0, rows = 0;
      ckpt::ReplicatedRows(a.rows(), size_, k, &first, &rows);
      counts[static_cast<size_t>(k)] = static_cast<int>(rows * rb);
      displs[static_cast<size_t>(k)] = static_cast<int>(first * rb);
    }
    BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r.data, counts.data(),
                                                         displs.data(), MPI_BYTE, comm_)));
  }
  return Status::OK();
}

Status CheckpointerImpl::Restore(std::optional<int64_t>* step) {
  const double t0 = Now();
  stats_ = CheckpointStats();
  step->reset();
  // Every rank must compare the same registrations with the manifest, or
  // some would stop at the comparison while others read.
  BATON_RETURN_IF_ERROR(CheckRegistrationsAgree("Restore"));

  std::vector<ckpt::VersionInfo> candidates;  // rank 0: complete versions, oldest first
  int quarantined = 0;
  Status local;
  if (rank_ == 0) {
    std::vector<ckpt::VersionInfo> versions;
    local = ckpt::ListVersions(env_, dir_, options_.max_restore_failures, &versions);
    for (const ckpt::VersionInfo& v : versions) {
      if (v.status == ckpt::VersionStatus::kComplete) candidates.push_back(v);
      if (v.status == ckpt::VersionStatus::kQuarantined) {
        ++quarantined;
        BATON_LOG(kCkpt, warning) << "skipping " << v.path << ": quarantined after " << v.restore_failures
                                  << " failed restores";
      }
    }
  }
  BATON_RETURN_IF_ERROR(Agree(comm_, local).Annotate("restoring from " + dir_));

  for (;;) {
    std::string name, text;
    if (rank_ == 0) NextCandidate(&candidates, &name, &text);
    // Broadcast the version's name and manifest text (empty name: none
    // left), and rank 0's counts of failed and quarantined versions.
    long long lens[4] = {static_cast<long long>(name.size()), static_cast<long long>(text.size()),
                         stats_.fallbacks, quarantined};
    BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Bcast(lens, 4, MPI_LONG_LONG, 0, comm_)));
    stats_.fallbacks = static_cast<int>(lens[2]);
    if (lens[0] == 0) {
      const int failed = stats_.fallbacks, skipped = static_cast<int>(lens[3]);
      stats_.seconds = Now() - t0;
      if (failed + skipped == 0) return Status::OK();  // a first run
      return Status::NotFound(log::kCkpt, "no version in " + dir_ + " could be restored: " +
                                              std::to_string(failed) + " failed now, " +
                                              std::to_string(skipped) + " quarantined before");
    }
    name.resize(static_cast<size_t>(lens[0]));
    text.resize(static_cast<size_t>(lens[1]));
    BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Bcast(name.data(), static_cast<int>(lens[0]), MPI_CHAR, 0, comm_)));
    if (lens[1] > INT_MAX) return Status::Internal(log::kCkpt, "manifest too large to broadcast");
    BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Bcast(text.data(), static_cast<int>(lens[1]), MPI_CHAR, 0, comm_)));
    ckpt::Manifest m;
    BATON_RETURN_IF_ERROR(ckpt::ParseManifestJson(text, &m));  // rank 0 parsed the same text
    std::vector<int> index_of;
    BATON_RETURN_IF_ERROR(CompareWithManifest(m, &index_of));

    const std::string vdir = dir_ + "/" + name;
    const bool gather = GatherFits(m);
    uint64_t bytes = 0;
    Status read = ReadMyRows(vdir, m, index_of, gather, &bytes);
    ckpt::Agreement ag;
    Status agreed = Agree(comm_, read, &ag);
    if (agreed.ok()) {
      if (gather) BATON_RETURN_IF_ERROR(GatherReplicated(m, index_of));
      blob_ = std::move(m.user_blob);
      *step = m.step;
      stats_.step = m.step;
      stats_.version_path = vdir;
      stats_.bytes = bytes;
      BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(
          MPI_Allreduce(&bytes, &stats_.total_bytes, 1, MPI_UINT64_T, MPI_SUM, comm_)));
      stats_.seconds = Now() - t0;
      return Status::OK();
    }
    if (rank_ == 0) {
      BATON_LOG(kCkpt, warning) << "cannot restore " << vdir << ": " << agreed.message()
                                << "; trying the next older version";
      ckpt::VersionInfo v;
      v.name = name;
      v.path = vdir;
      Status r = ckpt::RecordRestoreFailure(env_, v, agreed.message());
      if (!r.ok()) {
        BATON_LOG(kCkpt, warning) << "could not record the failure: " << r;
      }
    }
    ++stats_.fallbacks;
  }
}

}  // namespace

Status Checkpointer::Create(Runtime& runtime, const CheckpointOptions& options, std::unique_ptr<Checkpointer>* out) {
  std::string dir = options.dir;
  if (dir.empty()) {
    const char* env = std::getenv("BATON_CKPT_DIR");
    if (env != nullptr) dir = env;
  }
  if (dir.empty()) {
    return Status::InvalidArgument(log::kCkpt, "no checkpoint directory: set CheckpointOptions::dir or BATON_CKPT_DIR");
  }
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (options.keep < 1) {
    return Status::InvalidArgument(log::kCkpt, "keep = " + std::to_string(options.keep) + ": must be >= 1");
  }
  if (options.max_restore_failures < 1) {
    return Status::InvalidArgument(log::kCkpt, "max_restore_failures = " +
                                                   std::to_string(options.max_restore_failures) + ": must be >= 1");
  }
  if (options.group_size < 0) {
    return Status::InvalidArgument(log::kCkpt, "group_size = " + std::to_string(options.group_size) +
                                                   ": must be >= 0 (0: one shard per node)");
  }
  fs::Env* env = options.env != nullptr ? options.env : fs::Env::Default();
  auto ck = std::make_unique<CheckpointerImpl>(runtime, options, dir, env);
  BATON_RETURN_IF_ERROR(ck->Init());
  *out = std::move(ck);
  return Status::OK();
}

}  // namespace baton
