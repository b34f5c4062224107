#include "ckpt/chunk_reader.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "baton/log.h"

namespace baton::ckpt {

Status ChunkReader::Read(h5::ShardReader* reader, const std::string& file, const ArrayMeta& a, const DatasetMeta& d,
                         const Chunk& c, uint64_t keep_first, uint64_t keep_rows, char* dst, PhaseClock* clock,
                         const Progress& progress) {
  mismatched_ = false;
  const uint64_t rb = a.row_bytes();
  // The first read of a dataset opens and checks it (nothing is allocated
  // before the file shows it holds what the manifest claims): "open".
  BATON_RETURN_IF_ERROR(reader->CheckDataset(a, d.rows));
  clock->Lap("open");
  const uint64_t piece_rows = std::max<uint64_t>(1, kPieceBytes / std::max<uint64_t>(rb, 1));
  const uint64_t keep_end = keep_first + keep_rows;
  sum_.Reset();  // a read that failed before may have left a part of its chunk
  const char* mapped = nullptr;
  BATON_RETURN_IF_ERROR(reader->MapRows(a, d.rows, c.dataset_row, c.rows, &mapped));
  if (mapped != nullptr) {
    Status s = ReadMapped(mapped, file, a, c, keep_first, keep_rows, dst, clock, progress);
    // Its pages leave the page tables once used (ShardReader::UnmapRows): a
    // mapping kept whole counted the state's size in the process's RSS.
    reader->UnmapRows(a, c.dataset_row, c.rows);
    return s;
  }
  if (copy_after_verify_ && keep_rows > 0) return ReadThenCopy(reader, file, a, d, c, keep_first, keep_rows, dst, clock);
  // A chunk of no rows is one empty piece (its digest: the xxh3 of nothing).
  for (uint64_t r = 0; r < c.rows; r += piece_rows) {
    const uint64_t n = std::min(piece_rows, c.rows - r);
    const uint64_t g = c.first_row + r;  // global row of the piece's first row
    const bool all_kept = keep_rows > 0 && g >= keep_first && g + n <= keep_end;
    if (!all_kept) piece_.resize(n * rb);
    char* buf = all_kept ? dst + (g - keep_first) * rb : piece_.data();
    BATON_RETURN_IF_ERROR(reader->ReadRows(a, d.rows, c.dataset_row + r, n, buf));
    bytes_read_ += n * rb;
    clock->Lap("read");
    if (!all_kept && keep_rows > 0) {  // the piece's kept rows
      const uint64_t lo = std::max(g, keep_first), hi = std::min(g + n, keep_end);
      if (lo < hi) std::memcpy(dst + (lo - keep_first) * rb, buf + (lo - g) * rb, (hi - lo) * rb);
    }
    sum_.Update(buf, n * rb);  // still in the cache from the read
    clock->Lap("verify");
    if (progress) progress(n * rb);
  }
  return Check(file, a, c);
}

Status ChunkReader::ReadMapped(const char* chunk, const std::string& file, const ArrayMeta& a, const Chunk& c,
                               uint64_t keep_first, uint64_t keep_rows, char* dst, PhaseClock* clock,
                               const Progress& progress) {
  const uint64_t rb = a.row_bytes();
  const uint64_t piece_rows = std::max<uint64_t>(1, kPieceBytes / std::max<uint64_t>(rb, 1));
  const uint64_t keep_end = keep_first + keep_rows;
  // The kept rows of global rows [g, g + n) (in the mapping at src) to dst.
  auto copy_kept = [&](uint64_t g, uint64_t n, const char* src) {
    const uint64_t lo = std::max(g, keep_first), hi = std::min(g + n, keep_end);
    if (lo < hi) std::memcpy(dst + (lo - keep_first) * rb, src + (lo - g) * rb, (hi - lo) * rb);
  };
  for (uint64_t r = 0; r < c.rows; r += piece_rows) {
    const uint64_t n = std::min(piece_rows, c.rows - r);
    const char* src = chunk + r * rb;
    // The hash reads the page cache's pages in place (a page not yet
    // mapped is faulted in here: the "read"), and leaves the piece in the
    // CPU's cache for the copy right after.
    sum_.Update(src, n * rb);
    bytes_read_ += n * rb;
    clock->Lap("verify");
    if (!copy_after_verify_ && keep_rows > 0) {
      copy_kept(c.first_row + r, n, src);
      clock->Lap("copy");
    }
    if (progress) progress(n * rb);
  }
  BATON_RETURN_IF_ERROR(Check(file, a, c));
  if (copy_after_verify_ && keep_rows > 0) {
    // Verified whole: only now do its rows reach dst, from the mapping (the
    // chunk, at most kChunkBytes, is still in the CPU's cache from the hash).
    copy_kept(c.first_row, c.rows, chunk);
    clock->Lap("copy");
  }
  return Status::OK();
}

Status ChunkReader::ReadThenCopy(h5::ShardReader* reader, const std::string& file, const ArrayMeta& a,
                                 const DatasetMeta& d, const Chunk& c, uint64_t keep_first, uint64_t keep_rows,
                                 char* dst, PhaseClock* clock) {
  const uint64_t rb = a.row_bytes();
  const uint64_t piece_rows = std::max<uint64_t>(1, kPieceBytes / std::max<uint64_t>(rb, 1));
  piece_.resize(c.rows * rb);  // the manifest's chunk, bounded by the files before the restore began
  for (uint64_t r = 0; r < c.rows; r += piece_rows) {
    const uint64_t n = std::min(piece_rows, c.rows - r);
    char* buf = piece_.data() + r * rb;
    BATON_RETURN_IF_ERROR(reader->ReadRows(a, d.rows, c.dataset_row + r, n, buf));
    bytes_read_ += n * rb;
    clock->Lap("read");
    sum_.Update(buf, n * rb);  // still in the cache from the read
    clock->Lap("verify");
  }
  BATON_RETURN_IF_ERROR(Check(file, a, c));
  const uint64_t lo = std::max(c.first_row, keep_first), hi = std::min(c.first_row + c.rows, keep_first + keep_rows);
  if (lo < hi) std::memcpy(dst + (lo - keep_first) * rb, piece_.data() + (lo - c.first_row) * rb, (hi - lo) * rb);
  clock->Lap("copy");
  return Status::OK();
}

Status ChunkReader::Check(const std::string& file, const ArrayMeta& a, const Chunk& c) {
  const uint64_t digest = sum_.Digest();
  if (digest == c.xxh3) return Status::OK();
  mismatched_ = true;
  const std::string rows = c.rows == 0 ? "no rows"
                                       : "rows " + std::to_string(c.dataset_row) + "-" +
                                             std::to_string(c.dataset_row + c.rows - 1);
  return Status::Corruption(log::kCkpt, file + ": dataset " + a.name + " " + rows + " (written by rank " +
                                            std::to_string(c.rank) + "): xxh3 " + HexU64(digest) + " != manifest " +
                                            HexU64(c.xxh3));
}

}  // namespace baton::ckpt
