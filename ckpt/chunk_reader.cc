#include "ckpt/chunk_reader.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "baton/log.h"
#include "ckpt/checksum.h"
#include "ckpt/overlapped_hash.h"

namespace baton::ckpt {

Status ChunkReader::Read(h5::ShardReader* reader, const std::string& file, const ArrayMeta& a, const DatasetMeta& d, const Chunk& c,
                         uint64_t keep_first, uint64_t keep_rows, char* dst, PhaseClock* clock,
                         const Progress& progress) {
  mismatched_ = false;
  const uint64_t rb = a.row_bytes();
  // The first read of a dataset opens and checks it (nothing is allocated
  // before the file shows it holds what the manifest claims): "open".
  BATON_RETURN_IF_ERROR(reader->CheckDataset(a, d.rows));
  clock->Lap("open");
  const uint64_t piece_rows = std::max<uint64_t>(1, kPieceBytes / std::max<uint64_t>(rb, 1));
  const uint64_t keep_end = keep_first + keep_rows;
  OverlappedHash sum;  // declared after pieces_: its piece in flight is waited for before they go
  uint64_t k = 0;
  for (uint64_t r = 0; r < c.rows; r += piece_rows, ++k) {
    const uint64_t n = std::min(piece_rows, c.rows - r);
    const uint64_t g = c.first_row + r;  // global row of the piece's first row
    if (r + n < c.rows) reader->Prefetch(a, c.dataset_row + r + n, std::min(piece_rows, c.rows - r - n));
    const bool all_kept = keep_rows > 0 && g >= keep_first && g + n <= keep_end;
    std::vector<char>& piece = pieces_[k % 2];  // free: the Submit after its last piece returned
    if (!all_kept) piece.resize(n * rb);
    char* buf = all_kept ? dst + (g - keep_first) * rb : piece.data();
    BATON_RETURN_IF_ERROR(reader->ReadRows(a, d.rows, c.dataset_row + r, n, buf));
    bytes_read_ += n * rb;
    clock->Lap("read");
    if (!all_kept && keep_rows > 0) {  // the piece's kept rows (the hash only reads the piece too)
      const uint64_t lo = std::max(g, keep_first), hi = std::min(g + n, keep_end);
      if (lo < hi) std::memcpy(dst + (lo - keep_first) * rb, buf + (lo - g) * rb, (hi - lo) * rb);
    }
    sum.Submit(buf, n * rb);  // waits for the previous piece's hash: "verify"
    clock->Lap("verify");
    if (progress) progress(n * rb);
  }
  const uint64_t digest = sum.Finish();
  clock->Lap("verify");
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
