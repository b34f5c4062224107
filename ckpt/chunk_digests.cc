#include "ckpt/chunk_digests.h"

#include <algorithm>

namespace baton::ckpt {

uint64_t ChunkRows(uint64_t row_bytes) { return std::max<uint64_t>(1, kChunkBytes / std::max<uint64_t>(row_bytes, 1)); }

uint64_t ChunkCount(uint64_t rows, uint64_t row_bytes) {
  const uint64_t per = ChunkRows(row_bytes);
  return rows / per + (rows % per != 0 ? 1 : 0);
}

ChunkHasher::ChunkHasher(uint64_t rows, uint64_t row_bytes)
    : chunk_bytes_(ChunkRows(row_bytes) * row_bytes), count_(ChunkCount(rows, row_bytes)) {
  digests_.reserve(count_);
}

void ChunkHasher::Update(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const uint64_t take = std::min<uint64_t>(n, chunk_bytes_ - in_chunk_);
    sum_.Update(p, take);
    in_chunk_ += take;
    p += take;
    n -= take;
    if (in_chunk_ == chunk_bytes_) {
      digests_.push_back(sum_.Digest());
      sum_.Reset();
      in_chunk_ = 0;
    }
  }
}

std::vector<uint64_t> ChunkHasher::Finish() {
  // A last, shorter chunk; or rows of no bytes, whose chunks all hash nothing.
  if (in_chunk_ > 0) {
    digests_.push_back(sum_.Digest());
    sum_.Reset();
    in_chunk_ = 0;
  }
  const uint64_t empty = Xxh3(nullptr, 0);
  while (digests_.size() < count_) digests_.push_back(empty);
  return std::move(digests_);
}

std::vector<uint64_t> ChunkDigests(const void* data, uint64_t rows, uint64_t row_bytes) {
  ChunkHasher h(rows, row_bytes);
  h.Update(data, rows * row_bytes);
  return h.Finish();
}

}  // namespace baton::ckpt
