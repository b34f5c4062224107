// How a rank's rows of an array are cut into chunks, and their digests.
//
// A chunk is the unit of verification (docs/checkpoint-format.md, "Restore
// reads"): its xxh3 covers its bytes whole, and a reader checks a chunk only
// when it has read all of it. A save therefore cuts a rank's rows into
// chunks of at most kChunkBytes (at least one row each), so that a restore
// at another world size, which needs only part of another rank's rows,
// reads at most one chunk beyond its rows at each end of its range instead
// of every overlapping rank's rows whole (issue 32 item 8). Versions saved
// before hold one chunk per rank; they are read the same way, whole.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ckpt/checksum.h"

namespace baton::ckpt {

// The largest chunk a save writes (bytes), unless one row is larger.
inline constexpr uint64_t kChunkBytes = 2u << 20;

// Rows per chunk for rows of row_bytes: max(1, kChunkBytes / row_bytes).
uint64_t ChunkRows(uint64_t row_bytes);
// Chunks of `rows` rows: ceil(rows / ChunkRows(row_bytes)); 0 for no rows.
uint64_t ChunkCount(uint64_t rows, uint64_t row_bytes);

// The digests of the chunks of `rows` rows given in pieces of any size,
// in order (the writers hash as they write or copy).
class ChunkHasher {
 public:
  ChunkHasher(uint64_t rows, uint64_t row_bytes);
  void Update(const void* data, size_t n);
  // One xxh3 per chunk (ChunkCount of them); every byte must have been given.
  std::vector<uint64_t> Finish();

 private:
  uint64_t chunk_bytes_;  // bytes of a full chunk
  uint64_t count_;        // chunks in all
  uint64_t in_chunk_ = 0; // bytes of the current chunk hashed
  std::vector<uint64_t> digests_;
  Xxh3Stream sum_;
};

// The digests of rows held in memory at once.
std::vector<uint64_t> ChunkDigests(const void* data, uint64_t rows, uint64_t row_bytes);

}  // namespace baton::ckpt
