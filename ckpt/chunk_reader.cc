#include "ckpt/chunk_reader.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "baton/log.h"
#include "ckpt/checksum.h"

namespace baton::ckpt {

Status ChunkReader::Read(h5::ShardReader* reader, const std::string& file, const ArrayMeta& a, const DatasetMeta& d,
                         const Chunk& c, uint64_t keep_first, uint64_t keep_rows, char* dst, PhaseClock* clock,
                         const Progress& progress) {
  Status s = Queue(reader, file, a, d, c, keep_first, keep_rows, dst, clock, progress);
  Status f = Finish(clock);  // also after a failed read: nothing stays queued
  return s.ok() ? f : s;
}

Status ChunkReader::Queue(h5::ShardReader* reader, const std::string& file, const ArrayMeta& a, const DatasetMeta& d,
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
  checks_.push_back(Check{file, &a, &c});  // before its last piece: the digest may end at once
  // A chunk of no rows is one empty piece (its digest: the xxh3 of nothing).
  for (uint64_t r = 0; r < c.rows || (r == 0 && c.rows == 0); r += piece_rows) {
    const uint64_t n = std::min(piece_rows, c.rows - r);
    const bool last = r + n >= c.rows;
    const uint64_t g = c.first_row + r;  // global row of the piece's first row
    if (!last) reader->Prefetch(a, c.dataset_row + r + n, std::min(piece_rows, c.rows - r - n));
    const bool all_kept = keep_rows > 0 && n > 0 && g >= keep_first && g + n <= keep_end;
    const size_t b = piece_ % 2;
    std::vector<char>& piece = pieces_[b];
    if (!all_kept) {
      sum_.WaitFor(tickets_[b]);  // its last piece hashed: free
      piece.resize(n * rb);
    }
    char* buf = all_kept ? dst + (g - keep_first) * rb : piece.data();
    if (n > 0) {
      Status read = reader->ReadRows(a, d.rows, c.dataset_row + r, n, buf);
      if (!read.ok()) {
        // The stream ends here so that the next chunk's begins afresh; the
        // digest of this part of a chunk is not compared.
        checks_.back().chunk = nullptr;
        sum_.Submit(nullptr, 0, true);
        return read;
      }
    }
    bytes_read_ += n * rb;
    clock->Lap("read");
    if (!all_kept && keep_rows > 0) {  // the piece's kept rows (the hash only reads the piece too)
      const uint64_t lo = std::max(g, keep_first), hi = std::min(g + n, keep_end);
      if (lo < hi) std::memcpy(dst + (lo - keep_first) * rb, buf + (lo - g) * rb, (hi - lo) * rb);
    }
    const uint64_t ticket = sum_.Submit(buf, n * rb, last);  // hashed on while the next piece is read
    if (!all_kept) {
      tickets_[b] = ticket;
      ++piece_;
    }
    clock->Lap("verify");
    if (progress) progress(n * rb);
    if (last) break;
  }
  // Between chunks (the stream in flight is a whole one): the chunks
  // hashed by now.
  return CheckEnded();
}

Status ChunkReader::Finish(PhaseClock* clock) {
  sum_.Finish();
  clock->Lap("verify");
  Status s = CheckEnded();
  checks_.clear();
  return s;
}

Status ChunkReader::CheckEnded() {
  for (uint64_t digest : sum_.TakeDigests()) {
    if (checks_.empty()) return Status::Internal(log::kCkpt, "a chunk digest with no chunk to check");
    const Check k = checks_.front();
    checks_.pop_front();
    if (k.chunk == nullptr || digest == k.chunk->xxh3) continue;  // null: a read failed in it
    const Chunk& c = *k.chunk;
    mismatched_ = true;
    // Nothing queued is checked any more: the caller gives up on them.
    sum_.Finish();
    sum_.TakeDigests();
    checks_.clear();
    const std::string rows = c.rows == 0 ? "no rows"
                                         : "rows " + std::to_string(c.dataset_row) + "-" +
                                               std::to_string(c.dataset_row + c.rows - 1);
    return Status::Corruption(log::kCkpt, k.file + ": dataset " + k.array->name + " " + rows + " (written by rank " +
                                              std::to_string(c.rank) + "): xxh3 " + HexU64(digest) + " != manifest " +
                                              HexU64(c.xxh3));
  }
  return Status::OK();
}

}  // namespace baton::ckpt
