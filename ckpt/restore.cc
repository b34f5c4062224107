// The Checkpointer's restore path (ckpt/checkpointer_impl.h).
//
// Restore: rank 0 lists the versions, reads the newest complete one's
// manifest and broadcasts its text; every rank checks its registrations
// against it, reads and verifies the chunks holding its rows
// (ckpt/hdf5/shard_reader.h), replicated arrays are read in parts and
// all-gathered; agreed; on any failure a warning naming the file, the
// failure recorded beside the version (quarantine after
// max_restore_failures), and the next older version.
#include <mpi.h>

#include <climits>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "baton/log.h"
#include "ckpt/agreement.h"
#include "ckpt/checkpointer_impl.h"
#include "ckpt/checksum.h"
#include "ckpt/hdf5/shard_reader.h"
#include "ckpt/layout.h"
#include "mpi_runtime/mpi_check.h"

namespace baton::ckpt {

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
  BATON_RETURN_IF_ERROR(AgreeOnCall("Restore", Status::OK()));

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

}  // namespace baton::ckpt
